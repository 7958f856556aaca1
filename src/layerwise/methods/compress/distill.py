"""Layer-reduction distillation: a student made of the teacher's first l layers + mean pooling, trained to
reproduce the teacher's sentence embeddings by MSE on the user's unlabeled sentences (the recipe of
sentence-transformers' ``model_distillation_layer_reduction`` example).

Batches hold sentences of similar length (drawn from windows of a shuffled epoch, see ``LENGTH_GROUP``). For a
batch of sentences ``x_i`` with teacher embeddings ``t_i`` (d,), computed once (through the layer cache:
the teacher's embedding is the mean of its last hidden state), the loss is ``mean_{i,k} (s(x_i)_k - t_{i,k})^2``
with ``s`` the student. The student starts as the plain cut (hidden state l of the teacher) and trains through the
one loop (:mod:`layerwise.training`), so it is seeded and resumes exactly after a kill.

The every-depth student (``depths`` given; the idea of sentence-transformers' AdaptiveLayerLoss and 2D Matryoshka
training, with this module's loss) is one model of max(depths) layers whose mean of hidden state l, for every l in
``depths``, is trained towards the teacher at once: the loss is ``mean_{l in depths} mean_{i,k} (s_l(x_i)_k -
t_{i,k})^2``, the mean over the depths of each depth's loss above, every depth weighted alike. Cut at any of those
depths, it is a candidate of that depth, from one training run instead of one per depth.

With labelled pairs (``pairs``: texts with targets in [0, 1], the user's scored pairs mapped there), a second loss is
added at every step, as the issue's recipe allows: a batch of pairs drawn as TMFT draws them
(:func:`~layerwise.training.batch_indices`, seed + 1) and ``pairs_weight * mean_j (cos(s(a_j), s(b_j)) - y_j)^2``,
TMFT's objective (:class:`~layerwise.methods.truncated.tasks.PairRegressionTask`); for the every-depth student the mean
of that loss over its depths.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from layerwise.data.checksum import content_checksum
from layerwise.methods.truncated.model import TruncatedModel
from layerwise.methods.truncated.tasks import PairSet
from layerwise.training import (
    TrainingConfig,
    TrainingRun,
    TrainingTask,
    batch_indices,
    length_grouped_batch_indices,
    steps_per_epoch,
    tensors_sha256,
    train,
)
from layerwise.training.checkpoint import STATE_JSON
from layerwise.training.distributed import scale_mean, shard

__all__ = ["DistillTask", "LENGTH_GROUP", "PairLoss", "distill_student", "embedding_mse"]

#: batches of similar length (in characters) are drawn from windows of this many batches of a shuffled epoch
#: (:func:`~layerwise.training.length_grouped_batch_indices`): a batch costs its longest sentence, and the corpus
#: mixes 3-word questions with 100-word sentences, so random batches are mostly padding
LENGTH_GROUP = 64


@dataclass(frozen=True)
class PairLoss:
    """Labelled pairs (targets in [0, 1]) whose loss a student adds to the MSE, and its weight against the MSE."""

    pairs: PairSet
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not np.all((self.pairs.targets >= 0) & (self.pairs.targets <= 1)):
            raise ValueError(f"{self.pairs.name}: the pairs' targets must be scaled to [0, 1]")


def embedding_mse(vectors: np.ndarray, teacher: np.ndarray) -> float:
    """Mean squared difference of two (n, d) arrays of embeddings (the training objective, on given rows)."""
    return float(np.mean((np.asarray(vectors, np.float64) - np.asarray(teacher, np.float64)) ** 2))


class DistillTask(TrainingTask):
    """MSE of the student's sentence vectors to the teacher's (n, d), on batches of the corpus."""

    def __init__(self, model: TruncatedModel, texts: list[str], teacher: np.ndarray, *, batch_size: int, lr: float,
                 seed: int, depths: tuple[int, ...] | None = None, pairs: PairLoss | None = None):
        if teacher.shape[0] != len(texts):
            raise ValueError(f"{len(texts)} sentences but {teacher.shape[0]} teacher embeddings")
        top = int(model.encoder.config.num_hidden_layers)
        if depths is not None and (not depths or not all(1 <= d <= top for d in depths)):
            raise ValueError(f"depths {depths} must be a non-empty tuple within 1..{top} (the student's layers)")
        self.depths = None if depths is None else tuple(sorted(set(int(d) for d in depths)))
        self.module, self.texts = model, list(texts)
        self.teacher = torch.as_tensor(np.asarray(teacher, dtype=np.float32))
        self.batch_size, self.lr, self.seed = int(batch_size), float(lr), int(seed)
        self.lengths = np.fromiter((len(t) for t in self.texts), dtype=np.int64, count=len(self.texts))
        self.pairs = pairs
        self.description = (f"distill l{top}" if self.depths is None
                            else f"distill every depth {','.join(map(str, self.depths))}")

    def param_groups(self) -> list[dict]:
        return [{"name": "student", "params": list(self.module.parameters()), "lr": self.lr}]

    def loss(self, step: int, micro: int) -> dict:
        batch = length_grouped_batch_indices(self.lengths, self.batch_size, self.seed, step, group=LENGTH_GROUP)
        idx = shard(batch)  # this process's rows (all of them in one process)
        z = self._vectors([self.texts[i] for i in idx])
        target = self.teacher[torch.as_tensor(idx)].to(device=z.device, dtype=z.dtype)
        if self.depths is not None:
            target = target[:, None, :].expand_as(z)
        loss = scale_mean(torch.nn.functional.mse_loss(z, target), len(batch))
        if self.pairs is None:
            return {"loss": loss}
        pair_loss = self._pair_loss(step)
        return {"loss": loss + self.pairs.weight * pair_loss, "distill": loss.detach(), "pairs": pair_loss.detach()}

    def _vectors(self, texts: list[str]) -> torch.Tensor:
        """(b, d) the student's sentence vectors; with ``depths``, (b, k, d) the mean of each trained hidden state
        (the losses then average the depths too)."""
        if self.depths is None:
            return self.module(texts)
        return self.module.state_means(self.module.tokenize(texts))[:, list(self.depths)]

    def _pair_loss(self, step: int) -> torch.Tensor:
        """TMFT's objective on this step's batch of labelled pairs: mean (cos(u, v) - y)^2."""
        p = self.pairs.pairs
        batch = batch_indices(len(p), min(self.batch_size, len(p)), self.seed + 1, step)
        idx = shard(batch)
        z = self._vectors([p.texts1[i] for i in idx] + [p.texts2[i] for i in idx])  # one forward for both sides
        u, v = z.split(len(idx))
        cos = torch.nn.functional.cosine_similarity(u, v, dim=-1)  # (b,) or (b, k)
        target = torch.as_tensor(p.targets[idx], dtype=cos.dtype, device=cos.device)
        if cos.dim() == 2:
            target = target[:, None].expand_as(cos)
        return scale_mean(torch.nn.functional.mse_loss(cos, target), len(batch))

    def fingerprint(self) -> dict:
        m = self.module
        return {"model": {"weights_sha256": tensors_sha256(m.encoder.state_dict()), "layers": list(m.layers),
                          "max_length": m.max_length, "model_type": m.encoder.config.model_type},
                "data": content_checksum(self.texts), "teacher": tensors_sha256({"t": self.teacher}),
                "settings": {"batch_size": self.batch_size, "seed": self.seed, "lr": self.lr,
                             "batches": f"length-grouped-{LENGTH_GROUP}",
                             **({} if self.depths is None else {"depths": list(self.depths)}),
                             **({} if self.pairs is None else {"pairs": content_checksum(self.pairs.pairs),
                                                               "pairs_weight": self.pairs.weight})}}

    def save(self, folder: Path) -> None:
        self.module.save(folder)


def distill_student(student: TruncatedModel, texts: list[str], teacher: np.ndarray, *, config,
                    folder: Path | None = None, show_progress: bool | None = None,
                    depths: tuple[int, ...] | None = None, pairs: PairSet | None = None) -> TrainingRun:
    """Train ``student`` in place (``config``: a CompressConfig's epochs, batch_size, lr, seed, pairs_weight);
    ``folder``: checkpoints (a killed call resumes from ``folder/last``), None: in memory; ``depths``: train every one
    of these hidden states' means at once (the every-depth student), None: the student's own output; ``pairs``:
    labelled pairs (targets in [0, 1]) whose loss is added at every step. Returns the run."""
    steps = config.epochs * steps_per_epoch(len(texts), config.batch_size)
    loop = TrainingConfig(steps=steps, warmup_steps=steps // 10, seed=config.seed,
                          eval_every=max(1, steps // 10))  # a checkpoint every tenth of the run: a kill loses little
    task = DistillTask(student, texts, teacher, batch_size=config.batch_size, lr=config.lr, seed=config.seed,
                       depths=depths, pairs=None if pairs is None else PairLoss(pairs, config.pairs_weight))
    resume = folder is not None and (Path(folder) / "last" / STATE_JSON).is_file()
    return train(task, loop, output_dir=folder, resume=resume, overwrite=folder is not None and not resume,
                 show_progress=show_progress)
