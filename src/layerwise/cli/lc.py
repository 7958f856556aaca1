"""``layerwise search | layers | transfer | ablate``: BERT-LC (methods/lc)."""

from __future__ import annotations

from layerwise.cli._checks import (
    DEFAULT_ABLATE_LIMITED,
    DEFAULT_ABLATE_STS,
    DEFAULT_ABLATE_TASKS,
    DEFAULT_TRANSFER_TASKS,
    user_files,
)
from layerwise.cli._common import STS_CHOICES, add_common, add_encoder_options, encoder_options
from layerwise.cli._files import add_label_columns, add_pair_columns
from layerwise.cli._option_types import nonnegative_int, positive_float, positive_int, seed
from layerwise.cli.lc_fit import run_transfer_files, save_sts
from layerwise.data.senteval import TRANSFER_TASKS


def _add_pair_files(p, *, layers: bool = False) -> None:
    """--pairs FILE or --dev FILE --test FILE (the user's STS pairs, any format) and their column options."""
    files = p.add_argument_group("your own pairs (instead of a built-in data set)")
    files.add_argument("--pairs", default=None, metavar="FILE",
                       help="sentence pairs with scores (CSV, TSV, JSON lines or Parquet; any score scale)"
                            + ("" if layers else ", split into dev and test by the protocol (--splits, --dev-size)"))
    files.add_argument("--dev", default=None, metavar="FILE",
                       help="pairs to choose the subset on (with --test)" if not layers else
                            "with --test: the per-layer scores are the --test file's (nothing is chosen on dev)")
    files.add_argument("--test", default=None, metavar="FILE", help="pairs to report on (with --dev)")
    add_pair_columns(p)


def _add_save(p, help: str) -> None:
    p.add_argument("--save", default=None, metavar="FOLDER", help=help)
    p.add_argument("--overwrite", action="store_true", help="--save replaces an earlier export in FOLDER")


def add_parsers(sub) -> None:
    _add_sts_parsers(sub)
    _add_transfer_parser(sub)
    _add_ablate_parser(sub)
    for name in ("search", "layers"):
        sub.choices[name].set_defaults(handler=run_sts)
    for name in ("transfer", "ablate"):
        sub.choices[name].set_defaults(handler=run_transfer)


def _add_sts_parsers(sub) -> None:
    p = sub.add_parser("search", help="BERT-LC: choose a layer subset on dev, report test against baselines")
    add_common(p)
    _add_pair_files(p)
    _add_save(p, "with your own pairs: also fit LayerCombination on all of --pairs (or on --dev) and save it as a "
                 "sentence-transformers folder (built-in modules only)")
    p.add_argument("--max-layers", type=positive_int, default=None,
                   help="largest subset searched (default: all subsets up to 13 hidden states, else 8)")
    p.add_argument("--splits", type=positive_int, default=5, help="number of seeded dev/test splits (default: 5)")
    p.add_argument("--dev-size", type=positive_int, default=None,
                   help="dev pairs per split (default: 350, or half the pairs of a data set under 700)")
    p.add_argument("--seed", type=seed, default=0, help="split k uses seed + k (default: 0)")
    p.add_argument("--no-head", action="store_true", help="skip LC + MLP (the checkpoint's pooler head)")
    p.add_argument("--max-pooling", action="store_true",
                   help="also LC (max): LC's chosen hidden states pooled by the elementwise maximum of their token "
                        "means instead of their average (the paper's max pooling of a subset)")
    p.add_argument("--bootstrap", type=nonnegative_int, default=0, metavar="N",
                   help="test LC (and LC + MLP, LC (max), first0_last) against the last layer: paired bootstrap over "
                        "the test pairs, N resamples (the results pages use 2000; default 0: no test)")

    p = sub.add_parser("layers", help="per-layer analysis: each hidden state's STS score alone")
    add_common(p)
    _add_pair_files(p, layers=True)


