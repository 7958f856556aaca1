"""Encoder -> layer stack: one forward pass per batch gives every hidden state's pooled vectors."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from layerwise._progress import progress
from layerwise.cache import LayerCache
from layerwise.encoders.batching import length_sorted_batches
from layerwise.encoders.hidden_states import all_hidden_states, pool_hidden_states
from layerwise.encoders.model_files import config_sha256, tokenizer_sha256, weights_sha256
from layerwise.encoders.onnx_backend import LayerGraphSession, cached_layer_graph, check_backend
from layerwise.encoders.onnx_int8 import INT8_QUANTIZATION
from layerwise.encoders.registry import DEFAULT_MODEL, ModelFilesError, ResolvedModel, layerwise_home, resolve_model
from layerwise.encoders.tokens import TokenStack
from layerwise.errors import UsageError
from layerwise.finite import check_finite_weights
from layerwise.layers import LayerStack, validate_layers

logger = logging.getLogger(__name__)

__all__ = ["DTYPES", "LayerEncoder", "ModelIdentity"]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class ModelIdentity:
    """Everything that identifies the model's outputs; recorded in every results file and cache key."""

    name: str  # as asked for: built-in name or folder
    hf_id: str | None  # upstream id for built-in models
    path: str  # the local folder loaded
    weights_sha256: str  # sha256 over the weight files
    tokenizer_sha256: str | None  # sha256 over the tokenizer files (None: the folder has none)
    config_sha256: str | None  # sha256 of config.json
    model_type: str  # e.g. "bert", "mpnet"
    n_layers: int  # L; hidden states are 0..L
    hidden_size: int
    has_pooler: bool  # the model returns a pooler output
    pooler_trained: bool  # the checkpoint holds the pooler's weights (not randomly initialised)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelIdentity":
        """Back from :meth:`to_dict`; records written before the tokenizer and config hashes existed give None."""
        return cls(**{"tokenizer_sha256": None, "config_sha256": None,
                      **{k: v for k, v in d.items() if k in cls.__dataclass_fields__}})


@contextmanager
def _transformers_bars(show: bool):
    """Let transformers show its weight-loading bar only when we show ours; restore its setting after."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if not show and was:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if not show and was:
            hf_logging.enable_progress_bar()


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not one string: wrap it as [text]")
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty: nothing to encode")
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"texts[{bad}] is {type(texts[bad]).__name__}, expected str")
    return texts


def _load(path: Path, dtype: str, *, show: bool):
    """Tokenizer, model and the checkpoint's missing keys; unreadable files become one clear error."""
    from safetensors import SafetensorError
    from transformers import AutoModel, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        with _transformers_bars(show):
            model, info = AutoModel.from_pretrained(
                path, local_files_only=True, output_loading_info=True, dtype=DTYPES[dtype]
            )
    except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
        reason = " ".join(str(exc).split())[:300]
        raise ModelFilesError(
            f"cannot load the model in {path} ({type(exc).__name__}: {reason}); its config, tokenizer or weight "
            "files are damaged or incomplete: copy them again from the model's source"
        ) from exc
    return tokenizer, model, set(info.get("missing_keys", []))


def _cap_max_length(max_length: int, model, name: str) -> int:
    """``max_length`` capped at the positions the model has: ``max_position_embeddings`` minus the offset of
    its position ids (RoBERTa/MPNet count from ``padding_idx + 1``); a cap is logged as a warning."""
    cfg = model.config
    positions = getattr(cfg, "max_position_embeddings", None)
    if positions is None:
        return max_length
    padding_idx = getattr(getattr(model, "embeddings", None), "padding_idx", None)
    usable = int(positions) - (int(padding_idx) + 1 if padding_idx is not None else 0)
    if max_length > usable:
        logger.warning("max_length %d is more than %s's %d positions: texts are cut at %d tokens",
                       max_length, name, usable, usable)
        return usable
    return max_length


