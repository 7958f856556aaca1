"""Every hidden state through ONNX Runtime: an encoder exported to one graph whose outputs are already pooled.

The graph takes the tokenizer's ``input_ids`` and ``attention_mask`` (and ``token_type_ids`` where the model's
forward accepts them), each (B, T) int64 with B and T dynamic, and returns

* ``mean`` (B, K, d): the attention-masked mean of every hidden state 0..L (K = L + 1),
* ``cls`` (B, K, d): the first token of every hidden state,
* ``pooler`` (B, d): the model's pooler output, only where the model has a pooler,

computed by :func:`~layerwise.encoders.hidden_states.pool_hidden_states`, the pooling the torch encoder uses, so
the graph's output is K * d numbers a sentence instead of K * T * d.

A graph folder (:func:`export_layer_graph`) holds ``model.onnx`` (fp32), ``model-int8.onnx`` (the same graph with
its matrix products' weights dynamically quantized to int8, :mod:`~layerwise.encoders.onnx_int8`) and
``layer_graph.json`` (:class:`LayerGraphInfo`: inputs, outputs, K, d, exporter, versions and the int8 setting). It is written
atomically, and the export checks on its example batch that the graph gives the torch model's outputs and that
the source model's outputs did not change (the TorchScript exporter is given a deep copy: it was seen to alter
the model it exported). :class:`LayerGraphSession` runs one of the two graphs; :func:`cached_layer_graph` keeps
one folder per model identity under ``$LAYERWISE_HOME/onnx``. onnx and onnxruntime are optional
(``pip install 'layerwise[onnx]'``); :func:`require_onnx` names the extra before any work starts.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from layerwise.encoders.batching import length_sorted_batches
from layerwise.encoders.hidden_states import all_hidden_states, pool_hidden_states
from layerwise.encoders.onnx_int8 import INT8_QUANTIZATION, quantize_int8
from layerwise.encoders.openvino_runtime import INT8_DIR, INT8_XML, compile_graph, require_openvino
from layerwise.errors import UsageError
from layerwise.files import atomic_folder, recover_folder, remove_stale, write_atomic
from layerwise.keys import keyed_name
from layerwise.layers import LayerStack

logger = logging.getLogger(__name__)

__all__ = ["BACKENDS", "FP32_FILE", "INFO_FILE", "INSTALL_HINT", "INT8_FILE", "LayerGraphInfo", "LayerGraphSession",
           "cached_layer_graph", "check_backend", "ensure_int8", "export_layer_graph", "graph_inputs", "require_onnx"]

BACKENDS = ("torch", "onnx", "onnx-int8", "openvino")  # what LayerEncoder(backend=...) accepts
INSTALL_HINT = "pip install 'layerwise[onnx]'"
GRAPH_FORMAT_VERSION = 1  # of the folder's layout and the graph's outputs; a change re-exports every cached graph
FP32_FILE, INT8_FILE, INFO_FILE = "model.onnx", "model-int8.onnx", "layer_graph.json"
OPSET = 17  # the TorchScript exporter's scaled_dot_product_attention needs >= 14; 17 adds LayerNormalization
EXPORT_ATOL = 1e-4  # the export's self-check: graph vs torch on the example batch (fp32)
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def require_onnx(backend: str = "onnx"):
    """``onnxruntime`` (imported), or a one-line :class:`UsageError` naming the extra to install."""
    try:
        import onnx  # noqa: F401  (the exporter writes through it)
        import onnxruntime
    except ImportError:
        raise UsageError(f"backend {backend!r} needs onnx and onnxruntime, which are not installed: "
                         f"{INSTALL_HINT}") from None
    return onnxruntime


def check_backend(backend: str) -> str:
    """``backend`` if known (and, for an ONNX backend, runnable here); a one-line :class:`UsageError` otherwise."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if backend != "torch":
        require_onnx(backend)  # the export checks its graph with onnxruntime, whatever runs it after
    if backend == "openvino":
        require_openvino()
    return backend


