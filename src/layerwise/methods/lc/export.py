"""Export a layer subset (BERT-LC), optionally through the checkpoint's pooler head (LC + MLP), with built-in modules.

The encoder is cut above the highest hidden state used (:func:`~layerwise.encoders.truncate.truncate_encoder`),
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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from layerwise.encoders.layer_encoder import LayerEncoder
from layerwise.encoders.model_files import weights_sha256
from layerwise.encoders.registry import DEFAULT_MODEL, resolve_model
from layerwise.encoders.truncate import truncate_encoder
from layerwise.export.card import ExportCard, file_sha256, render_card
from layerwise.export.kinds import FALLBACK_KIND, Exporter, register_exporter
from layerwise.export.sentence_transformers import (
    check_destination,
    pooling_modules,
    save_st_folder,
    transformer_options,
)
from layerwise.layers import validate_layers

logger = logging.getLogger(__name__)

__all__ = ["SUBSET_POOLINGS", "SubsetChoice", "SubsetExport", "export_layer_subset"]

SUBSET_POOLINGS = ("mean", "cls")  # the token poolings layerwise computes (layer_mean kinds)


@dataclass(frozen=True)
class SubsetChoice:
    """The subset a layer search chose and what it scored (read from a results file, for the export card)."""

    layers: tuple[int, ...]
    n_chosen: int  # splits whose dev search chose this subset
    n_splits: int
    weights_sha256: str  # of the model the search ran on
    scores: dict[str, str]  # measure -> "mean ± std" in words
    results: str  # the results file the choice was read from


@dataclass(frozen=True)
class SubsetExport:
    """What :func:`export_layer_subset` writes."""

    model: str = DEFAULT_MODEL  # built-in name or a local Hugging Face folder
    layers: tuple[int, ...] | None = None  # hidden states (0 = embedding output); None: read from ``results``
    pooling: str = "mean"  # token pooling of each hidden state: mean (masked) or cls
    head: bool = False  # LC + MLP: feed the subset through the checkpoint's trained pooler head (dense + tanh)
    max_length: int = 256  # tokens per text (the exported model's max_seq_length)
    choice: SubsetChoice | None = None  # the subset a search chose (and what it scored), recorded in the card
    # what the subset scored where no ``choice`` says it (LayerCombination.save: its fit), measure -> value in words
    scores: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pooling not in SUBSET_POOLINGS:
            raise ValueError(f"unknown pooling {self.pooling!r} for a layer subset; valid: {', '.join(SUBSET_POOLINGS)}")
        if (self.layers is None) == (self.choice is None):
            raise ValueError("give exactly one of layers (e.g. layers=(0, 6)) and choice (a SubsetChoice, e.g. from "
                             "layerwise.benchmarks.lc.run.subset_from_results)")
        if self.head and self.pooling != "mean":
            raise ValueError("LC + MLP (head) feeds the mean pooling through the pooler head: use pooling='mean'")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["layers"] = None if self.layers is None else list(self.layers)
        if self.choice is not None:
            d["choice"]["layers"] = list(self.choice.layers)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "SubsetExport":
        layers, choice = d.get("layers"), d.get("choice")
        if choice is not None:
            choice = SubsetChoice(**{**choice, "layers": tuple(choice["layers"])})
        return cls(**{**d, "layers": None if layers is None else tuple(layers), "choice": choice})


def export_layer_subset(config: SubsetExport, folder: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write ``config``'s layer subset of its model as a sentence-transformers folder (see the module docstring)."""
    check_destination(folder, overwrite)
    choice = config.choice
    resolved = resolve_model(config.model)  # layers and weights are checked before the model loads
    n_states = int(json.loads((resolved.path / "config.json").read_text())["num_hidden_layers"]) + 1
    layers = validate_layers(choice.layers if choice else config.layers, n_states)
    if choice is not None and choice.weights_sha256 != weights_sha256(resolved.path):
        raise ValueError(f"the subset chosen in {choice.results} was measured on weights {choice.weights_sha256[:12]}, but "
                         f"{config.model} has other weights: export the model the search ran on")
    encoder = LayerEncoder(config.model, max_length=config.max_length, cache_dir=False, show_progress=False)
    ident = encoder.identity
    head = [_head_module(encoder)] if config.head else []  # read before the cut (the pooler is kept either way)
    model = truncate_encoder(encoder.model, max(layers), copy_model=False)
    modules, all_states = pooling_modules(model.config, pooling=config.pooling, layers=layers)
    modules += head
    results = None
    if choice is not None:
        results = {"path": str(choice.results), "sha256": file_sha256(choice.results),
                   "chosen_on": f"{choice.n_chosen} of {choice.n_splits} dev splits"}
    what = "LC + MLP: the pooler head (dense + tanh) over" if config.head else "BERT-LC:"
    card = ExportCard(
        kind="lc_mlp" if config.head else "layer_subset", source=ident.to_dict(), layers=list(layers),
        pooling=config.pooling, results_file=results, scores=choice.scores if choice else dict(config.scores),
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


# the fallback kind: a source no other exporter detects is a pretrained model, exported as a layer subset
EXPORTER = register_exporter(Exporter(
    kind=FALLBACK_KIND, detects=None, export=export_layer_subset,
    from_folder="a pretrained model: export a layer subset with export_layer_subset(SubsetExport(model, layers=...))"))
