"""``layerwise wordsim`` (per-layer word similarity) and ``layerwise tmft`` (truncated model fine-tuning).

``layerwise tmft --train FILE [--dev FILE] [--test FILE]`` fine-tunes on your pairs through
:class:`~layerwise.TruncatedFineTuner` (one per layer selection and seed; the pre-steps read ``--word-pairs FILE`` or
``--mlm-corpus FILE``): every file is read before the model loads, the summary is ``OUTPUT/tmft-<train>-<key>.{json,md}``
and each kept model a sentence-transformers folder ``OUTPUT/runs/<train>/<run>/model`` (a re-run resumes from the
checkpoints beside it).
Without ``--train`` it runs the paper's protocol on STS-B and keeps its results in a store under ``OUTPUT/state``
(one part per run, keyed on the model, the data checksums and every setting), so a re-run skips finished runs and a
cut-off run resumes from its checkpoints in ``OUTPUT/runs/``; the kept model of each run is a sentence-transformers
folder ``OUTPUT/runs/<run>/model``.
"""

from __future__ import annotations

import argparse

from layerwise.cli._common import add_training_tail
from layerwise.cli._files import (
    add_corpus_columns,
    add_pair_columns,
    add_word_columns,
    corpus_from_args,
    pairs_from_args,
    word_pairs_from_args,
)
from layerwise.cli._option_types import max_length, nonnegative_int, positive_float, positive_int, seed
from layerwise.data.wordsim import DEFAULT_WORDSIM, WORDSIM_FILES
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL
from layerwise.errors import UsageError
from layerwise.training.distributed import is_main

CLI_PRE_STEPS = ("none", "wordsim", "ws", "mlm")  # ws: the earlier name of wordsim


def add_parsers(sub) -> None:
    p = sub.add_parser("wordsim", help="per-layer word similarity: each hidden state's Spearman on word-pair sets")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"built-in name ({', '.join(BUILTIN_MODELS)}) or a local Hugging Face folder")
    p.add_argument("--sets", nargs="+", default=list(DEFAULT_WORDSIM),
                   help=f"sets from the data folder ({', '.join(WORDSIM_FILES)}), files 'word1 word2 score' (tab or "
                        "space separated, as those sets), or column files (.csv/.tsv/.jsonl/.parquet: --word1-column, "
                        f"--word2-column, --score-column, as tmft --word-pairs) (default: {' '.join(DEFAULT_WORDSIM)})")
    p.add_argument("--data-dir", default=None, help="data folder holding wordsim/ (default: $LAYERWISE_DATA)")
    p.add_argument("--output", default="runs", help="folder for wordsim-<model>-<key>.{json,md,png} (default: runs)")
    add_word_columns(p)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--device", default="cpu")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars, only the results")
    p.set_defaults(handler=run)
    _add_tmft(sub)


def _word_set(args, name: str):
    """A built-in set by name, a word-similarity file ('word1 word2 score' lines) or a column file (the reader of
    ``tmft --word-pairs``), by its suffix; a path that does not exist is said as such."""
    from pathlib import Path

    from layerwise.data.readers import TABLE_SUFFIXES
    from layerwise.data.wordsim import load_wordsim

    if str(name).lower() in WORDSIM_FILES:
        return load_wordsim(name, args.data_dir)
    path = Path(name).expanduser()
    if not path.exists():
        raise UsageError(f"--sets {name}: no such file, and not a built-in set ({', '.join(WORDSIM_FILES)})")
    if path.suffix.lower() in TABLE_SUFFIXES:
        return word_pairs_from_args(args, path)
    return load_wordsim(path)


