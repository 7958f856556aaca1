"""The TMFT training tasks for the one training loop (:mod:`layerwise.training`).

- :class:`PairRegressionTask`: the paper's objective for STS and word similarity alike. For a batch of pairs,
  ``loss = mean((cos(u_i, v_i) - y_i)^2)`` with ``y`` the gold score scaled to [0, 1] (STS-B: gold / 5).
  Evaluation: Spearman x100 of the cosines on a dev set of pairs.
- :class:`MaskedLMTask`: masked-language-model training of the full encoder with a fresh MLM head (transform +
  decoder tied to the input embeddings, as ``AutoModelForMaskedLM`` builds it when the checkpoint has no head);
  15 % of the tokens are selected, 80 % of those become [MASK], 10 % a random token, 10 % stay
  (``DataCollatorForLanguageModeling``). The masks come from torch's global RNG, which the loop saves.
Batches are a pure function of (seed, batch number) (:func:`layerwise.training.batch_indices`), so resume is exact.
Under DDP (``torchrun``) each process takes its rows of the batch (:func:`layerwise.training.distributed.shard`): the
pair loss, a mean over pairs, is then exactly the one-process loss; the MLM loss is each process's mean over its own
masked tokens (the masks differ from one process's anyway: each process draws them from its own RNG stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from layerwise.data.checksum import content_checksum
from layerwise.encoders.batching import cut_texts
from layerwise.evaluation.metrics import cosine_rows, spearman
from layerwise.methods.truncated.config import MLMConfig
from layerwise.training import TrainingTask, batch_indices, tensors_sha256
from layerwise.training.distributed import scale_mean, shard

__all__ = ["MaskedLMTask", "PairSet", "PairRegressionTask"]


@dataclass(frozen=True)
class PairSet:
    """Text pairs with targets in [0, 1] (training) or gold scores on any scale (evaluation)."""

    texts1: tuple[str, ...]
    texts2: tuple[str, ...]
    targets: np.ndarray  # (n,)
    name: str = "pairs"

    def __post_init__(self) -> None:
        n = len(self.texts1)
        if n == 0 or len(self.texts2) != n or np.asarray(self.targets).shape != (n,):
            raise ValueError(f"{self.name}: need as many texts2 and targets as texts1 (n={n} > 0)")
        if not np.all(np.isfinite(self.targets)):
            raise ValueError(f"{self.name}: targets must be finite numbers")

    def __len__(self) -> int:
        return len(self.texts1)


def pair_spearman(model, pairs: PairSet) -> float:
    """Spearman x100 of the cosine of the two texts' vectors against the pairs' scores."""
    a, b = model.encode(list(pairs.texts1)), model.encode(list(pairs.texts2))
    return 100.0 * spearman(cosine_rows(a, b), np.asarray(pairs.targets))


class PairRegressionTask(TrainingTask):
    """Cosine of a pair's sentence vectors regressed on its target with MSE (TMFT STS; TMFT WS)."""

    def __init__(self, model, train: PairSet, *, batch_size: int, lr: float, seed: int, dev: PairSet | None = None,
                 grad_accumulation: int = 1, description: str = "tmft"):
        if not np.all((train.targets >= 0) & (train.targets <= 1)):
            raise ValueError(f"{train.name}: training targets must be scaled to [0, 1]")
        self.module, self.train_pairs, self.dev = model, train, dev
        self.batch_size, self.lr, self.seed = int(batch_size), float(lr), int(seed)
        self.grad_accumulation, self.description = int(grad_accumulation), description

    def param_groups(self) -> list[dict]:
        return [{"name": "encoder", "params": list(self.module.parameters()), "lr": self.lr}]

    def loss(self, step: int, micro: int) -> dict:
        b = step * self.grad_accumulation + micro
        batch = batch_indices(len(self.train_pairs), self.batch_size, self.seed, b)
        idx, p = shard(batch), self.train_pairs  # this process's rows (all of them in one process)
        z = self.module([p.texts1[i] for i in idx] + [p.texts2[i] for i in idx])  # one forward for both sides
        u, v = z.split(len(idx))
        cos = torch.nn.functional.cosine_similarity(u, v, dim=-1)
        target = torch.as_tensor(p.targets[idx], dtype=cos.dtype, device=cos.device)
        return {"loss": scale_mean(torch.nn.functional.mse_loss(cos, target), len(batch))}

    def evaluate(self) -> float | None:
        return None if self.dev is None else pair_spearman(self.module, self.dev)

    def fingerprint(self) -> dict:
        m = self.module
        return {"model": {"weights_sha256": tensors_sha256(m.encoder.state_dict()), "layers": list(m.layers),
                          "max_length": m.max_length, "model_type": m.encoder.config.model_type},
                "data": content_checksum(self.train_pairs),
                "dev": content_checksum(self.dev) if self.dev is not None else None,
                "settings": {"batch_size": self.batch_size, "seed": self.seed, "lr": self.lr,
                             "grad_accumulation": self.grad_accumulation}}

    def save(self, folder: Path) -> None:
        self.module.save(folder)


class MaskedLMTask(TrainingTask):
    """MLM on unlabeled sentences; ``module`` is an ``AutoModelForMaskedLM`` (encoder + head)."""

    def __init__(self, mlm_model, tokenizer, sentences: list[str], settings: MLMConfig, *, seed: int,
                 max_length: int = 128):
        """``settings``: batch size, learning rate, gradient accumulation and masking probability (``MLMConfig``)."""
        from transformers import DataCollatorForLanguageModeling

        if not sentences:
            raise ValueError("no sentences for masked-language-model training")
        self.module, self.tokenizer, self.sentences = mlm_model, tokenizer, list(sentences)
        self.batch_size, self.seed, self.lr = int(settings.batch_size), int(seed), float(settings.lr)
        self.max_length, self.mlm_probability = int(max_length), float(settings.mlm_probability)
        grad_accumulation = settings.grad_accumulation
        self.collator = DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=self.mlm_probability,
                                                        return_tensors="pt")
        self.description, self.grad_accumulation = "mlm", int(grad_accumulation)

    def param_groups(self) -> list[dict]:
        return [{"name": "mlm", "params": list(self.module.parameters()), "lr": self.lr}]

    def loss(self, step: int, micro: int) -> dict:
        b = step * self.grad_accumulation + micro
        idx = shard(batch_indices(len(self.sentences), self.batch_size, self.seed, b))  # this process's rows
        enc = self.tokenizer(cut_texts([self.sentences[i] for i in idx], self.max_length), truncation=True, max_length=self.max_length)
        batch = self.collator([{k: enc[k][j] for k in enc} for j in range(len(idx))])
        device = next(self.module.parameters()).device
        out = self.module(**{k: v.to(device) for k, v in batch.items()})
        return {"loss": out.loss}

    def fingerprint(self) -> dict:
        return {"model": {"weights_sha256": tensors_sha256(self.module.base_model.state_dict()),
                          "model_type": self.module.config.model_type},
                "data": content_checksum(self.sentences),
                "settings": {"batch_size": self.batch_size, "seed": self.seed, "lr": self.lr,
                             "grad_accumulation": self.grad_accumulation, "max_length": self.max_length,
                             "mlm_probability": self.mlm_probability}}

    def save(self, folder: Path) -> None:
        self.module.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)

    def load_weights(self, folder: Path) -> None:
        from transformers import AutoModelForMaskedLM

        self.module.load_state_dict(AutoModelForMaskedLM.from_pretrained(folder).state_dict())
