"""The ``compress`` page's report, read from the store alone (:mod:`.stored`): every model's candidates under its
main protocol (:func:`page_results`: the page's protocol where the model has depth parts under it, else the one stored
at the most depths), the choice, issue 25's goals with their
figures (:mod:`.goals`), its students (:mod:`.students_report`), the runs the timings come from, the table, the
frontier plot.

A depth part may carry over candidates an earlier run timed (:meth:`~layerwise.Compressor.adopt`): they are marked
:data:`CARRIED_MARK` and that run's original is listed beside the part's own (:func:`~.stored.donor_part` finds the run).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from layerwise.benchmarks.compress.goals import goal_lines, run_ratio, tmft_page_scores
from layerwise.benchmarks.compress.reading import beside, own_setting_lines, page_protocol, page_results
from layerwise.benchmarks.compress.stored import (
    MODELS,
    NAME,
    TESTS,
    ModelResults,
    started,
    sts_average,
)
from layerwise.benchmarks.compress.students_report import (
    every_depth_lines,
    failed_lines,
    protocol_lines,
    tmft_lines,
    training_lines,
)
from layerwise.benchmarks.compress.tmft_check import stored_tmft
from layerwise.benchmarks.page_parts import cpu_label, part_revisions, provenance_lines
from layerwise.benchmarks.registry import PageContext
from layerwise.benchmarks.store import Part
from layerwise.methods.compress.backends import ONNX_INT8_MIXED, OPENVINO_INT8
from layerwise.methods.compress.build import GRAPH_CHECK_SENTENCES, GRAPH_TOLERANCE, STUDENTS
from layerwise.methods.compress.frontier import RECIPES, Candidate, plot_frontier
from layerwise.reports import write_text

__all__ = ["CARRIED_MARK", "TITLE", "write_page"]

RENDER_ONLY = True  # writes the page from its store; no stored number goes through it (measured_code)

TITLE = ("Compress: the fastest model within a quality budget (cut, LC cut, distilled, every-depth; torch, ONNX, "
         "ONNX int8, OpenVINO, OpenVINO int8)")
#: published figures (theirs, their hardware): sentence-transformers' layer-reduction distillation example
#: (stsb-roberta-base, STS-B test) and its CPU backend benchmark (quality kept, speed-up)
PUBLISHED = [
    "sentence-transformers `model_distillation_layer_reduction` example, stsb-roberta-base (12 layers, STS-B test "
    "85.44): 3 layers distilled 84.39 at 2.8x, 6 layers 85.23 at 1.7x",
    "sentence-transformers CPU backend benchmark: ONNX int8 3.23x and OpenVINO int8 5.29x the throughput of torch "
    "fp32, at 99.6-99.7 % of its quality",
]


CARRIED_MARK = "†"  # a candidate timed in an earlier run (carried over by Compressor.adopt)


def _table(r: ModelResults, tmft: dict[int, float]) -> list[str]:
    tests = [t for t in TESTS if t in r.original.tests]
    head = ["| depth | recipe | backend | parameters | throughput ratio | against the run's original | STS-B dev | "
            + " | ".join(tests) + " | STS average | TMFT STS-B test (tmft page) | |",
            "|---" * (9 + len(tests)) + "|---|"]
    rows = []
    for c in sorted(r.candidates, key=lambda c: (c.depth, list(RECIPES).index(c.recipe), c.layers, c.backend)):
        avg = sts_average(c)
        mark = "**chosen**" if c.name == r.chosen.name and c.layers == r.chosen.layers else ""
        rows.append(f"| {c.depth} | {c.recipe} ({','.join(map(str, c.layers))}) | {c.backend} | "
                    f"{c.parameters / 1e6:.1f} M | {c.ratio:.2f}x{CARRIED_MARK if r.carried(c) else ''} | "
                    f"{'' if (pooled := run_ratio(r, c)) is None else f'{pooled[0]:.2f}x'} | {c.dev:.2f} | "
                    + " | ".join(f"{c.tests[t]:.2f}" for t in tests)
                    + f" | {'-' if avg is None else f'{avg:.2f}'} | "
                    f"{f'{tmft[c.depth]:.2f}' if c.recipe in STUDENTS and c.depth in tmft else ''} | {mark} |")
    if any(r.carried(c) for c in r.candidates):
        rows += ["", f"{CARRIED_MARK} timed in an earlier run and carried over (the depth's *carried over* row above "
                 "gives that run's date and its original's ratios): compare it with that run's original, not with "
                 "the candidates timed in this run."]
    return head + rows


def _data_line(r: ModelResults) -> str:
    counts, protocol = r.counts, r.protocol
    tests = [t for t in TESTS if t in r.original.tests]
    absent = [t for t in protocol.get("tests", ()) if t not in r.original.tests]  # named, not in the data folder
    usable = counts["distinct"] - counts["left_out_scored"]
    sample = "all of them" if protocol.get("corpus_limit") is None else f"a seeded sample of the {usable} usable"
    return (f"Distillation corpus: {counts['kept']} sentences ({sample}; "
            + ", ".join(f"{k} {counts[k]}" for k in protocol["corpus"] if k in counts)
            + f"; {counts['distinct']} distinct; {counts['left_out_scored']} left out because they are in a dev or "
            f"test pair), {protocol['epochs']} epoch(s), batch {protocol['batch_size']}, learning rate "
            f"{protocol['lr']:g}, max length {protocol['max_length']}, seed {protocol['seed']}. Dev: STS-B dev. "
            f"Tests: {', '.join(tests)} (SICK-R: all 9927 pairs, as MTEB; STS12-16: aggregation `all`, every subset "
            "pooled into one Spearman, as MTEB)"
            + (f"; not scored, absent from the data folder: {', '.join(absent)}" if absent else "")
            + ". Backends: " + ", ".join(protocol["backends"])
            + f"; every-depth student: {'yes' if protocol.get('every_depth') else 'no'}"
            + (f"; labelled pairs, every student's second loss: {protocol['train_pairs']} train "
               "(TMFT's (cos - score / 5)^2 beside the MSE, weight 1)" if protocol.get("train_pairs") else "") + ".")


def _run_row(part: Part, label, carried: str) -> tuple:
    """One row of the runs table: ``part``'s run (date, machine), its original's ratio on each backend, and the code
    that computed it: the run's commit and those its candidates record (read back from the work folder), and how
    many candidates record none (measured before they did)."""
    ratios = {c.backend: c.ratio for c in (Candidate.from_dict(d) for d in part.payload["result"]["candidates"])
              if c.recipe == "original"}
    env = part.runs[-1].get("environment", {}) if part.runs else {}
    code = ", ".join(rev["commit"][:7] + ("+" if rev["dirty"] else "") for rev in part_revisions(part)) or "?"
    candidates = part.payload["result"]["candidates"]
    unrecorded = sum("computed" not in c.get("extra", {}) for c in candidates)
    if unrecorded:
        code += f" ({unrecorded} of {len(candidates)} candidates measured before candidates recorded their code)"
    return label, (started(part) or "?")[:10], cpu_label(env.get("machine", {})), ratios, carried, code


def _reference_lines(r: ModelResults) -> list[str]:
    """The original as timed in each depth part (every part times it against itself and on every backend), and in
    the earlier run a part carried candidates over from: ratios from different runs compare only as far as these
    agree."""
    rows = []
    for part in sorted(r.parts, key=lambda p: p.key["depth"]):
        donor = r.donors.get(part.key["depth"])
        runs = Counter((started(d) or "?")[:10] for c in part.payload["result"]["candidates"]
                       if (d := r.carried(Candidate.from_dict(c))) is not None)  # by the date of the run timing them
        carried = ", ".join(f"{n} ({when})" for when, n in sorted(runs.items())) or "0"
        rows.append(_run_row(part, part.key["depth"], carried))
        if donor is not None:  # the run the carried candidates were timed in, with its own original
            rows.append(_run_row(donor, f"{part.key['depth']} (carried over)", "–"))
    backends = r.protocol["backends"]
    lines = ["Each depth's candidates were timed in that depth's run, against the original timed in the same run; the "
             "original's own ratios per run show how far ratios from different runs compare. *Carried over*: "
             "candidates of an earlier run of the same settings with fewer backends or no every-depth student, kept "
             "with that run's numbers and timing (on the date given), not measured again. *Code*: the commit of the "
             "run that stored the part and those its candidates record having been trained, scored or timed at (a "
             "part re-stored from the work folder; + uncommitted changes); the part is stale when any of them is:", "",
             "| depth part | timed on | machine | " + " | ".join(f"original on {b}" for b in backends)
             + " | carried over | code |", "|---|---|---|" + "---|" * len(backends) + "---|---|"]
    lines += [f"| {label} | {when} | {machine} | "
              + " | ".join(f"{ratios[b]:.2f}x" if b in ratios else "–" for b in backends) + f" | {carried} | {code} |"
              for label, when, machine, ratios, carried, code in rows]
    shared = [b for b in backends if all(b in row[3] for row in rows)]  # timed by every run
    if len({tuple(f"{row[3][b]:.2f}" for b in shared) for row in rows}) > 1:
        lines += ["", "**The runs disagree**: a candidate's ratio is comparable with the others of its own run (and "
                  "with the original's in that run), not across runs."]
    return lines


def _graph_scores_line(r) -> list[str]:
    """Which float32 graph candidates took the torch candidate's test scores (``graph_test_scores=checked``), from
    the candidates themselves: how many, at which depths, how many sentences were checked, the largest difference."""
    checked = [c for c in r.candidates if c.extra.get("test_scores")]
    if not checked:
        return []
    info = [c.extra["test_scores"] for c in checked]
    depths = ", ".join(str(d) for d in sorted({c.depth for c in checked}))
    sizes = sorted({i["checked_sentences"] for i in info})
    sentences = f"{sizes[0]:,}" if len(sizes) == 1 else f"{sizes[0]:,}-{sizes[-1]:,}"
    return [f"Float32 graph test scores (`graph_test_scores=checked`): {len(checked)} onnx / openvino candidates at "
            f"depth(s) {depths} show their own dev score and the torch candidate's test scores, their vectors of "
            f"{sentences} sentences "
            f"(every dev sentence and the first {GRAPH_CHECK_SENTENCES} of each test set) having matched the torch "
            f"model's within {max(i['max_abs_diff'] for i in info):.1e} (tolerance {GRAPH_TOLERANCE:g}); every other "
            "candidate encoded every test set.", ""]


def _mixed_line(r) -> list[str]:
    """Which products each onnx-int8-mixed candidate kept float32 (from the candidates themselves)."""
    mixed = [c for c in r.candidates if c.backend == ONNX_INT8_MIXED and c.extra.get("quantization")]
    if not mixed:
        return []
    q = mixed[0].extra["quantization"]

    def kept(c) -> str:
        names = c.extra["quantization"]["kept_float32"]
        where = sorted({n.split("/")[3] for n in names if n.count("/") > 3},  # /model/encoder/layer.6/...
                       key=lambda x: (len(x), x))
        return (f"{c.recipe}-l{c.depth}: {len(names)} of {c.extra['quantization']['products']}"
                + (f" ({', '.join(where)})" if where else ""))

    return [f"onnx-int8-mixed: onnx-int8 but for the products whose input, on the corpus' first "
            f"{q['calibration_sentences']} sentences, has max |x| over {q['outlier_ratio']:g} times its "
            f"{q['percentile']:g}th percentile (kept float32); kept: " + "; ".join(kept(c) for c in mixed) + ".", ""]


def _quantization_line(r) -> list[str]:
    """How the model's openvino-int8 candidates were quantized, from the candidates themselves: each set of settings
    with the SmoothQuant alphas that were kept under it (where it chooses one per model)."""
    groups: dict[str, Counter] = {}
    for q in (c.extra.get("quantization") for c in r.candidates if c.backend == OPENVINO_INT8):
        if q is None:
            text, alpha = "not recorded (scored before candidates kept it; SmoothQuant was off then)", None
        else:
            alpha = q.get("smooth_quant_alpha") if "smooth_quant_alphas" in q else None
            text = ", ".join(f"{k} {v}" for k, v in q.items() if alpha is None or k != "smooth_quant_alpha")
        groups.setdefault(text, Counter())[alpha] += 1
    if not groups:
        return []

    def kept(alphas: Counter) -> str:
        n = sum(alphas.values())
        if None in alphas:
            return f"{n} candidates"
        return f"{n} candidates; alpha kept: " + ", ".join(
            f"{'off' if a < 0 else a} for {k}" for a, k in sorted(alphas.items()))

    return ["openvino-int8 (NNCF) settings: " + "; ".join(f"{text} ({kept(alphas)})" for text, alphas in groups.items())
            + ".", ""]


def _stop_part(parts: list[Part], r: ModelResults) -> Part | None:
    """The part where a run of ``r``'s protocol stopped descending (``stop_outside_budget``), or None."""
    key = {k: v for k, v in r.parts[0].key.items() if k != "depth"}
    return max((p for p in parts if p.key == {**key, "stop_outside_budget": True}), key=started, default=None)


