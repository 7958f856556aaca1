"""Real truncation of a Hugging Face encoder: keep the embeddings and layers 1..l, drop the rest.

TMFT (Rep, Dukić, Šnajder, 2024) fine-tunes an encoder *cut* at layer l and mean-pools its output. Their public code
runs the full model and picks ``hidden_states[l]`` (nothing is saved at training or inference time); here the layers
above l are removed from the module, ``config.num_hidden_layers`` is set to l, and the result is an ordinary model of
the same class: ``save_pretrained`` writes a folder that ``AutoModel`` loads with no custom code, and a forward pass
costs l/L of the full model's layer compute (plus the embeddings).

With the layer-index convention of :mod:`layerwise.layers` (hidden state 0 = embedding output), the truncated model's
``last_hidden_state`` equals hidden state l of the full model for the same inputs and attention mask; l = 0 keeps the
embeddings alone (ELECTRA's embedding projection included, since ``hidden_states[0]`` is taken after it).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = ["LAYER_PATHS", "NO_EMPTY_ENCODER", "count_parameters", "find_layers", "hidden_state", "truncate_encoder"]

# Model types whose encoder forward fails with no layer at all (transformers leaves its output unset).
NO_EMPTY_ENCODER = frozenset({"deberta", "deberta-v2"})

# Where the stack of transformer layers lives, by attribute path (first match wins).
LAYER_PATHS = ("encoder.layer", "encoder.layers", "transformer.layer", "layers", "layer")


def find_layers(model: nn.Module) -> tuple[nn.Module, str, nn.ModuleList]:
    """The (parent module, attribute name, ModuleList) holding the model's ``num_hidden_layers`` layers."""
    n_layers = int(model.config.num_hidden_layers)
    for path in LAYER_PATHS:
        *parents, name = path.split(".")
        parent = model
        for attr in parents:
            parent = getattr(parent, attr, None)
            if parent is None:
                break
        layers = getattr(parent, name, None) if parent is not None else None
        if isinstance(layers, nn.ModuleList) and len(layers) == n_layers:
            return parent, name, layers
    raise ValueError(
        f"cannot find the {n_layers} transformer layers of {type(model).__name__} (looked at "
        f"{', '.join(LAYER_PATHS)}); models with shared layers (ALBERT) cannot be truncated"
    )


def truncate_encoder(model: nn.Module, layer: int, *, copy_model: bool = True) -> nn.Module:
    """The encoder with hidden states 0..``layer`` only (layers above ``layer`` removed).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        An encoder (BERT, RoBERTa, MPNet, DeBERTa, ELECTRA discriminator or generator base, ...).
    layer : int
        Hidden state to keep as the output, 0..L (0: embeddings only; L: the model unchanged).
    copy_model : bool
        Truncate a deep copy (default) rather than ``model`` itself.
    """
    n_layers = int(model.config.num_hidden_layers)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= n_layers:
        raise ValueError(f"layer must be a hidden state 0..{n_layers} of this {n_layers}-layer model, got {layer!r}")
    if layer == 0 and model.config.model_type in NO_EMPTY_ENCODER:
        raise ValueError(
            f"{model.config.model_type} cannot keep 0 layers: its encoder's forward pass in transformers needs at "
            "least one layer; truncate at layer 1 or above"
        )
    model = copy.deepcopy(model) if copy_model else model
    parent, name, layers = find_layers(model)
    setattr(parent, name, nn.ModuleList(list(layers)[:layer]))
    model.config.num_hidden_layers = layer
    for attr in ("layer_types",):  # per-layer lists in some configs must shrink with the layers
        value = getattr(model.config, attr, None)
        if isinstance(value, (list, tuple)) and len(value) == n_layers:
            setattr(model.config, attr, list(value)[:layer])
    return model


def count_parameters(model: nn.Module, *, exclude_pooler: bool = True) -> int:
    """Number of parameters, without the pooler head (``pooler.*``) by default, as the TMFT paper counts them."""
    total = 0
    for name, p in model.named_parameters():
        if exclude_pooler and (name == "pooler" or name.startswith("pooler.")):
            continue
        total += p.numel()
    return total


@torch.no_grad()
def hidden_state(model: nn.Module, layer: int, **inputs) -> torch.Tensor:
    """Hidden state ``layer`` of the *full* model for ``inputs`` (the slow twin of a truncated forward pass)."""
    out = model(**inputs, output_hidden_states=True)
    return out.hidden_states[layer]
