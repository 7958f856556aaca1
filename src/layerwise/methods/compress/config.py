"""The settings of a compression run: every field changes a number of some candidate (backends: :mod:`.backends`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["GRAPH_TEST_SCORES", "CompressConfig"]

#: How the float32 graph backends (onnx, openvino) get their test scores: "measured", every test set encoded by the
#: graph; "checked", the torch candidate's test scores once the graph's vectors of the dev sentences and of a sample of
#: each test set are within tolerance of the torch model's (build.py: GRAPH_CHECK_SENTENCES, GRAPH_TOLERANCE)
GRAPH_TEST_SCORES = ("measured", "checked")


@dataclass(frozen=True)
class CompressConfig:
    """What the candidates are and how they are measured (the quality budget is not here: it only chooses)."""

    model: str  # built-in name or local Hugging Face folder (the teacher and the model every candidate is cut from)
    depths: tuple[int, ...]  # depths l (transformer layers kept) of the candidates, each in 1..L
    backends: tuple[str, ...] = ("torch",)  # torch, onnx, onnx-int8, onnx-int8-mixed, openvino, openvino-int8 (backends.py)
    epochs: int = 1  # distillation: passes over the corpus
    batch_size: int = 32  # distillation: sentences per step (the corpus must hold one batch at least)
    lr: float = 1e-4  # distillation: AdamW learning rate (linear decay, 10 % warm-up)
    max_length: int = 128  # tokens per sentence, for every candidate, the teacher and the timing
    seed: int = 0  # distillation: batches, dropout
    speed_sentences: int = 256  # corpus sentences encoded per timed pass (the first ones)
    speed_batch_size: int = 32  # sentences per forward pass when timing (the original model's too)
    speed_repeats: int = 3  # timed passes per model, interleaved with the original's; the median pass counts
    # depths the every-depth student is trained at, all at once (distill.py); a candidate at each of ``depths`` among
    # them; (): no such student. Like ``depths``, it says which candidates exist, not how any one is measured
    every_depth: tuple[int, ...] = ()
    graph_test_scores: str = "measured"  # GRAPH_TEST_SCORES (in the float32 graph candidates' keys only: build.py)
    # distillation with labelled pairs (CompressData.train_pairs): the weight of their loss against the MSE; in the
    # students' keys only when there are such pairs (build.py)
    pairs_weight: float = 1.0

    def to_dict(self) -> dict:
        out = asdict(self)
        out["depths"], out["backends"] = list(self.depths), list(self.backends)
        out["every_depth"] = list(self.every_depth)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "CompressConfig":
        return cls(**{**data, "depths": tuple(data["depths"]), "backends": tuple(data["backends"]),
                      "every_depth": tuple(data.get("every_depth", ()))})
