"""``layerwise lattemix``: Latte-Mix (methods/lattemix)."""

from __future__ import annotations

from layerwise.cli._checks import nonnegative_float, nonnegative_int, positive_float, positive_int, seed
from layerwise.cli._common import STS_CHOICES, add_encoder_options, encoder_options
from layerwise.methods.lattemix.config import MODEL_KINDS


def add_parsers(sub) -> None:
    p = sub.add_parser("lattemix", help="Latte-Mix: train token VAEs, zero-shot STS against poolings")
    add_encoder_options(p)
    p.add_argument("--datasets", nargs="+", default=["stsb", "sickr"], choices=STS_CHOICES)
    p.add_argument("--layer", type=int, default=-1, help="hidden state whose token vectors are modelled (default: last)")
    p.add_argument("--kinds", nargs="+", default=list(MODEL_KINDS), choices=MODEL_KINDS)
    p.add_argument("--seeds", type=seed, nargs="+", default=[0, 1, 2])
    p.add_argument("--n-classes", type=positive_int, default=16, help="categorical classes per group (default 16)")
    p.add_argument("--n-groups", type=positive_int, default=32, help="categorical latent groups (default 32)")
    p.add_argument("--latent-dim", type=positive_int, default=32, help="Normal VAE / AE latent size (default 32)")
    p.add_argument("--depth", type=int, default=1, choices=[1, 2, 3], help="encoder layers (default 1)")
    p.add_argument("--tau", type=positive_float, default=1.0, help="Gumbel-softmax temperature (default 1.0)")
    p.add_argument("--beta", type=nonnegative_float, default=1.0)
    p.add_argument("--beta-warmup-steps", type=nonnegative_int, default=1000)
    p.add_argument("--epochs", type=positive_int, default=1)
    p.add_argument("--train-batch-size", type=positive_int, default=256)
    p.add_argument("--lr", type=positive_float, default=1e-3)
    p.add_argument("--train-sources", nargs="+", default=["snli", "wiki"], choices=["snli", "wiki"])
    p.add_argument("--train-limit", type=positive_int, default=None, help="at most this many training sentences (seeded sample)")
    p.add_argument("--include-special", action="store_true", help="keep [CLS]/[SEP] tokens in training and mixtures")
    p.add_argument("--save-models", action="store_true", help="save each trained model under OUTPUT/models")

    p.set_defaults(handler=run)


def run(args, command) -> int:
    from layerwise.benchmarks.lattemix.report import METHOD_NAMES, format_cell, method_table, write_outputs
    from layerwise.benchmarks.lattemix.run import LatteMixRun, run_lattemix
    from layerwise.methods.lattemix import LatteMixConfig, TrainConfig
    from layerwise.reports import environment

    config = LatteMixConfig(n_classes=args.n_classes, n_groups=args.n_groups, latent_dim=args.latent_dim,
                            depth=args.depth, tau=args.tau, beta=args.beta, beta_warmup_steps=args.beta_warmup_steps)
    train = TrainConfig(epochs=args.epochs, batch_size=args.train_batch_size, lr=args.lr)
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
