"""The ``compress`` page's account of its students, read from the store alone: each student under this protocol
beside the earlier protocols still stored, where and how long they trained, which training of the every-depth student
each depth cuts (by its weights' checksum), and TMFT as this page trains it (:mod:`.tmft_check`) beside the tmft
page's own figure. :mod:`.report` places these sections in each model's part of the page."""

from __future__ import annotations

from layerwise.benchmarks.compress.stored import TESTS, ModelResults, sts_average, tests_average
from layerwise.methods.compress.build import STUDENTS
from layerwise.methods.compress.diagnostics import failed_students
from layerwise.methods.compress.frontier import Candidate

__all__ = ["every_depth_lines", "failed_lines", "protocol_lines", "tmft_lines", "training_lines"]

RENDER_ONLY = True  # writes the page from its store; no stored number goes through it (measured_code)


def tmft_lines(here: dict[int, dict], tmft: dict[int, float]) -> list[str]:
    """TMFT trained by this page (:mod:`.tmft_check`), per depth: its scores on this page's sets, beside the tmft
    page's own STS-B test figure (the mean of its seeds, on its machines) as a check."""
    if not here:
        return []
    tests = [t for t in TESTS if any(t in p["tests"] for p in here.values())]
    lines = ["TMFT trained by this page (`--option tmft=true`: the tmft page's run at each depth, seed 0, no pre-step, "
             "the checkpoint with the best STS-B dev kept; no timing, as it has the distilled student's architecture), "
             "Spearman x100:", "",
             "| depth | epochs | STS-B dev | " + " | ".join(tests) + " | STS average | tmft page STS-B test | "
             "trained on | minutes |", "|---" * (7 + len(tests)) + "|"]
    for depth, p in here.items():
        page = f"{tmft[depth]:.2f}" if depth in tmft else ""
        lines.append(f"| {depth} | {p['config']['epochs']} | {p['dev']:.2f} | "
                     + " | ".join(f"{p['tests'][t]:.2f}" if t in p["tests"] else "" for t in tests)
                     + f" | {tests_average(p['tests']):.2f} | {page} | {p.get('device', '?')} | "
                     f"{p.get('wall_seconds', 0) / 60:.1f} |")
    return lines + [""]


def protocol_lines(r: ModelResults, others: list[tuple[dict, list[Candidate]]]) -> list[str]:
    """The students (torch) at each depth under this protocol and under the earlier ones still in the store, side
    by side: what the training recipe changes. ``others``: :func:`~.stored.other_protocols`."""
    if not others:
        return []

    def named(protocol: dict, keys) -> str:  # the settings a protocol differs in, with its values
        return ", ".join(f"{k} {'none' if protocol.get(k) is None else protocol[k]}" for k in sorted(keys))

    differing = {k for p, _ in others for k in {*p, *r.protocol} if p.get(k) != r.protocol.get(k)}
    columns = [(f"this protocol ({named(r.protocol, differing)})", r.candidates)]
    columns += [(named(p, {k for k in differing if p.get(k) != r.protocol.get(k)}), c) for p, c in others]
    rows = []
    for depth in sorted({c.depth for _, cands in columns for c in cands if c.recipe in STUDENTS}):
        for recipe in STUDENTS:
            cells = []
            for _, cands in columns:
                c = next((c for c in cands if (c.recipe, c.depth, c.backend) == (recipe, depth, "torch")), None)
                avg = None if c is None else sts_average(c)
                cells.append("–" if c is None else f"{c.dev:.2f} / {c.tests.get('stsb', float('nan')):.2f} / "
                             + ("–" if avg is None else f"{avg:.2f}"))
            if any(cell != "–" for cell in cells):
                rows.append(f"| {depth} | {recipe} | " + " | ".join(cells) + " |")
    trained = [_trained(_where_trained(cands)) or "not recorded" for _, cands in columns]
    rows.append("| | trained on | " + " | ".join(trained) + " |")
    return ["The students (torch) under this protocol and under the earlier ones still in the store (their parts "
            "are not re-run; each protocol is named by the settings it differs in), STS-B dev / STS-B test / STS "
            "average:", "", "| depth | student | " + " | ".join(label for label, _ in columns) + " |",
            "|---|---|" + "---|" * len(columns), *rows, ""]


def _student_id(c: Candidate) -> tuple:
    """Which trained model a student's candidate cuts: the distilled student of its depth, or the every-depth
    student by its weights (a run spanning machines trains it again, and that is another model)."""
    return (c.recipe, c.depth if c.recipe == "distilled" else c.extra.get("weights_sha256"))


def _where_trained(candidates: list[Candidate]) -> dict[str, list[dict]]:
    """device (with its GPU, where recorded) -> the training facts of each student among ``candidates`` (an
    every-depth student once, cut at every depth), where recorded."""
    where: dict[str, dict] = {}
    for c in candidates:
        if c.recipe in STUDENTS and c.backend == "torch" and "device" in c.extra:
            gpu = (c.extra.get("machine") or {}).get("gpu")
            student = _student_id(c)
            where.setdefault(c.extra["device"] + (f" ({gpu})" if gpu else ""), {})[student] = c.extra
    return {device: list(students.values()) for device, students in where.items()}


