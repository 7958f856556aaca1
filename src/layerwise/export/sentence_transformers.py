"""Write a Hugging Face encoder + pooling as a sentence-transformers folder.

The folder loads with ``SentenceTransformer(folder)`` and with ``AutoModel`` (the encoder at its root). With
:func:`write_sentence_transformer` it holds built-in modules only (no ``trust_remote_code``); :func:`save_st_folder`
takes any modules after the encoder (a module class of the installed ``layerwise`` package, named by import path and
loaded with :func:`layerwise.export.no_code.load_sentence_transformer`; no ``.py`` file, every ``auto_map`` stripped:
no folder code ever runs). The folder is
written into a temporary sibling folder and renamed into place (:func:`layerwise.files.atomic_folder`), so a crash
leaves no half folder; an existing folder is replaced only when asked and only if this tool wrote it (its
``layerwise_export.json``, which lists every file the export wrote under ``"files"``). A replacement replaces those
files only: any other file found in the folder (a user's notes, say) is carried over into the new folder unchanged,
and one whose name the new export would take is refused before the folder is touched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from layerwise.encoders.folder_code import strip_auto_map
from layerwise.files import atomic_folder

__all__ = ["EXPORT_MARKER", "POOLING_MODES", "check_destination", "export_files", "pooling_modules", "save_st_folder",
           "transformer_options", "write_sentence_transformer"]

EXPORT_MARKER = "layerwise_export.json"
POOLING_MODES = ("mean", "cls", "max")


def write_sentence_transformer(model, tokenizer, folder: str | os.PathLike, *, pooling: str = "mean",
                               layers: tuple[int, ...] | None = None, max_seq_length: int | None = None,
                               provenance: dict | None = None, overwrite: bool = False) -> Path:
    """Save ``model`` (a transformers encoder) and ``tokenizer`` as a sentence-transformers folder.

    ``pooling``: token pooling (``mean`` masks padding). ``layers``: hidden states averaged before pooling (None or
    the last one alone: the encoder's output); a subset uses ``WeightedLayerPooling`` with 0/1 weights over every
    hidden state, a built-in module. ``provenance`` (JSON) is written to ``layerwise_export.json``.
    """
    modules, all_states = pooling_modules(model.config, pooling=pooling, layers=layers)
    return save_st_folder(model, tokenizer, folder, modules,
                          transformer_kwargs=transformer_options(max_seq_length, all_hidden_states=all_states),
                          provenance=provenance, overwrite=overwrite)


def transformer_options(max_seq_length: int | None = None, *, all_hidden_states: bool = False) -> dict:
    """Keywords of the folder's ``Transformer`` module: its ``max_seq_length`` (None: the model's own limit) and
    ``output_hidden_states`` (every hidden state in ``features["all_layer_embeddings"]``, saved in ``config.json``)."""
    kwargs: dict = {} if max_seq_length is None else {"max_seq_length": int(max_seq_length)}
    if all_hidden_states:
        kwargs["config_kwargs"] = {"output_hidden_states": True}
    return kwargs


def pooling_modules(config, *, pooling: str = "mean", layers: tuple[int, ...] | None = None) -> tuple[list, bool]:
    """The built-in modules after the encoder for a token pooling of a layer subset, and whether they read every
    hidden state (``all_layer_embeddings``). ``config``: the encoder's transformers config."""
    from sentence_transformers.sentence_transformer.modules import Pooling, WeightedLayerPooling

    if pooling not in POOLING_MODES:
        raise ValueError(f"unknown pooling {pooling!r}; valid: {', '.join(POOLING_MODES)}")
    top, dim = int(config.num_hidden_layers), int(config.hidden_size)
    subset = layers is not None and tuple(layers) != (top,)
    modules = []
    if subset:
        # a Parameter, not a plain tensor: only a Parameter is in the state dict that is saved and loaded back
        weights = torch.nn.Parameter(torch.tensor([1.0 if k in set(layers) else 0.0 for k in range(top + 1)]),
                                     requires_grad=False)
        modules.append(WeightedLayerPooling(dim, num_hidden_layers=top, layer_start=0, layer_weights=weights))
    modules.append(Pooling(dim, pooling_mode=pooling))
    return modules, subset


