"""``layerwise wordsim``: per-layer word similarity of any encoder (methods/truncated)."""

from __future__ import annotations

from layerwise.data.wordsim import DEFAULT_WORDSIM, WORDSIM_FILES
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL


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


def run(args, command) -> int:
    from layerwise.data.wordsim import load_wordsim
    from layerwise.encoders import LayerEncoder
    from layerwise.methods.truncated.wordsim import per_layer_wordsim, write_wordsim_outputs
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
