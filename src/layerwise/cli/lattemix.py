"""``layerwise lattemix``: Latte-Mix (methods/lattemix)."""

from __future__ import annotations

import sys

import numpy as np

from layerwise.benchmarks.lattemix.results import TRAIN_SOURCES
from layerwise.cli._checks import _check_data
from layerwise.cli._common import STS_CHOICES, add_encoder_options, encoder_options
from layerwise.cli._files import add_corpus_columns, add_pair_columns, corpus_from_args, pairs_from_args
from layerwise.cli._option_types import nonnegative_float, nonnegative_int, positive_float, positive_int, seed
from layerwise.errors import UsageError
from layerwise.methods.lattemix.config import MODEL_KINDS

BENCHMARK_DATASETS = ("stsb", "sickr")


def add_parsers(sub) -> None:
    p = sub.add_parser("lattemix", help="Latte-Mix: train token VAEs, zero-shot STS against poolings",
                       description="Train Latte-Mix token models on an unlabeled corpus and score sentence pairs. "
                                   "With --train CORPUS --pairs FILE...: your own files (csv, tsv, jsonl, parquet; "
                                   "txt for the corpus). Without them: the paper benchmark on --datasets.")
    add_encoder_options(p)
    p.add_argument("--train", metavar="FILE", default=None,
                   help="unlabeled training corpus (txt: one text per line; csv/tsv/jsonl/parquet: --text-column)")
    add_corpus_columns(p)
    p.add_argument("--pairs", metavar="FILE", nargs="+", default=None,
                   help="evaluation pairs with a similarity score (any scale), one or more files")
    add_pair_columns(p)
    p.add_argument("--datasets", nargs="+", default=None, choices=STS_CHOICES,
                   help="built-in STS sets of the benchmark run, without --train/--pairs (default: stsb sickr)")
    p.add_argument("--layer", type=int, default=-1, help="hidden state whose token vectors are modelled (default: last)")
    p.add_argument("--kinds", nargs="+", default=list(MODEL_KINDS), choices=MODEL_KINDS)
    p.add_argument("--seeds", type=seed, nargs="+", default=[0, 1, 2])
    p.add_argument("--n-classes", type=positive_int, default=16, help="categorical classes per group (default 16)")
    p.add_argument("--n-groups", type=positive_int, default=32, help="categorical latent groups (default 32)")
    p.add_argument("--latent-dim", type=positive_int, default=32, help="Normal VAE / AE latent size (default 32)")
    p.add_argument("--depth", type=int, default=1, choices=[1, 2, 3], help="encoder layers (default 1)")
    p.add_argument("--decoder-depth", type=positive_int, default=None,
                   help="decoder layers (default: as --depth; the paper's decoder has 3)")
    p.add_argument("--tau", type=positive_float, default=1.0,
                   help="Gumbel-softmax temperature (default 1.0; the paper uses 0.3)")
    p.add_argument("--kl-threshold", type=nonnegative_float, default=None, metavar="EPS",
                   help="KL thresholding: each latent group's (dimension's) batch-mean KL counts as at least EPS "
                        "nats (the paper: 0.3; default: the plain KL)")
    p.add_argument("--beta", type=nonnegative_float, default=1.0)
    p.add_argument("--beta-warmup-steps", type=nonnegative_int, default=1000)
    p.add_argument("--epochs", type=positive_int, default=1)
    p.add_argument("--train-batch-size", type=positive_int, default=256)
    p.add_argument("--lr", type=positive_float, default=1e-3)
    p.add_argument("--lr-warmup-steps", type=nonnegative_int, default=200,
                   help="the learning rate rises linearly over these steps (default 200)")
    p.add_argument("--train-sources", nargs="+", default=None, choices=list(TRAIN_SOURCES),
                   help="built-in training text of the benchmark run, without --train (default: snli wiki)")
    p.add_argument("--train-limit", type=positive_int, default=None,
                   help="at most this many training sentences (seeded sample; benchmark run)")
    p.add_argument("--include-special", action="store_true", help="keep [CLS]/[SEP] tokens in training and mixtures")
    p.add_argument("--save-models", action="store_true",
                   help="save each trained model under OUTPUT/models (with --train: sentence-transformers folders "
                        "of the categorical and ae models)")

    p.set_defaults(handler=run)