def _add_transfer_parser(sub) -> None:
    p = sub.add_parser("transfer", help="BERT-LC on SentEval transfer tasks: logistic regression on layer combinations",
                       description="Each task is a part of the results store in --output (transfer/<model>-<task>--"
                                   "<digest>.json, keyed on the model hashes, max length, dtype, data checksum and "
                                   "every protocol option), saved after every outer split: the same command resumes "
                                   "it, any changed setting computes afresh.")
    add_encoder_options(p, aggregation=False)
    p.add_argument("--tasks", nargs="+", default=None,
                   help=f"transfer tasks among {', '.join(TRANSFER_TASKS)}, case-insensitive "
                        f"(default: {' '.join(DEFAULT_TRANSFER_TASKS)}; MPQA is not in the shared data)")
    files = p.add_argument_group("your own labeled texts (instead of --tasks)")
    files.add_argument("--train", default=None, metavar="FILE",
                       help="labeled texts (CSV, TSV, JSON lines or Parquet): the subset is chosen on it by the inner "
                            "splits and the classifier fitted on all of it")
    files.add_argument("--test", default=None, metavar="FILE", help="labeled texts the classifier is scored on")
    add_label_columns(p)
    _add_save(p, "with --train: save the fitted LayerCombination (a sentence-transformers folder; the classifier "
                 "beside it for LayerCombination.load)")
    p.add_argument("--outer-splits", type=positive_int, default=None,
                   help="--tasks: seeded 85/15 train-dev/test splits (default 10)")
    p.add_argument("--inner-splits", type=positive_int, default=10,
                   help="inner splits choosing the subset: seeded 82/18 shuffles, or folds with --inner kfold "
                        "(default 10)")
    p.add_argument("--inner", choices=("shuffle", "kfold"), default="shuffle",
                   help="shuffle: seeded 82/18 inner splits (default); kfold: --inner-splits-fold inner "
                        "cross-validation, the paper's (with --shortlist 0: its exact, exhaustive choice)")
    p.add_argument("--max-layers", type=positive_int, default=None,
                   help="largest subset (default: 4 up to 13 hidden states, else 3)")
    p.add_argument("--shortlist", type=nonnegative_int, default=1,
                   help="subsets re-scored by SAGA inner CV after the ridge screen (default 1: the ridge choice; "
                        "0: every subset, the exhaustive and slow reference)")
    p.add_argument("--ridge-alpha", type=positive_float, default=1e-3, help="ridge screen penalty x mean feature variance")
    p.add_argument("--screen-dim", type=positive_int, default=None,
                   help="--tasks: project vectors on their top principal directions for the ridge screen only (large "
                        "models; default: full vectors)")
    p.add_argument("--seed", type=seed, default=0, help="outer split k uses seed + k (default 0)")
    p.add_argument("--jobs", type=positive_int, default=2, help="parallel classifier fits (threads, default 2)")
    p.add_argument("--no-head", action="store_true", help="skip LC + MLP (the checkpoint's pooler head)")
    p.add_argument("--bootstrap", type=nonnegative_int, default=0, metavar="N",
                   help="--tasks: test LC against each baseline, paired bootstrap over the outer splits' test "
                        "examples, N resamples (the results pages use 2000; default 0: no test)")


def _add_ablate_parser(sub) -> None:
    p = sub.add_parser("ablate", help="BERT-LC ablations: number of layers, excluding a layer, limited data",
                       description="Each part (STS set, transfer task, limited-data task) is a part of the results "
                                   "store in --output (ablations/...), reused when every setting in its key matches.")
    add_encoder_options(p)
    p.add_argument("--sts", nargs="*", default=None, choices=STS_CHOICES,
                   help=f"STS sets for (a) and (b) (default: {' '.join(DEFAULT_ABLATE_STS)}; none with --pairs or "
                        "--dev/--test)")
    p.add_argument("--tasks", nargs="*", default=None,
                   help=f"transfer tasks for (a) and (b) (default: {' '.join(DEFAULT_ABLATE_TASKS)}; none with your "
                        "own pairs)")
    p.add_argument("--limited-tasks", nargs="*", default=None,
                   help=f"transfer tasks for (c) limited data (default: {' '.join(DEFAULT_ABLATE_LIMITED)}; none "
                        "with your own pairs)")
    _add_pair_files(p)
    p.add_argument("--max-denominator", type=positive_int, default=None,
                   help="(c) keeps 1/2, 1/4 ... 1/max-denominator of train-dev (default 256)")
    p.add_argument("--limited-seeds", type=positive_int, default=None, help="(c) seeds per fraction (default 10)")
    p.add_argument("--splits", type=positive_int, default=5, help="STS dev/test splits (default 5)")
    p.add_argument("--dev-size", type=positive_int, default=None,
                   help="STS dev pairs per split (default 350, or half the pairs of your own file under 700)")
    p.add_argument("--outer-splits", type=positive_int, default=None,
                   help="transfer and limited-data parts: outer splits (default 10)")
    p.add_argument("--inner-splits", type=positive_int, default=None,
                   help="transfer and limited-data parts: inner splits (default 10)")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--jobs", type=positive_int, default=2)


