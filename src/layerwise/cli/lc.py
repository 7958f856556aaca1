"""``layerwise search | layers | transfer | ablate``: BERT-LC (methods/lc)."""

from __future__ import annotations

from layerwise.cli._checks import nonnegative_int, positive_float, positive_int, seed
from layerwise.cli._common import STS_CHOICES, add_common, add_encoder_options, encoder_options
from layerwise.data.senteval import TRANSFER_TASKS

DEFAULT_TRANSFER = ("mr", "cr", "subj", "sst2", "sst5", "trec", "mrpc")  # the seven tasks in the shared data


def add_parsers(sub) -> None:
    p = sub.add_parser("search", help="BERT-LC: choose a layer subset on dev, report test against baselines")
    add_common(p)
    p.add_argument("--max-layers", type=positive_int, default=None,
                   help="largest subset searched (default: all subsets up to 13 hidden states, else 8)")
    p.add_argument("--splits", type=positive_int, default=5, help="number of seeded dev/test splits (default: 5)")
    p.add_argument("--dev-size", type=positive_int, default=350, help="dev pairs per split (default: 350)")
    p.add_argument("--seed", type=seed, default=0, help="split k uses seed + k (default: 0)")
    p.add_argument("--no-head", action="store_true", help="skip LC + MLP (the checkpoint's pooler head)")

    p = sub.add_parser("layers", help="per-layer analysis: each hidden state's STS score alone")
    add_common(p)

    p = sub.add_parser("transfer", help="BERT-LC on SentEval transfer tasks: logistic regression on layer combinations",
                       description="Each task is a part of the results store in --output (transfer/<model>-<task>--"
                                   "<digest>.json, keyed on the model hashes, max length, dtype, data checksum and "
                                   "every protocol option), saved after every outer split: the same command resumes "
                                   "it, any changed setting computes afresh.")
    add_encoder_options(p, aggregation=False)
    p.add_argument("--tasks", nargs="+", default=list(DEFAULT_TRANSFER),
                   help=f"transfer tasks among {', '.join(TRANSFER_TASKS)}, case-insensitive "
                        f"(default: {' '.join(DEFAULT_TRANSFER)}; MPQA is not in the shared data)")
    p.add_argument("--outer-splits", type=positive_int, default=10, help="seeded 85/15 train-dev/test splits (default 10)")
    p.add_argument("--inner-splits", type=positive_int, default=10, help="seeded 82/18 splits choosing the subset (default 10)")
    p.add_argument("--max-layers", type=positive_int, default=None,
                   help="largest subset (default: 4 up to 13 hidden states, else 3)")
    p.add_argument("--shortlist", type=nonnegative_int, default=1,
                   help="subsets re-scored by SAGA inner CV after the ridge screen (default 1: the ridge choice; "
                        "0: every subset, the exhaustive and slow reference)")
    p.add_argument("--ridge-alpha", type=positive_float, default=1e-3, help="ridge screen penalty x mean feature variance")
    p.add_argument("--screen-dim", type=positive_int, default=None,
                   help="project vectors on their top principal directions for the ridge screen only (large models; "
                        "default: full vectors)")
    p.add_argument("--seed", type=seed, default=0, help="outer split k uses seed + k (default 0)")
    p.add_argument("--jobs", type=positive_int, default=2, help="parallel classifier fits (threads, default 2)")
    p.add_argument("--no-head", action="store_true", help="skip LC + MLP (the checkpoint's pooler head)")

    p = sub.add_parser("ablate", help="BERT-LC ablations: number of layers, excluding a layer, limited data",
                       description="Each part (STS set, transfer task, limited-data task) is a part of the results "
                                   "store in --output (ablations/...), reused when every setting in its key matches.")
    add_encoder_options(p)
    p.add_argument("--sts", nargs="*", default=["stsb", "sickr"], choices=STS_CHOICES, help="STS sets for (a) and (b)")
    p.add_argument("--tasks", nargs="*", default=["mr", "cr", "subj", "trec"],
                   help="transfer tasks for (a) and (b) (default: mr cr subj trec)")
    p.add_argument("--limited-tasks", nargs="*", default=["mr", "subj", "trec"],
                   help="transfer tasks for (c) limited data (default: mr subj trec)")
    p.add_argument("--max-denominator", type=positive_int, default=256,
                   help="(c) keeps 1/2, 1/4 ... 1/max-denominator of train-dev (default 256)")
    p.add_argument("--limited-seeds", type=positive_int, default=10)
    p.add_argument("--splits", type=positive_int, default=5, help="STS dev/test splits (default 5)")
    p.add_argument("--dev-size", type=positive_int, default=350, help="STS dev pairs per split (default 350)")
    p.add_argument("--outer-splits", type=positive_int, default=10)
    p.add_argument("--inner-splits", type=positive_int, default=10)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--jobs", type=positive_int, default=2)

    for name in ("search", "layers"):
        sub.choices[name].set_defaults(handler=run_sts)
    for name in ("transfer", "ablate"):
        sub.choices[name].set_defaults(handler=run_transfer)