def _best_by_depth(r: ModelResults) -> str:
    """Each depth's best dev Spearman among the candidates of at most that many layers, deepest first."""
    depths = sorted({c.depth for c in r.candidates}, reverse=True)
    return ", ".join(f"{max(c.dev for c in r.candidates if c.depth <= d):.2f} ({d})" for d in depths)


def _status_line(r: ModelResults, stop: Part | None, results: list[ModelResults]) -> str:
    """Which depths are measured, and why the others are not: not run yet, or left out by the stopping rule."""
    done = sorted(p.key["depth"] for p in r.parts)
    todo = [d for d in range(1, int(r.parts[0].payload["result"]["n_layers"]) + 1) if d not in done]
    line = f"Depths measured: {', '.join(map(str, done))}"
    if not todo:
        return line + " (all)."
    s = (stop.payload if stop is not None else {})
    if not s or max(todo) >= s["depth"] or s["depth"] not in done:
        return line + (f"; **not yet measured: {', '.join(map(str, todo))}** (the choice below is among the measured "
                       "depths only).")
    full = [f"{Path(o.model).name}, where every depth was built: {_best_by_depth(o)}" for o in results
            if o is not r and len({p.key['depth'] for p in o.parts}) == int(o.parts[0].payload["result"]["n_layers"])]
    return (line + f"; **depths {', '.join(map(str, todo))} not built**: at depth {s['depth']} no candidate of at "
            f"most {s['depth']} layers was within the budget of {s['budget']:g} on dev (the best, {s['best']} on "
            f"hidden states {','.join(map(str, s['best_layers']))}, {s['best_dev']:.2f} against the original's "
            f"{s['original_dev']:.2f}), and the run builds the depths deepest first and stops there (`--option "
            "stop_outside_budget=true`, Compressor's `stop_outside_budget`): the shallower depths' candidates are cut "
            "from, or trained as, still smaller models. The choice below is among the depths built. Best dev "
            "Spearman of the candidates of at most l layers, by depth l (l in brackets): "
            + "; ".join([f"{Path(r.model).name}: {_best_by_depth(r)}", *full]) + ".")


