"""``layerwise multitask``: multi-task fine-tuning (SST, Quora paraphrase, STS heads on one encoder; methods/multitask).

Named experiments: results go into a store under ``OUTPUT/state`` (one part per experiment x seed, keyed on every
setting), so a re-run skips what is done and a cut-off run resumes from its checkpoints in ``OUTPUT/runs/``.
``--tasks FILE`` (a task list in JSON or TOML, see ``methods/multitask/task_list.py``): the estimator
``MultitaskModel`` trains on the user's files and the command writes ``OUTPUT/multitask-<FILE>-<key>.json`` (per-task
dev scores) and the model folder ``OUTPUT/multitask-<FILE>-<key>-model/`` (sentence-transformers, heads beside it).
"""

from __future__ import annotations

from layerwise.cli._common import add_training_tail
from layerwise.cli._option_types import max_length, nonnegative_int, positive_float, positive_int, seed
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL
from layerwise.methods.multitask.config import SCHEDULES
from layerwise.training.distributed import is_main

OVERRIDES = ("epochs", "schedule", "batch_size", "lr", "max_length", "limit", "eval_limit", "temperature")


def add_parsers(sub) -> None:
    p = sub.add_parser("multitask", help="multi-task fine-tuning: SST, Quora paraphrase and STS heads on one encoder")
    p.add_argument("experiments", nargs="*", default=[],
                   help="named experiments (BASELINE, SHARED, STS_PARA_HEAD_MOD, STS_PARA_HEAD_MOD_1, FREEZE_SST, "
                        "SST_TO_STS, NLI_REGRESSION, NLI_CONTRASTIVE, NLI_TRIPLET), each optionally with +MIX (a "
                        "layer mix per task), +SUBSET (a layer subset per task), +FROZEN (SST trained last, its head "
                        "alone on the frozen encoder: SST_TO_STS+FROZEN is the report's protocol), +TAU1 (the NLI "
                        "contrastive temperature 1.0, the report's Eq. 3 as written) or +HEADMOD (the cosine STS "
                        "head and |u-v| PARA features: FREEZE_SST+HEADMOD)")
    p.add_argument("--config", action="append", default=[], metavar="FILE",
                   help="a JSON file of MultitaskConfig fields (repeatable), run besides the named experiments")
    p.add_argument("--tasks", dest="task_file", default=None, metavar="FILE",
                   help="your own tasks: a .json or .toml file with a list 'tasks' of {name, kind (classification, "
                        "pair_classification, pair_regression, nli), data (a CSV/TSV/JSONL/Parquet file), dev, "
                        "columns, head, layer (a hidden state or \"mix\"), features}; trains one model on them "
                        "instead of the named experiments")
    p.add_argument("--shared-layers", type=nonnegative_int, default=None,
                   help="--tasks: hidden layers shared by the linear pair heads (default: 0)")
    p.add_argument("--freeze", nargs="+", default=None, metavar="TASK",
                   help="--tasks: tasks trained last, their heads alone on the frozen encoder")
    p.add_argument("--nli-epochs", type=positive_int, default=None, help="--tasks: epochs of the nli task (default: 1)")
    p.add_argument("--seeds", type=seed, nargs="+", default=[0])
    p.add_argument("--epochs", type=positive_int, default=None,
                   help="epochs over the task data (default: 10; the report does not state its epoch count)")
    p.add_argument("--temperature", type=positive_float, default=None,
                   help="temperature of the contrastive NLI objective (default: 0.05; the report's Eq. 3 has none: "
                        "1.0)")
    p.add_argument("--schedule", default=None, choices=SCHEDULES,
                   help="batch order within an epoch (default: task_by_task, the report's)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="default: 32 (the report's); under torchrun the global batch, split over the "
                                                    "processes")
    p.add_argument("--lr", type=positive_float, default=None, help="encoder and head learning rate (default: 2e-5)")
    p.add_argument("--max-length", type=max_length, default=None, help="tokens per sentence (default: 128)")
    p.add_argument("--limit", type=positive_int, default=None, help="at most this many training examples per task")
    p.add_argument("--eval-limit", type=positive_int, default=None, help="at most this many dev / test examples per task")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"built-in name ({', '.join(BUILTIN_MODELS)}) or a local Hugging Face folder")
    p.add_argument("--data-dir", default=None,
                   help="data folder holding senteval/SST5, quora/, sts/STSB and nli/ (default: $LAYERWISE_DATA)")
    p.add_argument("--output", default="runs/multitask",
                   help="folder for multitask.{md,json}, multitask-layers.png, state/ and runs/ "
                        "(default: runs/multitask)")
    p.add_argument("--overwrite", action="store_true",
                   help="start cut-off runs again instead of resuming them (finished results in state/ are kept)")
    add_training_tail(p)
    p.set_defaults(handler=run)


def configs_from_args(args) -> list:
    """The MultitaskConfigs named on the command line (and in --config files), with the options given applied."""
    from dataclasses import replace

    from layerwise.methods.multitask.config import get_experiment, load_config

    over = {k: getattr(args, k) for k in OVERRIDES if getattr(args, k) is not None}
    configs = [get_experiment(name, **over) for name in args.experiments]
    configs += [replace(load_config(path), **over) for path in args.config]
    if not configs:
        raise ValueError("name at least one experiment (e.g. `layerwise multitask BASELINE`), or pass --config FILE or "
                         "--tasks FILE (your own tasks)")
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ValueError(f"experiment names must differ (they name the results and folders), got {names}")
    return configs


