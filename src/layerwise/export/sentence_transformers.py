"""Write a Hugging Face encoder + pooling as a sentence-transformers folder, with built-in modules only.

The folder loads with ``SentenceTransformer(folder)`` (no ``trust_remote_code``) and with ``AutoModel`` (the encoder
at its root). It is written into a temporary sibling folder and renamed into place, so a crash leaves no half folder;
an existing folder is replaced only when asked and only if this tool wrote it (its ``layerwise_export.json``).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

__all__ = ["EXPORT_MARKER", "write_sentence_transformer"]

EXPORT_MARKER = "layerwise_export.json"
POOLING_MODES = ("mean", "cls", "max")


def write_sentence_transformer(model, tokenizer, folder: str | os.PathLike, *, pooling: str = "mean",
                               max_seq_length: int | None = None, provenance: dict | None = None,
                               overwrite: bool = False) -> Path:
    """Save ``model`` (a transformers encoder) and ``tokenizer`` as a sentence-transformers folder.

    ``pooling``: token pooling of the encoder's output (``mean`` masks padding). ``provenance`` (JSON) is written to
    ``layerwise_export.json`` beside the modules.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    if pooling not in POOLING_MODES:
        raise ValueError(f"unknown pooling {pooling!r}; valid: {', '.join(POOLING_MODES)}")
    dest = Path(folder)
    _check_destination(dest, overwrite)
    tmp = dest.parent / f".{dest.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir(parents=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        kwargs = {} if max_seq_length is None else {"max_seq_length": int(max_seq_length)}
        encoder = Transformer(str(tmp), **kwargs)
        st = SentenceTransformer(modules=[encoder, Pooling(int(model.config.hidden_size), pooling_mode=pooling)],
                                 device="cpu")
        st.save(str(tmp))
        (tmp / EXPORT_MARKER).write_text(json.dumps({"written_by": "layerwise", **(provenance or {})}, indent=2) + "\n")
        if dest.exists():
            shutil.rmtree(dest)  # only a folder this tool wrote (checked above)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _check_destination(dest: Path, overwrite: bool) -> None:
    if not dest.exists():
        return
    if not dest.is_dir():
        raise FileExistsError(f"{dest} is a file; give a folder path for the exported model")
    if not any(dest.iterdir()):
        dest.rmdir()  # an empty folder holds nothing to lose
        return
    if not (dest / EXPORT_MARKER).is_file():
        raise FileExistsError(f"{dest} exists and was not written by layerwise: choose another folder (nothing in "
                              "it is touched)")
    if not overwrite:
        raise FileExistsError(f"{dest} already holds an exported model: pass overwrite=True (--overwrite) to replace it")
