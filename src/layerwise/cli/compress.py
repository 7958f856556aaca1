"""``layerwise compress MODEL --corpus FILE --dev PAIRS [--test PAIRS ...] --output DIR``: the fastest model within a
quality budget (:class:`~layerwise.Compressor`).

Every file is read before the model loads. Into DIR go ``report.md`` (the choice and every candidate), ``frontier.png``
(dev Spearman against throughput), ``report.json``, the chosen model as a sentence-transformers folder ``model/``, and
``work/`` (every finished candidate and student: the same command after a kill continues where it stopped).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from layerwise.cli._files import add_corpus_columns, add_pair_columns, corpus_from_args, pairs_from_args
from layerwise.cli._option_types import (
    layer_list,
    max_length,
    nonnegative_float,
    positive_float,
    positive_int,
    seed,
)

BACKEND_CHOICES = "torch, onnx, onnx-int8, onnx-int8-mixed, openvino, openvino-int8"
GRAPH_TEST_SCORES = ("measured", "checked")  # methods.compress.config's (not imported here: it would load torch)


def add_parsers(sub) -> None:
    p = sub.add_parser("compress", help="the fastest model within a quality budget: cut, LC-cut and distilled "
                                        "candidates at every depth, timed against the original")
    p.add_argument("model", metavar="MODEL", help="built-in name or a local Hugging Face encoder folder")
    p.add_argument("--corpus", required=True, metavar="FILE",
                   help="unlabeled sentences to distil on (.txt one a line, .jsonl/.csv/.tsv/.parquet with --text-column)")
    p.add_argument("--dev", required=True, metavar="PAIRS", help="scored pairs that choose (csv/tsv/jsonl/parquet)")
    p.add_argument("--test", nargs="+", default=[], metavar="PAIRS", help="scored pairs only reported")
    p.add_argument("--train-pairs", default=None, metavar="PAIRS",
                   help="labelled pairs (scores on any scale) whose loss, (cos - score mapped to [0, 1])^2, every "
                        "student adds to the MSE towards the original (default: none, the MSE alone)")
    p.add_argument("--pairs-weight", type=positive_float, default=1.0,
                   help="weight of the --train-pairs loss against the MSE (default: 1.0)")
    p.add_argument("--output", required=True, metavar="DIR", help="where the report, the chosen model and work/ go")
    p.add_argument("--budget", type=nonnegative_float, default=1.0,
                   help="points of dev Spearman the chosen model may lose against the original (default: 1.0)")
    p.add_argument("--depths", type=layer_list, default=None,
                   help="depths (layers kept) to build candidates at, e.g. 2,3,4 (default: every depth 1..L)")
    p.add_argument("--every-depth", action="store_true",
                   help="also train one student at every depth at once and cut it at each depth (one training run "
                        "for all depths, against one per depth)")
    p.add_argument("--stop-outside-budget", action="store_true",
                   help="build the depths deepest first and stop after the first depth at which no candidate is "
                        "within --budget on dev (the shallower depths, whose students cost the most, are left out)")
    p.add_argument("--retime", action="store_true",
                   help="time every candidate already in DIR/work again (its scores are kept): for timings taken on a "
                        "busy machine or in an earlier run")
    p.add_argument("--backends", default="torch", help=f"comma-separated: {BACKEND_CHOICES} (default: torch)")
    p.add_argument("--epochs", type=positive_int, default=1, help="distillation passes over the corpus (default: 1)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="distillation batch (default: 32)")
    p.add_argument("--lr", type=positive_float, default=1e-4, help="distillation learning rate (default: 1e-4)")
    p.add_argument("--max-length", type=max_length, default=128, help="tokens per sentence (default: 128)")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--speed-sentences", type=positive_int, default=256,
                   help="corpus sentences encoded per timed pass (default: 256)")
    p.add_argument("--speed-batch-size", type=positive_int, default=32, help="batch when timing (default: 32)")
    p.add_argument("--speed-repeats", type=positive_int, default=3, help="timed passes per model (default: 3)")
    p.add_argument("--graph-test-scores", choices=GRAPH_TEST_SCORES, default="measured",
                   help="the float32 graph backends' (onnx, openvino) test scores: measured, each test set encoded by "
                        "the graph (default); checked, the torch candidate's once the graph's vectors of the dev "
                        "sentences and a sample of each test set equal the torch model's (within 1e-4)")
    p.add_argument("--device", default="cpu", help="where models train and run (default: cpu)")
    p.add_argument("--cache-dir", default=None, help="layer-stack cache (default: $LAYERWISE_HOME/cache)")
    p.add_argument("--prepare", action="store_true",
                   help="train the students and score every candidate into DIR/work, time nothing and write no "
                        "report (the same command without --prepare then only times them: on a quiet machine)")
    p.add_argument("--train-students", action="store_true",
                   help="only train the students into DIR/work (score and time nothing): e.g. with --device cuda on "
                        "a GPU machine; the same command without it, DIR/work copied to the machine the model will "
                        "run on, loads them there, then scores and times")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars, only the results")
    add_corpus_columns(p)
    add_pair_columns(p)
    p.set_defaults(handler=run)


def _tests(args: argparse.Namespace) -> dict:
    """Each --test file read, named by its file name (a repeated name gets its position)."""
    out = {}
    for i, path in enumerate(args.test):
        name = Path(path).stem
        out[name if name not in out else f"{name}-{i + 1}"] = pairs_from_args(args, path, min_rows=3)
    return out


def run(args, command) -> int:
    from layerwise import reports
    from layerwise.export.sentence_transformers import check_destination
    from layerwise.methods.compress import Compressor, CompressSettings
    from layerwise.methods.compress.diagnostics import failed_student_lines
    from layerwise.methods.compress.frontier import plot_frontier, report_lines
    from layerwise.reports import environment, git_state, run_section, write_json, write_text

    corpus = corpus_from_args(args, args.corpus)  # every file read before the model loads
    dev = pairs_from_args(args, args.dev, min_rows=3)
    tests = _tests(args)
    train_pairs = None if args.train_pairs is None else pairs_from_args(args, args.train_pairs, min_rows=2)
    settings = CompressSettings(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, max_length=args.max_length,
                                seed=args.seed, speed_sentences=args.speed_sentences,
                                speed_batch_size=args.speed_batch_size, speed_repeats=args.speed_repeats,
                                graph_test_scores=args.graph_test_scores, pairs_weight=args.pairs_weight,
                                device=args.device, cache_dir=args.cache_dir)
    out = Path(args.output)
    check_destination(out / "model", True)  # a model/ folder layerwise did not export is refused before the fit
    est = Compressor(args.model, depths=args.depths, every_depth=args.every_depth, budget=args.budget,
                     backends=args.backends, settings=settings, output_dir=str(out / "work"),
                     stop_outside_budget=args.stop_outside_budget, show_progress=not args.quiet)
    if args.train_students:
        names = est.train_students(corpus, dev, tests=tests, train_pairs=train_pairs)
        print(f"trained {len(names)} student(s) into {out / 'work' / 'students'}: {', '.join(names) or 'none'}; "
              "the same command without --train-students (DIR/work beside it) loads them")
        return 0
    if args.prepare:
        scored = est.prepare(corpus, dev, tests=tests, train_pairs=train_pairs)
        print(f"scored {len(scored)} candidates into {out / 'work'}; run the same command without --prepare to time "
              "them and choose")
        return 0
    if args.retime:
        print(f"forgot {est.retime(corpus, dev, tests=tests, train_pairs=train_pairs)} stored timings in {out / 'work'}: timing them again")
    env = environment(command)
    env["machine"]["load_average_start"], t0 = list(os.getloadavg()), time.perf_counter()
    est.fit(corpus, dev, tests=tests, train_pairs=train_pairs)
    env["machine"]["load_average_end"] = list(os.getloadavg())
    env["git"] = None if env["source"] is None else git_state(Path(reports.__file__).resolve().parents[2])
    report = est.report()
    title = f"layerwise compress: {Path(args.model).name}"
    params = {"model": args.model, "corpus": f"{args.corpus} ({len(set(corpus))} distinct sentences)",
              "dev": args.dev, "tests": ", ".join(args.test) or "none", "budget": args.budget,
              **({} if args.train_pairs is None else {"train pairs": f"{args.train_pairs} (weight {args.pairs_weight})"})}
    failed = failed_student_lines(est.candidates_, args.lr)  # a student below its untrained cut: say so, and the fix
    warnings = ["## Warnings", "", *(f"- {line.removeprefix('warning: ')}" for line in failed), ""] if failed else []
    lines = report_lines(report, title=title) + warnings + run_section(env, params, time.perf_counter() - t0)
    paths = {"model": est.save(out / "model"), "report": write_text(out / "report.md", "\n".join(lines) + "\n"),
             "json": write_json(out / "report.json", {**report, "environment": env}),
             "plot": plot_frontier(est.candidates_, out / "frontier.png", title=title, chosen=est.chosen_)}
    c = est.chosen_
    print(f"chosen {c.name}: dev Spearman {c.dev:.2f} (original {est.original_.dev:.2f}), {c.ratio:.2f}x the "
          f"original's throughput, {c.parameters / 1e6:.2f} M parameters")
    for line in failed:
        print(line, file=sys.stderr)
    if est.unbuilt_depths_:
        print(f"depths not built (--stop-outside-budget): {', '.join(map(str, est.unbuilt_depths_))}")
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return 0