def run(args, command) -> int:
    if args.train is not None or args.pairs is not None:
        return run_files(args, command)
    # the benchmark's defaults are filled here (None lets a run on the user's files skip their data): check them now,
    # before the model loads, as preflight checks the ones given
    args.datasets = args.datasets or list(BENCHMARK_DATASETS)
    args.train_sources = args.train_sources or list(TRAIN_SOURCES)
    _check_data(args)
    from layerwise.benchmarks.lattemix.report import METHOD_NAMES, format_cell, method_table, write_outputs
    from layerwise.benchmarks.lattemix.run import LatteMixRun, run_lattemix
    from layerwise.methods.lattemix import LatteMixConfig, TrainConfig
    from layerwise.reports import environment

    config = LatteMixConfig(n_classes=args.n_classes, n_groups=args.n_groups, latent_dim=args.latent_dim,
                            depth=args.depth, tau=args.tau, beta=args.beta, beta_warmup_steps=args.beta_warmup_steps,
                            decoder_depth=args.decoder_depth, kl_threshold=args.kl_threshold)
    train = TrainConfig(epochs=args.epochs, batch_size=args.train_batch_size, lr=args.lr,
                        lr_warmup_steps=args.lr_warmup_steps)
    run = LatteMixRun(model=args.model, datasets=tuple(args.datasets), layer=args.layer, kinds=tuple(args.kinds),
                      seeds=tuple(args.seeds), config=config, train=train, train_sources=tuple(args.train_sources),
                      train_limit=args.train_limit, include_special=args.include_special, aggregation=args.aggregation)
    result = run_lattemix(run, data_dir=args.data_dir, encoder_options=encoder_options(args),
                          save_dir=f"{args.output}/models" if args.save_models else None)
    result.environment = environment(command)
    paths = write_outputs(result, args.output)
    print(f"model {result.model.name} | hidden state {result.layer} | "
          f"{result.training_text.n_sentences} training sentences | Spearman x100 ({args.aggregation})")
    print(f"  {'method':45s} " + " ".join(f"{d:>15s}" for d in result.data))
    for method, per in method_table(result).items():
        print(f"  {METHOD_NAMES.get(method, method):45s} " + " ".join(f"{format_cell(per[d]):>15s}" for d in result.data))
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return 0


def _estimator_params(args) -> dict:
    """The LatteMix parameters the options give (all but ``kind`` and ``seed``)."""
    return dict(model=args.model, layer=args.layer, n_groups=args.n_groups, n_classes=args.n_classes,
                latent_dim=args.latent_dim, depth=args.depth, decoder_depth=args.decoder_depth, tau=args.tau,
                kl_threshold=args.kl_threshold, beta=args.beta,
                beta_warmup_steps=args.beta_warmup_steps, epochs=args.epochs, batch_size=args.train_batch_size,
                lr=args.lr, lr_warmup_steps=args.lr_warmup_steps, include_special=args.include_special,
                max_length=args.max_length,
                encode_batch_size=args.batch_size, device=args.device, show_progress=False if args.quiet else None)


def _planned_outputs(args, corpus, pairs, train_label: str) -> tuple[str, dict]:
    """The results' file stem and the folder of each model to save ((kind, seed) -> folder), checked before any
    training. Both are named by everything that changes them (settings, kinds, seeds, the files' contents): a run
    under other settings writes beside this one's files, never over them."""
    from layerwise.data.checksum import content_checksum
    from layerwise.export.sentence_transformers import check_destination
    from layerwise.keys import keyed_name

    settings = {k: v for k, v in _estimator_params(args).items() if k not in ("device", "show_progress")}
    stem = keyed_name(f"lattemix-{train_label}", {
        "settings": settings, "kinds": list(args.kinds), "seeds": [int(x) for x in args.seeds],
        "train": content_checksum(list(corpus)), "pairs": [content_checksum(d) for d in pairs]})
    folders = {(kind, int(s)): f"{args.output}/models/{stem}-{kind}-seed{s}" for kind in args.kinds
               for s in args.seeds if args.save_models and kind != "normal"}
    if args.save_models and not folders:
        print("--save-models: the normal kind has no saved form (LatteMix.save needs categorical or ae); nothing "
              "will be saved", file=sys.stderr)
    for folder in folders.values():  # same key: this run's own models again (replaced); a user's folder: refused
        check_destination(folder, overwrite=True)
    return stem, folders


