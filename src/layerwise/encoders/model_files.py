"""What a model folder holds: the hashes that identify its weights, tokenizer and config, and the checks that it
can give meaningful vectors (config, weights and tokenizer present, sizes the weight files can hold, no folder code),
made before anything is loaded. Where a model comes from (a built-in name or a folder) is :mod:`registry`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

from layerwise.encoders.folder_code import check_no_code
from layerwise.errors import ModelFilesError, ModelNotFoundError

__all__ = ["TOKENIZER_FILES", "VOCABULARY_FILES", "WEIGHT_PATTERNS", "check_config_fits_weights", "check_model_folder",
           "config_sha256", "declared_training_data", "files_sha256", "folder_sha256", "tokenizer_sha256",
           "weights_sha256"]


def weights_sha256(path: str | os.PathLike) -> str:
    """sha256 over the model's weight files (``*.safetensors``, else ``*.bin``), in name order.

    For a single ``model.safetensors`` this is that file's own sha256, the upstream hash.
    """
    folder = Path(path)
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    if not files:
        raise ModelNotFoundError(f"no weight files (*.safetensors or *.bin) in {folder}")
    h = hashlib.sha256()
    for f in files:
        _hash_file(h, f)
    return h.hexdigest()


def _hash_file(h, path: Path) -> None:
    """Feed the bytes of ``path`` into ``h`` in 4 MiB blocks (memory stays flat for any size)."""
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.txt", "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model", "spm.model")


def files_sha256(folder: str | os.PathLike, names) -> str | None:
    """sha256 over the named files that exist in ``folder`` (name, size and bytes of each, in name order);
    ``None`` when none exists."""
    folder = Path(folder)
    present = sorted(n for n in names if (folder / n).is_file())
    if not present:
        return None
    h = hashlib.sha256()
    for name in present:
        h.update(f"{name}\0{(folder / name).stat().st_size}\0".encode())
        _hash_file(h, folder / name)
    return h.hexdigest()


def folder_sha256(folder: str | os.PathLike) -> str:
    """sha256 over every file below ``folder`` (:func:`files_sha256` of their relative paths): a folder model's
    identity, e.g. an exported sentence-transformers folder (weights, config, tokenizer, modules, in subfolders too).

    Hidden entries (a name starting with ``.``, and all below it) are left out: they hold tool state (``.git``, a
    hub ``.cache``, an encode work folder written inside the model folder), not the model.
    """
    folder = Path(folder)
    names = [p.relative_to(folder).as_posix() for p in folder.rglob("*")
             if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)]
    if not names:
        raise ModelNotFoundError(f"{folder} holds no files; pass a model folder")
    return files_sha256(folder, names)


def tokenizer_sha256(path: str | os.PathLike) -> str | None:
    """sha256 over the tokenizer files of a model folder (:data:`TOKENIZER_FILES`); ``None`` when it has none."""
    return files_sha256(path, TOKENIZER_FILES)


def config_sha256(path: str | os.PathLike) -> str | None:
    """sha256 of the folder's ``config.json``; ``None`` when absent."""
    return files_sha256(path, ("config.json",))


#: Files that define a tokenizer's vocabulary; a folder needs at least one (tokenizer_config.json alone does not).
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model", "spm.model")
WEIGHT_PATTERNS = ("*.safetensors", "*.bin")


def declared_training_data(path: str | os.PathLike) -> list[str]:
    """The training files a sentence-transformers folder declares in its ``data_config.json`` (``[{"name": ...}]``,
    as the 1B-pair models ship it), in file order; [] when there is none or it is not that list (nothing is inferred)."""
    file = Path(path) / "data_config.json"
    try:
        entries = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(entries, list):
        return []
    return [e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)]


def check_model_folder(path: str | os.PathLike) -> None:
    """Refuse a model folder that cannot give meaningful vectors: invalid ``config.json``, no weights, no tokenizer.

    Without tokenizer files transformers would build a tiny default vocabulary in which every word is
    ``[UNK]``, and every score would be noise; that is refused here, before anything is loaded. A folder that names
    code (an ``auto_map``, a foreign ``modules.json`` type, a ``.py`` file) is refused too: layerwise never runs a
    folder's code (:func:`~layerwise.encoders.folder_code.check_no_code`).
    """
    folder = Path(path)
    check_no_code(folder, name="model")
    cfg = folder / "config.json"
    try:
        config = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFilesError(f"{cfg} cannot be read as JSON ({exc}); restore the model's config.json") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise ModelFilesError(f"{cfg} has no \"model_type\": it is not a Hugging Face model config; restore it")
    if not any(f.is_file() for pattern in WEIGHT_PATTERNS for f in folder.glob(pattern)):
        raise ModelFilesError(
            f"{folder} has a config but no weight files: expected model.safetensors (or pytorch_model.bin)")
    if not any((folder / name).is_file() for name in VOCABULARY_FILES):
        raise ModelFilesError(
            f"{folder} has no tokenizer files: expected one of {', '.join(VOCABULARY_FILES)} "
            "(copy them from the model's source; without them every word would be [UNK])")
    check_config_fits_weights(folder, config)


_SIZE_KEYS = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size",
              "max_position_embeddings")


def check_config_fits_weights(folder: str | os.PathLike, config: dict) -> None:
    """Refuse a config whose sizes the weight files cannot hold, before transformers allocates anything.

    Every size must be a positive integer, and the attention matrices alone of ``num_hidden_layers`` layers of
    ``hidden_size`` (4 x hidden_size**2 numbers each, a bound no real checkpoint is under) must fit in the numbers
    the weight files hold (counted from the safetensors headers, no tensor read; a ``.bin`` file counts one number
    per byte). ``num_hidden_layers: 100000`` or ``hidden_size: 10**7`` in a model of a few MB would otherwise
    allocate gigabytes, or terabytes, of random weights. A weight file whose header cannot be read is left to the
    loader, which reports it as damaged.
    """
    folder = Path(folder)
    for key in _SIZE_KEYS:
        value = config.get(key)
        least = 0 if key == "num_hidden_layers" else 1  # 0 layers: a model truncated to its embeddings (tmft L0)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise ModelFilesError(f"{folder / 'config.json'}: {key} = {value!r} is not an integer of at least {least}; "
                                  "restore the model's config.json")
    layers, hidden = config.get("num_hidden_layers"), config.get("hidden_size")
    if layers is None or hidden is None:
        return
    held = 0
    for f in (f for pattern in WEIGHT_PATTERNS for f in sorted(folder.glob(pattern)) if f.is_file()):
        count = _safetensors_numbers(f) if f.suffix == ".safetensors" else f.stat().st_size
        if count is None:
            return  # a damaged file: the loader says so, naming it
        held += count
    needed = 4 * layers * hidden * hidden
    if needed > held:
        raise ModelFilesError(
            f"{folder / 'config.json'} asks for {layers} layers of hidden size {hidden} (at least {needed:,} weights) "
            f"but the weight files hold {held:,}: the config does not belong to these weights; restore the model's "
            "config.json")


def _safetensors_numbers(path: Path) -> int | None:
    """How many numbers a safetensors file holds, from its header alone; None when the header cannot be read."""
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= min(path.stat().st_size - 8, 100_000_000):
                return None
            header = json.loads(f.read(size))
        return sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