def run(args, command) -> int:
    from layerwise.benchmarks.truncated.wordsim_report import write_wordsim_outputs
    from layerwise.encoders import LayerEncoder
    from layerwise.methods.truncated.wordsim import per_layer_wordsim
    from layerwise.reports import environment

    datasets = [_word_set(args, name) for name in args.sets]  # all read before the model loads
    encoder = LayerEncoder(args.model, batch_size=args.batch_size, device=args.device, cache_dir=False)
    result = per_layer_wordsim(encoder, datasets)
    paths = write_wordsim_outputs(result, args.output, environment(command))
    n_states = len(next(iter(result.scores.values())))
    print(f"model {result.model['name']} | Spearman x100 per hidden state (0 = embedding output)")
    print("  set" + " " * 14 + " ".join(f"{k:>6d}" for k in range(n_states)))
    for name, vals in result.scores.items():
        print(f"  {name:16s} " + " ".join(f"{v:6.2f}" for v in vals) + f"   best {result.best_layer(name)}")
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return 0


def layer_subset(text: str) -> tuple[int, ...]:
    """``"0,3"`` -> (0, 3): hidden states separated by commas, each >= 0."""
    try:
        layers = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of hidden states; write e.g. 0,3") \
            from None
    if any(k < 0 for k in layers):
        raise argparse.ArgumentTypeError(f"{text!r} has a negative hidden state; use 0 (embeddings) .. L")
    return layers


def _add_tmft(sub) -> None:
    p = sub.add_parser("tmft", help="truncated model fine-tuning: cut the encoder at layer l, fine-tune on scored "
                                    "pairs (your --train file, or STS-B)")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"built-in name ({', '.join(BUILTIN_MODELS)}) or a local Hugging Face folder")
    p.add_argument("--layers", type=nonnegative_int, nargs="+", default=[], metavar="L",
                   help="hidden states to truncate at (0 = embedding output), one TMFT run each")
    p.add_argument("--subset", type=layer_subset, action="append", default=[], metavar="K,K,...",
                   help="a layer combination (e.g. 0,3): one LC-TMFT run, truncated at its maximum, mean of the "
                        "subset as the sentence vector (repeatable)")
    p.add_argument("--pre-step", choices=CLI_PRE_STEPS, default="none",
                   help="none; wordsim (word-similarity fine-tuning first: --word-pairs FILE, or the built-in sets "
                        "without --train; 'ws' is the same); mlm (MLM domain adaptation first: --mlm-corpus FILE, "
                        "or SNLI + wiki sentences without --train)")
    files = p.add_argument_group("your data (CSV, TSV, JSON lines or Parquet; a corpus also as plain text)")
    files.add_argument("--train", default=None, metavar="FILE",
                       help="scored sentence pairs to fine-tune on (any score scale: it is read); without it, STS-B")
    files.add_argument("--dev", default=None, metavar="FILE", help="scored pairs whose Spearman picks the epoch kept "
                                                                    "(default: the last epoch)")
    files.add_argument("--test", default=None, metavar="FILE", help="scored pairs to report the Spearman of")
    add_pair_columns(files)
    files.add_argument("--score-scale", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                       help="the scale of the --train scores (default: read from them; word pairs are always read "
                            "on their own range)")
    files.add_argument("--word-pairs", default=None, metavar="FILE",
                       help="word pairs with similarity scores for --pre-step wordsim (split 70/15/15 train/dev/test)")
    add_word_columns(files)
    files.add_argument("--mlm-corpus", default=None, metavar="FILE",
                       help="unlabeled sentences for --pre-step mlm")
    add_corpus_columns(files)
    p.add_argument("--seeds", type=seed, nargs="+", default=[0])
    p.add_argument("--epochs", type=positive_int, default=10, help="passes over the training pairs (default: 10, "
                                                                    "the paper)")
    p.add_argument("--batch-size", type=positive_int, default=32,
                   help="pairs per step (default: 32); under torchrun the global batch, split over the processes")
    p.add_argument("--lr", type=positive_float, default=2e-5)
    p.add_argument("--max-length", type=max_length, default=128, help="tokens per sentence (default: 128)")
    p.add_argument("--dataset", choices=["stsb", "sickr"], default=None,
                   help="built-in pairs without --train: stsb (train/dev/test, the default) or sickr (SemEval-2014 "
                        "train/trial/test); any other pairs file: --train FILE")
    p.add_argument("--train-limit", type=positive_int, default=None, help="first n built-in train pairs (quick checks)")
    p.add_argument("--ws-epochs", type=positive_int, default=None, help="word-similarity epochs (default: 50)")
    p.add_argument("--mlm-limit", type=positive_int, default=None,
                   help="at most this many built-in MLM sentences, a seeded sample (default: all)")
    p.add_argument("--data-dir", default=None,
                   help="data folder holding sts/STSB, wordsim/, nli/, unlabeled/ (default: $LAYERWISE_DATA)")
    p.add_argument("--output", default="runs/tmft",
                   help="folder for the summary (tmft.{md,json} and tmft-layers.png on STS-B; tmft-TRAIN-KEY.{md,json} "
                        "on --train TRAIN), and runs/ with the checkpoints and kept models (default: runs/tmft)")
    add_training_tail(p)
    p.set_defaults(handler=run_tmft_command)