def _own_pairs(args):
    """(STSData, dev_test rows or None) of the user's --pairs or --dev/--test files; (None, None) for a built-in set.

    Dev and test are stacked into one data set (subsets "dev" and "test"), dev rows first."""
    import numpy as np

    from layerwise.data.readers import data_label
    from layerwise.data.sts import STSData

    files = user_files(args)

    def one(read, path, part: str) -> STSData:
        n = len(read.sentences1)
        return STSData(name=data_label(path), sentences1=list(read.sentences1), sentences2=list(read.sentences2),
                       scores=np.asarray(read.scores, dtype=np.float64), subsets=np.full(n, part), split=part,
                       source=str(path))

    if "pairs" in files:
        return one(files["pairs"], args.pairs, "all"), None
    if "dev" not in files:
        return None, None
    dev, test = one(files["dev"], args.dev, "dev"), one(files["test"], args.test, "test")
    if args.command == "layers":  # nothing is chosen: the per-layer scores are the test file's
        return test, None
    both = STSData(name=f"{dev.name}-{test.name}", sentences1=dev.sentences1 + test.sentences1,
                   sentences2=dev.sentences2 + test.sentences2, scores=np.concatenate([dev.scores, test.scores]),
                   subsets=np.concatenate([dev.subsets, test.subsets]), split="dev-test",
                   source=f"{args.dev} (dev), {args.test} (test)")
    return both, (np.arange(len(dev)), np.arange(len(dev), len(both)))


def run_sts(args, command) -> int:
    from layerwise.benchmarks.lc import run as experiments
    from layerwise.data.readers import data_label
    from layerwise.export.sentence_transformers import check_destination
    from layerwise.reports import environment

    data, dev_test = _own_pairs(args)
    if getattr(args, "save", None) and data is None:
        raise ValueError("--save fits LayerCombination on your own pairs: give --pairs FILE or --dev FILE --test "
                         "FILE (for a built-in data set, export a search's subset with `layerwise export --from`)")
    if getattr(args, "save", None):
        check_destination(args.save, args.overwrite)  # before the search, not after it
    common = dict(model=args.model, dataset=args.dataset or data.name, data_dir=args.data_dir, split=args.split,
                  aggregation=args.aggregation, encoder_options=encoder_options(args))
    if args.command == "search":
        config = experiments.SearchConfig(n_splits=args.splits, dev_size=args.dev_size, seed=args.seed,
                                          max_layers=args.max_layers, head=not args.no_head,
                                          bootstrap=args.bootstrap, max_pooling=args.max_pooling, **common)
        result = experiments.run_search(config, data, dev_test=dev_test)
        result.environment = environment(command)
        _print_search(result, experiments.write_search_outputs(result, args.output))
        if args.save:
            save_sts(args, data if dev_test is None else data.take(dev_test[0]),
                      data.name if dev_test is None else data_label(args.dev))
        return 0
    result = experiments.run_layers(experiments.SearchConfig(**common), data)
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
    # with a dev file and a test file the subset is chosen on dev and every score below is the test file's
    where = "the test file's pairs" if d.split == "dev-test" else "all pairs"
    print(f"per-layer Spearman x100 on {where} (hidden state 0 = embedding output):")
    for kind, values in result.per_layer.items():
        print(f"  {kind:5s} " + " ".join(f"{i}:{v:.2f}" for i, v in enumerate(values)))
    print(f"splits (dev {lc.dev_size} pairs, subsets up to {lc.max_layers} states):")
    for s in lc.splits:
        print(f"  seed {s.seed}: chose {tuple(s.layers)} dev {s.dev_spearman:.2f} "
              f"test {s.test['lc']['spearman']:.2f} ({s.n_subsets} subsets in {s.search_seconds:.2f}s)")
    one = len(lc.splits) == 1  # a single split has no spread (the pages' convention): no "± 0.00"
    print("test Spearman x100" + ("" if one else ", mean ± std over splits") + ":")
    for method, v in lc.summary("spearman").items():
        print(f"  {method:12s} {fmt(v['mean'], None if one else v['std'])}")
    _print_significance(lc.significance, "the last layer", "pairs")
    print(f"time: encode {result.seconds['encode']:.1f}s, protocol {result.seconds['protocol']:.1f}s")
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")


