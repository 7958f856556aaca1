"""One save format for every trained module: ``config.json`` + ``model.safetensors`` in one folder.

Shaped like sentence-transformers' ``Module``: a subclass lists its constructor's keyword settings in
``config_keys``; :meth:`Module.save` writes them (``get_config_dict()``) and the state dict, and
:meth:`Module.load` rebuilds ``cls(**config)`` and loads the weights. The folder is written into a temporary
sibling and renamed into place, so a killed save leaves the previous one intact. No pickle anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from layerwise.files import atomic_folder

__all__ = ["CONFIG_NAME", "WEIGHTS_NAME", "Module", "is_module_folder", "load_state_file", "save_state_file"]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"


def is_module_folder(folder: str | Path) -> bool:
    """True when ``folder`` holds a saved module (``config.json`` and ``model.safetensors``)."""
    folder = Path(folder)
    return (folder / CONFIG_NAME).is_file() and (folder / WEIGHTS_NAME).is_file()


def save_state_file(tensors: dict[str, torch.Tensor], path: str | Path) -> Path:
    """Write tensors with safetensors (detached, contiguous, on the CPU)."""
    import safetensors.torch

    safetensors.torch.save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(path))
    return Path(path)


def load_state_file(path: str | Path) -> dict[str, torch.Tensor]:
    """Tensors written by :func:`save_state_file` (safetensors: no code runs while loading)."""
    import safetensors.torch

    return safetensors.torch.load_file(str(path))


class Module(nn.Module):
    """Base of the trainable modules. Subclasses set ``config_keys`` (their constructor's keyword settings)."""

    config_keys: tuple[str, ...] = ()

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
        missing = sorted(set(cls.config_keys) - set(config))
        if unknown or missing:
            raise ValueError(
                f"{folder / CONFIG_NAME} does not fit {cls.__name__}: unknown keys {unknown}, missing keys {missing}; "
                f"expected {list(cls.config_keys)}"
            )
        return config

    def load_weights(self, folder: str | Path) -> "Module":
        """Load ``model.safetensors`` from ``folder`` into this module (strict: every key must match)."""
        state = load_state_file(Path(folder) / WEIGHTS_NAME)
        self.load_state_dict(state)
        return self

    @classmethod
    def load(cls, folder: str | Path) -> "Module":
        """``cls(**config)`` with the saved weights, in eval mode."""
        module = cls(**cls.read_config(folder))
        return module.load_weights(folder).eval()