def _check_settings(*, max_length: int, batch_size: int, dtype: str, device: str, backend: str) -> None:
    """The encoder's settings, checked before the model loads (an ONNX backend: onnxruntime installed)."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
    check_backend(backend)
    if backend != "torch" and (dtype != "float32" or torch.device(device).type != "cpu"):
        raise UsageError(f"backend {backend!r} runs the float32 graph on the CPU through onnxruntime: pass "
                         f"device='cpu' and dtype='float32' (got {device!r}, {dtype!r})")
    if int(max_length) < 2:
        raise ValueError(f"max_length must be at least 2, got {max_length}")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")


class LayerEncoder:
    """Encode sentences into a :class:`~layerwise.layers.LayerStack` with every hidden state.

    Parameters
    ----------
    model : str or path
        A built-in name (``all-MiniLM-L6-v2``, ``all-mpnet-base-v2``) or a local Hugging Face folder.
    max_length : int
        Tokens per sentence after truncation; capped (with a warning) at the positions the model has.
    batch_size : int
        Sentences per forward pass (sentences are sorted by length first, order is restored after).
    device : str
        Torch device, e.g. ``"cpu"``.
    dtype : {"float32", "bfloat16", "float16"}
        Compute dtype of the model; outputs are stored as float32.
    cache_dir : path, None or False
        Layer-stack cache folder (default ``$LAYERWISE_HOME/cache``); ``False`` disables caching.
    show_progress : bool or None
        Progress bar; ``None`` shows it when this module's logger is at INFO or lower.
    backend : {"torch", "onnx", "onnx-int8", "openvino"}
        What computes :meth:`encode`: the torch model, or its layer graph (every hidden state pooled inside one
        ONNX graph, :mod:`~layerwise.encoders.onnx_backend`) through onnxruntime in float32 or with int8 weights,
        or through OpenVINO in float32 (``pip install 'layerwise[openvino]'``).
        The graph is exported once per model identity under ``$LAYERWISE_HOME/onnx``; ONNX backends need
        ``pip install 'layerwise[onnx]'``, ``device="cpu"`` and ``dtype="float32"``, and are part of the cache key.
        :meth:`encode_tokens` always runs the torch model.
    """

    def __init__(
        self,
        model: str | os.PathLike = DEFAULT_MODEL,
        *,
        max_length: int = 256,
        batch_size: int = 64,
        device: str = "cpu",
        dtype: str = "float32",
        cache_dir: str | os.PathLike | None | bool = None,
        show_progress: bool | None = None,
        backend: str = "torch",
    ):
        _check_settings(max_length=max_length, batch_size=batch_size, dtype=dtype, device=device, backend=backend)
        self.backend = backend
        self.resolved: ResolvedModel = resolve_model(model)
        self.batch_size = int(batch_size)
        self.device = torch.device(device)
        self.dtype = dtype
        self.show_progress = show_progress
        path = self.resolved.path
        self.tokenizer, self.model, missing = _load(path, dtype, show=self._show_progress())
        check_finite_weights(self.model, self.resolved.name)
        self.model.to(self.device).eval()
        self.max_length = _cap_max_length(int(max_length), self.model, self.resolved.name)
        n_special = self.tokenizer.num_special_tokens_to_add(pair=False)
        if self.max_length <= n_special:
            raise ValueError(f"max_length {max_length} leaves no token for text after {self.resolved.name}'s "
                             f"{n_special} special tokens, so every sentence would be the same; pass at least "
                             f"{n_special + 1}")
        has_pooler = getattr(self.model, "pooler", None) is not None
        pooler_trained = has_pooler and not any(k.startswith("pooler.") for k in missing)
        cfg = self.model.config
        self.identity = ModelIdentity(
            name=self.resolved.name,
            hf_id=self.resolved.hf_id,
            path=str(path),
            weights_sha256=weights_sha256(path),
            tokenizer_sha256=tokenizer_sha256(path),
            config_sha256=config_sha256(path),
            model_type=cfg.model_type,
            n_layers=int(cfg.num_hidden_layers),
            hidden_size=int(cfg.hidden_size),
            has_pooler=has_pooler,
            pooler_trained=pooler_trained,
        )
        if has_pooler and not pooler_trained:
            logger.warning("%s has a pooler layer but its checkpoint holds no pooler weights: its pooler output "
                           "comes from randomly initialised weights", self.resolved.name)
        self._graph = self._open_graph() if backend != "torch" else None
        self.cache = None
        if cache_dir is not False:
            root = Path(cache_dir) if cache_dir not in (None, True) else layerwise_home() / "cache"
            self.cache = LayerCache(root, key=self.cache_key())

    def _open_graph(self) -> LayerGraphSession:
        """The model's layer graph (exported on first use, one folder per weights and config) run by onnxruntime."""
        graph_key = {k: getattr(self.identity, k) for k in ("weights_sha256", "config_sha256", "model_type")}
        folder = cached_layer_graph(self.model, graph_key, root=layerwise_home() / "onnx")
        return LayerGraphSession(folder, quantized=self.backend == "onnx-int8",
                                 runtime="openvino" if self.backend == "openvino" else "onnxruntime")

    def _show_progress(self) -> bool:
        if self.show_progress is None:
            return logger.isEnabledFor(logging.INFO)
        return bool(self.show_progress)

    def pooler_head(self) -> tuple[np.ndarray, np.ndarray, str]:
        """The checkpoint's pooler head as arrays: (W (d, d), b (d,), activation), for ``pooling.head_pooling``.

        BERT-style poolers are ``tanh(W x + b)`` over the first token; LC + MLP feeds a layer combination through
        the same dense layer instead. Raises ValueError when the model has no pooler or its weights are untrained.
        """
        pooler = getattr(self.model, "pooler", None)
        dense = getattr(pooler, "dense", None)
        if dense is None:
            raise ValueError(f"{self.identity.name} has no pooler head (dense + tanh) to feed a combination through")
        if not self.identity.pooler_trained:
            raise ValueError(
                f"{self.identity.name}'s checkpoint holds no pooler weights: its head is randomly initialised, so "
                "LC + MLP would be meaningless"
            )
        w = dense.weight.detach().float().cpu().numpy()
        b = dense.bias.detach().float().cpu().numpy()
        return w, b, "tanh"

    def head_status(self) -> str:
        """One line for results files: whether LC + MLP can use this checkpoint's pooler head, and why not."""
        if not self.identity.has_pooler:
            return "absent: the model has no pooler head, LC + MLP not run"
        if not self.identity.pooler_trained:
            return "untrained: the checkpoint holds no pooler weights, LC + MLP not run"
        return "pooler head from pre-training (in the checkpoint)"

    @property
    def n_states(self) -> int:
        """L + 1 hidden states (0 = embedding output)."""
        return self.identity.n_layers + 1

    def cache_key(self) -> dict:
        """Every setting that changes the encoder's output."""
        ident = self.identity
        return {
            "weights_sha256": ident.weights_sha256,
            "model_type": ident.model_type,
            "n_layers": ident.n_layers,
            "hidden_size": ident.hidden_size,
            "tokenizer": type(self.tokenizer).__name__,
            "vocab_size": len(self.tokenizer),
            "tokenizer_sha256": ident.tokenizer_sha256,  # e.g. lowercasing switched off in tokenizer.json
            "config_sha256": ident.config_sha256,
            "max_length": self.max_length,
            "dtype": self.dtype,
            "pooler": ident.has_pooler,
            # the torch key stays as it was before backends existed, so its caches remain valid
            **({"backend": self.backend} if self.backend != "torch" else {}),
            **({"int8": INT8_QUANTIZATION} if self.backend == "onnx-int8" else {}),  # 7-bit weights, say
        }

    def encode(self, texts: Sequence[str]) -> LayerStack:
        """Layer stack for ``texts``: mean and CLS of shape (n, L+1, d), pooler (n, d) or None."""
        texts = _check_texts(texts)
        if self.cache is not None:
            return self.cache.get_or_compute(texts, self._encode_unique)
        uniq = list(dict.fromkeys(texts))
        stack = self._encode_unique(uniq)
        if len(uniq) == len(texts):
            return stack
        where = {t: i for i, t in enumerate(uniq)}
        return stack.take([where[t] for t in texts])

    def _batches(self, texts: list[str], *, special_tokens_mask: bool = False):
        """(indices, padded batch) in order of decreasing token length (:func:`length_sorted_batches`)."""
        return length_sorted_batches(self.tokenizer, texts, batch_size=self.batch_size, max_length=self.max_length,
                                     special_tokens_mask=special_tokens_mask)

    @torch.inference_mode()
    def encode_tokens(self, texts: Sequence[str], layers) -> TokenStack:
        """Token vectors of the chosen hidden states (not cached: they are large).

        Returns a :class:`~layerwise.encoders.tokens.TokenStack` with vectors of shape (total_tokens, len(layers), d),
        sentence ``i`` owning rows ``offsets[i]:offsets[i + 1]`` (padding removed, special tokens flagged).
        """
        texts = _check_texts(texts)
        layers = validate_layers(layers, self.n_states)
        n = len(texts)
        per_sentence: list = [None] * n
        with progress(total=n, desc="encoding tokens", unit="sent", disable=not self._show_progress()) as bar:
            for idx, enc in self._batches(texts, special_tokens_mask=True):
                special = enc.pop("special_tokens_mask")
                enc = enc.to(self.device)
                out = self.model(**enc, output_hidden_states=True)
                hs = torch.stack([all_hidden_states(out)[l] for l in layers], dim=2).float().cpu()  # (B, T, S, d)
                keep = enc["attention_mask"].bool().cpu()  # (B, T): drops padding on either side
                for j, i in enumerate(idx):
                    per_sentence[i] = (hs[j][keep[j]].numpy(), special[j][keep[j]].numpy().astype(bool))
                bar.update(len(idx))
        lengths = np.array([v.shape[0] for v, _ in per_sentence])
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        return TokenStack(
            vectors=np.concatenate([v for v, _ in per_sentence]),
            special=np.concatenate([m for _, m in per_sentence]),
            offsets=offsets,
            layers=layers,
        )

    def _encode_batch(self, enc) -> tuple:
        """``mean``, ``cls`` (B, K, d) and ``pooler`` (B, d) or None of one padded batch, by the chosen backend."""
        if self._graph is not None:
            return self._graph.run(enc)
        enc = enc.to(self.device)
        out = self.model(**enc, output_hidden_states=True)
        b_cls, b_mean = pool_hidden_states(all_hidden_states(out), enc["attention_mask"])
        pooler = getattr(out, "pooler_output", None)
        return (b_mean.float().cpu().numpy(), b_cls.float().cpu().numpy(),
                None if pooler is None else pooler.float().cpu().numpy())

    @torch.inference_mode()
    def _encode_unique(self, texts: list[str]) -> LayerStack:
        n = len(texts)
        K, d = self.n_states, self.identity.hidden_size
        mean = np.empty((n, K, d), dtype=np.float32)
        cls = np.empty((n, K, d), dtype=np.float32)
        pooler = np.empty((n, d), dtype=np.float32) if self.identity.has_pooler else None
        with progress(total=n, desc="encoding", unit="sent", disable=not self._show_progress()) as bar:
            for idx, enc in self._batches(texts):
                mean[idx], cls[idx], b_pooler = self._encode_batch(enc)
                if pooler is not None:
                    pooler[idx] = b_pooler
                bar.update(len(idx))
        return LayerStack(mean=mean, cls=cls, pooler=pooler)