@dataclass(frozen=True)
class LayerGraphInfo:
    """What a graph folder holds (``layer_graph.json``)."""

    inputs: tuple[str, ...]  # graph inputs, in order: input_ids, attention_mask[, token_type_ids]
    outputs: tuple[str, ...]  # mean, cls[, pooler]
    n_states: int  # K = L + 1 hidden states (0 = embedding output)
    hidden_size: int  # d
    has_pooler: bool
    model_type: str
    opset: int
    exporter: str  # "torchscript" (torch.onnx.export(dynamo=False))
    versions: dict  # torch, onnx, onnxruntime that wrote the folder
    source: dict  # what the caller said the model is (cached_layer_graph: its key); {} when not said
    format_version: int = GRAPH_FORMAT_VERSION
    # the setting model-int8.onnx was quantized under (onnx_int8.INT8_QUANTIZATION); None: no int8 graph, or one
    # written before the setting was recorded (8-bit weights), which ensure_int8 quantizes again
    int8: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "LayerGraphInfo":
        d = dict(d)
        d["inputs"], d["outputs"] = tuple(d["inputs"]), tuple(d["outputs"])
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def graph_inputs(model) -> tuple[str, ...]:
    """The tokenizer tensors ``model``'s forward takes: input_ids, attention_mask[, token_type_ids]."""
    params = inspect.signature(model.forward).parameters
    missing = [name for name in _INPUTS[:2] if name not in params]
    if missing:
        raise UsageError(f"{type(model).__name__}.forward takes no {', '.join(missing)}: only text encoders with "
                         "input_ids and attention_mask can be exported to a layer graph")
    return tuple(name for name in _INPUTS if name in params)


class _PooledStates(torch.nn.Module):
    """The exported function: tokenizer tensors -> every hidden state pooled (and the pooler output)."""

    def __init__(self, model, inputs: tuple[str, ...], has_pooler: bool):
        super().__init__()
        self.model, self.inputs, self.has_pooler = model, inputs, has_pooler

    def forward(self, *tensors: torch.Tensor):
        kwargs = dict(zip(self.inputs, tensors))
        out = self.model(**kwargs, output_hidden_states=True)
        cls, mean = pool_hidden_states(all_hidden_states(out), kwargs["attention_mask"])
        return (mean, cls, out.pooler_output) if self.has_pooler else (mean, cls)


def _example_batch(model, inputs: tuple[str, ...]) -> tuple[torch.Tensor, ...]:
    """Two rows of 7 tokens, the second padded after 4, with ids drawn (seeded) from the model's vocabulary."""
    cfg = model.config
    gen = torch.Generator().manual_seed(0)
    low = int(getattr(cfg, "pad_token_id", None) or 0) + 1
    ids = torch.randint(low, max(int(cfg.vocab_size), low + 1), (2, 7), generator=gen)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 4:] = 0
    ids[1, 4:] = int(getattr(cfg, "pad_token_id", None) or 0)
    tensors = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros(2, 7, dtype=torch.long)}
    return tuple(tensors[name] for name in inputs)


