"""``layerwise wordsim`` (per-layer word similarity) and ``layerwise tmft`` (truncated model fine-tuning).

``layerwise tmft`` keeps its results in a store under ``OUTPUT/state`` (one part per run, keyed on the model, the
data checksums and every setting), so a re-run skips finished runs and a cut-off run resumes from its checkpoints in
``OUTPUT/runs/``; the kept model of each run is a sentence-transformers folder ``OUTPUT/runs/<run>/model``.
"""

from __future__ import annotations

import argparse

from layerwise.cli._checks import max_length, nonnegative_int, positive_float, positive_int, seed
from layerwise.cli._common import add_training_tail
from layerwise.data.wordsim import DEFAULT_WORDSIM, WORDSIM_FILES
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL
from layerwise.methods.truncated.config import PRE_STEPS
from layerwise.training.distributed import is_main


def add_parsers(sub) -> None:
    p = sub.add_parser("wordsim", help="per-layer word similarity: each hidden state's Spearman on word-pair sets")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"built-in name ({', '.join(BUILTIN_MODELS)}) or a local Hugging Face folder")
    p.add_argument("--sets", nargs="+", default=list(DEFAULT_WORDSIM),
                   help=f"sets from the data folder ({', '.join(WORDSIM_FILES)}) or files 'word1 word2 score' "
                        f"(default: {' '.join(DEFAULT_WORDSIM)})")
    p.add_argument("--data-dir", default=None, help="data folder holding wordsim/ (default: $LAYERWISE_DATA)")
    p.add_argument("--output", default="runs", help="folder for wordsim-<model>.{json,md,png} (default: runs)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--device", default="cpu")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars, only the results")
    p.set_defaults(handler=run)
    _add_tmft(sub)


def run(args, command) -> int:
    from layerwise.benchmarks.truncated.wordsim_report import write_wordsim_outputs
    from layerwise.data.wordsim import load_wordsim
    from layerwise.encoders import LayerEncoder
    from layerwise.methods.truncated.wordsim import per_layer_wordsim
    from layerwise.reports import environment

    datasets = [load_wordsim(name, args.data_dir) for name in args.sets]  # all read before the model loads
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
    p = sub.add_parser("tmft", help="truncated model fine-tuning: cut the encoder at layer l, fine-tune on STS-B")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"built-in name ({', '.join(BUILTIN_MODELS)}) or a local Hugging Face folder")
    p.add_argument("--layers", type=nonnegative_int, nargs="+", default=[], metavar="L",
                   help="hidden states to truncate at (0 = embedding output), one TMFT run each")
    p.add_argument("--subset", type=layer_subset, action="append", default=[], metavar="K,K,...",
                   help="a layer combination (e.g. 0,3): one LC-TMFT run, truncated at its maximum, mean of the "
                        "subset as the sentence vector (repeatable)")
    p.add_argument("--pre-step", choices=PRE_STEPS, default="none",
                   help="none; ws (word-similarity fine-tuning first); mlm (MLM domain adaptation first)")
    p.add_argument("--seeds", type=seed, nargs="+", default=[0])
    p.add_argument("--epochs", type=positive_int, default=10, help="passes over STS-B train (default: 10, the paper)")
    p.add_argument("--batch-size", type=positive_int, default=32,
                   help="pairs per step (default: 32); under torchrun the global batch, split over the processes")
    p.add_argument("--lr", type=positive_float, default=2e-5)
    p.add_argument("--max-length", type=max_length, default=128, help="tokens per sentence (default: 128)")
    p.add_argument("--train-limit", type=positive_int, default=None, help="first n STS-B train pairs (quick checks)")
    p.add_argument("--ws-epochs", type=positive_int, default=None, help="word-similarity epochs (default: 50)")
    p.add_argument("--mlm-limit", type=positive_int, default=None,
                   help="at most this many MLM sentences, a seeded sample (default: all)")
    p.add_argument("--data-dir", default=None,
                   help="data folder holding sts/STSB, wordsim/, nli/, unlabeled/ (default: $LAYERWISE_DATA)")
    p.add_argument("--output", default="runs/tmft",
                   help="folder for tmft.{md,json}, tmft-layers.png, state/ and runs/ (default: runs/tmft)")
    add_training_tail(p)
    p.set_defaults(handler=run_tmft_command)


def tmft_configs(args) -> list:
    """The TMFTConfigs of the command line (each layer and subset x each seed), checked against the model."""
    import json

    from layerwise.encoders.registry import resolve_model
    from layerwise.methods.truncated.config import MLMConfig, TMFTConfig, WSConfig

    selections = [(k,) for k in args.layers] + list(args.subset)
    if not selections:
        raise ValueError("pass --layers L [L ...] (TMFT at each depth) or --subset K,K (one LC-TMFT run)")
    resolved = resolve_model(args.model)
    n_states = int(json.loads((resolved.path / "config.json").read_text())["num_hidden_layers"]) + 1
    bad = sorted({k for sel in selections for k in sel if k >= n_states})
    if bad:
        raise ValueError(f"hidden state(s) {bad} are not in {resolved.name}: it has {n_states} (0 = embedding "
                         f"output .. {n_states - 1} = last layer); pass layers in that range")
    ws = WSConfig() if args.ws_epochs is None else WSConfig(epochs=args.ws_epochs)
    mlm = MLMConfig() if args.mlm_limit is None else MLMConfig(limit=args.mlm_limit)
    configs = [TMFTConfig(model=args.model, layers=sel, pre_step=args.pre_step, epochs=args.epochs,
                          batch_size=args.batch_size, lr=args.lr, max_length=args.max_length, seed=s,
                          train_limit=args.train_limit, ws=ws, mlm=mlm) for s in args.seeds for sel in selections]
    return list(dict.fromkeys(configs))


def run_tmft_command(args, command) -> int:
    from pathlib import Path

    from layerwise.benchmarks.page_parts import save_png
    from layerwise.benchmarks.store import ResultsStore
    from layerwise.benchmarks.truncated.experiment import run_runs
    from layerwise.benchmarks.truncated.runs_report import draw_runs, runs_markdown, runs_summary
    from layerwise.reports import environment, write_json, write_text

    configs = tmft_configs(args)  # every config checked before any work
    if args.quiet:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the command line's choice, not the library's
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