def save_st_folder(model, tokenizer, folder: str | os.PathLike, modules: list, *, transformer_kwargs: dict | None = None,
                   provenance: dict | None = None, readme: str | None = None, overwrite: bool = False) -> Path:
    """Save ``model`` + ``tokenizer`` as the folder's ``Transformer`` module followed by ``modules``.

    ``transformer_kwargs``: see :func:`transformer_options`. ``readme``: the folder's ``README.md`` (model card).
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Transformer

    dest = Path(folder)
    check_destination(dest, overwrite)
    with atomic_folder(dest, replaceable=lambda p: (p / EXPORT_MARKER).is_file()) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        transformer = Transformer(str(tmp), **(transformer_kwargs or {}))
        # sentence-transformers writes its own generated card (encoding sample texts) unless we bring one
        SentenceTransformer(modules=[transformer, *modules], device="cpu").save(
            str(tmp), create_model_card=readme is None)
        strip_auto_map(tmp)  # a source's auto_map would make transformers import a file of the folder
        if readme is not None:
            (tmp / "README.md").write_text(readme)
        written = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if not p.is_dir())
        _carry_over_user_files(dest, tmp, [*written, EXPORT_MARKER])
        manifest = {"written_by": "layerwise", **(provenance or {}), "files": [*written, EXPORT_MARKER]}
        (tmp / EXPORT_MARKER).write_text(json.dumps(manifest, indent=2) + "\n")
    return dest


def export_files(dest: str | os.PathLike) -> set[str] | None:
    """The files (relative posix paths) an earlier export wrote into ``dest``, from its manifest; None when ``dest``
    holds no manifest with a file list (not an export of this version: nothing in it is known to be ours)."""
    marker = Path(dest) / EXPORT_MARKER
    try:
        files = json.loads(marker.read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return set(files)


def _carry_over_user_files(dest: Path, tmp: Path, written: list[str]) -> None:
    """Copy into ``tmp`` every file of ``dest`` that the earlier export did not write (the user's), so the rename
    that replaces ``dest`` keeps them; refuse one whose name the new export takes."""
    if not dest.is_dir():
        return
    ours = export_files(dest) or set()
    for path in sorted(dest.rglob("*")):
        rel = path.relative_to(dest).as_posix()
        if path.is_dir() and not path.is_symlink() or rel in ours:
            continue
        if rel in written:
            raise FileExistsError(f"{path} was not written by layerwise and the new export writes a file of that "
                                  "name: move it away and export again (nothing was changed)")
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, tmp / rel, follow_symlinks=False)


def check_destination(dest: str | os.PathLike, overwrite: bool) -> None:
    """Refuse, before any work, a destination that is a file, holds files this tool did not write, or holds an
    export that ``overwrite`` does not allow to replace."""
    dest = Path(dest)
    if not dest.exists():
        return
    if not dest.is_dir():
        raise FileExistsError(f"{dest} is a file; give a folder path for the exported model")
    if not any(dest.iterdir()):
        return  # an empty folder holds nothing to lose
    if not (dest / EXPORT_MARKER).is_file():
        raise FileExistsError(f"{dest} exists and was not written by layerwise: choose another folder (nothing in "
                              "it is touched)")
    if overwrite and export_files(dest) is None:
        raise FileExistsError(f"{dest}/{EXPORT_MARKER} lists no files (an export of an older layerwise): which files "
                              "in it are the export's is unknown, so nothing is replaced; remove the folder yourself or "
                              "choose another")
    if not overwrite:
        raise FileExistsError(f"{dest} already holds an exported model: pass overwrite=True (--overwrite) to replace it")
