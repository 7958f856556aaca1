"""Checkpoints without pickle, the run fingerprint, and the output-folder rules.

A checkpoint folder (``OUTPUT/last``) holds the trained module in its own format (what ``task.save`` writes) and

    trainer_state.safetensors   optimizer tensors ("optimizer.<param>.<key>"), RNG states ("rng.torch",
                                "rng.cuda.<i>"; under DDP also "rng.torch.rank<r>" of every rank r > 0) and the
                                task's own tensors ("task.<name>": generators, orders)
    trainer_state.json          format version, step, best score, history, the schedule, the optimizer's
                                param-group settings and non-tensor state, and the run fingerprint

It is written into a temporary sibling and renamed into place (``layerwise.files.atomic_folder``), so a run killed
while writing keeps the previous checkpoint. Nothing here unpickles: safetensors and JSON only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from layerwise.errors import ModelFilesError
from layerwise.files import atomic_folder, recover_folder, remove_stale
from layerwise.modules.base import load_state_file, save_state_file
from layerwise.outputs import MANIFEST, OutputManifest
from layerwise.training.distributed import rank

logger = logging.getLogger(__name__)

__all__ = [
    "OWN_OUTPUTS",
    "TrainerState",
    "fingerprint_differences",
    "load_checkpoint",
    "prepare_output",
    "save_checkpoint",
    "tensors_sha256",
]

STATE_JSON = "trainer_state.json"
STATE_TENSORS = "trainer_state.safetensors"
FORMAT_VERSION = 1
OWN_OUTPUTS = ("last", "best", "train.json")  # what the tool writes in an output folder (and overwrite removes)


@dataclass
class TrainerState:
    """What a checkpoint records besides tensors: the step done, the best dev score, the history, the fingerprint."""

    step: int = 0
    best: float | None = None
    history: dict = field(default_factory=lambda: {"step": [], "loss": [], "dev": []})
    fingerprint: dict = field(default_factory=dict)


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over names, dtypes, shapes and bytes of ``tensors`` (e.g. a state dict), in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")  # 0-d: reshape first
    return h.hexdigest()


def fingerprint_differences(saved: dict, now: dict, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two fingerprints, e.g. ``["settings.lr", "data"]``."""
    out = []
    for key in sorted(set(saved) | set(now)):
        a, b = saved.get(key), now.get(key)
        name = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += fingerprint_differences(a, b, prefix=f"{name}.")
        elif a != b:
            out.append(name)
    return out


def prepare_output(output_dir, *, resume: bool, overwrite: bool) -> Path | None:
    """Check the output folder before any work: resume needs ``last/``; existing outputs need resume or overwrite.

    ``overwrite`` removes only what the tool wrote there: ``last/`` holding a checkpoint and ``best/`` beside it, ``train.json``
    when the folder's manifest lists it (:mod:`layerwise.outputs`), and their temporary folders; anything else of
    those names is refused, never removed. Returns the folder (None when ``output_dir`` is None).
    """
    if output_dir is None:
        if resume or overwrite:
            raise ValueError("resume and overwrite need an output_dir holding the checkpoints")
        return None
    out = Path(output_dir)
    if resume and overwrite:
        raise ValueError("pass either resume=True (continue) or overwrite=True (start again), not both")
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"output {out} is a file, not a folder; choose another output folder")
    for name in ("last", "best"):
        recover_folder(out / name)
    if resume:
        if not (out / "last" / STATE_JSON).is_file():
            raise FileNotFoundError(f"nothing to resume in {out}: no last/{STATE_JSON}; start without resume (--resume)")
        return out
    found = [name for name in OWN_OUTPUTS if os.path.lexists(out / name)]
    foreign = [name for name in found if not _own_output(out, name)]
    if foreign:
        raise FileExistsError(f"{out / foreign[0]} was not written by layerwise (not a checkpoint, or not listed in "
                              f"{MANIFEST}); it is never replaced or removed: move it away, or choose another output "
                              "folder")
    if found and not overwrite:
        raise FileExistsError(f"{out} already holds {', '.join(found)}: pass resume=True (--resume) to continue that "
                              "run or overwrite=True (--overwrite) to start again (only the tool's own outputs are removed)")
    for name in found:
        if (out / name).is_dir():
            shutil.rmtree(out / name)
        else:
            (out / name).unlink()
        logger.info("overwrite: removed %s", out / name)
    for name in ("last", "best"):
        remove_stale(out / name)
    return out


