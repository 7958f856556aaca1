"""The ``compress`` page's report, read from the store alone: every model's candidates under its newest protocol, the
choice, issue 25's goals with their figures, the runs the timings come from, the table, the frontier plot.

A depth part may carry over candidates an earlier run timed (:meth:`~layerwise.Compressor.adopt`): they are marked
:data:`CARRIED_MARK` and that run's original is listed beside the part's own (:func:`donor_part` finds the run).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from layerwise.benchmarks.page_parts import provenance_lines
from layerwise.benchmarks.registry import PageContext
from layerwise.benchmarks.store import Part
from layerwise.methods.compress.backends import OPENVINO_INT8
from layerwise.methods.compress.build import STUDENTS
from layerwise.methods.compress.frontier import RECIPES, Candidate, choose, plot_frontier
from layerwise.reports import write_text

__all__ = ["MODELS", "NAME", "TESTS", "TITLE", "donor_part", "model_candidates", "write_page"]

NAME = "compress"
TITLE = ("Compress: the fastest model within a quality budget (cut, LC cut, distilled, every-depth; torch, ONNX, "
         "ONNX int8, OpenVINO, OpenVINO int8)")
MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")
TESTS = ("stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16")
STS_AVERAGE = TESTS  # the "STS average" column: the mean of these test sets' Spearman (those present)
#: published figures (theirs, their hardware): sentence-transformers' layer-reduction distillation example
#: (stsb-roberta-base, STS-B test) and its CPU backend benchmark (quality kept, speed-up)
PUBLISHED = [
    "sentence-transformers `model_distillation_layer_reduction` example, stsb-roberta-base (12 layers, STS-B test "
    "85.44): 3 layers distilled 84.39 at 2.8x, 6 layers 85.23 at 1.7x",
    "sentence-transformers CPU backend benchmark: ONNX int8 3.23x and OpenVINO int8 5.29x the throughput of torch "
    "fp32, at 99.6-99.7 % of its quality",
]


#: issue 25's goals: throughput against the original within 1.0 point on STS-B test and the STS average; int8
#: within 0.5 point of fp32 on dev
GOAL_RATIOS = {"all-MiniLM-L6-v2": 3.0, "all-mpnet-base-v2": 4.0}
INT8_GOAL = 0.5
INT8_PAIRS = (("onnx-int8", "onnx"), ("openvino-int8", "openvino"))
CARRIED_MARK = "†"  # a candidate timed in an earlier run (carried over by Compressor.adopt)


#: protocol fields that add candidates without changing any candidate's numbers: a part stored under a protocol
#: that differs only in these gives its candidates to the new part (Compressor.adopt)
ADDITIVE = ("backends", "every_depth")


def donor_part(parts: list[Part], name: str, key: dict) -> Part | None:
    """The newest stored part ``name`` of the same model and data whose protocol differs from ``key``'s only in
    :data:`ADDITIVE` fields, with no backend the new one lacks (its candidates are the new part's, measured)."""
    def rest(protocol: dict) -> dict:
        return {k: v for k, v in protocol.items() if k not in ADDITIVE}

    found = [p for p in parts if p.name == name and p.key.get("model") == key["model"]
             and p.key.get("data") == key["data"] and rest(p.key["protocol"]) == rest(key["protocol"])
             and set(p.key["protocol"]["backends"]) <= set(key["protocol"]["backends"])
             and p.key["protocol"] != key["protocol"]]
    return max(found, key=_started, default=None)


def _started(part: Part) -> str:
    """When the newest run of ``part`` started ("" where none is recorded)."""
    return max((run.get("started", "") for run in part.runs), default="")


def model_candidates(parts: list[Part], key: dict, budget: float) -> tuple[list[Candidate], Candidate, Candidate]:
    """Every candidate of the depth parts stored under ``key`` (each once: the original is in every part, the first
    kept), the original on torch, and the choice under ``budget``."""
    seen, candidates = set(), []
    for part in sorted((p for p in parts if "depth" in p.key and {k: v for k, v in p.key.items() if k != "depth"}
                        == key), key=lambda p: p.key["depth"]):
        for c in (Candidate.from_dict(d) for d in part.payload["result"]["candidates"]):
            if (c.recipe, c.layers, c.backend) not in seen:
                seen.add((c.recipe, c.layers, c.backend))
                candidates.append(c)
    plain = {c.layers for c in candidates if c.recipe in ("cut", "original")}
    # a depth's LC cut may be a lower depth's plain cut (the best subset of 0..2 is {1}, say): listed once, as the cut
    candidates = [c for c in candidates if not (c.recipe == "lc-cut" and c.layers in plain)]
    if not candidates:
        raise ValueError("no stored depth parts under this key")
    original = next(c for c in candidates if c.recipe == "original" and c.backend == "torch")
    return candidates, original, choose(candidates, original.dev, budget)


def _average(c: Candidate) -> float | None:
    values = [c.tests[t] for t in STS_AVERAGE if t in c.tests]
    return sum(values) / len(values) if values else None


def _tmft_by_depth(ctx: PageContext, model: str) -> dict[int, float]:
    """STS-B test Spearman of TMFT (no pre-step, 3 epochs, mean over seeds) per depth, read from the tmft page's
    store parts (the tmft page's own numbers; nothing is recomputed)."""
    scores: dict[int, list[float]] = {}
    for part in ctx.store.parts("tmft"):
        cfg = part.payload.get("config") or {}
        if cfg.get("model") == model and cfg.get("pre_step") == "none" and cfg.get("epochs") == 3 \
                and len(cfg.get("layers") or []) == 1:
            scores.setdefault(int(cfg["layers"][0]), []).append(float(part.payload["test_spearman"]))
    return {depth: sum(v) / len(v) for depth, v in scores.items()}


@dataclass(frozen=True)
class _ModelResults:
    """One model's stored depth parts under its newest protocol, read back: every candidate, the original, the
    choice under that protocol's budget."""

    model: str
    protocol: dict
    counts: dict
    parts: list[Part]
    candidates: list[Candidate]
    original: Candidate
    chosen: Candidate
    # depth -> the earlier run's part whose candidates a depth part carried over (their timing is that run's)
    donors: dict[int, Part] = field(default_factory=dict)

    def carried(self, c: Candidate) -> Part | None:
        """The earlier run's part ``c`` was carried over from (timed there), or None (timed in its own part)."""
        donor = self.donors.get(c.depth)
        if donor is None:
            return None
        earlier = {(d["recipe"], tuple(d["layers"]), d["backend"]) for d in donor.payload["result"]["candidates"]}
        return donor if (c.recipe, c.layers, c.backend) in earlier else None


def _by_model(parts: list[Part]) -> list[_ModelResults]:
    """Per model (in MODELS order, then others), the depth parts of its most recently run protocol."""
    depth_parts = [p for p in parts if "depth" in p.key]
    out = []
    for model in dict.fromkeys(p.payload["model"] for p in depth_parts):
        mine = [p for p in depth_parts if p.payload["model"] == model]
        newest = max(mine, key=_started)
        key = {k: v for k, v in newest.key.items() if k != "depth"}
        protocol = key["protocol"]
        candidates, original, chosen = model_candidates(mine, key, float(protocol["budget"]))
        kept = [p for p in mine if p.key["protocol"] == protocol]
        donors = {p.key["depth"]: d for p in kept if (p.payload.get("adopted") or {}).get("candidates")
                  and (d := donor_part(mine, p.name, p.key)) is not None}
        out.append(_ModelResults(model, protocol, newest.payload["corpus"], kept, candidates, original, chosen,
                                 donors))
    order = {Path(m).name: i for i, m in enumerate(MODELS)}
    return sorted(out, key=lambda r: (order.get(Path(r.model).name, len(order)), r.model))


def _table(r: _ModelResults, tmft: dict[int, float]) -> list[str]:
    tests = [t for t in TESTS if t in r.original.tests]
    head = ["| depth | recipe | backend | parameters | throughput ratio | STS-B dev | "
            + " | ".join(tests) + " | STS average | TMFT STS-B test (tmft page) | |",
            "|---" * (8 + len(tests)) + "|---|"]
    rows = []
    for c in sorted(r.candidates, key=lambda c: (c.depth, list(RECIPES).index(c.recipe), c.layers, c.backend)):
        avg = _average(c)
        mark = "**chosen**" if c.name == r.chosen.name and c.layers == r.chosen.layers else ""
        rows.append(f"| {c.depth} | {c.recipe} ({','.join(map(str, c.layers))}) | {c.backend} | "
                    f"{c.parameters / 1e6:.1f} M | {c.ratio:.2f}x{CARRIED_MARK if r.carried(c) else ''} | {c.dev:.2f} | "
                    + " | ".join(f"{c.tests[t]:.2f}" for t in tests)
                    + f" | {'-' if avg is None else f'{avg:.2f}'} | "
                    f"{f'{tmft[c.depth]:.2f}' if c.recipe in STUDENTS and c.depth in tmft else ''} | {mark} |")
    if any(r.carried(c) for c in r.candidates):
        rows += ["", f"{CARRIED_MARK} timed in an earlier run and carried over (the depth's *carried over* row above "
                 "gives that run's date and its original's ratios): compare it with that run's original, not with "
                 "the candidates timed in this run."]
    return head + rows


def _timed(r: _ModelResults, c: Candidate) -> str:
    """The ratio's spread over its passes, and where it was timed when carried over from an earlier run."""
    passes = c.pass_ratios
    spread = f" (passes {min(passes):.2f}-{max(passes):.2f}x)" if len(passes) > 1 else ""
    donor = r.carried(c)
    return spread + ("" if donor is None else f" (timed in the earlier run of {(_started(donor) or '?')[:10]}, "
                     "carried over)")


def _goals(r: _ModelResults, tmft: dict[int, float]) -> list[str]:
    """The choice, then each goal of issue 25 with its measured figure and whether it is met."""
    candidates, original, chosen = r.candidates, r.original, r.chosen
    ok = [c for c in candidates if "stsb" in c.tests and c.tests["stsb"] >= original.tests["stsb"] - 1.0
          and (_average(c) or 0) >= (_average(original) or 0) - 1.0]
    best = max(ok, key=lambda c: c.ratio, default=original)
    layers = ",".join(map(str, chosen.layers))
    lines = [f"- chosen on dev (budget {r.protocol['budget']:g}): **{chosen.name}** (hidden states {layers}), "
             f"{chosen.ratio:.2f}x{_timed(r, chosen)}, STS-B dev {chosen.dev:.2f} (original {original.dev:.2f}), STS-B test "
             f"{chosen.tests.get('stsb', float('nan')):.2f} (original {original.tests.get('stsb', float('nan')):.2f})"]
    goal = GOAL_RATIOS.get(Path(r.model).name)
    speed = (f" (goal: >= {goal:g}x, **{'met' if best.ratio >= goal else 'not met'}**)" if goal is not None else "")
    lines.append(f"- fastest candidate within 1.0 of the original on STS-B test and on the STS average (read on the "
                 f"test sets, for the goal only): {best.name}, {best.ratio:.2f}x{_timed(r, best)}{speed}"
                 + (_speed_why(r, best) if goal is not None and best.ratio < goal else ""))
    lines += _student_lines(candidates, tmft)
    for int8, fp32 in INT8_PAIRS:
        drift = {c.name: c.dev - o.dev for c in candidates if c.backend == int8
                 for o in candidates if o.backend == fp32 and (o.recipe, o.layers) == (c.recipe, c.layers)}
        if drift:
            over = {name: d for name, d in drift.items() if abs(d) > INT8_GOAL}
            lines.append(f"- {int8} against {fp32} (fp32), same model: dev Spearman differs by at most "
                         f"{max(map(abs, drift.values())):.2f} points, over {INT8_GOAL:g} for {len(over)} of "
                         f"{len(drift)} candidates (goal: within {INT8_GOAL:g}, **{'met' if not over else 'not met'}**"
                         + (f"; {', '.join(f'{n} {d:+.2f}' for n, d in sorted(over.items(), key=lambda kv: -abs(kv[1])))}"
                            if over else "") + ")")
    return lines


def _speed_why(r: _ModelResults, best: Candidate) -> str:
    """Why the throughput goal is not met: how many layers the candidates within the quality limits run, and how far
    the nearest candidate with fewer layers falls short (the smaller of its two margins)."""
    base = (r.original.tests["stsb"], _average(r.original))
    fewer = [c for c in r.candidates if c.depth < best.depth and "stsb" in c.tests and _average(c) is not None]
    runs = (f"all {best.depth} layers" if best.depth == r.original.depth
            else f"at least {best.depth} of {r.original.depth} layers")
    if not fewer:
        return (f". Why: every candidate within the limits runs {runs} (none with fewer layers is measured yet), so "
                "only the backend speeds it up")
    near = max(fewer, key=lambda c: min(c.tests["stsb"] - base[0], _average(c) - base[1]))
    return (f". Why: every candidate within the limits runs {runs}; the nearest with fewer, {near.name}, is "
            f"{near.tests['stsb'] - base[0]:+.2f} on STS-B test and {_average(near) - base[1]:+.2f} on the STS "
            f"average against the original, so the speed-up rests on the backend at {best.depth} layers")


def _student_lines(candidates: list[Candidate], tmft: dict[int, float]) -> list[str]:
    """Each student recipe (torch) against TMFT at the same depth on STS-B test, the one set the tmft page scores."""
    lines = []
    for recipe in STUDENTS:
        pairs = sorted((c.depth, c.tests["stsb"], tmft[c.depth]) for c in candidates
                       if c.recipe == recipe and c.backend == "torch" and c.depth in tmft and "stsb" in c.tests)
        if pairs:
            wins = sum(s > t for _, s, t in pairs)
            lines.append(f"- {recipe} against TMFT at the same depth, STS-B test (the tmft page scores no other set; "
                         f"the goal names the STS average): higher at {wins} of {len(pairs)} depths ("
                         + ", ".join(f"{d}: {s:.2f} vs {t:.2f}" for d, s, t in pairs) + ")"
                         + ("" if wins == len(pairs) else "; TMFT trains on STS-B's labelled train pairs, which the "
                            "students never see (they learn the original's embeddings of the unlabeled corpus)"))
    return lines


def _data_line(r: _ModelResults) -> str:
    counts, protocol = r.counts, r.protocol
    tests = [t for t in TESTS if t in r.original.tests]
    usable = counts["distinct"] - counts["left_out_scored"]
    sample = "all of them" if protocol.get("corpus_limit") is None else f"a seeded sample of the {usable} usable"
    return (f"Distillation corpus: {counts['kept']} sentences ({sample}; "
            + ", ".join(f"{k} {counts[k]}" for k in protocol["corpus"] if k in counts)
            + f"; {counts['distinct']} distinct; {counts['left_out_scored']} left out because they are in a dev or "
            f"test pair), {protocol['epochs']} epoch(s), batch {protocol['batch_size']}, learning rate "
            f"{protocol['lr']:g}, max length {protocol['max_length']}, seed {protocol['seed']}. Dev: STS-B dev. "
            f"Tests: {', '.join(tests)} (SICK-R: all 9927 pairs, as MTEB; STS12-16: aggregation `all`, every subset "
            "pooled into one Spearman, as MTEB). Backends: " + ", ".join(protocol["backends"])
            + f"; every-depth student: {'yes' if protocol.get('every_depth') else 'no'}.")


def _run_row(part: Part, label, carried: str) -> tuple:
    """One row of the runs table: ``part``'s run (date, machine) and its original's ratio on each backend."""
    ratios = {c.backend: c.ratio for c in (Candidate.from_dict(d) for d in part.payload["result"]["candidates"])
              if c.recipe == "original"}
    env = part.runs[-1].get("environment", {}) if part.runs else {}
    return label, (_started(part) or "?")[:10], env.get("machine", {}).get("platform", "?"), ratios, carried


def _reference_lines(r: _ModelResults) -> list[str]:
    """The original as timed in each depth part (every part times it against itself and on every backend), and in
    the earlier run a part carried candidates over from: ratios from different runs compare only as far as these
    agree."""
    rows = []
    for part in sorted(r.parts, key=lambda p: p.key["depth"]):
        carried = part.payload.get("adopted")
        carried = f"{carried['candidates']} ({(carried.get('from_run') or '?')[:10]})" if carried else "0"
        rows.append(_run_row(part, part.key["depth"], carried))
        donor = r.donors.get(part.key["depth"])
        if donor is not None:  # the run the carried candidates were timed in, with its own original
            rows.append(_run_row(donor, f"{part.key['depth']} (carried over)", "–"))
    backends = r.protocol["backends"]
    lines = ["Each depth's candidates were timed in that depth's run, against the original timed in the same run; the "
             "original's own ratios per run show how far ratios from different runs compare. *Carried over*: "
             "candidates of an earlier run of the same settings with fewer backends or no every-depth student, kept "
             "with that run's numbers and timing (on the date given), not measured again:", "",
             "| depth part | timed on | machine | " + " | ".join(f"original on {b}" for b in backends)
             + " | carried over |", "|---|---|---|" + "---|" * len(backends) + "---|"]
    lines += [f"| {label} | {when} | {machine} | "
              + " | ".join(f"{ratios[b]:.2f}x" if b in ratios else "–" for b in backends) + f" | {carried} |"
              for label, when, machine, ratios, carried in rows]
    shared = [b for b in backends if all(b in ratios for _, _, _, ratios, _ in rows)]  # timed by every run
    if len({tuple(f"{ratios[b]:.2f}" for b in shared) for _, _, _, ratios, _ in rows}) > 1:
        lines += ["", "**The runs disagree**: a candidate's ratio is comparable with the others of its own run (and "
                  "with the original's in that run), not across runs."]
    return lines


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


def _stop_part(parts: list[Part], r: _ModelResults) -> Part | None:
    """The part where a run of ``r``'s protocol stopped descending (``stop_outside_budget``), or None."""
    key = {k: v for k, v in r.parts[0].key.items() if k != "depth"}
    return max((p for p in parts if p.key == {**key, "stop_outside_budget": True}), key=_started, default=None)


def _best_by_depth(r: _ModelResults) -> str:
    """Each depth's best dev Spearman among the candidates of at most that many layers, deepest first."""
    depths = sorted({c.depth for c in r.candidates}, reverse=True)
    return ", ".join(f"{max(c.dev for c in r.candidates if c.depth <= d):.2f} ({d})" for d in depths)


def _status_line(r: _ModelResults, stop: Part | None, results: list[_ModelResults]) -> str:
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
    """Write ``compress.md`` and one frontier plot per model from the store alone (each model under the protocol
    it was last run with)."""
    results = _by_model(ctx.store.parts(NAME))
    if not results:
        raise FileNotFoundError(f"no compress parts in {ctx.store.root}; run `layerwise results run compress` first")
    lines = [f"# {TITLE}", "",
             "Made by `layerwise results run compress` (computes what the store lacks, one part per model and depth) "
             "and `layerwise results render compress` (this page, from `docs/results/state/compress/` alone). Per "
             "model, `Compressor` (the estimator behind `layerwise compress`) builds at every depth l the plain cut, "
             "the LC cut (best subset of hidden states 0..l on STS-B dev, exact search) and a student distilled from "
             "the full model by MSE on the corpus (where a model's protocol says `every_depth`, also one student "
             "trained at every depth at once, cut at each); each runs on the backends its protocol lists (`torch` "
             "fp32; `onnx` fp32 and `onnx-int8`, dynamic quantization, in onnxruntime; `openvino`, the fp32 graph, "
             "and `openvino-int8`, NNCF's static int8 calibrated on the corpus' first 300 sentences, in OpenVINO, "
             "under the settings each model's line states: the current code tries SmoothQuant off, at 0.5 and at "
             "0.95 and keeps, per candidate, the int8 model that keeps the fp32 model's similarities of the "
             "calibration sentences best) "
             "and is timed against the original torch model in one run.", ""]
    paths = []
    for r in results:
        name = Path(r.model).name
        png = plot_frontier(r.candidates, ctx.output / f"compress-{name}.png", title=name, chosen=r.chosen)
        paths.append(png)
        status = _status_line(r, _stop_part(ctx.store.parts(NAME), r), results)
        tmft = _tmft_by_depth(ctx, r.model)
        lines += [f"## {name}", "", _data_line(r), "", status, "", *_quantization_line(r), *_goals(r, tmft), "",
                  *_reference_lines(r), "",
                  *_table(r, tmft), "", f"![frontier]({png.name})", ""]
    limit = results[0].parts[0].key["protocol"].get("corpus_limit")  # the protocol of the models shown
    for name in [m for m in MODELS if m not in {Path(r.model).name for r in results}]:
        lines += [f"## {name}", "", "**Not run yet.** `layerwise results run compress --data-dir DATA --option "
                  f"'models=[\"{name}\"]'" + (f" --option corpus_limit={limit}" if limit is not None else "")
                  + " --option timings=per-depth` computes it under the protocol above (one part per depth, deepest "
                  "first, each stored when timed: resumable; every depth trains a student, so several CPU hours on a "
                  "2-CPU machine).", ""]
    s = results[0].chosen.speed
    lines += ["## How to read it", "",
              f"Throughput ratio: the original torch model's median pass over the candidate's, passes interleaved in "
              f"one run ({s['sentences']} corpus sentences, batch {s['batch_size']}, max length {s['max_length']}, "
              f"{len(s['seconds'])} timed passes each, {s['threads']} threads); the original torch row, timed against "
              "itself, shows the timing's noise, and the goal lines give the range of the per-pass ratios (each original "
              "pass over the candidate pass beside it). ONNX fp32 gives the torch vectors "
              "(difference per candidate in its stored part); int8 is close, not equal.", "",
              *[f"- {k}: {v}" for k, v in RECIPES.items()], "",
              "## Published figures (theirs, their hardware; not measured here)", "", *[f"- {p}" for p in PUBLISHED],
              "", "## Provenance", "", *provenance_lines([p for r in results for p in r.parts]), ""]
    return [write_text(ctx.output / f"{NAME}.md", "\n".join(lines)), *paths]
