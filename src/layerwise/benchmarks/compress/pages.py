"""The ``compress`` page: the fastest model within 1.0 point of STS-B dev Spearman, and the whole frontier, for the
built-in models (``layerwise results run compress``; ``render`` reads the store only).

One part per model and depth: :class:`~layerwise.Compressor` at that depth on the page's corpus (:mod:`.data`), STS-B
dev choosing and the test sets scored, keyed on the model's identity, the data's checksums, every setting and the
depth (1..L: the full depth adds the LC cut of all states); then one part per model for the chosen model (saved under
``folders/<model>/model``, written again when more depths change the choice or a retime its numbers). Every depth shares the
work folder ``folders/<model>/work`` (candidates, students, graphs), so a killed run continues; with ``timings=last``
(the default) every depth is scored before any is timed (:meth:`~layerwise.Compressor.prepare`). With
``stop_outside_budget=true`` no depth shallower than the first one at which no candidate of at most that many layers
is within the budget on dev is built; a ``<model>-stop`` part says where and why, and the page states it. With
``min_depth=l`` a run builds no depth shallower than l; with ``depths=[l, ...]`` it builds only those (e.g. the depths
another page measured, to compare with them, before the ones between). With
``train_students=[depths]`` a run only trains those depths' students (and the every-depth student) into the work
folder and stores nothing: the share of a machine with a GPU, whose work folder, copied to the timing machine, is loaded
there by the run that scores and times. ``graph_test_scores=checked`` lets the float32 graphs take the torch scores of
the test sets once their vectors are checked (``CompressSettings.graph_test_scores``; not in the key: each candidate
records it, and the page says which took them). ``train_pairs=stsb`` gives every student STS-B's train pairs as a
second loss (``Compressor(train_pairs=)``; in the key when set). ``tmft=true`` also trains the tmft page's TMFT
run at every stored depth and scores it on the page's test sets (:mod:`.tmft_check`: own parts, not in the key), for
the goal's reading of the students against TMFT on the STS average.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from functools import cache, partial
from pathlib import Path

from layerwise.benchmarks.compress.data import CORPUS_SOURCES, TRAIN_PAIRS, page_data
from layerwise.benchmarks.compress.report import TITLE, write_page
from layerwise.benchmarks.compress.stored import MODELS, NAME, TESTS, donor_part, home_depth, model_candidates
from layerwise.benchmarks.compress.tmft_check import tmft_parts
from layerwise.benchmarks.page_parts import merge_revisions, run_record
from layerwise.benchmarks.registry import PageContext, ResultsPage, register
from layerwise.benchmarks.store import Part, model_key
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.methods.compress import Compressor, CompressSettings
from layerwise.methods.compress.config import GRAPH_TEST_SCORES
from layerwise.methods.compress.frontier import Candidate, stop_record
from layerwise.reports import changed_files, source_root

logger = logging.getLogger(__name__)

__all__ = ["PAGE", "CompressPageConfig"]


@dataclass(frozen=True)
class CompressPageConfig:
    """The page's protocol (every field but ``folders`` is part of each stored part's key)."""

    budget: float = 1.0
    backends: tuple[str, ...] = ("torch", "onnx", "onnx-int8", "onnx-int8-mixed", "openvino", "openvino-int8")
    epochs: int = 1
    batch_size: int = 64
    lr: float = 1e-4
    max_length: int = 128
    seed: int = 0
    speed_sentences: int = 1000
    speed_batch_size: int = 32
    speed_repeats: int = 3
    corpus: tuple[str, ...] = CORPUS_SOURCES
    corpus_limit: int | None = None  # a seeded sample of the corpus (None: all of it)
    tests: tuple[str, ...] = TESTS
    folders: str = "runs/compress"  # candidates, students, graphs and chosen models (large; not in the repository)
    # "last": every depth scored first, then all timed in one block (the timings can wait for a quiet machine);
    # "per-depth": each depth scored, timed and stored in turn (a run spanning sessions keeps every finished depth;
    # the work folder, with the students, does not survive a new checkout)
    timings: str = "last"
    # one student trained at every depth 1..L at once, cut at each depth part's depth (a candidate per depth); in
    # the protocol only when on (the parts stored before it existed keep their key)
    every_depth: bool = True
    # time every stored candidate of the depths this run computes again (with --redo): ratios carried over from an
    # earlier run, or measured on a busy machine, measured anew in one block (not in the key: numbers keep meaning)
    retime: bool = False
    # build the depths deepest first and stop after the first one at which no candidate of at most that many layers
    # is within the budget on dev (Compressor's stop_outside_budget; a "<model>-stop" part records where and why):
    # which depths are built, not how any candidate is measured, so not in the key
    stop_outside_budget: bool = False
    # the float32 graphs' (onnx, openvino) test scores: "measured" or "checked" (CompressSettings.graph_test_scores:
    # the torch candidate's, once the graph's vectors are the torch model's on the dev sentences and a sample of each
    # test set). Not in the key: the two agree to about 1e-4 of a point (the graphs' vectors are the torch ones to
    # ~1e-6), each candidate records which it is (extra "test_scores") and the page says so, so a depth scored either
    # way stays beside the stored ones (a deeper depth measured in full, a shallower one checked)
    graph_test_scores: str = "measured"
    # only train the students of these depths (and the every-depth student) into the work folder, then stop: for a
    # machine with a GPU, whose students a later run on the timing machine loads (work folder copied); not in the key
    train_students: tuple[int, ...] = ()
    device: str | None = None  # where the students train and the candidates run (None: cpu); not in the key
    # labelled pairs every student also learns from (Compressor's train_pairs): "stsb", STS-B's train split, or None
    # (the MSE alone); in the key only when set (the parts stored before it existed keep their key)
    train_pairs: str | None = None
    # build no depth shallower than this one in this run (1: every depth): for a run that must end before the next
    # depth's students train (their share on a GPU, or hours of CPU); the page lists the depths not built yet as not
    # yet measured. Which depths are built, not how any is measured, so not in the key
    min_depth: int = 1
    # build only these depths in this run (empty: every depth from min_depth up), the stored ones still counting for
    # the stopping rule: to measure first a depth another page has figures for (TMFT's 3, 6, 9). Not in the key
    depths: tuple[int, ...] = ()
    # also train TMFT (the tmft page's run: seed 0, no pre-step) at every stored depth of this protocol and score it
    # on the page's test sets (:mod:`.tmft_check`), for the goal's STS-average reading; its own parts, not in the key
    tmft: bool = False

    def builds(self, depth: int) -> bool:
        """Whether this run builds ``depth`` where the store lacks it (``min_depth``, ``depths``)."""
        return depth >= self.min_depth and (not self.depths or depth in self.depths)

    def protocol(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()
                if k not in ("folders", "timings", "retime", "stop_outside_budget", "train_students", "device",
                             "graph_test_scores", "min_depth", "depths", "tmft")
                and not (k == "every_depth" and not v) and not (k == "train_pairs" and v is None)}


def _config(ctx: PageContext) -> CompressPageConfig:
    known = set(CompressPageConfig.__dataclass_fields__) | {"models"}
    bad = sorted(set(ctx.options) - known)
    if ctx.options.get("timings", "last") not in ("last", "per-depth"):
        bad.append(f"timings={ctx.options['timings']!r} (valid: last, per-depth)")
    if ctx.options.get("graph_test_scores", "measured") not in GRAPH_TEST_SCORES:
        bad.append(f"graph_test_scores={ctx.options['graph_test_scores']!r} (valid: {', '.join(GRAPH_TEST_SCORES)})")
    bad += [f"{k}={ctx.options[k]!r} (valid: true, false)" for k in ("every_depth", "retime", "stop_outside_budget", "tmft")
            if k in ctx.options and not isinstance(ctx.options[k], bool)]
    if ctx.options.get("train_pairs") not in (None, *TRAIN_PAIRS):
        bad.append(f"train_pairs={ctx.options['train_pairs']!r} (valid: {', '.join(TRAIN_PAIRS)})")
    for option, example in (("train_students", "[11, 10]"), ("depths", "[9]")):
        depths = ctx.options.get(option, [])
        if not isinstance(depths, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in depths):
            bad.append(f"{option}={depths!r} (valid: a JSON list of depths, e.g. {example})")
    low = ctx.options.get("min_depth", 1)
    if not isinstance(low, int) or isinstance(low, bool) or low < 1:
        bad.append(f"min_depth={low!r} (valid: a depth of at least 1, e.g. 11)")
    if bad:
        raise ValueError(f"unknown or invalid compress page option(s) {bad}; valid options: {', '.join(sorted(known))}")
    listed = ("backends", "corpus", "tests")  # JSON lists, or comma-separated names (--option tests=stsb,sickr)
    return CompressPageConfig(**{k: tuple(v.split(",")) if k in listed and isinstance(v, str)
                                 else tuple(v) if isinstance(v, list) else v
                                 for k, v in ctx.options.items() if k != "models"})


def _settings(config: CompressPageConfig) -> CompressSettings:
    return CompressSettings(epochs=config.epochs, batch_size=config.batch_size, lr=config.lr,
                            max_length=config.max_length, seed=config.seed, speed_sentences=config.speed_sentences,
                            speed_batch_size=config.speed_batch_size, speed_repeats=config.speed_repeats,
                            graph_test_scores=config.graph_test_scores, device=config.device)


def run(ctx: PageContext) -> None:
    """Compute the parts every model lacks: every depth's candidates scored first, then each depth timed and stored