def run(args, command) -> int:
    if args.task_file is not None:
        return run_tasks(args)
    only_tasks = [flag for flag, value in (("--shared-layers", args.shared_layers), ("--freeze", args.freeze),
                                           ("--nli-epochs", args.nli_epochs)) if value is not None]
    if only_tasks:
        raise ValueError(f"{', '.join(only_tasks)} apply to --tasks FILE; the named experiments set these "
                         "themselves (SHARED, FREEZE_SST, NLI_*)")
    from pathlib import Path

    from layerwise.benchmarks.multitask.experiment import run_parts
    from layerwise.benchmarks.multitask.pages import TITLE
    from layerwise.benchmarks.multitask.report import MultitaskPage, draw_layer_weights, render_markdown, summary
    from layerwise.benchmarks.page_parts import run_record, save_png
    from layerwise.benchmarks.store import ResultsStore
    from layerwise.methods.multitask.run import RunControl
    from layerwise.reports import write_json, write_text

    configs = configs_from_args(args)  # every config checked before any work
    out = Path(args.output)
    results = run_parts(configs, args.seeds, ResultsStore(out / "state"), model=args.model, checkpoints=out / "runs",
                        data_dir=args.data_dir, command=command,
                        control=RunControl(overwrite=args.overwrite, device=args.device))
    if not is_main():  # under torchrun: every process trained, rank 0 writes and prints
        return 0
    page = MultitaskPage(TITLE, args.model, results, [f"- command: `{run_record(command)['command']}`"])
    paths = [write_text(out / "multitask.md", render_markdown(page)),
             write_json(out / "multitask.json", {**summary(page), "runs": [r.to_payload() for r in results]})]
    if any(r.layer_weights for r in results):
        paths.append(save_png(draw_layer_weights(page), out / "multitask-layers.png"))
    print(f"{'experiment':32s} seed  dev overall  test: SST acc  PARA acc  STS Pearson  overall")
    for r in results:
        t = r.test
        print(f"{r.config['name']:32s} {r.seed:4d}  {r.dev.overall:11.4f}  {t.sst_acc:13.4f}  {t.para_acc:8.4f}  "
              f"{t.sts_pearson:11.4f}  {t.overall:7.4f}")
    for path in paths:
        print(f"wrote {path}")
    return 0


def estimator_from_args(args):
    """The :class:`MultitaskModel` of ``--tasks FILE`` and the options given (the task file read and checked)."""
    from layerwise.methods.multitask.estimator import MultitaskModel
    from layerwise.methods.multitask.task_list import read_task_file

    unused = [flag for flag, value in (("experiment names", args.experiments), ("--config", args.config),
                                       ("--limit", args.limit), ("--eval-limit", args.eval_limit),
                                       ("--data-dir", args.data_dir)) if value]
    if unused:
        raise ValueError(f"--tasks trains on the files of the task list: leave out {', '.join(unused)} (they are "
                         "for the built-in experiments)")
    if len(args.seeds) != 1:
        raise ValueError(f"--tasks trains one model: give one seed (--seeds {args.seeds[0]}), not {args.seeds}")
    tasks = read_task_file(args.task_file)
    options = {"epochs": args.epochs, "schedule": args.schedule, "batch_size": args.batch_size, "lr": args.lr,
               "max_length": args.max_length, "shared_layers": args.shared_layers, "nli_epochs": args.nli_epochs,
               "temperature": args.temperature,
               "freeze": None if args.freeze is None else list(args.freeze)}
    return MultitaskModel(args.model, tasks=tasks, seed=args.seeds[0], device=args.device,
                          show_progress=False if args.quiet else None,
                          **{k: v for k, v in options.items() if v is not None})


def run_tasks(args) -> int:
    """``--tasks FILE``: fit the estimator on the user's tasks, save it and report the dev scores per task."""
    from pathlib import Path

    from layerwise.data.readers import data_label
    from layerwise.export.sentence_transformers import check_destination
    from layerwise.keys import keyed_name
    from layerwise.reports import write_json

    estimator = estimator_from_args(args)
    # named by the settings and the task file, so that a run under others writes beside this one, never over it
    settings = {k: v for k, v in estimator.get_params().items() if k not in ("tasks", "device", "show_progress")}
    text = Path(args.task_file).read_text(encoding="utf-8")
    out = Path(args.output)
    label = keyed_name(f"multitask-{data_label(args.task_file)}", {"settings": settings, "task_file": text})
    check_destination(out / f"{label}-model", overwrite=True)  # a user's folder: refused before training
    estimator.fit()  # reads every data file before the model loads
    if not is_main():
        return 0
    model_dir = estimator.save(out / f"{label}-model")
    rows = [{**p.to_dict(), "dev_scores": estimator.dev_scores_.get(name)} for name, p in estimator.tasks_.items()]
    report = write_json(out / f"{label}.json", {
        "task_file": str(args.task_file), "model": args.model, "model_dir": str(model_dir), "tasks": rows,
        "settings": {k: v for k, v in estimator.get_params().items() if k != "tasks"},
        "layer_weights": estimator.layer_weights_, "phases": estimator.history_})
    print(f"{'task':20s} {'kind':20s} {'train data':24s} {'dev data':24s} dev scores")
    for row in rows:
        scores = row["dev_scores"]
        shown = ", ".join(f"{k} {v:.4f}" for k, v in scores.items()) if scores else "no dev data"
        print(f"{row['name']:20s} {row['kind']:20s} {row['source']:24s} {row['dev_source'] or '-':24s} {shown}")
    print(f"wrote {report}")
    print(f"wrote {model_dir}")
    return 0