def _selections(args) -> list[tuple[int, ...]]:
    """The layer selections of the command line, checked against the model (its config only)."""
    import json

    from layerwise.encoders.registry import resolve_model

    selections = list(dict.fromkeys([(k,) for k in args.layers] + list(args.subset)))
    if not selections:
        raise ValueError("pass --layers L [L ...] (TMFT at each depth) or --subset K,K (one LC-TMFT run)")
    resolved = resolve_model(args.model)
    n_states = int(json.loads((resolved.path / "config.json").read_text())["num_hidden_layers"]) + 1
    bad = sorted({k for sel in selections for k in sel if k >= n_states})
    if bad:
        raise ValueError(f"hidden state(s) {bad} are not in {resolved.name}: it has {n_states} (0 = embedding "
                         f"output .. {n_states - 1} = last layer); pass layers in that range")
    return selections


def tmft_configs(args) -> list:
    """The TMFTConfigs of the command line on STS-B (each layer and subset x each seed), checked against the model."""
    from layerwise.methods.truncated.config import MLMConfig, TMFTConfig, WSConfig

    selections = _selections(args)
    ws = WSConfig() if args.ws_epochs is None else WSConfig(epochs=args.ws_epochs)
    mlm = MLMConfig() if args.mlm_limit is None else MLMConfig(limit=args.mlm_limit)
    pre_step = "ws" if args.pre_step == "wordsim" else args.pre_step
    configs = [TMFTConfig(model=args.model, layers=sel, pre_step=pre_step, epochs=args.epochs,
                          batch_size=args.batch_size, lr=args.lr, max_length=args.max_length, seed=s,
                          train_limit=args.train_limit, ws=ws, mlm=mlm, dataset=args.dataset or "stsb")
               for s in args.seeds for sel in selections]
    return list(dict.fromkeys(configs))


def _check_file_options(args) -> None:
    """Options that belong to --train (or to the built-in STS-B) and the pre-step's data, before anything is read."""
    pre = "wordsim" if args.pre_step == "ws" else args.pre_step
    if args.train is None:
        given = [flag for flag, value in (("--dev", args.dev), ("--test", args.test), ("--word-pairs", args.word_pairs),
                                          ("--mlm-corpus", args.mlm_corpus), ("--score-scale", args.score_scale))
                 if value is not None]
        if given:
            raise UsageError(f"{given[0]} is for your own pairs: pass --train FILE too (without it, tmft runs on "
                             "STS-B with its own dev and test)")
        return
    built_in = [flag for flag, value in (("--train-limit", args.train_limit), ("--mlm-limit", args.mlm_limit),
                                         ("--dataset", args.dataset)) if value is not None]
    if built_in:
        raise UsageError(f"{built_in[0]} applies to the built-in data only; with --train, give the rows you want "
                         "in your files")
    for flag, value, step in (("--word-pairs", args.word_pairs, "wordsim"), ("--mlm-corpus", args.mlm_corpus, "mlm")):
        if pre == step and value is None:
            raise UsageError(f"--pre-step {step} with --train needs {flag} FILE (your data for the pre-step)")
        if pre != step and value is not None:
            raise UsageError(f"{flag} is the data of --pre-step {step}, but --pre-step is {args.pre_step}; pass "
                             f"--pre-step {step}, or leave {flag} out")


