"""No folder's code ever runs: check, strip and load sentence-transformers folders without ``trust_remote_code``.

A folder can name code in two ways: an ``auto_map`` in a JSON config (``config.json``, ``tokenizer_config.json``, a
module's config) makes transformers import a ``.py`` file beside it, and a ``modules.json`` ``type`` outside
``sentence_transformers`` makes sentence-transformers import that class (from a file in the folder first, when
``trust_remote_code=True``). layerwise writes neither: its trained modules (the layer-attention pooler, Latte-Mix)
are classes of the installed ``layerwise`` package named in ``modules.json`` by import path, and an export holds
no ``.py`` file.

sentence-transformers 6 imports any class outside its own package only with ``trust_remote_code=True``, which
would also run a ``.py`` file someone placed in the folder. :func:`load_sentence_transformer` loads such a folder
with ``trust_remote_code=False``: it refuses a folder that names code (:func:`layerwise.encoders.folder_code.check_no_code`), then resolves each
``layerwise.*`` type to the installed class itself (sentence-transformers' ``module_classes`` hook, the one its
trainer uses to reload a model it has in memory) and every other type as sentence-transformers always does.
Nothing from the folder is imported or executed. With sentence-transformers 5 and older, which import an installed
class for a local folder without the flag, it is a plain ``SentenceTransformer(folder)``.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from layerwise.encoders.folder_code import check_no_code, read_small_json
from layerwise.errors import UsageError

__all__ = ["layerwise_module_class", "load_sentence_transformer"]

def layerwise_module_class(type_name: str) -> type:
    """The installed layerwise class a ``modules.json`` type names (``layerwise.<module>.<Class>``), or a
    :class:`UsageError`: only sentence-transformers module classes of the installed ``layerwise`` package qualify."""
    from sentence_transformers.base.modules.module import Module as STModule

    module_path, _, class_name = type_name.rpartition(".")
    if not type_name.startswith("layerwise.") or not class_name:
        raise UsageError(f"module type {type_name!r} is not a layerwise class (layerwise.<module>.<Class>)")
    try:
        cls = getattr(importlib.import_module(module_path), class_name)
    except (ImportError, AttributeError):
        raise UsageError(f"module type {type_name!r} is not in this layerwise installation: export the model again "
                         "with this version, or install the layerwise version that wrote it") from None
    if not (isinstance(cls, type) and issubclass(cls, STModule) and cls.__module__.startswith("layerwise.")):
        raise UsageError(f"module type {type_name!r} is not a sentence-transformers module class of layerwise")
    return cls


def load_sentence_transformer(folder: str | os.PathLike, **kwargs):
    """``SentenceTransformer(folder, **kwargs)`` for an exported folder, with ``trust_remote_code=False``.

    Refuses a folder that names code (:func:`check_no_code`); resolves its ``layerwise.*`` module types to the
    installed classes (see the module docstring). ``kwargs`` go to ``SentenceTransformer`` (``device``, ...).
    """
    from sentence_transformers import SentenceTransformer

    if kwargs.pop("trust_remote_code", False):
        raise UsageError("trust_remote_code=True is refused: layerwise never runs a folder's code; leave it out")
    folder = Path(folder)
    if not (folder / "modules.json").is_file():
        raise UsageError(f"folder={str(folder)!r} is not a sentence-transformers folder (no modules.json); pass a "
                         "folder written by save(...) or `layerwise export`")
    check_no_code(folder)
    entries = read_small_json(folder / "modules.json")
    if not isinstance(entries, list):
        raise UsageError(f"{folder / 'modules.json'} is not a list of modules; export the model again")
    classes = {e["type"]: layerwise_module_class(e["type"]) for e in entries if e["type"].startswith("layerwise.")}
    loader = getattr(SentenceTransformer, "_load_with_module_classes", None)
    if classes and loader is not None:  # sentence-transformers >= 6: installed classes need this hook
        return loader(str(folder), classes, trust_remote_code=False, **kwargs)
    return SentenceTransformer(str(folder), trust_remote_code=False, **kwargs)
