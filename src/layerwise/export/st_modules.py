"""sentence-transformers modules that exist only in layerwise: classes of the installed package, never folder code.

A folder's ``modules.json`` names :class:`LayerPoolerModule` by import path and the folder holds no ``.py`` file.
sentence-transformers 6 imports a class outside its own package only with ``trust_remote_code=True`` (which would
also run a file placed in the folder), so such a folder is loaded with
:func:`layerwise.export.no_code.load_sentence_transformer`, which resolves the class to this installed one with
``trust_remote_code=False``. A method's own module class lives with the method (Latte-Mix:
:mod:`layerwise.methods.lattemix.st_module`).
"""

from __future__ import annotations

from sentence_transformers.base.modules.module import Module as STModule

from layerwise.encoders.hidden_states import pool_hidden_states
from layerwise.modules.poolers import LayerPooler

__all__ = ["LayerPoolerModule"]


class LayerPoolerModule(STModule):
    """A trained :class:`~layerwise.modules.poolers.LayerPooler` as a sentence-transformers module.

    Reads ``features["all_layer_embeddings"]`` (K tensors (B, T, d), from a ``Transformer`` with
    ``output_hidden_states``) and ``features["attention_mask"]`` (B, T); writes ``features["sentence_embedding"]``
    (B, d) = pooler(per-state CLS vectors (B, K, d), per-state masked means (B, K, d)), as ``SentenceModel`` does.
    """

    config_keys = ["kind", "hidden_size", "n_states", "mlp"]

    def __init__(self, kind: str = "layer_attention", hidden_size: int = 384, n_states: int = 7, mlp: bool = True):
        super().__init__()
        self.kind, self.hidden_size, self.n_states, self.mlp = kind, int(hidden_size), int(n_states), bool(mlp)
        self.pooler = LayerPooler(kind=kind, hidden_size=self.hidden_size, n_states=self.n_states, mlp=self.mlp)

    @classmethod
    def from_pooler(cls, pooler: LayerPooler) -> "LayerPoolerModule":
        """A module holding a copy of ``pooler``'s settings and weights."""
        module = cls(**pooler.get_config_dict())
        module.pooler.load_state_dict(pooler.state_dict())
        return module

    def forward(self, features: dict) -> dict:
        states = features.get("all_layer_embeddings")
        if states is None:
            raise ValueError("LayerPoolerModule needs every hidden state: the folder's Transformer must be built with "
                             "config_kwargs={'output_hidden_states': True} (re-export with `layerwise export`)")
        cls, mean = pool_hidden_states(states, features["attention_mask"])
        features["sentence_embedding"] = self.pooler(cls, mean)
        return features

    def get_embedding_dimension(self) -> int:
        return self.hidden_size

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None, revision=None,
             local_files_only: bool = False, **kwargs) -> "LayerPoolerModule":
        hub = {"subfolder": subfolder, "token": token, "cache_folder": cache_folder, "revision": revision,
               "local_files_only": local_files_only}
        model = cls(**cls.load_config(model_name_or_path=model_name_or_path, **hub))
        return cls.load_torch_weights(model_name_or_path=model_name_or_path, model=model, **hub)
