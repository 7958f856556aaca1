"""Write docs/results/lattemix.md: Latte-Mix zero-shot STS for the packaged models.

For each model: (1) the main table, every STS set here, categorical VAE (cosine and -JS), Normal VAE, AE against
CLS / mean / max pooling of the last hidden state, mean ± std over seeds, training time; for the first model also
(2) the per-layer curve (categorical VAE on each hidden state vs mean pooling of that state, the paper's Figure 3)
and (3) a hyper-parameter table (latent classes, temperature, encoder depth) on STS-B and SICK-R.

    python scripts/lattemix_results.py                      # both models, everything (~40 min on 2 cores)
    python scripts/lattemix_results.py --models all-MiniLM-L6-v2 --output /tmp/lm.md --quick
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from layerwise import LayerEncoder  # noqa: E402
from layerwise.data import available_sts  # noqa: E402
from layerwise.methods.lattemix import LatteMixConfig, TrainConfig  # noqa: E402
from layerwise.methods.lattemix.report import METHOD_NAMES  # noqa: E402
from layerwise.methods.lattemix.run import evaluate_baselines, evaluate_config, prepare  # noqa: E402
from layerwise.reports import environment, fmt, write_json, write_text  # noqa: E402

logger = logging.getLogger("lattemix_results")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["all-MiniLM-L6-v2", "all-mpnet-base-v2"])
    p.add_argument("--data-dir", default=None, help="default: $LAYERWISE_DATA, else ../shared/data")
    p.add_argument("--output", default=str(REPO / "docs" / "results" / "lattemix.md"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--train-limit", type=int, default=20000, help="training sentences for the main tables")
    p.add_argument("--layer-train-limit", type=int, default=8000, help="training sentences for the per-layer curve")
    p.add_argument("--sweep-train-limit", type=int, default=15000, help="training sentences for the sweep")
    p.add_argument("--n-classes", type=int, default=16)
    p.add_argument("--n-groups", type=int, default=32)
    p.add_argument("--tau", type=float, default=1.0)
    p.add_argument("--quick", action="store_true", help="tiny settings to check the script (not for results)")
    return p.parse_args(argv)


def _data_dir(arg):
    import os

    if arg:
        return arg
    if os.environ.get("LAYERWISE_DATA"):
        return os.environ["LAYERWISE_DATA"]
    return str(REPO.parent / "shared" / "data")


def _row(scores: dict, datasets) -> list[str]:
    return [fmt(float(np.mean(scores[d])), float(np.std(scores[d]))) for d in datasets]


def main_table(model: str, data_dir: str, args, datasets) -> dict:
    enc = LayerEncoder(model)
    t0 = time.perf_counter()
    data = prepare(enc, datasets, layers=(-1,), data_dir=data_dir, train_limit=args.train_limit)
    layer = data.layers[0]
    base = evaluate_baselines(data, layer)
    cfg = LatteMixConfig(n_classes=args.n_classes, n_groups=args.n_groups, tau=args.tau)
    train = TrainConfig(max_steps=50 if args.quick else None)
    runs = {kind: evaluate_config(data, replace(cfg, kind=kind), train, layer=layer, seeds=args.seeds)
            for kind in ("categorical", "normal", "ae")}
    return {"model": data.model, "layer": layer, "training_text": data.train_info, "seconds": data.seconds,
            "data": {n: {"split": d.split, "n_pairs": len(d)} for n, (d, _, _) in data.datasets.items()},
            "baselines": base, "runs": runs, "total_seconds": time.perf_counter() - t0}


def layer_curve(model: str, data_dir: str, args) -> dict:
    enc = LayerEncoder(model)
    data = prepare(enc, args.small_sets, layers=range(enc.n_states), data_dir=data_dir,
                   train_limit=args.layer_train_limit)
    cfg = LatteMixConfig(kind="categorical", n_classes=args.n_classes, n_groups=args.n_groups, tau=args.tau)
    train = TrainConfig(max_steps=50 if args.quick else None)
    out = {"layers": list(data.layers), "training_text": data.train_info, "mean": {}, "categorical": {}}
    for layer in data.layers:
        base = evaluate_baselines(data, layer)
        out["mean"][layer] = base["mean"]
        out["categorical"][layer] = evaluate_config(data, cfg, train, layer=layer, seeds=args.seeds[:1])["scores"]
    return out


def sweep(model: str, data_dir: str, args) -> list[dict]:
    enc = LayerEncoder(model)
    data = prepare(enc, args.small_sets, layers=(-1,), data_dir=data_dir, train_limit=args.sweep_train_limit)
    layer = data.layers[0]
    base = LatteMixConfig(n_classes=args.n_classes, n_groups=args.n_groups, tau=args.tau)
    train = TrainConfig(max_steps=50 if args.quick else None)
    variants = [("default", {})]
    variants += [("classes per group", {"n_classes": c}) for c in (8, 64)]
    variants += [("groups", {"n_groups": g}) for g in (1, 8, 64)]
    variants += [("one group, many classes", {"n_groups": 1, "n_classes": 256})]
    variants += [("tau", {"tau": t}) for t in (0.5, 2.0)]
    variants += [("depth", {"depth": k}) for k in (2, 3)]
    rows = []
    for what, change in variants:
        cfg = replace(base, **change)
        res = evaluate_config(data, cfg, train, layer=layer, seeds=args.seeds[:1])
        rows.append({"vary": what, "change": change, "config": res["config"], "scores": res["scores"],
                     "train_seconds": res["train_seconds"]})
    return rows, data.train_info


def render(result: dict) -> str:
    env = result["environment"]
    lines = [
        "# Latte-Mix: zero-shot STS from mixtures of token latent distributions", "",
        f"- command: `{env['command']}`",
        f"- date: {env['date']}; machine: {env['machine']['platform']}, {env['machine']['cpu_count']} CPUs; "
        + ", ".join(f"{k} {v}" for k, v in env["versions"].items()),
        "- method: a VAE over frozen token vectors of one hidden state (0 = embedding output), trained without labels "
        "for one epoch; a sentence is the mean of its (non-special) tokens' posteriors; similarity = cosine or minus "
        "the Jensen-Shannon divergence of two mixtures (categorical VAE), minus the closed-form L2 distance between "
        "Gaussian mixtures (Normal VAE), cosine of mean codes (AE). Baselines: cosine of CLS / mean / max pooling of "
        "the same hidden state.",
        "- training text: SNLI dev+test sentences and the 11,914-sentence wiki1m head, minus every evaluation sentence. "
        "This is not the paper's training text; numbers are not comparable with the paper's.",
        "- STS12-16 aggregation `all`; STS-B test split; SICK-R SemEval-2014 test split (4,927 pairs). Spearman x100.",
        f"- defaults: categorical VAE with {result['main'][0]['runs']['categorical']['config']['n_groups']} groups of "
        f"{result['main'][0]['runs']['categorical']['config']['n_classes']} classes, tau "
        f"{result['main'][0]['runs']['categorical']['config']['tau']}, one linear encoder layer, beta 1 with a "
        f"{result['main'][0]['runs']['categorical']['config']['beta_warmup_steps']}-step linear warm-up, Adam lr 1e-3 "
        "with a 200-step linear warm-up, batch 256 tokens, one epoch; Normal VAE and AE with a 32-d latent.",
        "",
    ]
    for main in result["main"]:
        m = main["model"]
        datasets = list(main["data"])
        seeds = next(iter(main["runs"].values()))["seeds"]
        lines += [f"## {m['name']} (hidden state {main['layer']}, the last)", "",
                  f"Training: {main['training_text']['n_sentences']} sentences, {main['training_text']['n_tokens']} "
                  f"tokens; trained rows: mean ± std over seeds {seeds}.", "",
                  "| method | " + " | ".join(datasets) + " | avg |", "|---|" + "---|" * (len(datasets) + 1)]
        avgs = {}
        for meth, per in main["baselines"].items():
            vals = [per[d] for d in datasets]
            avgs[meth] = float(np.mean(vals))
            lines.append(f"| {METHOD_NAMES[meth]} | " + " | ".join(f"{v:.2f}" for v in vals) + f" | {avgs[meth]:.2f} |")
        for kind, run in main["runs"].items():
            for metric, per in run["scores"].items():
                key = f"{kind}/{metric}"
                avgs[key] = float(np.mean([np.mean(per[d]) for d in datasets]))
                lines.append(f"| {METHOD_NAMES[key]} | " + " | ".join(_row(per, datasets)) + f" | {avgs[key]:.2f} |")
        lines += ["", "| model | train seconds per seed | final loss | final KL |", "|---|---|---|---|"]
        for kind, run in main["runs"].items():
            lines.append(f"| {kind} | {np.mean(run['train_seconds']):.1f} | {np.mean(run['final_loss']):.2f} | "
                         f"{np.mean(run['final_kl']):.3f} |")
        best_lm = max(("categorical/cosine", "categorical/js"), key=lambda k: avgs[k])
        diff = avgs[best_lm] - avgs["mean"]
        per_set = {d: float(np.mean(main["runs"]["categorical"]["scores"][best_lm.split("/")[1]][d]))
                   - main["baselines"]["mean"][d] for d in datasets}
        wins = [d for d, v in per_set.items() if v > 0]
        lines += ["", f"**Verdict ({m['name']})**: the better Latte-Mix similarity ({METHOD_NAMES[best_lm]}) averages "
                  f"{avgs[best_lm]:.2f} against {avgs['mean']:.2f} for mean pooling ({diff:+.2f}); it beats mean pooling on "
                  f"{len(wins)} of {len(datasets)} sets" + (f" ({', '.join(wins)})" if wins else "") + ".",
                  f"Encoding: training text {main['seconds']['encode_train']:.0f} s, evaluation sentences "
                  f"{main['seconds']['encode_eval']:.0f} s; whole model {main['total_seconds']:.0f} s.", ""]
    sets = result["small_sets"]
    if result.get("layers"):
        lc = result["layers"]
        lines += [f"## Per-layer curve ({result['main'][0]['model']['name']}, seed {result['seeds'][0]}, "
                  f"{lc['training_text']['n_sentences']} training sentences)", "", "![per-layer](lattemix-layers.png)", "",
                  "| hidden state | " + " | ".join(f"mean {d} | Latte-Mix cos {d} | Latte-Mix -JS {d}" for d in sets) + " |",
                  "|---|" + "---|---|---|" * len(sets)]
        for layer in lc["layers"]:
            mean, cat = lc["mean"][layer], lc["categorical"][layer]
            lines.append(f"| {layer} | " + " | ".join(
                f"{mean[d]:.2f} | {cat['cosine'][d][0]:.2f} | {cat['js'][d][0]:.2f}" for d in sets) + " |")
        lines.append("")
    if result.get("sweep"):
        lines += [f"## Hyper-parameters ({result['main'][0]['model']['name']}, last hidden state, categorical VAE, "
                  f"seed {result['seeds'][0]}, {args_limit(result)} training sentences)", "",
                  "Default: " + ", ".join(f"{k} {v}" for k, v in result["sweep"][0]["config"].items()
                                          if k in ("n_groups", "n_classes", "tau", "depth", "beta")) + ".", "",
                  "| varied | setting (others as default) | " + " | ".join(f"{d} cos | {d} -JS" for d in sets)
                  + " | train s |", "|---|---|" + "---|---|" * len(sets) + "---|"]
        for r in result["sweep"]:
            sc = r["scores"]
            lines.append(f"| {r['vary']} | {r['change'] or 'default'} | " + " | ".join(
                f"{sc['cosine'][d][0]:.2f} | {sc['js'][d][0]:.2f}" for d in sets) + f" | {r['train_seconds'][0]:.1f} |")
        lines += ["", "AE vs Normal VAE vs categorical VAE (the paper's Table 2) are the rows of the main tables above.", ""]
    return "\n".join(lines)


def args_limit(result: dict) -> str:
    return str(result.get("sweep_training_text", {}).get("n_sentences", "?"))


def plot_layers(lc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(lc["mean"][lc["layers"][0]])
    fig, axes = plt.subplots(1, len(sets), figsize=(4.5 * len(sets), 3.5), dpi=120, squeeze=False)
    axes = axes[0]
    for ax, d in zip(axes, sets):
        ax.plot(lc["layers"], [lc["mean"][l][d] for l in lc["layers"]], marker="o", label="mean pooling")
        ax.plot(lc["layers"], [lc["categorical"][l]["js"][d][0] for l in lc["layers"]], marker="s", label="Latte-Mix (-JS)")
        ax.plot(lc["layers"], [lc["categorical"][l]["cosine"][d][0] for l in lc["layers"]], marker="^",
                label="Latte-Mix (cosine)")
        ax.set_title(d)
        ax.set_xlabel("hidden state (0 = embedding output)")
        ax.set_ylabel("Spearman x 100")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    data_dir = _data_dir(args.data_dir)
    datasets = [d for d in ("stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16") if d in available_sts(data_dir)]
    out = Path(args.output)
    if args.quick:  # check the script end to end in a few minutes; not for results
        args.train_limit = args.layer_train_limit = args.sweep_train_limit = 300
        datasets = ["stsb"]
    args.small_sets = ["stsb", "sickr"] if not args.quick else ["stsb"]
    result = {"environment": environment(["python", *sys.argv]), "seeds": args.seeds, "main": [],
              "small_sets": args.small_sets}
    for model in args.models:
        result["main"].append(main_table(model, data_dir, args, datasets))
        write_json(out.with_suffix(".json"), result)
    result["layers"] = layer_curve(args.models[0], data_dir, args)
    plot_layers(result["layers"], out.parent / "lattemix-layers.png")
    write_json(out.with_suffix(".json"), result)
    result["sweep"], result["sweep_training_text"] = sweep(args.models[0], data_dir, args)
    write_json(out.with_suffix(".json"), result)
    write_text(out, render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