def run_sts(args, command) -> int:
    from layerwise.benchmarks.lc import run as experiments
    from layerwise.reports import environment

    common = dict(model=args.model, dataset=args.dataset, data_dir=args.data_dir, split=args.split,
                  aggregation=args.aggregation, encoder_options=encoder_options(args))
    if args.command == "search":
        config = experiments.SearchConfig(n_splits=args.splits, dev_size=args.dev_size, seed=args.seed,
                                          max_layers=args.max_layers, head=not args.no_head, **common)
        result = experiments.run_search(config)
        result.environment = environment(command)
        _print_search(result, experiments.write_search_outputs(result, args.output))
        return 0
    result = experiments.run_layers(experiments.SearchConfig(**common))
    result.environment = environment(command)
    paths = experiments.write_layers_outputs(result, args.output)
    for kind, values in result.per_layer.items():
        print(f"{kind:5s} " + " ".join(f"{i}:{v:.2f}" for i, v in enumerate(values)))
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return 0


def _print_search(result, paths: dict) -> None:
    from layerwise.reports import fmt

    d, lc = result.data, result.lc
    print(f"model {result.model.name} | data {d.name} ({d.split}, {d.n_pairs} pairs) | "
          f"aggregation {d.aggregation}")
    print("per-layer Spearman x100 (hidden state 0 = embedding output):")
    for kind, values in result.per_layer.items():
        print(f"  {kind:5s} " + " ".join(f"{i}:{v:.2f}" for i, v in enumerate(values)))
    print(f"splits (dev {lc.dev_size} pairs, subsets up to {lc.max_layers} states):")
    for s in lc.splits:
        print(f"  seed {s.seed}: chose {tuple(s.layers)} dev {s.dev_spearman:.2f} "
              f"test {s.test['lc']['spearman']:.2f} ({s.n_subsets} subsets in {s.search_seconds:.2f}s)")
    print("test Spearman x100, mean ± std over splits:")
    for method, v in lc.summary("spearman").items():
        print(f"  {method:12s} {fmt(v['mean'], v['std'])}")
    print(f"time: encode {result.seconds['encode']:.1f}s, protocol {result.seconds['protocol']:.1f}s")
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")


def run_transfer(args, command) -> int:
    if args.command == "ablate":
        return run_ablate(args, command)
    from layerwise.benchmarks.lc.transfer_report import write_transfer_outputs
    from layerwise.benchmarks.lc.transfer_run import TransferRunConfig, run_transfer_tasks
    from layerwise.benchmarks.store import ResultsStore
    from layerwise.methods.lc.transfer import TransferProtocol
    from layerwise.reports import fmt

    if args.shortlist < 0:
        raise ValueError(f"--shortlist must be 0 (exhaustive) or positive, got {args.shortlist}")
    protocol = TransferProtocol(n_outer=args.outer_splits, n_inner=args.inner_splits, max_layers=args.max_layers,
                                shortlist=args.shortlist or None, seed=args.seed, ridge_alpha=args.ridge_alpha,
                                screen_dim=args.screen_dim)
    config = TransferRunConfig(model=args.model, tasks=tuple(args.tasks), protocol=protocol, head=not args.no_head,
                               n_jobs=args.jobs, data_dir=args.data_dir, encoder_options=encoder_options(args))
    run = run_transfer_tasks(config, ResultsStore(args.output), command=command)
    paths = write_transfer_outputs(run, args.output)
    print(f"model {run.model.name} | test accuracy x100, mean ± std over {args.outer_splits} outer splits")
    for task, t in run.tasks.items():
        cells = "  ".join(f"{m} {fmt(v['mean'], v['std'])}" for m, v in t.result.summary().items())
        print(f"  {task:5s} {cells}  ({t.encode_seconds:.0f}s encode, {t.protocol_seconds:.0f}s protocol)")
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return 0


def run_ablate(args, command) -> int:
    from layerwise.benchmarks.lc.ablation_report import write_ablation_outputs
    from layerwise.benchmarks.lc.ablation_run import AblationConfig, run_ablations
    from layerwise.benchmarks.store import ResultsStore

    if args.max_denominator < 2:
        raise ValueError(f"--max-denominator must be at least 2, got {args.max_denominator}")
    k = int(args.max_denominator).bit_length() - 1
    config = AblationConfig(
        model=args.model, sts=tuple(args.sts), tasks=tuple(args.tasks), limited_tasks=tuple(args.limited_tasks),
        fractions=tuple(1 / 2**i for i in range(1, k + 1)), limited_seeds=args.limited_seeds,
        aggregation=args.aggregation, n_splits=args.splits, dev_size=args.dev_size, n_outer=args.outer_splits,
        n_inner=args.inner_splits, seed=args.seed, n_jobs=args.jobs, data_dir=args.data_dir,
        encoder_options=encoder_options(args))
    result = run_ablations(config, ResultsStore(args.output), command=command)
    for kind, path in write_ablation_outputs(result, args.output).items():
        print(f"wrote {kind}: {path}")
    return 0
