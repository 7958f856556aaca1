"""One save format for every trained module: ``config.json`` + ``model.safetensors`` in one folder.

Shaped like sentence-transformers' ``Module``: a subclass lists its constructor's keyword settings in
``config_keys``; :meth:`Module.save` writes them (``get_config_dict()``) and the state dict, and
:meth:`Module.load` rebuilds ``cls(**config)`` and loads the weights. The folder is written into a temporary
sibling and renamed into place, so a killed save leaves the previous one intact. No pickle anywhere.

Loading validates the folder before anything is allocated: the module is first built on the ``meta`` device (no
memory) from its config, and the shapes it needs are compared with the shapes the safetensors header lists; a
truncated file, a missing, extra or wrong-shaped tensor, or a config whose sizes the weights do not have (a
``hidden_size`` of 10**7, say) is refused in one line (:class:`~layerwise.errors.ModelFilesError`). Weights holding
NaN or inf are refused after loading (:func:`layerwise.finite.check_finite_weights`).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from layerwise.errors import ModelFilesError
from layerwise.files import atomic_folder
from layerwise.finite import check_finite_weights

__all__ = ["CONFIG_NAME", "WEIGHTS_NAME", "Module", "is_module_folder", "load_state_file", "save_state_file",
           "state_file_shapes"]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"


def is_module_folder(folder: str | Path) -> bool:
    """True when ``folder`` holds a saved module (``config.json`` and ``model.safetensors``)."""
    folder = Path(folder)
    return (folder / CONFIG_NAME).is_file() and (folder / WEIGHTS_NAME).is_file()


def save_state_file(tensors: dict[str, torch.Tensor], path: str | Path) -> Path:
    """Write tensors with safetensors (detached, contiguous, on the CPU)."""
    import safetensors.torch

    try:
        safetensors.torch.save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(path))
    except safetensors.SafetensorError as exc:  # a full disk, a file-size limit: safetensors' own error type
        raise OSError(f"writing {path} failed ({' '.join(str(exc).split())}); free some space or write to another "
                      "disk, then run the same command again") from None
    return Path(path)


def state_file_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor in a safetensors file, from its header (no tensor is read); a file that is not
    whole safetensors (truncated, damaged) raises :class:`~layerwise.errors.ModelFilesError`."""
    import safetensors

    path = Path(path)
    try:
        with safetensors.safe_open(str(path), framework="pt") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types, OSError and others
        raise ModelFilesError(f"{path} cannot be read as safetensors ({type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:160]}); the file is damaged or truncated: save or copy "
                              "the module again") from None
    return shapes


def load_state_file(path: str | Path) -> dict[str, torch.Tensor]:
    """Tensors written by :func:`save_state_file` (safetensors: no code runs while loading)."""
    import safetensors.torch

    return safetensors.torch.load_file(str(path))


class Module(nn.Module):
    """Base of the trainable modules. Subclasses set ``config_keys`` (their constructor's keyword settings)."""

    config_keys: tuple[str, ...] = ()
    # keys a saved config may lack (settings added later, whose constructor default is the earlier behaviour)
    optional_config_keys: tuple[str, ...] = ()

    def get_config_dict(self) -> dict:
        """The constructor settings, JSON-serialisable: ``type(self)(**self.get_config_dict())`` rebuilds the module."""
        return {key: getattr(self, key) for key in self.config_keys}

    def save(self, folder: str | Path) -> Path:
        """Write ``config.json`` + ``model.safetensors`` into ``folder`` atomically (replaces a saved module only)."""
        folder = Path(folder)
        with atomic_folder(folder, replaceable=is_module_folder) as tmp:
            (tmp / CONFIG_NAME).write_text(json.dumps(self.get_config_dict(), indent=2) + "\n")
            save_state_file(self.state_dict(), tmp / WEIGHTS_NAME)
        return folder

    @classmethod
    def read_config(cls, folder: str | Path) -> dict:
        """The saved settings, checked against ``config_keys``; a one-line error names unknown or missing keys."""
        folder = Path(folder)
        if not is_module_folder(folder):
            raise FileNotFoundError(f"{folder} holds no saved {cls.__name__} ({CONFIG_NAME} + {WEIGHTS_NAME})")
        config = json.loads((folder / CONFIG_NAME).read_text())
        if not isinstance(config, dict):
            raise ValueError(f"{folder / CONFIG_NAME} must hold a JSON object of {cls.__name__} settings")
        unknown = sorted(set(config) - set(cls.config_keys))
        missing = sorted(set(cls.config_keys) - set(config) - set(cls.optional_config_keys))
        if unknown or missing:
            raise ValueError(
                f"{folder / CONFIG_NAME} does not fit {cls.__name__}: unknown keys {unknown}, missing keys {missing}; "
                f"expected {list(cls.config_keys)}"
            )
        return config

    def load_weights(self, folder: str | Path) -> "Module":
        """Load ``model.safetensors`` from ``folder`` into this module (every key and shape must match, and every
        value be finite); a mismatch is one line naming the file and the first difference."""
        path = Path(folder) / WEIGHTS_NAME
        _check_shapes(path, {k: tuple(v.shape) for k, v in self.state_dict().items()}, type(self).__name__)
        self.load_state_dict(load_state_file(path))
        check_finite_weights(self, f"{type(self).__name__} in {folder}")
        return self

    @classmethod
    def load(cls, folder: str | Path) -> "Module":
        """``cls(**config)`` with the saved weights, in eval mode; the config is checked against the weights'
        shapes on the meta device before any memory is allocated."""
        config = cls.read_config(folder)
        try:
            with torch.device("meta"):
                probe = cls(**config)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ModelFilesError(f"{Path(folder) / CONFIG_NAME} does not describe a {cls.__name__} "
                                  f"({' '.join(str(exc).split())[:200]}); restore the folder") from None
        _check_shapes(Path(folder) / WEIGHTS_NAME, {k: tuple(v.shape) for k, v in probe.state_dict().items()},
                      cls.__name__)
        del probe
        return cls(**config).load_weights(folder).eval()


def _check_shapes(path: Path, expected: dict[str, tuple[int, ...]], what: str) -> None:
    """Refuse a weights file whose tensors are not exactly ``expected`` (name -> shape)."""
    found = state_file_shapes(path)
    if found == expected:
        return
    missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    wrong = [k for k in sorted(set(expected) & set(found)) if expected[k] != found[k]]
    if wrong:
        k = wrong[0]
        detail = f"{k} has shape {list(found[k])} where the config needs {list(expected[k])}"
    else:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {extra[:3]}"
    raise ModelFilesError(f"{path} does not fit its {CONFIG_NAME} ({what}: {detail}); the config or the weights "
                          "were changed or damaged: save or copy the module again")
