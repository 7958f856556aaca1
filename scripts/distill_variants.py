"""A screen of distillation recipes for the compress page's students: one student of MODEL cut at DEPTH, trained on
the page's corpus (``benchmarks.compress.data.page_data``: the same seeded sample as ``--option corpus_limit=N``) as
the page trains it (``methods.compress.distill.distill_student``: batch 64, max length 128, seed 0, one epoch by
default), but with one thing changed, then scored on STS-B dev and test (torch, Spearman x100 of the cosines).
One JSON line per run is appended to OUT, with the run's environment (commit, machine, versions, command).

    PYTHONPATH=src python scripts/distill_variants.py mean --corpus-limit 30000 --depth 5 --lr 5e-4 \\
        --data-dir /work/shared/data --out docs/results/compress-distill-variants.jsonl

Variants: ``mean`` (the page's loss: MSE to the teacher's mean of its last hidden state), ``normalized`` (MSE of the
unit vectors, as sentence-transformers' MSELoss with a teacher that normalizes), ``cosine`` (1 - cos), ``pairs``
(the page's loss plus the library's labelled-pairs loss on STS-B train, ``train_pairs``, scores / 5).
A screen, not a results page: the page itself changes only through ``layerwise results run compress``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

from layerwise.benchmarks.compress.data import page_data
from layerwise.benchmarks.compress.pages import CompressPageConfig
from layerwise.data import load_sts
from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.evaluation.metrics import cosine_rows, spearman
from layerwise.methods.compress import distill
from layerwise.methods.compress.config import CompressConfig
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.tasks import PairSet
from layerwise.reports import environment
from layerwise.training import seed_everything

VARIANTS = ("mean", "normalized", "cosine", "pairs")


class _Normalized(distill.DistillTask):
    """MSE of the student's and the teacher's unit vectors."""

    def loss(self, step: int, micro: int) -> dict:
        batch = distill.length_grouped_batch_indices(self.lengths, self.batch_size, self.seed, step,
                                                     group=distill.LENGTH_GROUP)
        z = torch.nn.functional.normalize(self.module([self.texts[i] for i in batch]), dim=-1)
        t = torch.nn.functional.normalize(self.teacher[torch.as_tensor(batch)], dim=-1)
        return {"loss": torch.nn.functional.mse_loss(z, t)}


class _Cosine(distill.DistillTask):
    """1 - cosine of the student's and the teacher's vectors."""

    def loss(self, step: int, micro: int) -> dict:
        batch = distill.length_grouped_batch_indices(self.lengths, self.batch_size, self.seed, step,
                                                     group=distill.LENGTH_GROUP)
        z = self.module([self.texts[i] for i in batch])
        t = self.teacher[torch.as_tensor(batch)]
        return {"loss": (1 - torch.nn.functional.cosine_similarity(z, t, dim=-1)).mean()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variant", choices=VARIANTS)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument("--corpus-limit", type=int, default=30000, help="0: the whole corpus")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    limit = args.corpus_limit or None
    page = CompressPageConfig(corpus_limit=limit)
    data = page_data(page.corpus, page.tests, limit=limit, seed=page.seed, data_dir=args.data_dir)
    texts = list(data.corpus)
    enc = LayerEncoder(args.model, max_length=page.max_length)
    top = enc.identity.n_layers
    teacher = np.concatenate([enc.encode(texts[i:i + 4096]).mean[:, top] for i in range(0, len(texts), 4096)])
    pairs = None
    if args.variant == "pairs":
        train = load_sts("stsb", split="train", data_dir=args.data_dir)
        pairs = PairSet(tuple(train.sentences1), tuple(train.sentences2), np.asarray(train.scores) / 5.0, "stsb")
    distill.DistillTask = {"normalized": _Normalized, "cosine": _Cosine}.get(args.variant, distill.DistillTask)
    config = CompressConfig(model=args.model, depths=(args.depth,), epochs=args.epochs, batch_size=page.batch_size,
                            lr=args.lr, max_length=page.max_length, seed=page.seed)
    seed_everything(page.seed)
    student = TruncatedModel.from_pretrained(args.model, (args.depth,), max_length=page.max_length)
    t0 = time.perf_counter()
    distill.distill_student(student, texts, teacher, config=config, show_progress=True, pairs=pairs)
    seconds = time.perf_counter() - t0
    student.eval()

    def score(p) -> float:
        a, b = student.encode(list(p.sentences1)), student.encode(list(p.sentences2))
        return round(100 * spearman(cosine_rows(a, b), np.asarray(p.scores)), 2)

    line = {"variant": args.variant, "model": args.model, "depth": args.depth, "lr": args.lr, "epochs": args.epochs,
            "corpus": len(texts), "train_seconds": round(seconds), "dev": score(data.dev),
            "stsb_test": score(data.tests["stsb"]), "environment": environment(["python", *sys.argv])}
    print(json.dumps({k: v for k, v in line.items() if k != "environment"}))
    with open(args.out, "a") as f:
        f.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
