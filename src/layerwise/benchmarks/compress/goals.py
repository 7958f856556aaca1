"""Issue 25's goals on the ``compress`` page, each with its measured figure, met or not, and why where not: the
throughput against the original within 1.0 point on STS-B test and the STS average, the students against TMFT at the
same depth, the int8 backends within 0.5 point of their fp32 graph on dev."""

from __future__ import annotations

import statistics
from pathlib import Path

from layerwise.benchmarks.compress.stored import ModelResults, model_candidates, started, sts_average, tests_average
from layerwise.benchmarks.compress.tmft_check import tmft_config
from layerwise.benchmarks.page_parts import cpu_label
from layerwise.benchmarks.store import Part, ResultsStore
from layerwise.methods.compress.build import STUDENTS
from layerwise.methods.compress.frontier import Candidate

__all__ = ["GOAL_RATIOS", "INT8_GOAL", "INT8_PAIRS", "goal_lines", "ratio_note", "run_ratio", "timing_cpus", "tmft_page_scores"]

RENDER_ONLY = True  # writes the page from its store; no stored number goes through it (measured_code)

GOAL_RATIOS = {"all-MiniLM-L6-v2": 3.0, "all-mpnet-base-v2": 4.0}
INT8_GOAL = 0.5
INT8_PAIRS = (("onnx-int8", "onnx"), ("onnx-int8-mixed", "onnx"), ("openvino-int8", "openvino"))


def run_ratio(r: ModelResults, c: Candidate) -> tuple[float, int] | None:
    """``c``'s throughput against the median of every pass of the original in the run that timed ``c`` (the original
    is timed beside each candidate of a run, so a run holds many of its passes, against the 3 beside ``c``), and that
    number of passes; None where ``c`` is untimed or its run is not among the parts read.

    The ratio the choice uses pairs ``c``'s passes with the original's passes beside them, which cancels a change of
    load during the run but carries the original's own pass-to-pass noise (about 10 % here); on a quiet machine the
    run's pooled original is the steadier denominator. A carried-over candidate's run is the earlier part it came
    from (all that part's candidates)."""
    if not c.speed:
        return None
    same = lambda d: ((d["recipe"], tuple(d["layers"]), d["backend"]) == (c.recipe, c.layers, c.backend)  # noqa: E731
                      and d.get("speed") == c.speed)
    donor = r.carried(c)
    part = donor or next((p for p in r.parts if any(same(d) for d in p.payload["result"]["candidates"])), None)
    if part is None:
        return None
    run = [Candidate.from_dict(d) for d in part.payload["result"]["candidates"] if d.get("speed")]
    if donor is None:  # the part's own run: not the candidates it carried over from an earlier one
        run = [o for o in run if r.carried(o) is None]
    passes = [s for o in run for s in o.speed["original_seconds"]]
    return statistics.median(passes) / statistics.median(c.speed["seconds"]), len(passes)


def ratio_note(r: ModelResults, c: Candidate) -> str:
    """The ratio's spread over its passes, the ratio against its run's pooled original (:func:`run_ratio`), and where
    it was timed when carried over from an earlier run."""
    passes = c.pass_ratios
    spread = f" (passes {min(passes):.2f}-{max(passes):.2f}x" if len(passes) > 1 else ""
    pooled = run_ratio(r, c)
    if spread:
        spread += (f"; {pooled[0]:.2f}x against the median of the original's {pooled[1]} passes in its run)"
                   if pooled and pooled[1] > len(passes) else ")")
    donor = r.carried(c)
    return spread + ("" if donor is None else f" (timed in the earlier run of {(started(donor) or '?')[:10]}, "
                     "carried over)")


def tmft_page_scores(store: ResultsStore, model: str) -> dict[int, float]:
    """STS-B test Spearman of TMFT (no pre-step, the tmft page's epochs for the model: :data:`.tmft_check.
    TMFT_EPOCHS`, mean over seeds) per depth, read from the tmft page's store parts (its own numbers; nothing is
    recomputed): the figures the students' STS-B test line compares with."""
    scores: dict[int, list[float]] = {}
    epochs = tmft_config(model, 1).epochs
    for part in store.parts("tmft"):
        cfg = part.payload.get("config") or {}
        if cfg.get("model") == model and cfg.get("pre_step") == "none" and cfg.get("epochs") == epochs \
                and len(cfg.get("layers") or []) == 1 and cfg.get("dataset", "stsb") == "stsb":  # not SICK-R's
            scores.setdefault(int(cfg["layers"][0]), []).append(float(part.payload["test_spearman"]))
    return {depth: sum(v) / len(v) for depth, v in scores.items()}