def _versions() -> dict:
    import onnx
    import onnxruntime

    return {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def _load_model(model):
    if isinstance(model, (str, os.PathLike)):
        from transformers import AutoModel

        return AutoModel.from_pretrained(model, local_files_only=True, dtype=torch.float32).eval()
    return model


def _run_torch(module: _PooledStates, example) -> list[np.ndarray]:
    """The wrapped model's outputs on ``example`` in eval mode; its training flag is put back after."""
    was_training = module.model.training
    device = next(module.model.parameters()).device
    module.model.eval()
    try:
        with torch.inference_mode():
            return [t.float().cpu().numpy() for t in module(*(x.to(device) for x in example))]
    finally:
        module.model.train(was_training)


def _max_diff(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def _export_checked(encoder, path: Path, *, inputs: tuple[str, ...], outputs: tuple[str, ...], opset: int) -> None:
    """Write the fp32 graph of a deep copy of ``encoder`` to ``path``, then check on the example batch that the
    graph gives the copy's outputs (within 1e-4) and that ``encoder``'s own outputs did not change (exactly)."""
    has_pooler = "pooler" in outputs
    source = _PooledStates(encoder, inputs, has_pooler)
    twin = _PooledStates(copy.deepcopy(encoder).float().cpu().eval(), inputs, has_pooler).eval()
    example = _example_batch(encoder, inputs)
    before = _run_torch(source, example)
    reference = _run_torch(twin, example)
    with torch.no_grad(), warnings.catch_warnings():
        # the tracer's notes on Python-constant branches (mask shapes, sdpa's causal flag) and advanced indexing:
        # the graph is checked against torch below, and the tests check other batch sizes and lengths
        warnings.simplefilter("ignore", category=torch.jit.TracerWarning)
        warnings.simplefilter("ignore", category=UserWarning)
        warnings.simplefilter("ignore", category=DeprecationWarning)  # the TorchScript exporter, chosen: see OPSET
        torch.onnx.export(twin, example, str(path), input_names=list(inputs), output_names=list(outputs),
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in inputs}, opset_version=opset,
                          dynamo=False)
    if _max_diff(before, _run_torch(source, example)) != 0.0:
        raise RuntimeError("exporting changed the source model's outputs; the export is discarded")
    got = LayerGraphSession.from_file(path, threads=1).run_tensors(example)
    if (diff := _max_diff(reference, got)) > EXPORT_ATOL:
        raise RuntimeError(f"the exported graph differs from the torch model by {diff:.2e} (> {EXPORT_ATOL}) on "
                           "the example batch; the export is discarded")


def export_layer_graph(model, dest: str | os.PathLike, *, quantize: bool = True, opset: int = OPSET,
                       source: dict | None = None) -> Path:
    """Export ``model`` (a Hugging Face encoder object or folder) to the graph folder ``dest``; returns ``dest``.

    Writes ``model.onnx``, with ``quantize`` ``model-int8.onnx``, and ``layer_graph.json``, all at once (a killed
    export leaves no partial folder). The model is exported in float32 from a deep copy and left as it was
    (weights, device, training flag); both are checked on an example batch (RuntimeError if the graph differs
    from torch by more than 1e-4 or the model's own outputs changed). An existing ``dest`` is replaced only if
    it is a graph folder. ``source``: JSON facts about the model recorded in ``layer_graph.json`` (e.g. its
    weights' sha256).
    """
    require_onnx()
    encoder = _load_model(model)
    inputs = graph_inputs(encoder)
    has_pooler = getattr(encoder, "pooler", None) is not None
    outputs = ("mean", "cls", "pooler") if has_pooler else ("mean", "cls")
    cfg = encoder.config
    dest = Path(dest)
    remove_stale(dest)
    with atomic_folder(dest, replaceable=lambda d: (d / INFO_FILE).is_file()) as tmp:
        _export_checked(encoder, tmp / FP32_FILE, inputs=inputs, outputs=outputs, opset=opset)
        if quantize:
            quantize_int8(tmp / FP32_FILE, tmp / INT8_FILE)
        info = LayerGraphInfo(inputs=inputs, outputs=outputs, n_states=int(cfg.num_hidden_layers) + 1,
                              hidden_size=int(cfg.hidden_size), has_pooler=has_pooler, model_type=cfg.model_type,
                              opset=opset, exporter="torchscript", versions=_versions(), source=dict(source or {}),
                              int8=dict(INT8_QUANTIZATION) if quantize else None)
        (tmp / INFO_FILE).write_text(json.dumps(info.to_dict(), indent=2) + "\n", encoding="utf-8")
    return dest


def cached_layer_graph(model, key: dict, *, root: str | os.PathLike) -> Path:
    """The graph folder of ``model`` under ``root``, named by ``key`` (the model's identity; the graph format and
    the package versions are added): exported on first use, reused after."""
    require_onnx()
    full = {**key, "graph_format": GRAPH_FORMAT_VERSION, "opset": OPSET, **_versions(), "int8": INT8_QUANTIZATION}
    dest = recover_folder(Path(root) / keyed_name("graph", full))
    if not (dest / INFO_FILE).is_file() or not (dest / INT8_FILE).is_file():
        logger.info("exporting the layer graph to %s", dest)
        export_layer_graph(model, dest, source=full)
    return dest


def ensure_int8(folder: str | os.PathLike) -> Path:
    """The graph folder ``folder`` with ``model-int8.onnx`` quantized under the current setting
    (:data:`~layerwise.encoders.onnx_int8.INT8_QUANTIZATION`): quantized again from ``model.onnx`` where it is
    missing or was written under another (the file and ``layer_graph.json`` each replaced atomically, the int8
    graph first). Returns the folder."""
    require_onnx()
    folder = Path(folder)
    info_path = folder / INFO_FILE
    if not info_path.is_file():
        raise UsageError(f"{folder} is not a layer graph folder (no {INFO_FILE}); write one with export_layer_graph")
    info = LayerGraphInfo.from_dict(json.loads(info_path.read_text(encoding="utf-8")))
    if info.int8 == INT8_QUANTIZATION and (folder / INT8_FILE).is_file():
        return folder
    logger.info("quantizing %s again: its int8 graph was written under %s", folder, info.int8)
    partial = folder / f".{INT8_FILE}.partial"
    quantize_int8(folder / FP32_FILE, partial)
    os.replace(partial, folder / INT8_FILE)
    write_atomic(info_path, (json.dumps({**info.to_dict(), "int8": dict(INT8_QUANTIZATION)}, indent=2) + "\n").encode())
    return folder


class LayerGraphSession:
    """One graph of a folder run on the CPU by onnxruntime or OpenVINO.

    Parameters
    ----------
    folder : path
        A folder written by :func:`export_layer_graph`.
    quantized : bool
        Run the int8 model: ``model-int8.onnx`` on onnxruntime, ``openvino-int8/model.xml`` (NNCF's, see
        :mod:`~layerwise.encoders.openvino_int8`) on OpenVINO.
    threads : int or None
        onnxruntime's intra-op threads (None: ``torch.get_num_threads()``, so torch and ONNX compare alike).
    runtime : {"onnxruntime", "openvino"}
        What runs the graph: onnxruntime, or OpenVINO (:mod:`~layerwise.encoders.openvino_runtime`).
    """

    def __init__(self, folder: str | os.PathLike, *, quantized: bool = False, threads: int | None = None,
                 runtime: str = "onnxruntime"):
        folder = Path(folder)
        info_path = folder / INFO_FILE
        if not info_path.is_file():
            raise UsageError(f"{folder} is not a layer graph folder (no {INFO_FILE}); write one with "
                             "export_layer_graph")
        self.info = LayerGraphInfo.from_dict(json.loads(info_path.read_text(encoding="utf-8")))
        if runtime not in ("onnxruntime", "openvino"):
            raise UsageError(f"unknown runtime {runtime!r}; valid: onnxruntime, openvino")
        if runtime == "openvino" and quantized:
            path = folder / INT8_DIR / INT8_XML
            if not path.is_file():
                raise UsageError(f"{path} is missing; write OpenVINO's int8 model first with "
                                 "layerwise.encoders.openvino_int8.quantize_openvino")
        else:
            path = folder / (INT8_FILE if quantized else FP32_FILE)
            if not path.is_file():
                raise UsageError(f"{path} is missing; export the folder again with quantize=True")
        self._open(path, threads, runtime)

    @classmethod
    def from_file(cls, path: Path, *, threads: int | None = None) -> "LayerGraphSession":
        """A session on one .onnx file, before its folder's info is written (the export's self-check)."""
        self = cls.__new__(cls)
        self.info = None
        self._open(path, threads, "onnxruntime")
        return self

    def _open(self, path: Path, threads: int | None, runtime: str) -> None:
        threads = int(threads or torch.get_num_threads())
        if runtime == "openvino":
            self._run, self._inputs = compile_graph(path, threads)
            return
        ort = require_onnx()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about unused initializers are not the user's to fix
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._inputs = tuple(i.name for i in session.get_inputs())
        self._run = lambda feed: session.run(None, feed)

    @property
    def input_names(self) -> tuple[str, ...]:
        return self._inputs

    def run(self, batch: Mapping[str, np.ndarray | torch.Tensor]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``mean`` (B, K, d), ``cls`` (B, K, d) and ``pooler`` (B, d) or None for one tokenized batch.

        ``batch`` holds (B, T) ``input_ids`` and ``attention_mask`` (tensors or arrays); a ``token_type_ids`` the
        graph takes but the batch lacks is zeros; tensors the graph does not take are ignored."""
        feed = {}
        for name in self._inputs:
            value = batch.get(name)
            if value is None and name == "token_type_ids":
                value = np.zeros_like(np.asarray(batch["input_ids"]))
            if value is None:
                raise UsageError(f"the batch has no {name!r}, which the layer graph takes")
            feed[name] = np.asarray(value.numpy() if isinstance(value, torch.Tensor) else value, dtype=np.int64)
        out = self._run(feed)
        return out[0], out[1], (out[2] if len(out) > 2 else None)

    def run_tensors(self, tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
        """Outputs for tensors given in the graph's input order."""
        mean, cls, pooler = self.run(dict(zip(self._inputs, tensors)))
        return [mean, cls] + ([] if pooler is None else [pooler])

    def encode(self, tokenizer, texts: Sequence[str], *, batch_size: int = 32, max_length: int = 256) -> LayerStack:
        """The layer stack of ``texts`` (length-sorted batches, order restored), as ``LayerEncoder.encode``."""
        texts = list(texts)
        n = len(texts)
        mean = cls = pooler = None
        for idx, enc in length_sorted_batches(tokenizer, texts, batch_size=batch_size, max_length=max_length):
            b_mean, b_cls, b_pooler = self.run(enc)
            if mean is None:
                mean = np.empty((n,) + b_mean.shape[1:], dtype=np.float32)
                cls = np.empty_like(mean)
                pooler = None if b_pooler is None else np.empty((n, b_pooler.shape[1]), dtype=np.float32)
            mean[idx], cls[idx] = b_mean, b_cls
            if pooler is not None:
                pooler[idx] = b_pooler
        if mean is None:
            raise ValueError("texts is empty: nothing to encode")
        return LayerStack(mean=mean, cls=cls, pooler=pooler)
