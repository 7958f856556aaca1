"""Saving trained modules the same way everywhere: ``config.json`` + ``model.safetensors`` in one folder."""

from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["load_module_files", "save_module_files"]

CONFIG = "config.json"
WEIGHTS = "model.safetensors"


def save_module_files(folder: str | Path, config, module: torch.nn.Module) -> Path:
    """Write ``config`` (an object with ``save(path)``) and the module's state dict; the weights are renamed into place."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config.save(folder / CONFIG)
    tmp = folder / f".{WEIGHTS}.tmp"
    save_file({k: v.detach().contiguous() for k, v in module.state_dict().items()}, str(tmp))
    tmp.replace(folder / WEIGHTS)
    return folder


def load_module_files(folder: str | Path, what: str) -> tuple[Path, dict]:
    """The config path and the state dict saved by :func:`save_module_files`; a clear error when absent."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if not (folder / CONFIG).is_file() or not (folder / WEIGHTS).is_file():
        raise FileNotFoundError(f"{folder} holds no saved {what} ({CONFIG} + {WEIGHTS})")
    return folder / CONFIG, load_file(str(folder / WEIGHTS))
