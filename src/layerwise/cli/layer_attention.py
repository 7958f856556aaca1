"""``layerwise train | retrieval``: layer-wise attention pooling (methods/layer_attention)."""

from __future__ import annotations

from layerwise.cli._files import (
    add_corpus_columns,
    add_pair_columns,
    add_triplet_columns,
    corpus_from_args,
    pairs_from_args,
    triplets_from_args,
)
from layerwise.cli._option_types import max_length, nonnegative_int, positive_float, positive_int, seed
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
                   help="your training file (.txt/.csv/.tsv/.jsonl/.parquet): texts for unsup (--text-column), pairs "
                        "for in_batch or triplets for sup_hard_neg (--anchor-column, --positive-column, "
                        "--negative-column); default: wiki head (unsup) or SNLI dev+test triplets from --data-dir")
    p.add_argument("--dev", default=None,
                   help="scored pairs (.csv/.tsv/.jsonl/.parquet; --sentence1-column ...) evaluated every "
                        "--eval-every steps, the best kept (default: the built-in STS-B dev)")
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
    p.add_argument("--output", default="runs/train",
                   help="the run folder: checkpoints last/ and best/, the trained model model/ (a "
                        "sentence-transformers folder) and train.json")
    p.add_argument("-q", "--quiet", action="store_true")
    add_corpus_columns(p)
    add_triplet_columns(p)
    add_pair_columns(p)

    p = sub.add_parser("retrieval", help="semantic search with any sentence-transformers folder: exact and FAISS, "
                                         "on a BEIR-style folder or Quora duplicate questions")
    p.add_argument("model_dir", help="a trained pooler's folder (`layerwise train`'s OUTPUT/model, best or last) or "
                                     "any other sentence-transformers folder (an LC export), searched as it embeds")
    p.add_argument("--beir", default=None,
                   help="a BEIR-style folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv (default: Quora "
                        "duplicate questions from --data-dir)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--split", default=None,
                   help="qrels split with --beir (default: test); Quora: dev, test or all (default: dev)")
    p.add_argument("--index", nargs="+", default=["exact", "flat", "ivf"], choices=["exact", "flat", "ivf"])
    p.add_argument("--nlist", type=positive_int, default=1024,
                   help="IVF cells (default 1024, the paper's; at most the corpus size, checked before encoding)")
    p.add_argument("--nprobe", type=positive_int, default=10)
    p.add_argument("--without-pooler", action="store_true",
                   help="search with a last-layer vector of the encoder, not the pooler (see --unpooled)")
    p.add_argument("--unpooled", choices=["mean", "cls"], default="mean",
                   help="with --without-pooler: the last layer's token mean (default) or its [CLS] vector (the "
                        "paper's [CLS]_Last)")
    p.add_argument("--output", default="runs/retrieval")
    p.add_argument("-q", "--quiet", action="store_true")

    for name in ("train", "retrieval"):
        sub.choices[name].set_defaults(handler=run)


def _training_data(args):
    """The examples (as the estimator takes them) and their plain label, read before any model loads."""
    from layerwise.benchmarks.layer_attention.run import load_training_examples
    from layerwise.data import load_sts
    from layerwise.data.readers import TripletData, data_label
    from layerwise.errors import UsageError

    if args.train_data is None:
        examples, source = load_training_examples(args.objective, None, data_dir=args.data_dir)
        label = "wiki1m_head" if args.objective == "unsup" else "snli_dev_test"
    elif args.objective == "unsup":
        examples, source = corpus_from_args(args, args.train_data), args.train_data
        label = data_label(args.train_data)
    else:
        data = triplets_from_args(args, args.train_data)
        if args.objective == "in_batch" and data.negatives is not None:
            if args.negative_column:  # named on the command line: refused, not ignored
                raise UsageError(f"--negative-column {args.negative_column} does not apply to --objective in_batch "
                                 "(pairs); leave it out, or use --objective sup_hard_neg")
            data = TripletData(data.anchors, data.positives, None, name=data.name, source=data.source)
        if args.objective == "sup_hard_neg" and data.negatives is None:
            raise UsageError(f"{args.train_data} has no {args.negative_column or 'negative'!r} column: --objective sup_hard_neg "
                             "needs triplets; name the column with --negative-column, or use --objective in_batch")
        examples, source, label = data, args.train_data, data_label(args.train_data)
    if args.dev is not None:
        dev, dev_label = pairs_from_args(args, args.dev, min_rows=3), data_label(args.dev)
    else:
        dev, dev_label = load_sts("stsb", data_dir=args.data_dir, split="dev"), "STS-B dev"
    return examples, source, label, dev, dev_label


