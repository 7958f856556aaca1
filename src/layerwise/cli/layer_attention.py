"""``layerwise train | retrieval``: layer-wise attention pooling (methods/layer_attention)."""

from __future__ import annotations

from layerwise.cli._checks import max_length, nonnegative_int, positive_float, positive_int, seed
from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.methods.layer_attention.train import OBJECTIVES
from layerwise.modules.poolers import POOLER_KINDS
from layerwise.training.distributed import is_main


def add_parsers(sub) -> None:
    p = sub.add_parser("train", help="contrastive training of an encoder with a layer pooler (SimCSE objectives)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="built-in name or local Hugging Face folder")
    p.add_argument("--pooler", default="layer_attention", choices=POOLER_KINDS)
    p.add_argument("--objective", default="unsup", choices=OBJECTIVES)
    p.add_argument("--train-data", default=None,
                   help="sentences (one per line) or CSV sent0,sent1[,hard_neg]; default: wiki head (unsup) or "
                        "SNLI dev+test triplets from --data-dir")
    p.add_argument("--data-dir", default=None, help="data folder (default: $LAYERWISE_DATA)")
    p.add_argument("--steps", type=positive_int, default=500)
    p.add_argument("--batch-size", type=positive_int, default=64,
                   help="examples per step (default: 64); under torchrun the global batch, split over the processes, "
                        "with the in-batch negatives gathered from all of them")
    p.add_argument("--lr", type=positive_float, default=3e-5)
    p.add_argument("--pooler-lr", type=positive_float, default=1e-3)
    p.add_argument("--warmup-steps", type=nonnegative_int, default=50)
    p.add_argument("--temperature", type=positive_float, default=0.05)
    p.add_argument("--freeze-encoder", action="store_true", help="train the pooler only")
    p.add_argument("--eval-every", type=nonnegative_int, default=100, help="steps between STS-B dev evaluations")
    p.add_argument("--max-length", type=max_length, default=32)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--resume", action="store_true", help="continue from OUTPUT/last (same model, data and settings)")
    p.add_argument("--overwrite", action="store_true",
                   help="start again in an OUTPUT that holds a run (removes only its last/, best/ and train.json)")
    p.add_argument("--output", default="runs/train")
    p.add_argument("-q", "--quiet", action="store_true")

    p = sub.add_parser("retrieval", help="Quora duplicate-question search with a trained model (FAISS)")
    p.add_argument("model_dir", help="a folder written by `layerwise train` (OUTPUT/best or OUTPUT/last)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--split", default="dev", choices=["dev", "test", "all"])
    p.add_argument("--index", nargs="+", default=["exact", "flat", "ivf"], choices=["exact", "flat", "ivf"])
    p.add_argument("--nlist", type=positive_int, default=100)
    p.add_argument("--nprobe", type=positive_int, default=10)
    p.add_argument("--without-pooler", action="store_true", help="search with the last-layer mean, not the pooler")
    p.add_argument("--output", default="runs/retrieval")
    p.add_argument("-q", "--quiet", action="store_true")

    for name in ("train", "retrieval"):
        sub.choices[name].set_defaults(handler=run)


def run(args, command) -> int:
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if args.quiet:
        hf_logging.disable_progress_bar()  # -q: no weight-loading bar either (the command line's choice)
    try:
        return _run(args, command)
    finally:
        if args.quiet and was:
            hf_logging.enable_progress_bar()


def _run(args, command) -> int:
    from pathlib import Path

    from layerwise.benchmarks.layer_attention.run import DataSources, run_retrieval, run_train
    from layerwise.methods.layer_attention.train import ContrastiveConfig
    from layerwise.reports import environment, write_json

    if args.command == "train":
        cfg = ContrastiveConfig(objective=args.objective, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                                pooler_lr=args.pooler_lr, warmup_steps=args.warmup_steps,
                                temperature=args.temperature, freeze_encoder=args.freeze_encoder,
                                eval_every=args.eval_every, seed=args.seed)
        # an existing run without --resume / --overwrite raises FileExistsError: one line, exit 2 (cli.main)
        data = DataSources(train_data=args.train_data, data_dir=args.data_dir)
        result = run_train(args.model, cfg, args.output, pooler=args.pooler, data=data,
                           max_length=args.max_length, resume=args.resume, overwrite=args.overwrite)
        if not is_main():  # under torchrun: every process trained, rank 0 writes and prints
            return 0
        result.environment = environment(command)
        path = write_json(Path(args.output) / "train.json", result.to_dict())
        h = result.history
        print(f"trained {args.pooler} ({args.objective}) on {result.n_examples} examples "
              f"({result.training_data}): {len(h.loss)} steps in {h.seconds:.0f}s, last loss {h.loss[-1]:.3f}")
        for step, score in h.dev:
            print(f"  step {step}: STS-B dev Spearman {score:.2f}")
        best = "no dev evaluation" if h.best_dev is None else f"best dev {h.best_dev:.2f}"
        print(f"{best}; model in {Path(args.output) / 'best'}; wrote {path}")
        return 0
    result = run_retrieval(args.model_dir, data_dir=args.data_dir, split=args.split, indexes=args.index,
                           nlist=args.nlist, nprobe=args.nprobe, without_pooler=args.without_pooler)
    result.environment = environment(command)
    path = write_json(Path(args.output) / "retrieval.json", result.to_dict())
    print(f"Quora {args.split}: {result.data.corpus} questions, {result.data.queries} queries; pooler {result.pooler}")
    for r in result.results:
        print(f"  {r.index:32s} MRR@10 {r.mrr_at_10:.2f}  R@1 {r.recall[1]:.2f}  R@10 {r.recall[10]:.2f}  "
              f"{r.ms_per_query:.3f} ms/query  {r.index_bytes / 2**20:.1f} MiB")
    print(f"wrote {path}")
    return 0
