"""Export a layer subset (BERT-LC), optionally through the checkpoint's pooler head (LC + MLP), with built-in modules.

The encoder is cut above the highest hidden state used (:func:`~layerwise.methods.truncated.truncate.truncate_encoder`),
so a subset that stops early makes a model that runs fewer layers than the original. The folder holds

    Transformer (every hidden state when the subset has more than one) -> WeightedLayerPooling (0/1 weights)
        -> Pooling (mean or cls) [-> Dense(d, d, Tanh) with the pooler's weights, for LC + MLP]

all built in, so it loads with ``SentenceTransformer(folder)`` and ``trust_remote_code=False``. The arithmetic is
BERT-LC's: a token mean (or the first token) of a mean over layers is the mean over layers of each layer's token
mean (or CLS vector) under one attention mask, :func:`layerwise.pooling.layer_mean`; LC + MLP is
:func:`layerwise.pooling.head_pooling`.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from layerwise.encoders.registry import DEFAULT_MODEL
from layerwise.export.card import ExportCard, file_sha256, render_card
from layerwise.export.sentence_transformers import (
    check_destination,
    pooling_modules,
    save_st_folder,
    transformer_options,
)

logger = logging.getLogger(__name__)

__all__ = ["SUBSET_POOLINGS", "SubsetChoice", "SubsetExport", "export_layer_subset", "subset_from_results"]

SUBSET_POOLINGS = ("mean", "cls")  # the token poolings layerwise computes (layer_mean kinds)


@dataclass(frozen=True)
class SubsetExport:
    """What :func:`export_layer_subset` writes."""

    model: str = DEFAULT_MODEL  # built-in name or a local Hugging Face folder
    layers: tuple[int, ...] | None = None  # hidden states (0 = embedding output); None: read from ``results``
    pooling: str = "mean"  # token pooling of each hidden state: mean (masked) or cls
    head: bool = False  # LC + MLP: feed the subset through the checkpoint's trained pooler head (dense + tanh)
    max_length: int = 256  # tokens per text (the exported model's max_seq_length)
    results: str | None = None  # a `layerwise search` results JSON to read the subset (and scores) from

    def __post_init__(self) -> None:
        if self.pooling not in SUBSET_POOLINGS:
            raise ValueError(f"unknown pooling {self.pooling!r} for a layer subset; valid: {', '.join(SUBSET_POOLINGS)}")
        if (self.layers is None) == (self.results is None):
            raise ValueError("give exactly one of layers (e.g. layers=(0, 6)) and results (a `layerwise search` results "
                             "JSON, e.g. results='runs/search.json')")
        if self.head and self.pooling != "mean":
            raise ValueError("LC + MLP (head) feeds the mean pooling through the pooler head: use pooling='mean'")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["layers"] = None if self.layers is None else list(self.layers)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "SubsetExport":
        layers = d.get("layers")
        return cls(**{**d, "layers": None if layers is None else tuple(layers)})


@dataclass(frozen=True)
class SubsetChoice:
    """The subset read from a search results file and what it scored."""

    layers: tuple[int, ...]
    n_chosen: int  # splits whose dev search chose this subset
    n_splits: int
    weights_sha256: str  # of the model the search ran on
    scores: dict[str, str]  # measure -> "mean ± std" in words


def subset_from_results(path: str | os.PathLike, *, head: bool = False) -> SubsetChoice:
    """The subset a ``layerwise search`` run chose on most of its dev splits (ties: the higher mean dev score)."""
    from layerwise.methods.lc.run import STSRun

    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"results file {path} cannot be read as JSON ({exc}); give a results file written by "
                         "`layerwise search`") from None
    run = STSRun.from_dict(doc)
    if run.kind != "search" or run.lc is None or not run.lc.splits:
        raise ValueError(f"results file {path} is a {run.kind!r} results file with no layer search; give one written by "
                         "`layerwise search`")
    counts = Counter(s.layers for s in run.lc.splits)
    dev = {key: sum(s.dev_spearman for s in run.lc.splits if s.layers == key) / n for key, n in counts.items()}
    layers = max(counts, key=lambda key: (counts[key], dev[key]))
    method = "lc_mlp" if head else "lc"
    summary = run.lc.summary("spearman")
    if method not in summary:
        raise ValueError(f"results file {path} has no {method} scores (LC + MLP was not run: {run.lc_mlp}); pass "
                         "head=False")
    where = f"{run.data.name} {run.data.split}, {len(run.lc.splits)} dev/test splits of {run.lc.dev_size} dev pairs"
    scores = {f"{name} test Spearman x100 ({where})": f"{summary[name]['mean']:.2f} ± {summary[name]['std']:.2f}"
              for name in dict.fromkeys((method, "last")) if name in summary}
    return SubsetChoice(tuple(layers), counts[layers], len(run.lc.splits), run.model.weights_sha256, scores)


def export_layer_subset(config: SubsetExport, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write ``config``'s layer subset of its model as a sentence-transformers folder (see the module docstring)."""
    from layerwise.encoders.layer_encoder import LayerEncoder
    from layerwise.encoders.registry import resolve_model, weights_sha256
    from layerwise.layers import validate_layers
    from layerwise.methods.truncated.truncate import truncate_encoder

    check_destination(folder, overwrite)
    choice = subset_from_results(config.results, head=config.head) if config.results is not None else None
    resolved = resolve_model(config.model)  # layers and weights are checked before the model loads
    n_states = int(json.loads((resolved.path / "config.json").read_text())["num_hidden_layers"]) + 1
    layers = validate_layers(choice.layers if choice else config.layers, n_states)
    if choice is not None and choice.weights_sha256 != weights_sha256(resolved.path):
        raise ValueError(f"results file {config.results} was measured on weights {choice.weights_sha256[:12]}, but "
                         f"{config.model} has other weights: export the model the search ran on")
    encoder = LayerEncoder(config.model, max_length=config.max_length, cache_dir=False, show_progress=False)
    ident = encoder.identity
    head = [_head_module(encoder)] if config.head else []  # read before the cut (the pooler is kept either way)
    model = truncate_encoder(encoder.model, max(layers), copy_model=False)
    modules, all_states = pooling_modules(model.config, pooling=config.pooling, layers=layers)
    modules += head
    results = None
    if config.results is not None:
        results = {"path": str(config.results), "sha256": file_sha256(config.results),
                   "chosen_on": f"{choice.n_chosen} of {choice.n_splits} dev splits"}
    what = "LC + MLP: the pooler head (dense + tanh) over" if config.head else "BERT-LC:"
    card = ExportCard(
        kind="lc_mlp" if config.head else "layer_subset", source=ident.to_dict(), layers=list(layers),
        pooling=config.pooling, results_file=results, scores=choice.scores if choice else {},
        description=f"{what} the {config.pooling} pooling of hidden states {', '.join(map(str, layers))} of "
                    f"{ident.name}, averaged; the encoder is cut above hidden state {max(layers)} "
                    f"({max(layers)} of its {ident.n_layers} layers run).",
        extra={"max_length": encoder.max_length, "layers_kept": max(layers), "layers_in_source": ident.n_layers})
    return save_st_folder(model, encoder.tokenizer, folder, modules,
                          transformer_kwargs=transformer_options(encoder.max_length, all_hidden_states=all_states),
                          provenance=card.provenance(), readme=render_card(card, Path(folder).name), overwrite=overwrite)


def _head_module(encoder):
    """``Dense(d, d, Tanh)`` holding the checkpoint's pooler weights (ValueError when it has none trained)."""
    import torch
    from sentence_transformers.sentence_transformer.modules import Dense

    weight, bias, _ = encoder.pooler_head()
    d = weight.shape[0]
    return Dense(d, d, activation_function=torch.nn.Tanh(), init_weight=torch.from_numpy(weight),
                 init_bias=torch.from_numpy(bias))
