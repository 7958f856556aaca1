"""Write docs/results/layer-attention.md: layer-wise attention pooling against pooling baselines.

Two regimes, same steps, batch, learning rates and seeds for every pooler:

- **frozen encoder** (every pooler in `--poolers` x each objective x every seed in `--frozen-seeds`): the encoder's
  layer vectors are computed once (training views with dropout, evaluation without) and only the pooler trains
  (`layerwise.methods.layer_attention.frozen`); minutes for the whole grid.
- **encoder trained** (the paper's setting; `--encoder-poolers` x objectives x `--encoder-seeds`): the encoder and
  the pooler train together (`layerwise train`), ~10-20 min per run on 2 CPU cores.

Each trained pooler is evaluated zero-shot on the STS sets here (test data only; the checkpoint is chosen on STS-B
dev) and, for `--retrieval-poolers`, on Quora duplicate-question search with and without the pooler.
Resumable: a finished run's result is reused when its config matches.

    python scripts/layer_attention_results.py                    # both regimes
    python scripts/layer_attention_results.py --regimes frozen   # the grid only
    python scripts/layer_attention_results.py --no-train        # page from finished runs only, trains nothing
    python scripts/layer_attention_results.py --quick --output /tmp/la.md
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from layerwise.methods.layer_attention import POOLER_KINDS, ContrastiveConfig, SentenceModel  # noqa: E402
from layerwise.methods.layer_attention.run import run_retrieval, run_train  # noqa: E402
from layerwise.data import available_sts, load_sts  # noqa: E402
from layerwise.evaluation.sts import sts_scores  # noqa: E402
from layerwise.reports import environment, fmt, write_json, write_text  # noqa: E402

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="all-MiniLM-L6-v2")
    p.add_argument("--data-dir", default=None, help="default: $LAYERWISE_DATA, else ../shared/data")
    p.add_argument("--objectives", nargs="+", default=["unsup", "sup_hard_neg"])
    p.add_argument("--poolers", nargs="+", default=list(POOLER_KINDS), choices=POOLER_KINDS)
    p.add_argument("--regimes", nargs="+", default=["frozen", "encoder"], choices=["frozen", "encoder"])
    p.add_argument("--frozen-seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of every frozen-encoder run")
    p.add_argument("--encoder-poolers", nargs="+", default=["layer_attention", "last_cls"], choices=POOLER_KINDS)
    p.add_argument("--encoder-seeds", type=int, nargs="+", default=[0], help="seeds of the encoder-trained runs")
    p.add_argument("--steps", type=int, default=250)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--retrieval-poolers", nargs="+", default=["layer_attention", "last_cls"])
    p.add_argument("--runs", default=str(REPO / "runs" / "layer-attention"),
                   help="encoder-trained runs (model checkpoints: large, not in the repo)")
    p.add_argument("--frozen-runs", default=str(REPO / "docs" / "results" / "state" / "layer-attention-frozen"),
                   help="one small JSON per frozen-encoder run (kept in the repo so that a run resumes anywhere)")
    p.add_argument("--output", default=str(REPO / "docs" / "results" / "layer-attention.md"))
    p.add_argument("--no-train", action="store_true",
                   help="encoder regime: use the finished runs only and list the others as not run (writes the page "
                        "while a long run is still going, or when there is no time for it)")
    p.add_argument("--quick", action="store_true", help="a few steps, STS-B only: checks the script, not results")
    return p.parse_args(argv)


def _data_dir(arg):
    import os

    return arg or os.environ.get("LAYERWISE_DATA") or str(REPO.parent / "shared" / "data")


def evaluate_sts(model_dir: Path, datasets: dict) -> dict[str, float]:
    sm = SentenceModel.load(model_dir)
    out = {}
    for name, d in datasets.items():
        e1, e2 = sm.encode(list(d.sentences1)), sm.encode(list(d.sentences2))
        out[name] = sts_scores(e1, e2, d.scores, groups=np.asarray(d.subsets), aggregation="all")["spearman"]
    return out


def one_run(args, data_dir, datasets, objective, pooler, seed) -> dict:
    folder = Path(args.runs) / objective / pooler / f"seed{seed}"
    cfg = ContrastiveConfig(objective=objective, steps=args.steps, batch_size=args.batch_size, seed=seed,
                            eval_every=max(1, args.steps // 5))
    done = folder / "result.json"
    if done.is_file():
        prev = json.loads(done.read_text())
        if prev["train"]["history"]["config"] == json.loads(json.dumps(cfg.__dict__)):
            return prev
    if args.no_train:
        return None
    train = run_train(args.model, cfg, folder, pooler=pooler, data_dir=data_dir, resume=True)
    result = {"regime": "encoder", "objective": objective, "pooler": pooler, "seed": seed, "train": train,
              "sts": evaluate_sts(folder / "best", datasets)}
    if pooler in args.retrieval_poolers and seed == args.encoder_seeds[0]:
        result["retrieval"] = run_retrieval(folder / "best", data_dir=data_dir, split="dev", indexes=("exact", "ivf"))
        result["retrieval_without_pooler"] = run_retrieval(folder / "best", data_dir=data_dir, split="dev",
                                                           indexes=("exact",), without_pooler=True)
    write_json(done, result)
    return result


def frozen_grid(args, data_dir, datasets) -> list[dict]:
    """Every pooler x objective x seed on a frozen encoder, from layer vectors computed once."""
    import torch

    from layerwise.methods.layer_attention import PoolerConfig, build_pooler
    from layerwise.methods.layer_attention.frozen import compute_features, embed_features, train_pooler_on_features, training_views
    from layerwise.methods.layer_attention.run import load_training_examples
    from layerwise.evaluation.retrieval import FaissIndex, load_quora_retrieval, search

    folder = Path(args.frozen_runs)
    configs = {(obj, pooler, seed): ContrastiveConfig(objective=obj, steps=args.steps, batch_size=args.batch_size,
                                                      seed=seed, freeze_encoder=True, eval_every=max(1, args.steps // 5))
               for obj in args.objectives for pooler in args.poolers for seed in args.frozen_seeds}
    done = {}
    for key, cfg in configs.items():
        f = folder / key[0] / key[1] / f"seed{key[2]}.json"
        if f.is_file():
            prev = json.loads(f.read_text())
            if prev["train"]["config"] == json.loads(json.dumps(cfg.__dict__)):
                done[key] = prev
    if len(done) == len(configs):
        return [done[k] for k in configs]
    sm = SentenceModel.from_pretrained(args.model, pooler="last_cls")
    show = True
    feats = {}
    for name, d in datasets.items():
        feats[name] = (compute_features(sm, list(d.sentences1), dropout=False, show_progress=show, desc=f"{name} 1"),
                       compute_features(sm, list(d.sentences2), dropout=False, show_progress=show, desc=f"{name} 2"))
    dev = load_sts("stsb", data_dir=data_dir, split="dev")
    dev_feats = (compute_features(sm, list(dev.sentences1), dropout=False), compute_features(sm, list(dev.sentences2),
                                                                                            dropout=False), dev.scores)
    quora = load_quora_retrieval(data_dir, "dev") if args.retrieval_poolers and not args.quick else None
    quora_feats = compute_features(sm, quora.corpus, dropout=False, show_progress=show, desc="quora") if quora else None
    views, sources = {}, {}
    for obj in args.objectives:
        examples, sources[obj] = load_training_examples(obj, data_dir=data_dir)
        if args.quick:
            examples = examples[:256]
        views[obj] = training_views(sm, obj, examples, seed=0, show_progress=show)
    without = None
    if quora is not None:
        without = search(quora, quora_feats.mean[:, -1].numpy())
    cfg0 = sm.encoder.config
    out = []
    for (obj, pooler, seed), cfg in configs.items():
        if (obj, pooler, seed) in done:
            out.append(done[(obj, pooler, seed)])
            continue
        torch.manual_seed(seed)
        pool = build_pooler(PoolerConfig(kind=pooler, hidden_size=cfg0.hidden_size, n_states=cfg0.num_hidden_layers + 1))
        hist = train_pooler_on_features(pool, views[obj], cfg, dev=dev_feats)
        sts = {}
        for name, d in datasets.items():
            a, b = feats[name]
            sts[name] = sts_scores(embed_features(pool, a), embed_features(pool, b), d.scores,
                                   groups=np.asarray(d.subsets), aggregation="all")["spearman"]
        result = {"regime": "frozen", "objective": obj, "pooler": pooler, "seed": seed, "sts": sts,
                  "train": {"history": hist, "config": hist["config"], "training_data": sources[obj],
                            "n_examples": len(views[obj][0])}}
        if quora is not None and pooler in args.retrieval_poolers and seed == args.frozen_seeds[0]:
            emb = embed_features(pool, quora_feats)
            result["retrieval"] = {"results": [search(quora, emb), search(quora, emb, index=FaissIndex("ivf"))]}
            result["retrieval_without_pooler"] = {"results": [without]}
        write_json(folder / obj / pooler / f"seed{seed}.json", result)
        print(f"frozen {obj} {pooler} seed {seed}: best dev {hist['best_dev']:.2f}, STS-B test {sts.get('stsb', float('nan')):.2f}",
              flush=True)
        out.append(result)
    return out


def _sts_table(runs, sets, poolers, obj) -> list[str]:
    lines = ["| pooler | seeds | " + " | ".join(sets) + " | avg | training steps/s (evaluation excluded) |",
             "|---|---|" + "---|" * (len(sets) + 2)]
    for pooler in poolers:
        rs = [r for r in runs if r["objective"] == obj and r["pooler"] == pooler]
        if not rs:
            continue
        cells = [fmt(float(np.mean([r["sts"][d] for r in rs])), float(np.std([r["sts"][d] for r in rs])))
                 for d in sets]
        avg = np.mean([np.mean([r["sts"][d] for d in sets]) for r in rs])
        sps = np.mean([r["train"]["history"]["steps_this_run"] / r["train"]["history"]["train_seconds"] for r in rs])
        name = f"**{pooler}**" if pooler == "layer_attention" else pooler
        lines.append(f"| {name} | {len(rs)} | " + " | ".join(cells) + f" | {avg:.2f} | {sps:.2f} |")
    return lines


def _verdict(runs, poolers, obj) -> str:
    def avg(p):
        rs = [r for r in runs if r["objective"] == obj and r["pooler"] == p]
        return float(np.mean([np.mean(list(r["sts"].values())) for r in rs])) if rs else None

    a = avg("layer_attention")
    if a is None:
        return ""
    others = {p: avg(p) for p in poolers if p != "layer_attention" and avg(p) is not None}
    beaten = [p for p, v in others.items() if a > v]
    best = max(others.items(), key=lambda kv: kv[1]) if others else None
    return (f"**{obj}**: layer attention averages {a:.2f} over the sets; it beats {len(beaten)} of {len(others)} other "
            f"poolers ({', '.join(beaten) or 'none'})" + (f"; the best other is {best[0]} at {best[1]:.2f}." if best else "."))


def _retrieval_table(runs) -> list[str]:
    ret = [r for r in runs if "retrieval" in r]
    if not ret:
        return []
    lines = ["| objective | pooler | search with | index | MRR@10 | R@1 | R@10 | ms/query | index MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in ret:
        for label, block in (("pooler", r["retrieval"]), ("last-layer mean", r["retrieval_without_pooler"])):
            for x in block["results"]:
                lines.append(f"| {r['objective']} | {r['pooler']} | {label} | {x['index']} | {x['mrr@10']:.2f} | "
                             f"{x['recall@1']:.2f} | {x['recall@10']:.2f} | {x['ms_per_query']:.3f} | "
                             f"{x['index_bytes'] / 2**20:.1f} |")
    return lines


def render(res: dict) -> str:
    env = res["environment"]
    sets = res["datasets"]
    lines = ["# Layer-wise attention pooling vs pooling baselines", "",
             f"- command: `{env['command']}`; date {env['date']}; {env['machine']['cpu_count']} CPUs; "
             + ", ".join(f"{k} {v}" for k, v in env["versions"].items()),
             f"- model `{res['model']}`; every run: {res['steps']} steps, batch {res['batch_size']}, pooler lr 1e-3 "
             "(encoder lr 3e-5 when trained), warm-up 50 steps then linear decay, temperature 0.05, max length 32, "
             "gradient clipping 1.0; checkpoint chosen on STS-B dev every "
             f"{max(1, res['steps'] // 5)} steps; test sets never trained on; STS Spearman x100, aggregation `all`.",
             "- training data: unsup = the wiki1m head (11,914 sentences); sup_hard_neg = ~5.9k SNLI dev+test triplets "
             "(premises with an entailment and a contradiction). Not SimCSE's 1M sentences / the paper's 275k "
             "triplets: not comparable with the paper's numbers.",
             "- all-MiniLM-L6-v2 is already a contrastively fine-tuned sentence encoder (mean pooling); the paper "
             "starts from raw BERT/RoBERTa. Every pooler here starts with a fresh MLP head.", ""]
    frozen = [r for r in res["runs"] if r.get("regime") == "frozen"]
    enc = [r for r in res["runs"] if r.get("regime", "encoder") == "encoder"]
    if frozen:
        lines += ["## Frozen encoder: every pooler, both objectives, "
                  f"{len(res['frozen_seeds'])} seeds (mean ± std over seeds)", "",
                  "The encoder's layer vectors are computed once (training views with dropout: two independent passes "
                  "for unsup, one per column for sup_hard_neg; evaluation without dropout) and only the pooler trains, "
                  "so the dropout noise is drawn once per example rather than at every step.", ""]
        for obj in res["objectives"]:
            lines += [f"### `{obj}`", "", *_sts_table(frozen, sets, res["poolers"], obj), "",
                      _verdict(frozen, res["poolers"], obj), ""]
        if _retrieval_table(frozen):
            lines += ["### Quora duplicate-question search, frozen encoder (dev split, seed "
                      f"{res['frozen_seeds'][0]})", "",
                      "'last-layer mean' is the untouched encoder (the paper's 'train with the pooler, search "
                      "without it' is the same thing when the encoder is frozen).", "", *_retrieval_table(frozen), ""]
    if not enc:
        lines += ["## Encoder trained with the pooler (the paper's setting)", "",
                  "Not in this page: these runs train the encoder too (10-20 min each on 2 CPU cores) and were not run "
                  "for it; `--regimes encoder` adds them (resumable, one folder per run under `runs/layer-attention`). "
                  "The conclusions above are about poolers on a frozen encoder only.", ""]
    if enc:
        lines += ["## Encoder trained with the pooler (the paper's setting)", ""]
        if res.get("encoder_not_run"):
            lines += ["**Not run yet**: " + "; ".join(res["encoder_not_run"]) + " (objective / pooler / seed). The "
                      "same command without `--no-train` trains them (resumable).", ""]
        for obj in res["objectives"]:
            if any(r["objective"] == obj for r in enc):
                lines += [f"### `{obj}`", "", *_sts_table(enc, sets, res["encoder_poolers"], obj), "",
                          _verdict(enc, res["encoder_poolers"], obj), ""]
        if _retrieval_table(enc):
            lines += ["### Quora duplicate-question search, encoder trained (dev split)", "",
                      "'last-layer mean' = the fine-tuned encoder searched without its pooler (the paper's Table 3).",
                      "", *_retrieval_table(enc), ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    data_dir = _data_dir(args.data_dir)
    names = ["stsb"] if args.quick else [d for d in ("stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16")
                                         if d in available_sts(data_dir)]
    if args.quick:  # never mixes its meaningless runs into the kept state
        args.frozen_runs = str(Path(args.runs).with_name(Path(args.runs).name + "-frozen"))
        args.steps, args.frozen_seeds, args.encoder_seeds = 4, [0], [0]
        args.poolers, args.encoder_poolers = ["layer_attention", "last_cls"], ["layer_attention"]
        args.retrieval_poolers = []
    datasets = {n: load_sts(n, data_dir=data_dir) for n in names}
    res = {"environment": environment(["python", *sys.argv]), "model": args.model, "steps": args.steps,
           "batch_size": args.batch_size, "objectives": args.objectives, "poolers": args.poolers,
           "frozen_seeds": args.frozen_seeds, "encoder_poolers": args.encoder_poolers,
           "encoder_seeds": args.encoder_seeds, "datasets": names, "runs": []}
    if "frozen" in args.regimes:
        res["runs"] += frozen_grid(args, data_dir, datasets)
        write_json(Path(args.output).with_suffix(".json"), res)
    if "encoder" in args.regimes:
        for obj in args.objectives:
            for pooler in args.encoder_poolers:
                for seed in args.encoder_seeds:
                    run = one_run(args, data_dir, datasets, obj, pooler, seed)
                    if run is None:
                        res.setdefault("encoder_not_run", []).append(f"{obj} / {pooler} / seed {seed}")
                        continue
                    res["runs"].append(run)
                    write_json(Path(args.output).with_suffix(".json"), res)
    write_text(args.output, render(res))
    print(render(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