def _print_significance(tests: dict, against: str, units: str, indent: str = "  ") -> None:
    """The paired bootstrap tests of a run (column -> SignificanceResult dict), one line each; nothing where none.

    The verdict is worded as on the results pages (``significance_parts.p_cell``), at the pages' level.
    """
    from layerwise.benchmarks.significance_parts import ALPHA, p_cell
    from layerwise.evaluation.significance import SignificanceResult

    if not tests:
        return
    first = next(iter(tests.values()))
    print(f"{indent}p against {against} (paired bootstrap over {first['n_units']} test {units}, "
          f"{first['n_resamples']} resamples; yes: p < {ALPHA}):")
    width = max(map(len, tests))
    for name, t in tests.items():
        print(f"{indent}  {name:{width}s} {t['difference']:+.2f}  p {p_cell(SignificanceResult(**t))}")


def run_transfer(args, command) -> int:
    if args.command == "ablate":
        return run_ablate(args, command)
    if args.train and getattr(args, "bootstrap", 0):
        raise ValueError("--bootstrap tests LC over the outer splits of --tasks; with --train/--test there is one "
                         "split of your files: leave --bootstrap out")
    if args.train:
        return run_transfer_files(args, command)
    from layerwise.benchmarks.lc.transfer_report import write_transfer_outputs
    from layerwise.benchmarks.lc.transfer_run import TransferRunConfig, run_transfer_tasks
    from layerwise.benchmarks.store import ResultsStore
    from layerwise.methods.lc.transfer import TransferProtocol
    from layerwise.reports import fmt

    if args.shortlist < 0:
        raise ValueError(f"--shortlist must be 0 (exhaustive) or positive, got {args.shortlist}")
    protocol = TransferProtocol(n_outer=args.outer_splits, n_inner=args.inner_splits, max_layers=args.max_layers,
                                shortlist=args.shortlist or None, seed=args.seed, ridge_alpha=args.ridge_alpha,
                                screen_dim=args.screen_dim, inner=args.inner, bootstrap=args.bootstrap)
    config = TransferRunConfig(model=args.model, tasks=tuple(args.tasks), protocol=protocol, head=not args.no_head,
                               n_jobs=args.jobs, data_dir=args.data_dir, encoder_options=encoder_options(args))
    run = run_transfer_tasks(config, ResultsStore(args.output), command=command)
    paths = write_transfer_outputs(run, args.output)
    one = args.outer_splits == 1  # a single split has no spread: no "± 0.00"
    print(f"model {run.model.name} | test accuracy x100" + ("" if one else
                                                            f", mean ± std over {args.outer_splits} outer splits"))
    for task, t in run.tasks.items():
        cells = "  ".join(f"{m} {fmt(v['mean'], None if one else v['std'])}" for m, v in t.result.summary().items())
        print(f"  {task:5s} {cells}  ({t.encode_seconds:.0f}s encode, {t.protocol_seconds:.0f}s protocol)")
        _print_significance({f"lc vs {b}": v for b, v in t.result.significance.items()}, "each baseline",
                            "examples", indent="    ")
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
    data, _ = _own_pairs(args)
    result = run_ablations(config, ResultsStore(args.output), command=command, pairs=[data] if data else [])
    for kind, path in write_ablation_outputs(result, args.output, data_name=data.name if data else None).items():
        print(f"wrote {kind}: {path}")
    return 0