as one part (a kill keeps every scored candidate and every stored depth), then the chosen model."""
    config = _config(ctx)
    encoders = _encoders(ctx, config)
    data = page_data(config.corpus, config.tests, limit=config.corpus_limit, seed=config.seed,
                     data_dir=ctx.data_dir, train_pairs=config.train_pairs)
    for model, encoder in encoders.items():
        key = {"model": model_key(encoder.identity), "data": data.checksums(), "protocol": config.protocol()}
        name, root = Path(model).name, Path(config.folders) / Path(model).name
        compressor = partial(_compressor, model, config, root, n_layers=encoder.identity.n_layers)
        if config.train_students:  # a GPU machine's share of the work: the students, nothing scored or stored
            names = compressor(*config.train_students).train_students(data.corpus, data.dev, **data.inputs())
            logger.info("compress page: %s: students %s in %s", name, names, root / "work")
            continue
        # every depth 1..L: the original is in every part, the full depth adds its LC cut (best subset of 0..L);
        # deepest first, so a run spanning sessions stores first the depths nearest the original's quality
        lowest = max(config.min_depth, min(config.depths, default=1))
        stored = {depth: ctx.store.load(NAME, f"{name}-l{depth}", {**key, "depth": depth})
                  for depth in range(encoder.identity.n_layers, lowest - 1, -1)}
        missing = [depth for depth, part in stored.items() if part is None and config.builds(depth)]
        _forget_stale(ctx, compressor, data, name, key, missing)
        adopted = _adopt(ctx, compressor, data, name, key, missing)
        if config.retime and missing:  # the shared work folder: every depth's timings forgotten at once
            n = compressor(missing[0]).retime(data.corpus, data.dev, **data.inputs())
            logger.info("compress page: %s: %d stored timings forgotten, timed again below", name, n)
            adopted = {}  # every candidate is timed in this run: nothing is carried over
        stop = _Descent(config.budget if config.stop_outside_budget else None)
        built = []  # the missing depths scored in this run, deepest first (timed below with timings=last)
        for depth, part in stored.items():
            if part is None and depth not in missing:  # not built in this run (option depths): not yet measured
                continue
            if part is not None:  # stored: its candidates count for the stopping rule as they are
                candidates = [Candidate.from_dict(c) for c in part.payload["result"]["candidates"]]
            elif config.timings == "last":  # students trained, candidates scored, nothing timed (load is harmless)
                candidates = compressor(depth).prepare(data.corpus, data.dev, **data.inputs())
                built.append(depth)
            else:
                candidates = _store_depth(ctx, compressor, data, model, key, depth, adopted)
            if stop.after(depth, candidates):
                stop_key, record = {**key, "stop_outside_budget": True}, {"model": model, **stop.record}
                known = ctx.store.load(NAME, f"{name}-stop", stop_key)
                if known is None or known.payload != record:  # stored once per decision, not once per run
                    ctx.store.save(Part(NAME, f"{name}-stop", stop_key, record, True, [run_record(ctx.command)]))
                break
        for depth in built:  # then the timings, in one block (read back: only the timing is new)
            _store_depth(ctx, compressor, data, model, key, depth, adopted)
        _save_choice(ctx, compressor, data, model, key, config.budget, root)
        if config.tmft:  # TMFT at every depth this protocol has stored, scored on the page's test sets
            measured = [d for d in range(1, encoder.identity.n_layers + 1)
                        if ctx.store.load(NAME, f"{name}-l{d}", {**key, "depth": d}) is not None]
            tmft_parts(ctx, model, encoder.identity, data, measured, root, device=config.device)


def _forget_stale(ctx: PageContext, compressor, data, name: str, key: dict, missing: list[int]) -> None:
    """Before a depth part that ``--redo`` / ``--stale`` names is computed again: its students, scores and timings in
    the work folder that code of a commit whose measured files changed since computed (as ``layerwise results list``
    judges a part) are forgotten (``Compressor.forget_computed``), so that the part is computed again rather than
    re-stored from older numbers. Outside a git checkout staleness cannot be told: nothing is forgotten."""
    redo = [depth for depth in missing if ctx.store.named_for_redo(f"{name}-l{depth}", {**key, "depth": depth})]
    root = source_root()
    if not redo or root is None:
        return
    sources = PAGE.sources()
    stale = cache(lambda commit: bool(changed_files(commit, sources, root)))  # one git diff per commit
    for depth in redo:
        n = compressor(depth).forget_computed(stale, data.corpus, data.dev, **data.inputs())
        if n:
            logger.info("compress page: %s depth %d: %d student(s) or candidate(s) computed by code changed since "
                        "forgotten: computed again", name, depth, n)


def _adopt(ctx: PageContext, compressor, data, name: str, key: dict, missing: list[int]) -> dict:
    """depth -> the earlier run whose candidates this protocol keeps at that depth (it only adds to them), each
    kept in the work folder (``Compressor.adopt``); never a part that ``--redo`` / ``--stale`` names (stale, say)."""
    adopted = {}
    earlier = ctx.store.parts(NAME) if missing else []  # read once, not per depth
    for depth in missing:
        donor = donor_part(earlier, f"{name}-l{depth}", key)
        if donor is not None and ctx.store.named_for_redo(donor.name, donor.key):
            logger.info("compress page: %s: not carrying candidates over from %s--%s: --redo names it",
                        name, donor.name, donor.digest)
        elif donor is not None:
            n = compressor(depth).adopt(donor.payload["result"]["candidates"], data.corpus, data.dev, **data.inputs())
            adopted[depth] = {"candidates": n, "from_run": donor.runs[-1].get("started") if donor.runs else None}
    return adopted


def _save_choice(ctx: PageContext, compressor, data, model: str, key: dict, budget: float, root: Path) -> None:
    """The model's choice among every stored depth, saved as a sentence-transformers folder and stored as a part:
    again whenever the choice read from the stored depth parts changed (more depths) or its numbers did (timed
    again), as its card shows them. The part keeps that reading (``read``) beside the fitted choice (``chosen``, as
    the work folder gave it): the two may differ in what the depth parts record (the original's ratio of another
    depth's run, say), and only the reading is compared, so an unchanged store fits nothing again."""
    name, parts = Path(model).name, ctx.store.parts(NAME)
    _, _, chosen = model_candidates(parts, key, budget)
    saved_choice = ctx.store.load(NAME, name, key)
    if saved_choice is None or saved_choice.payload.get("read") != chosen.to_dict():
        est = compressor(home_depth(parts, key, chosen)).fit(data.corpus, data.dev, **data.inputs())
        saved = est.save(root / "model")  # every candidate is read back from the work folder
        ctx.store.save(Part(NAME, name, key, {"model": model, "chosen": est.chosen_.to_dict(),
                                              "read": chosen.to_dict(), "saved_model": str(saved)}, True,
                            [run_record(ctx.command)]))


def _encoders(ctx: PageContext, config: CompressPageConfig) -> dict[str, LayerEncoder]:
    """Each model's encoder (its identity keys the parts), ``min_depth`` and ``depths`` checked against every model's
    depth before any work."""
    encoders = {model: LayerEncoder(model, max_length=config.max_length, cache_dir=False, show_progress=False)
                for model in ctx.options.get("models") or MODELS}
    for model, encoder in encoders.items():
        n = encoder.identity.n_layers
        if config.min_depth > n:
            raise ValueError(f"min_depth={config.min_depth} is deeper than {Path(model).name}'s {n} layers; "
                             f"pass a depth in 1..{n}")
        outside = [d for d in config.depths if not 1 <= d <= n]
        if outside:
            raise ValueError(f"depths={list(config.depths)}: {outside} outside {Path(model).name}'s 1..{n}; "
                             f"pass depths in 1..{n}")
    return encoders


def _store_depth(ctx: PageContext, compressor, data, model: str, key: dict, depth: int, adopted: dict) -> list:
    """Fit one depth (its scored candidates read back, only the timings new) and store it as a part; its
    candidates."""
    t0 = time.perf_counter()
    est = compressor(depth).fit(data.corpus, data.dev, **data.inputs())
    payload = {"model": model, "depth": depth, "result": est.result_.to_dict(), "corpus": data.counts,
               "seconds": time.perf_counter() - t0, **({"adopted": adopted[depth]} if depth in adopted else {}),
               "computed_at": computed_at(est.result_.candidates)}
    ctx.store.save(Part(NAME, f"{Path(model).name}-l{depth}", {**key, "depth": depth}, payload, True,
                        [run_record(ctx.command)]))
    logger.info("compress page: %s depth %d done in %.0f s", Path(model).name, depth, payload["seconds"])
    return est.candidates_


def computed_at(candidates) -> list[dict]:
    """The distinct revisions (``commit``, ``dirty``) that trained, scored and timed ``candidates``, as each records
    it (``extra["computed"]``); a candidate measured before that was recorded names none. A depth part read back
    from the work folder is then as current as the oldest code that measured it, not as the run that stored it
    (:func:`~layerwise.benchmarks.page_parts.part_revisions`)."""
    revisions = merge_revisions(rev for c in candidates for rev in c.extra.get("computed", {}).values())
    return sorted(revisions, key=lambda rev: rev["commit"])


class _Descent:
    """The page's stopping rule over its depths, deepest first (:func:`~layerwise.methods.compress.frontier.
    stop_record` on every candidate seen so far, as ``Compressor(stop_outside_budget=True)`` decides); budget None:
    never stops. ``record``: where and why it stopped."""

    def __init__(self, budget: float | None):
        self.budget, self.seen, self.record = budget, [], None

    def after(self, depth: int, candidates: list) -> bool:
        self.seen += candidates
        if self.budget is not None:
            self.record = stop_record(self.seen, self.budget, depth)
        return self.record is not None


def _compressor(model: str, config: CompressPageConfig, root: Path, *depths: int, n_layers: int) -> Compressor:
    """The estimator of one depth's candidates (of several: ``train_students``); every depth shares the work folder
    (the original is measured once, the every-depth student trained once)."""
    every = tuple(range(1, n_layers + 1)) if config.every_depth else False
    return Compressor(model, depths=tuple(depths), every_depth=every, budget=config.budget, backends=config.backends,
                      settings=_settings(config), output_dir=str(root / "work"))


def render(ctx: PageContext) -> list[Path]:
    """Check the options, then write the page from the store alone (:func:`~.report.write_page`)."""
    _config(ctx)
    return write_page(ctx)


PAGE = register(ResultsPage(
    name=NAME, method="compress", title=TITLE, models=MODELS, data=("stsb", *TESTS[1:], *CORPUS_SOURCES),
    grid={"models": list(MODELS), "backends": list(CompressPageConfig().backends)},
    settings=CompressPageConfig().protocol(), run=run, render=render,
    # the page's text from the store alone (run imports neither): their changes change no stored number
    renders=("src/layerwise/benchmarks/compress/report.py", "src/layerwise/benchmarks/compress/goals.py"),
    # every stored key: a key is a protocol (the page shows a model's main one, the others beside it, the run a
    # part carried candidates from), never an earlier version of one, so none supersedes another
    shows=list))