def goal_lines(r: ModelResults, tmft: dict[int, float], here: dict[int, dict] | None = None,
               others: list[tuple[dict, list[Candidate]]] = ()) -> list[str]:
    """The choice, then each goal of issue 25 with its measured figure and whether it is met; ``tmft``: the tmft
    page's STS-B test per depth; ``here``: TMFT trained by this page per depth (:mod:`.tmft_check`); ``others``: the
    model's other stored protocols (:func:`~.stored.other_protocols`), whose students learnt from labelled pairs
    where this protocol's did not are read against TMFT too (the like-for-like reading)."""
    candidates, original, chosen = r.candidates, r.original, r.chosen
    ok = [c for c in candidates if "stsb" in c.tests and c.tests["stsb"] >= original.tests["stsb"] - 1.0
          and (sts_average(c) or 0) >= (sts_average(original) or 0) - 1.0]
    best = max(ok, key=lambda c: c.ratio, default=original)
    layers = ",".join(map(str, chosen.layers))
    lines = _cpus_line(r) + [f"- chosen on dev (budget {r.protocol['budget']:g}): **{chosen.name}** (hidden states {layers}), "
             f"{chosen.ratio:.2f}x{ratio_note(r, chosen)}, STS-B dev {chosen.dev:.2f} (original {original.dev:.2f}), STS-B test "
             f"{chosen.tests.get('stsb', float('nan')):.2f} (original {original.tests.get('stsb', float('nan')):.2f})"]
    goal = GOAL_RATIOS.get(Path(r.model).name)
    speed = (f" (goal: >= {goal:g}x, **{'met' if best.ratio >= goal else 'not met'}**)" if goal is not None else "")
    lines.append(f"- fastest candidate within 1.0 of the original on STS-B test and on the STS average (read on the "
                 f"test sets, for the goal only): {best.name}, {best.ratio:.2f}x{ratio_note(r, best)}{speed}"
                 + _pooled_goal(r, ok, best, goal)
                 + (_speed_why(r, best) if goal is not None and best.ratio < goal else "") + _hidden_losses(best, original))
    lines += _every_test_line(r)
    lines += _student_lines(candidates, tmft, pairs=r.protocol.get("train_pairs"),
                            epochs=tmft_config(r.model, 1).epochs)
    lines += tmft_here_lines(candidates, here or {}, pairs=r.protocol.get("train_pairs"),
                             batch_size=r.protocol.get("batch_size"))
    for protocol, students in others:
        if protocol.get("train_pairs") and not r.protocol.get("train_pairs"):
            lines += tmft_here_lines(students, here or {}, pairs=protocol["train_pairs"],
                                     batch_size=protocol.get("batch_size"),
                                     under=f"under the protocol with train_pairs {protocol['train_pairs']} (this "
                                           "model's students of that protocol, in the table of protocols below)")
    for int8, fp32 in INT8_PAIRS:
        drift = {c.name: c.dev - o.dev for c in candidates if c.backend == int8
                 for o in candidates if o.backend == fp32 and (o.recipe, o.layers) == (c.recipe, c.layers)}
        if drift:
            over = {name: d for name, d in drift.items() if abs(d) > INT8_GOAL}
            lines.append(f"- {int8} against {fp32} (fp32), same model: dev Spearman differs by at most "
                         f"{max(map(abs, drift.values())):.2f} points, over {INT8_GOAL:g} for {len(over)} of "
                         f"{len(drift)} candidates (goal: within {INT8_GOAL:g}, **{'met' if not over else 'not met'}**"
                         + (f"; {', '.join(f'{n} {d:+.2f}' for n, d in sorted(over.items(), key=lambda kv: -abs(kv[1])))}"
                            f"; {_directions(over)}" if over else "") + ")")
    return lines


def timing_cpus(r: ModelResults) -> dict[str, list[Part]]:
    """The CPU each depth part was timed on (:func:`~layerwise.benchmarks.page_parts.cpu_label` of its run) ->
    those parts, deepest first. A candidate carried over from an earlier run counts with the part that holds it
    (the runs table names that earlier run and its machine)."""
    cpus: dict[str, list[Part]] = {}
    for part in sorted(r.parts, key=lambda p: -p.key["depth"]):
        machine = (part.runs[-1].get("environment", {}) if part.runs else {}).get("machine", {})
        cpus.setdefault(cpu_label(machine), []).append(part)
    return cpus