def _trained(where: dict[str, list[dict]]) -> str:
    """"cpu: 2 student(s), 850-910 s each", with the students a kill interrupted: their time is the last process's
    (``steps_this_run`` of ``steps``), and a student recorded before that was kept may have resumed unseen."""
    out = []
    for device, facts in where.items():
        seconds = [f["seconds"] for f in facts]
        resumed = [f for f in facts if f.get("steps_this_run") is not None and f["steps_this_run"] < f["steps"]]
        unknown = sum(f.get("steps_this_run") is None for f in facts)
        span = f"{seconds[0]:.0f} s" if len(seconds) == 1 else f"{min(seconds):.0f}-{max(seconds):.0f} s each"
        out.append(f"{device}: {len(facts)} student(s), {span}"
                   + "".join(f" (one resumed: {f['seconds']:.0f} s are its last {f['steps_this_run']} of "
                             f"{f['steps']} steps)" for f in resumed)
                   + (" (whether resumed not recorded: a resumed student's time is its last process's)"
                      if unknown else ""))
    return "; ".join(out)


def every_depth_lines(r: ModelResults) -> list[str]:
    """Which training of the every-depth student each depth's every-depth rows cut, by its weights' checksum: one
    for every depth, or several where the depths were built on different machines (the work folder, with the
    student, does not survive a new one): trainings of the same recipe and seed, but different models."""
    trainings: dict[str | None, list[Candidate]] = {}
    for c in sorted(r.candidates, key=lambda c: -c.depth):
        if c.recipe == "every-depth" and c.backend == "torch":
            trainings.setdefault(c.extra.get("weights_sha256"), []).append(c)
    unknown = trainings.pop(None, [])
    if not trainings and not unknown:
        return []

    def depths(cands: list[Candidate]) -> str:
        return "depth(s) " + ", ".join(str(c.depth) for c in cands)

    def described(sha: str, cands: list[Candidate]) -> str:
        facts = cands[0].extra
        where = facts.get("device", "?") + (f", {facts['seconds']:.0f} s" if "seconds" in facts else "")
        return f"{depths(cands)}: weights sha256 {sha[:12]}, trained on {where}"

    unrecorded = (f"{'; ' if trainings else ''}{depths(unknown)}: weights not recorded (trained before candidates "
                  "recorded them), so which training they cut is not known" if unknown else "")
    if len(trainings) <= 1:
        head = "Every-depth student: one training, cut at each depth (" if not unknown else "Every-depth student ("
        return [head + "".join(described(*t) for t in trainings.items()) + unrecorded + ").", ""]
    return [f"Every-depth student: **{len(trainings)} trainings** of the same recipe and seed, which are different "
            "models (the depths were built on different machines, and a new machine trains the student again): "
            + "; ".join(described(sha, cands) for sha, cands in trainings.items()) + unrecorded
            + ". Each every-depth row is its own training's cut; rows of different trainings compare as two "
            "trainings do, not as one model's depths.", ""]


def training_lines(r: ModelResults) -> list[str]:
    """Where and how long the students trained (their candidates' training facts, where recorded): on a machine with
    a GPU, say, while every candidate is scored and timed on the machine of the runs table."""
    where = _where_trained(r.candidates)
    if not where:
        return []
    return ["Students trained on " + _trained(where)
            + " (each student's `run.json`); every candidate scored and timed on the machine of the runs table.", ""]


def failed_lines(r: ModelResults, others: list[tuple[dict, list[Candidate]]]) -> list[str]:
    """Each student of this protocol whose training failed (:func:`failed_students`), named beside its figures with
    what the candidate recorded of it (its distance to the teacher's embeddings against the cut's, its last loss, the
    protocol's learning rate); where ``others`` (:func:`~.stored.other_protocols`) are stored, the table of
    :func:`protocol_lines` shows them beside it."""
    lines = []
    for c, cut in failed_students(r.candidates):
        x = c.extra
        mse = (f"; its embeddings are nearer the teacher's than the cut's (MSE {x['mse_distilled']:.4f} against "
               f"{x['mse_cut']:.4f} on {x['mse_sentences']} sentences) while their ranking is lost (as a student that "
               "maps every sentence near the teacher's mean embedding would be)" if {"mse_distilled", "mse_cut"} <= set(x)
               and x["mse_distilled"] < x["mse_cut"] else "")
        loss = f"; its loss over the last 10 steps {x['final_loss']:.3f}" if "final_loss" in x else ""
        lines.append(f"- **{c.recipe}-l{c.depth} failed to train**: STS-B dev {c.dev:.2f}, below the untrained "
                     f"cut at its depth ({cut.dev:.2f}){mse}{loss}; this protocol's learning rate "
                     f"{r.protocol.get('lr', '?')}. Its rows are measured as they are, not a recipe's reach"
                     + (": the students of this model under other protocols (the table above) show what the recipe "
                        "keeps." if others else "."))
    return ["Students whose training failed under this protocol (dev below the untrained cut of their depth):",
            "", *lines, ""] if lines else []