def run_files(args, command) -> int:
    """Your files: fit LatteMix on the --train corpus (per kind and seed), Spearman of every measure on each --pairs."""
    import time

    from layerwise.data.readers import data_label
    from layerwise.methods.lattemix import LatteMix
    from layerwise.reports import environment, write_json

    _check_file_options(args)
    # every file is read and checked before any model loads
    corpus = corpus_from_args(args, args.train)
    pairs = [pairs_from_args(args, path, min_rows=3) for path in args.pairs]
    train_label = data_label(args.train)
    labels: list[str] = []
    for path in args.pairs:
        label = data_label(path)
        labels.append(label if label not in labels else f"{label}-{len(labels) + 1}")
    stem, folders = _planned_outputs(args, corpus, pairs, train_label)
    t0 = time.perf_counter()
    scores: dict[str, dict[str, list[float]]] = {}
    baseline: dict[str, float] = {}
    saved: list[str] = []
    training: dict[str, list[dict]] = {}
    layer = None
    for kind in args.kinds:
        for run_seed in args.seeds:
            est = LatteMix(**_estimator_params(args), kind=kind, seed=int(run_seed)).fit(corpus)
            layer = est.layer_
            training.setdefault(kind, []).append({"seed": int(run_seed), **est.training_})
            _score_pairs(est, dict(zip(labels, pairs)), scores, baseline)
            if (kind, int(run_seed)) in folders:
                saved.append(str(est.save(folders[kind, int(run_seed)], overwrite=True)))
    rows = {f"mean pooling (hidden state {layer})": {label: [v] for label, v in baseline.items()}, **scores}
    result = {
        "kind": "lattemix-files", "model": args.model, "layer": layer,
        "train": {"file": str(args.train), "label": train_label, "n_texts": len(corpus)},
        "pairs": [{"file": str(p), "label": label, "n_pairs": len(d.scores)} for p, label, d in zip(args.pairs, labels, pairs)],
        "settings": {**_estimator_params(args), "kinds": list(args.kinds), "seeds": list(args.seeds)},
        "spearman_x100": {method: {label: [float(x) for x in v] for label, v in per.items()}
                          for method, per in rows.items()},
        "training": training, "saved_models": saved, "seconds": time.perf_counter() - t0,
        "environment": environment(command),
    }
    path = write_json(f"{args.output}/{stem}.json", result)
    _print_table(args, layer, f"{train_label} ({len(corpus)} texts)", labels, rows)
    for folder in saved:
        print(f"saved model: {folder}")
    print(f"wrote results: {path}")
    return 0


def _check_file_options(args) -> None:
    """--train and --pairs come together, without the benchmark's options."""
    if args.train is None or args.pairs is None:
        raise UsageError("--train and --pairs go together: give the training corpus (--train FILE) and the "
                         "evaluation pairs (--pairs FILE ...), or neither for the built-in benchmark (--datasets)")
    benchmark = [flag for flag, value in (("--datasets", args.datasets), ("--train-sources", args.train_sources),
                                          ("--train-limit", args.train_limit)) if value is not None]
    if benchmark:
        raise UsageError(f"{', '.join(benchmark)} belong to the benchmark run; with --train and --pairs, leave them out")
    if args.dtype != "float32":
        raise UsageError(f"--dtype {args.dtype} is not available with --train (Latte-Mix reads float32 token vectors)")


def _score_pairs(est, pairs: dict, scores: dict, baseline: dict) -> None:
    """Add the Spearman x100 of every measure of the fitted ``est`` on each pairs file to ``scores`` (measure ->
    label -> one value per fit), and mean pooling of the same hidden state to ``baseline`` (label -> value, once)."""
    from layerwise.evaluation.metrics import cosine_rows, spearman
    from layerwise.methods.lattemix import SIMILARITIES, pair_similarity

    for label, data in pairs.items():
        unique = list(dict.fromkeys([*data.sentences1, *data.sentences2]))
        where = {s: i for i, s in enumerate(unique)}
        mix = est.mixtures(unique)
        i1 = [where[s] for s in data.sentences1]
        i2 = [where[s] for s in data.sentences2]
        for measure in SIMILARITIES[est.kind]:
            sim = pair_similarity(mix.take(i1), mix.take(i2), measure)
            scores.setdefault(f"{est.kind} {measure}", {}).setdefault(label, []).append(100 * spearman(sim, data.scores))
        if label not in baseline:  # the same hidden state, mean-pooled: the reference Latte-Mix is read against
            emb = est.encoder_.encode(unique).mean[:, est.layer_]
            baseline[label] = 100 * spearman(cosine_rows(emb[i1], emb[i2]), data.scores)


def _print_table(args, layer, trained_on: str, labels: list[str], rows: dict) -> None:
    from layerwise.reports import fmt, sample_std

    spread = f"mean ± std over {len(args.seeds)} seeds" if len(args.seeds) > 1 else f"one seed ({args.seeds[0]})"
    print(f"model {args.model} | hidden state {layer} | trained on {trained_on} | Spearman x100, {spread}")
    print(f"  {'method':34s} " + " ".join(f"{label:>16s}" for label in labels))
    for method, per in rows.items():
        cells = [fmt(float(np.mean(per[label])), sample_std(per[label]))
                 for label in labels]
        print(f"  {method:34s} " + " ".join(f"{c:>16s}" for c in cells))