def _cpus_line(r: ModelResults) -> list[str]:
    """Where the depths were timed on more than one CPU: which, and the choice of the same rule among each CPU's
    depths alone (a ratio compares with the others of its own runs, not across CPUs)."""
    cpus = timing_cpus(r)
    if len(cpus) < 2:
        return []
    budget = float(r.protocol["budget"])
    per_cpu = []
    key = {k: v for k, v in r.parts[0].key.items() if k != "depth"}
    for label, parts in cpus.items():  # the candidates as these parts hold them: the original timed in these runs
        _, _, best = model_candidates(parts, key, budget)
        depths = ", ".join(str(part.key["depth"]) for part in parts)
        per_cpu.append(f"depth(s) {depths} on {label}: {best.name}, {best.ratio:.2f}x, STS-B dev {best.dev:.2f}")
    return [f"- **timed on {len(cpus)} different CPUs** (the depths were built in different sessions): a ratio "
            "compares with the others of its own CPU only (the runs table below gives each run's original on every "
            "backend), so the choice and the goal readings below, which compare candidates across CPUs, are not "
            "like for like. The same rule (fastest within the budget on dev) among each CPU's depths alone: "
            + "; ".join(per_cpu) + "."]


def _pooled_goal(r: ModelResults, ok: list[Candidate], best: Candidate, goal: float | None) -> str:
    """The throughput goal read against each run's pooled original (:func:`run_ratio`): the fastest candidate within
    the quality limits on that reading, which may be another one, and whether the goal holds there too."""
    pooled = {c.name: ratio[0] for c in ok if (ratio := run_ratio(r, c)) is not None}
    if goal is None or not pooled:
        return ""
    name = max(pooled, key=pooled.get)
    verdict = f"**{'met' if pooled[name] >= goal else 'not met'}**"
    if name == best.name:
        return f"; against its run's original (the median of all its passes) the goal is {verdict} too" \
            if pooled[name] >= goal and best.ratio >= goal else f"; against its run's original the goal is {verdict}"
    return (f"; against each run's original (the median of all its passes, a steadier denominator than the passes "
            f"beside a candidate) the fastest within the limits is {name}, {pooled[name]:.2f}x (goal {verdict} on "
            "that reading)")


def _directions(over: dict[str, float]) -> str:
    """Which way the int8 candidates outside the goal moved: a loss of quality is the goal's concern; a gain is a
    departure from float32 all the same (the goal is two-sided), and the page says which it is."""
    lower = sum(d < 0 for d in over.values())
    if lower == len(over):
        return "all lower than float32"
    return "none lower than float32 (int8 scored higher)" if lower == 0 else f"{lower} lower than float32, " \
        f"{len(over) - lower} higher"


def _hidden_losses(c: Candidate, original: Candidate) -> str:
    """The test sets on which ``c`` is more than 1.0 below the original although the STS average is within it."""
    below = {t: c.tests[t] - original.tests[t] for t in c.tests
             if t in original.tests and c.tests[t] < original.tests[t] - 1.0}
    if not below:
        return ""
    return ("; but on its own test sets it is more than 1.0 below the original on "
            + ", ".join(f"{t} ({d:+.2f})" for t, d in sorted(below.items(), key=lambda kv: kv[1]))
            + ": the average holds because it gains on others")


def _every_test_line(r: ModelResults) -> list[str]:
    """A stricter reading than the goal's, for a user who needs every test set kept: the fastest candidate within 1.0
    of the original on each test set the original was scored on (the original itself when none is)."""
    candidates, original = r.candidates, r.original
    tests = sorted(original.tests)
    if len(tests) < 2:
        return []
    ok = [c for c in candidates if all(t in c.tests and c.tests[t] >= original.tests[t] - 1.0 for t in tests)]
    best = max(ok, key=lambda c: c.ratio, default=original)
    worst = min(tests, key=lambda t: best.tests[t] - original.tests[t])
    return [f"- fastest candidate within 1.0 of the original on every test set ({', '.join(tests)}; a stricter "
            f"reading than the goal's, not the goal): {best.name}, {best.ratio:.2f}x{ratio_note(r, best)}, closest to the limit on {worst} "
            f"({best.tests[worst] - original.tests[worst]:+.2f})"]


def _speed_why(r: ModelResults, best: Candidate) -> str:
    """Why the throughput goal is not met: how many layers the candidates within the quality limits run, and how far
    the nearest candidate with fewer layers falls short (the smaller of its two margins)."""
    base = (r.original.tests["stsb"], sts_average(r.original))
    fewer = [c for c in r.candidates if c.depth < best.depth and "stsb" in c.tests and sts_average(c) is not None]
    runs = (f"all {best.depth} layers" if best.depth == r.original.depth
            else f"at least {best.depth} of {r.original.depth} layers")
    if not fewer:
        return (f". Why: every candidate within the limits runs {runs} (none with fewer layers is measured yet), so "
                "only the backend speeds it up")
    near = max(fewer, key=lambda c: min(c.tests["stsb"] - base[0], sts_average(c) - base[1]))
    return (f". Why: every candidate within the limits runs {runs}; the nearest with fewer, {near.name}, is "
            f"{near.tests['stsb'] - base[0]:+.2f} on STS-B test and {sts_average(near) - base[1]:+.2f} on the STS "
            f"average against the original, so the speed-up rests on the backend at {best.depth} layers")