def write_page(ctx: PageContext) -> list[Path]:
    """Write ``compress.md`` and one frontier plot per model from the store alone (each model under its main
    protocol, :func:`page_results`)."""
    parts = ctx.store.parts(NAME)  # read once: the depth parts and the stop parts
    results = page_results(parts)
    if not results:
        raise FileNotFoundError(f"no compress parts in {ctx.store.root}; run `layerwise results run compress` first")
    lines = [f"# {TITLE}", "",
             "Made by `layerwise results run compress` (computes what the store lacks, one part per model and depth) "
             "and `layerwise results render compress` (this page, from `docs/results/state/compress/` alone). Per "
             "model, `Compressor` (the estimator behind `layerwise compress`) builds at every depth l the plain cut, "
             "the LC cut (best subset of hidden states 0..l on STS-B dev, exact search) and a student distilled from "
             "the full model by MSE on the corpus (where a model's protocol names `train_pairs`, with TMFT's loss on "
             "those labelled pairs beside it; where a model's protocol says `every_depth`, also one student "
             "trained at every depth at once, cut at each); each runs on the backends its protocol lists (`torch` "
             "fp32; `onnx` fp32 and `onnx-int8`, dynamic quantization, in onnxruntime, and `onnx-int8-mixed`, the "
             "same but for the products whose inputs have outliers on the calibration sentences, kept fp32; "
             "`openvino`, the fp32 graph, "
             "and `openvino-int8`, NNCF's static int8 calibrated on the corpus' first 300 sentences, in OpenVINO, "
             "under the settings each model's line states: the current code tries SmoothQuant off, at 0.5 and at "
             "0.95 and keeps, per candidate, the int8 model that keeps the fp32 model's similarities of the "
             "calibration sentences best) "
             "and is timed against the original torch model in one run.", ""]
    paths = []
    for r in results:
        png = plot_frontier(r.candidates, ctx.output / f"compress-{Path(r.model).name}.png", title=Path(r.model).name,
                            chosen=r.chosen)
        paths.append(png)
        lines += _model_lines(ctx, parts, r, results, png)
    limit = results[0].parts[0].key["protocol"].get("corpus_limit")  # the protocol of the models shown
    for name in [m for m in MODELS if m not in {Path(r.model).name for r in results}]:
        lines += [f"## {name}", "", "**Not run yet.** `layerwise results run compress --data-dir DATA --option "
                  f"'models=[\"{name}\"]'" + (f" --option corpus_limit={limit}" if limit is not None else "")
                  + " --option timings=per-depth` computes it under the protocol above (one part per depth, deepest "
                  "first, each stored when timed: resumable; every depth trains a student, so several CPU hours on a "
                  "2-CPU machine).", ""]
    lines += [*_reading_lines(results), "## Published figures (theirs, their hardware; not measured here)", "",
              *[f"- {p}" for p in PUBLISHED],
              "", "## Provenance", "", *provenance_lines([p for r in results for p in r.parts]
                                                              + [p for p in parts if "tmft_depth" in p.key]), ""]
    return [write_text(ctx.output / f"{NAME}.md", "\n".join(lines)), *paths]