def run_tmft_command(args, command) -> int:
    _check_file_options(args)
    if args.train is not None:
        return _run_on_files(args, command)
    from pathlib import Path

    from layerwise.benchmarks.page_parts import save_png
    from layerwise.benchmarks.store import ResultsStore
    from layerwise.benchmarks.truncated.experiment import run_runs
    from layerwise.benchmarks.truncated.runs_report import draw_runs, runs_markdown, runs_summary
    from layerwise.reports import environment, write_json, write_text

    configs = tmft_configs(args)  # every config checked before any work
    out = Path(args.output)
    results = run_runs(configs, ResultsStore(out / "state"), checkpoints=out / "runs", data_dir=args.data_dir,
                       command=command, page="tmft-runs", show_progress=False if args.quiet else None,
                       device=args.device)
    if not is_main():  # under torchrun: every process trained, rank 0 writes and prints
        return 0
    env = environment(command)
    paths = [write_json(out / "tmft.json", runs_summary(results, env)),
             write_text(out / "tmft.md", runs_markdown(results, env["command"])),
             save_png(draw_runs(results), out / "tmft-layers.png")]
    print(f"{'run':44s} {'parameters':>11s} {'dev':>7s} {'test':>7s} {'Pearson':>7s}")
    for r in results:
        c = r.config
        name = f"{c['pre_step']} L{','.join(map(str, c['layers']))} seed{c['seed']} ep{c['epochs']}"
        print(f"{name:44s} {r.parameters:11,d} {r.dev_spearman:7.2f} {r.test_spearman:7.2f} {r.test_pearson:7.2f}")
    for path in paths:
        print(f"wrote {path}")
    for r in results:
        print(f"model: {r.saved_model}")
    return 0