def tmft_here_lines(candidates: list[Candidate], here: dict[int, dict], *, pairs: str | None = None,
                    under: str = "", batch_size: int | None = None) -> list[str]:
    """Each student recipe (torch) against TMFT trained by this page at the same depth (:mod:`.tmft_check`), on the
    STS average (the goal's reading) and on STS-B test; ``pairs``: the labelled pairs the protocol's students also
    learnt from (None: the corpus' MSE alone, which the line says where TMFT is not beaten); ``under``: which
    protocol the students are of, where not the model's main one; ``batch_size``: the protocol's, with which the
    students' recorded steps give the labelled pairs they drew (a pair batch each step) beside TMFT's."""
    lines = []
    for recipe in STUDENTS:
        rows = sorted((c.depth, sts_average(c), tests_average(here[c.depth]["tests"]), c.tests.get("stsb"),
                       here[c.depth]["tests"].get("stsb")) for c in candidates
                      if c.recipe == recipe and c.backend == "torch" and c.depth in here and sts_average(c) is not None)
        if not rows:
            continue
        wins = sum(s > t for _, s, t, _, _ in rows)
        stsb = [(d, s, t) for d, _, _, s, t in rows if s is not None and t is not None]
        epochs = {here[d]["config"]["epochs"] for d, *_ in rows}
        lines.append(f"- {recipe}{' ' + under if under else ''} against TMFT at the same depth, trained here (the "
                     "tmft page's settings: seed 0, "
                     f"{'/'.join(map(str, sorted(epochs)))} epoch(s), no pre-step; scored on this page's test sets), "
                     f"STS average (goal: higher): higher at {wins} of {len(rows)} depths (**"
                     f"{'met' if wins == len(rows) else 'not met'}**; "
                     + ", ".join(f"{d}: {s:.2f} vs {t:.2f}" for d, s, t, _, _ in rows) + "); STS-B test: higher at "
                     f"{sum(s > t for _, s, t in stsb)} of {len(stsb)}"
                     + (_labels(pairs, epochs) if wins < len(rows) or pairs else "")
                     + (_drawn(candidates, recipe, here, [d for d, *_ in rows], batch_size) if pairs else ""))
    return lines


def _drawn(candidates: list[Candidate], recipe: str, here: dict[int, dict], depths: list[int],
           batch_size: int | None) -> str:
    """How many labelled pairs each side drew in training (steps x batch, as recorded): the students take a batch of
    pairs at every corpus step, TMFT one pass over the pairs per epoch, so the two can differ several times over."""
    students = sorted({c.extra["steps"] * batch_size for c in candidates if c.recipe == recipe and c.backend == "torch"
                       and c.depth in depths and "steps" in c.extra} if batch_size else set())
    tmft = sorted({here[d]["steps"] * here[d]["config"]["batch_size"] for d in depths if "steps" in here[d]})
    if not students or not tmft:
        return ""
    return (f"; labelled pairs drawn in training: the students {'/'.join(f'{n:,}' for n in students)} (a batch of "
            f"{batch_size} at each step), TMFT {'/'.join(f'{n:,}' for n in tmft)}")


def _labels(pairs: str | None, epochs) -> str:
    """What each side learns from labelled pairs: both (``pairs``, the students' second loss), or TMFT alone."""
    if pairs:
        return (f"; both learn from labelled pairs ({pairs} train: the students beside the MSE on the corpus, TMFT "
                f"from STS-B train alone, for {'/'.join(map(str, sorted(epochs)))} epoch(s))")
    return ("; TMFT trains on STS-B's labelled train pairs, which the students never see (they learn the original's "
            "embeddings of the unlabeled corpus)")


def _student_lines(candidates: list[Candidate], tmft: dict[int, float], *, pairs: str | None = None,
                   epochs: int = 3) -> list[str]:
    """Each student recipe (torch) against TMFT at the same depth on STS-B test, the one set the tmft page scores;
    ``pairs``: the labelled pairs the protocol's students also learnt from (None: the corpus' MSE alone)."""
    why = _labels(pairs, {epochs})
    lines = []
    for recipe in STUDENTS:
        rows = sorted((c.depth, c.tests["stsb"], tmft[c.depth]) for c in candidates
                      if c.recipe == recipe and c.backend == "torch" and c.depth in tmft and "stsb" in c.tests)
        if rows:
            wins = sum(s > t for _, s, t in rows)
            lines.append(f"- {recipe} against TMFT at the same depth, STS-B test (the tmft page scores no other set; "
                         f"the goal names the STS average): higher at {wins} of {len(rows)} depths ("
                         + ", ".join(f"{d}: {s:.2f} vs {t:.2f}" for d, s, t in rows) + ")"
                         + (why if wins < len(rows) or pairs else ""))
    return lines
