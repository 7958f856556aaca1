"""Sentence embeddings from a layer stack, with no re-encoding.

Every pooling here is a pure function of a :class:`~layerwise.layers.LayerStack`; layer selections are
explicit tuples of hidden-state indices (0 = embedding output, L = last layer; see ``layers.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from layerwise.layers import LayerStack, validate_layers
from layerwise.modules.scalar_mix import ScalarMix

__all__ = [
    "Pooling",
    "apply_head",
    "baseline_poolings",
    "cls_pooling",
    "head_pooling",
    "layer_max",
    "layer_mean",
    "named_selections",
    "pooler_output",
    "random_layers",
    "scalar_mix",
]


def cls_pooling(stack: LayerStack, layer: int = -1) -> np.ndarray:
    """First-token vector of one hidden state: (n, d)."""
    (layer,) = validate_layers([layer], stack.n_states)
    return stack.cls[:, layer, :]


def pooler_output(stack: LayerStack) -> np.ndarray:
    """The model's pooler output (dense + tanh over the last CLS): (n, d)."""
    if stack.pooler is None:
        raise ValueError(
            "this layer stack has no pooler output: the model has no pooler layer "
            "(use cls_pooling or layer_mean instead)"
        )
    return stack.pooler


def layer_mean(stack: LayerStack, layers, *, kind: str = "mean") -> np.ndarray:
    """BERT-LC pooling p(H, D) = 1/|D| sum_{l in D} pool(H[l]): (n, d).

    ``kind="mean"`` averages the token-mean vectors of the chosen hidden states, ``kind="cls"`` their
    first-token vectors.
    """
    idx = list(validate_layers(layers, stack.n_states))
    src = _source(stack, kind)
    return src[:, idx, :].mean(axis=1)


def layer_max(stack: LayerStack, layers) -> np.ndarray:
    """Max pooling of a subset: the elementwise maximum over the chosen hidden states' token-mean vectors: (n, d).

    BERT-LC offers max pooling beside averaging the chosen layers; the layer stack keeps one token-mean vector per
    hidden state (no token vectors), so the maximum is taken across the chosen states, per dimension. A one-state
    subset gives that state's mean vector, as :func:`layer_mean` does.
    """
    idx = list(validate_layers(layers, stack.n_states))
    return stack.mean[:, idx, :].max(axis=1)


def head_pooling(stack: LayerStack, layers, weight: np.ndarray, bias: np.ndarray, *, kind: str = "mean") -> np.ndarray:
    """LC + MLP: the layer combination fed through the checkpoint's pooler head, tanh(W p(H, D) + b): (n, d).

    ``weight`` (d, d) and ``bias`` (d,) come from :meth:`layerwise.LayerEncoder.pooler_head`.
    """
    return apply_head(layer_mean(stack, layers, kind=kind), weight, bias)


def apply_head(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """tanh(x W^T + b) for vectors ``x`` (n, d) and a pooler head ``weight`` (d, d), ``bias`` (d,): float32 (n, d)."""
    w = np.asarray(weight, dtype=np.float64)
    d = x.shape[-1]
    if w.shape != (d, d) or np.shape(bias) != (d,):
        raise ValueError(f"head of shape {w.shape} / {np.shape(bias)} does not fit d={d}")
    return np.tanh(x.astype(np.float64) @ w.T + np.asarray(bias, dtype=np.float64)).astype(np.float32)


def scalar_mix(stack: LayerStack, weights, *, gamma: float = 1.0, kind: str = "mean") -> np.ndarray:
    """Softmax-weighted layer mix, gamma * sum_l softmax(w)_l * pool(H[l]): float32 (n, d).

    Computed by :class:`layerwise.modules.scalar_mix.ScalarMix` (in float64) with its weights set to ``weights``,
    one real number per hidden state (L + 1 of them); they need not be positive.
    """
    import torch

    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (stack.n_states,):
        raise ValueError(
            f"scalar_mix needs one weight per hidden state ({stack.n_states}), got shape {w.shape}"
        )
    mix = ScalarMix(stack.n_states).double()
    with torch.no_grad():
        mix.weights.copy_(torch.from_numpy(w))
        mix.gamma.fill_(float(gamma))
        out = mix(torch.from_numpy(_source(stack, kind).astype(np.float64)))
    return out.numpy().astype(np.float32)


def _source(stack: LayerStack, kind: str) -> np.ndarray:
    if kind == "mean":
        return stack.mean
    if kind == "cls":
        return stack.cls
    raise ValueError(f"unknown kind {kind!r}; valid: 'mean', 'cls'")


def named_selections(n_states: int) -> dict[str, tuple[int, ...]]:
    """The usual fixed layer selections, as explicit hidden-state tuples.

    ``first_last`` exists in two conventions that published numbers mix up: ``first0_last`` = (0, L)
    counts the embedding output as "first", ``first1_last`` = (1, L) the first transformer layer.
    """
    L = n_states - 1
    if L < 1:
        raise ValueError(f"a model needs at least one transformer layer, got {n_states} hidden states")
    return {
        "last": (L,),
        "first0_last": (0, L),
        "first1_last": (1, L) if L > 1 else (L,),
        "last_four": tuple(range(max(0, L - 3), L + 1)),
        "all": tuple(range(n_states)),
    }


def random_layers(n_states: int, *, seed: int, size: int | None = None) -> tuple[int, ...]:
    """A seeded random subset of hidden states; ``size`` None draws the size uniformly from 1..L+1."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, n_states + 1)) if size is None else int(size)
    if not 1 <= k <= n_states:
        raise ValueError(f"size must be in 1..{n_states}, got {size}")
    return tuple(sorted(int(x) for x in rng.choice(n_states, size=k, replace=False)))


@dataclass(frozen=True)
class Pooling:
    """A named pooling of a layer stack, serialisable into results files.

    kind: ``"mean"`` (mean of the layers' token means), ``"cls"`` (mean of the layers' CLS vectors),
    ``"max"`` (elementwise max over the layers' token means, :func:`layer_max`), ``"pooler"`` (the model's
    pooler output; ``layers`` unused).
    """

    name: str
    kind: str
    layers: tuple[int, ...] = field(default=())

    def __call__(self, stack: LayerStack) -> np.ndarray:
        if self.kind == "pooler":
            return pooler_output(stack)
        if self.kind == "max":
            return layer_max(stack, self.layers)
        return layer_mean(stack, self.layers, kind=self.kind)

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "layers": list(self.layers)}


def baseline_poolings(n_states: int, *, seed: int = 0, has_pooler: bool = False) -> list[Pooling]:
    """Baselines reported beside layer combination: CLS, last, first+last (both conventions), last four,
    all layers, a seeded random subset, and the pooler output where the model has one."""
    sel = named_selections(n_states)
    L = n_states - 1
    out = [
        Pooling("cls", "cls", (L,)),
        Pooling("last", "mean", sel["last"]),
        Pooling("first0_last", "mean", sel["first0_last"]),
        Pooling("first1_last", "mean", sel["first1_last"]),
        Pooling("last_four", "mean", sel["last_four"]),
        Pooling("all", "mean", sel["all"]),
        Pooling("random", "mean", random_layers(n_states, seed=seed)),
    ]
    if has_pooler:
        out.append(Pooling("pooler", "pooler"))
    return out