def _own_output(out: Path, name: str) -> bool:
    """``last``: a real folder holding a checkpoint's state; ``best`` (the task's own save format): beside such a
    ``last`` (one run writes both); a file: listed in the folder's manifest."""
    if name in ("last", "best"):
        last, path = out / "last", out / name
        return (all(p.is_dir() and not p.is_symlink() for p in (path, last)) and (last / STATE_JSON).is_file())
    return not OutputManifest(out).foreign(name)


def _optimizer_parts(opt: torch.optim.Optimizer | None) -> tuple[dict, dict]:
    if opt is None:
        return {}, {"param_groups": [], "scalars": {}}
    sd = opt.state_dict()
    tensors, scalars = {}, {}
    for idx, values in sd["state"].items():
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer.{idx}.{key}"] = value
            else:
                scalars.setdefault(str(idx), {})[key] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _rng_tensors() -> dict[str, torch.Tensor]:
    out = {"rng.torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        out.update({f"rng.cuda.{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())})
    return out


def save_checkpoint(folder, task, optimizer, state: TrainerState, *, schedule: dict,
                    rank_rngs: dict[int, torch.Tensor] | None = None) -> Path:
    """Write the module, the optimizer, RNG and task tensors and ``state`` into ``folder`` atomically.

    ``rank_rngs``: the torch RNG state of every rank of a DDP run (rank -> state), so that each rank resumes its own.
    """
    folder = Path(folder)
    opt_tensors, opt_meta = _optimizer_parts(optimizer)
    ranks = {f"rng.torch.rank{r}": s for r, s in (rank_rngs or {}).items() if r > 0}
    tensors = {**opt_tensors, **_rng_tensors(), **ranks, **{f"task.{k}": v for k, v in task.state_tensors().items()}}
    meta = {"format_version": FORMAT_VERSION, **asdict(state), "schedule": schedule, "optimizer": opt_meta}
    with atomic_folder(folder, replaceable=lambda p: (p / STATE_JSON).is_file()) as tmp:
        task.save(tmp)
        save_state_file(tensors, tmp / STATE_TENSORS)
        (tmp / STATE_JSON).write_text(json.dumps(meta, indent=1) + "\n")
    return folder


def _read_checkpoint(folder: Path, task) -> dict[str, torch.Tensor]:
    """The trainer-state tensors, after loading the module weights into ``task``; a damaged file is one clear error."""
    from safetensors import SafetensorError

    try:
        tensors = load_state_file(folder / STATE_TENSORS)
        task.load_weights(folder)
    except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ModelFilesError(f"cannot resume from {folder}: its checkpoint files are damaged ({type(exc).__name__}: "
                              f"{reason}); start again with overwrite=True (--overwrite)") from exc
    return tensors


def load_checkpoint(folder, task, optimizer, fingerprint: dict) -> TrainerState:
    """Check the fingerprint, then load the module weights, optimizer, RNG and task tensors; return the state."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / STATE_JSON).read_text())
    except (OSError, ValueError) as exc:
        raise ModelFilesError(f"cannot resume from {folder}: {STATE_JSON} is unreadable ({type(exc).__name__}: "
                              f"{exc}); start again with overwrite=True (--overwrite)") from exc
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{folder / STATE_JSON} has format {meta.get('format_version')}, expected {FORMAT_VERSION}")
    diff = fingerprint_differences(meta["fingerprint"], fingerprint)
    if diff:
        raise ValueError(f"cannot resume from {folder}: this run differs in {', '.join(diff)}; resume with the same "
                         "model, data and settings, or pass overwrite=True (--overwrite) to start again")
    tensors = _read_checkpoint(folder, task)
    if optimizer is not None:
        state: dict = {}
        for name, value in tensors.items():
            if name.startswith("optimizer."):
                _, idx, key = name.split(".", 2)
                state.setdefault(int(idx), {})[key] = value
        for idx, values in meta["optimizer"]["scalars"].items():
            state.setdefault(int(idx), {}).update(values)
        optimizer.load_state_dict({"state": state, "param_groups": meta["optimizer"]["param_groups"]})
    torch.set_rng_state(tensors.get(f"rng.torch.rank{rank()}", tensors["rng.torch"]))  # rank 0: "rng.torch"
    cuda = [tensors[f"rng.cuda.{i}"] for i in range(torch.cuda.device_count()) if f"rng.cuda.{i}" in tensors]
    if cuda:
        torch.cuda.set_rng_state_all(cuda)
    task.load_state_tensors({k[len("task."):]: v for k, v in tensors.items() if k.startswith("task.")})
    logger.info("resuming from step %d (%s)", meta["step"], folder)
    return TrainerState(step=meta["step"], best=meta["best"], history=meta["history"], fingerprint=meta["fingerprint"])