def _train(args, command) -> int:
    from pathlib import Path

    from layerwise.benchmarks.layer_attention.results import TrainHistory, TrainResult
    from layerwise.export.sentence_transformers import check_destination
    from layerwise.methods.layer_attention.estimator import LayerAttentionPooler
    from layerwise.reports import environment, write_json
    from layerwise.training import prepare_output
    from layerwise.training.distributed import run_on_main

    out = Path(args.output)
    if not args.overwrite or args.resume:  # refuse an existing run, a resume with nothing to resume, or both flags
        run_on_main(prepare_output, out, resume=args.resume, overwrite=args.overwrite)
    examples, source, label, dev, dev_label = _training_data(args)  # bad files: one line before any model loads
    est = LayerAttentionPooler(args.model, pooler=args.pooler, objective=args.objective, steps=args.steps,
                               batch_size=args.batch_size, lr=args.lr, pooler_lr=args.pooler_lr,
                               warmup_steps=args.warmup_steps, temperature=args.temperature,
                               freeze_encoder=args.freeze_encoder, eval_every=args.eval_every,
                               max_length=args.max_length, seed=args.seed, output_dir=str(out), resume=args.resume)
    est.training_config()  # the settings, checked before any model loads
    check_destination(out / "model", True)  # a folder there that layerwise did not write is refused, before training
    if args.overwrite:  # everything read: only now remove the earlier run's own outputs
        run_on_main(prepare_output, out, resume=args.resume, overwrite=True)
    est.fit(examples, dev=dev, show_progress=not args.quiet)
    if not is_main():  # under torchrun: every process trained, rank 0 writes and prints
        return 0
    model_dir = est.save(out / "model", overwrite=True)  # this run's own export (its checkpoints are beside it)
    result = TrainResult(model=str(args.model), pooler=args.pooler, training_data=f"{label} ({source})",
                         n_examples=est.n_examples_, dev=f"{dev_label} ({len(dev)} pairs)",
                         history=TrainHistory.from_dict(est.history_), output=str(out), environment=environment(command))
    path = write_json(out / "train.json", result.to_dict())
    h = result.history
    print(f"trained {args.pooler} ({args.objective}) on {result.n_examples} examples of {label}: {len(h.loss)} "
          f"steps in {h.seconds:.0f}s, last loss {h.loss[-1]:.3f}")
    for step, score in h.dev:
        print(f"  step {step}: {dev_label} Spearman {score:.2f}")
    best = "no dev evaluation" if h.best_dev is None else f"best dev {h.best_dev:.2f}"
    print(f"{best}; model in {model_dir} (checkpoints {out / 'best'}, {out / 'last'}); wrote {path}")
    return 0


def _mib(n) -> str:
    return "?" if n is None else f"{n / 2**20:.1f} MiB"


def run(args, command) -> int:
    from pathlib import Path

    from layerwise.benchmarks.layer_attention.run import SearchOptions, run_retrieval
    from layerwise.data.readers import read_beir
    from layerwise.errors import UsageError
    from layerwise.reports import environment, write_json

    if args.command == "train":
        return _train(args, command)
    if args.unpooled != "mean" and not args.without_pooler:
        raise UsageError(f"--unpooled {args.unpooled} chooses the vector searched without the pooler: add "
                         "--without-pooler, or leave --unpooled out to search with the pooler")
    beir = None if args.beir is None else read_beir(args.beir, split=args.split or "test")  # before the model
    split = args.split or "dev"
    options = SearchOptions(indexes=tuple(args.index), nlist=args.nlist, nprobe=args.nprobe,
                            without_pooler=args.without_pooler, unpooled=args.unpooled)
    result = run_retrieval(args.model_dir, data_dir=args.data_dir, split=split, beir=beir, options=options)
    result.environment = environment(command)
    name = "quora" if beir is None else beir.name
    path = write_json(Path(args.output) / f"retrieval-{name}-{result.data.split}.json", result.to_dict())
    print(f"{name} {result.data.split}: {result.data.corpus} documents, {result.data.queries} queries; pooler "
          f"{result.pooler}")
    for r in result.results:
        print(f"  {r.index:32s} MRR@10 {r.mrr_at_10:.2f}  R@1 {r.recall[1]:.2f}  R@10 {r.recall[10]:.2f}  "
              f"{r.ms_per_query:.3f} ms/query batched, {r.ms_per_query_batch1:.3f} one at a time  "
              f"{r.index_bytes / 2**20:.1f} MiB serialised, {_mib(r.index_resident_bytes)} resident")
    print(f"wrote {path}")
    return 0