def _run_on_files(args, command) -> int:
    """``--train FILE``: every file read (one line on a bad one) before the model loads, then one
    :class:`~layerwise.TruncatedFineTuner` per layer selection and seed; outputs named after the training file."""
    from pathlib import Path

    from layerwise.data.readers import data_label
    from layerwise.evaluation.sts import sts_scores
    from layerwise.keys import keyed_name
    from layerwise.methods.truncated import TruncatedFineTuner
    from layerwise.reports import environment, write_json, write_text

    train = pairs_from_args(args, args.train, min_rows=2)
    dev = None if args.dev is None else pairs_from_args(args, args.dev, min_rows=2)
    test = None if args.test is None else pairs_from_args(args, args.test, min_rows=2)
    words = None if args.word_pairs is None else word_pairs_from_args(args, args.word_pairs)
    corpus = None if args.mlm_corpus is None else corpus_from_args(args, args.mlm_corpus)
    selections = _selections(args)
    label = data_label(args.train)
    out = Path(args.output)
    pre = {"none": None, "ws": "wordsim"}.get(args.pre_step, args.pre_step)
    runs = []
    for s in args.seeds:
        for sel in selections:
            tuner = TruncatedFineTuner(
                args.model, depth=max(sel), layers=sel if len(sel) > 1 else None, pre_step=pre, epochs=args.epochs,
                batch_size=args.batch_size, lr=args.lr, max_length=args.max_length, seed=s,
                score_scale=None if args.score_scale is None else tuple(args.score_scale),
                output_dir=str(out / "runs" / label), device=args.device, show_progress=False if args.quiet else None,
                **({} if args.ws_epochs is None else {"wordsim_epochs": args.ws_epochs}))
            tuner.fit(train.sentences1, train.sentences2, train.scores, dev=dev, word_pairs=words, corpus=corpus)
            scores = None if test is None else sts_scores(tuner.encode(list(test.sentences1)),
                                                          tuner.encode(list(test.sentences2)), test.scores)
            runs.append(_file_run(tuner, scores))
    if not is_main():
        return 0
    env = environment(command)
    data = {"train": _file_info(args.train, train), "dev": _file_info(args.dev, dev),
            "test": _file_info(args.test, test), "word_pairs": _file_info(args.word_pairs, words),
            "mlm_corpus": _file_info(args.mlm_corpus, corpus)}
    # named by everything that changes the runs (the files' contents, the settings), so that another run's summary
    # never replaces this one while this one's models stay in OUTPUT/runs
    # (each run's model folder is itself named by its settings and data: TruncatedFineTuner's output_dir)
    key = {"model": args.model, "data": {k: v and v.get("checksum") for k, v in data.items()},
           "runs": [Path(r["model"]).name for r in runs]}
    stem = keyed_name(f"tmft-{label}", key)
    paths = [write_json(out / f"{stem}.json", {"environment": env, "data": data, "runs": runs}),
             write_text(out / f"{stem}.md", _files_markdown(label, data, runs, env["command"]))]
    print(f"TMFT on {label} ({len(train)} pairs); Spearman x100 on "
          f"{data_label(args.dev) if dev else 'no dev'} / {data_label(args.test) if test else 'no test'}")
    print(f"{'run':32s} {'parameters':>11s} {'dev':>7s} {'test':>7s} {'Pearson':>7s}")
    for r in runs:
        print(f"{r['name']:32s} {r['parameters']:11,d} {_cell(r['dev_spearman'])} {_cell(r['test_spearman'])} "
              f"{_cell(r['test_pearson'])}")
    for path in paths:
        print(f"wrote {path}")
    for r in runs:
        print(f"model: {r['model']}")
    return 0


def _file_run(tuner, scores) -> dict:
    layers = ",".join(map(str, tuner.layers_))
    return {"name": f"{tuner.pre_step or 'none'} L{layers} seed{tuner.seed} ep{tuner.epochs}",
            "depth": tuner.depth, "layers": list(tuner.layers_), "pre_step": tuner.pre_step, "seed": tuner.seed,
            "epochs": tuner.epochs, "parameters": tuner.n_parameters_, "dev_spearman": tuner.dev_score_,
            "test_spearman": None if scores is None else float(scores["spearman"]),
            "test_pearson": None if scores is None else float(scores["pearson"]),
            "pre_step_info": tuner.pre_step_, "model": str(tuner.model_path_)}


def _file_info(path, data) -> dict | None:
    from layerwise.data.checksum import content_checksum
    from layerwise.data.readers import data_label

    if path is None:
        return None
    return {"file": str(path), "label": data_label(path), "rows": len(data), "checksum": content_checksum(data)}


def _cell(value) -> str:
    return f"{'-':>7s}" if value is None else f"{value:7.2f}"


def _files_markdown(label: str, data: dict, runs: list[dict], command: str) -> str:
    files = ", ".join(f"{role} `{info['label']}` ({info['rows']} rows)" for role, info in data.items() if info)
    lines = [f"# TMFT on {label}", "", f"Data: {files}. Spearman and Pearson x100 of the cosine of the kept model "
             "(the epoch with the best dev Spearman, or the last without dev); hidden state 0 is the embedding "
             "output.", "", "| run | layers | parameters | dev | test | test Pearson | model |",
             "|---|---|---|---|---|---|---|"]
    for r in runs:
        cells = [("-" if r[k] is None else f"{r[k]:.2f}") for k in ("dev_spearman", "test_spearman", "test_pearson")]
        lines.append(f"| {r['name']} | {','.join(map(str, r['layers']))} | {r['parameters']:,} | {' | '.join(cells)} "
                     f"| `{r['model']}` |")
    return "\n".join(lines + ["", f"Command: `{command}`", ""])