def _model_lines(ctx: PageContext, parts: list[Part], r: ModelResults, results: list[ModelResults], png: Path
                 ) -> list[str]:
    """One model's section: its protocol, status, goals, students, TMFT, runs, the table and its frontier plot."""
    status = _status_line(r, _stop_part(parts, r), results)
    tmft, here, others = tmft_page_scores(ctx.store, r.model), stored_tmft(parts, r.model), beside(parts, r)
    return [f"## {Path(r.model).name}", "", _data_line(r), "", status, "", *_quantization_line(r), *_mixed_line(r),
            *_graph_scores_line(r),
            *goal_lines(r, tmft, here, others), "", *protocol_lines(r, others),
            *own_setting_lines(r, page_protocol(parts), others), *failed_lines(r, others), *training_lines(r),
            *every_depth_lines(r),
            *tmft_lines(here, tmft), *_reference_lines(r), "",
            *_table(r, tmft), "", f"![frontier]({png.name})", ""]


def _reading_lines(results: list[ModelResults]) -> list[str]:
    """How to read the ratios (the timing of the first model's choice) and the recipes."""
    s = results[0].chosen.speed
    return ["## How to read it", "",
            f"Throughput ratio: the original torch model's median pass over the candidate's, passes interleaved in "
            f"one run ({s['sentences']} corpus sentences, batch {s['batch_size']}, max length {s['max_length']}, "
            f"{len(s['seconds'])} timed passes each, {s['threads']} threads); the original torch row, timed against "
            "itself, shows the timing's noise, and the goal lines give the range of the per-pass ratios (each original "
            "pass over the candidate pass beside it). *Against the run's original*: the median of every pass of the "
            "original in the candidate's run (it is timed beside each candidate of a depth part: dozens of passes) "
            "over the candidate's median pass. Pairing passes cancels a change of load during the run; pooling "
            "cancels the original's own pass-to-pass noise, about 10 % per pass here, which moves the paired ratio of "
            "one candidate by as much (two candidates of one architecture and backend can differ by 20 % on it). "
            "The choice uses the paired ratio; the goal line gives both readings. ONNX fp32 gives the torch vectors "
            "(difference per candidate in its stored part); int8 is close, not equal.", "",
            *[f"- {k}: {v}" for k, v in RECIPES.items()], ""]
