"""Data-parallel training under ``torchrun``: the process group, this process's rows of a batch, and collectives.

``torchrun --nproc_per_node N`` starts N processes with ``WORLD_SIZE``, ``RANK`` and ``LOCAL_RANK`` set;
:func:`setup` joins them into one process group (NCCL when this process trains on a GPU, gloo on CPU). Without
those variables (or with ``WORLD_SIZE=1``) every function here is the identity and nothing is initialised, so a
plain ``python`` run takes exactly the one-process path.

How a global batch of n examples is split over W processes (:func:`shard`): rank r takes the r-th of W contiguous
parts whose sizes differ by at most one (``np.array_split``), so concatenating the parts in rank order gives the
batch back. A loss that is a mean over examples is multiplied by :func:`shard_weight` = W * n_r / n; DDP averages
the gradients over the W ranks, so the gradient is that of the mean over all n examples, exactly as one process
with the whole batch computes it (a weight of 1.0 when n_r = n / W). A loss over the whole batch (in-batch
negatives) gathers the rows of every rank first (:func:`gather_rows`, which keeps the gradient) and computes the
global loss on every rank; its backward sums the W ranks' row gradients, which DDP's average then undoes.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import torch
import torch.distributed as dist

logger = logging.getLogger(__name__)

__all__ = ["barrier", "broadcast_value", "data_parallel", "gather_rows", "is_distributed", "is_main", "launched",
           "local_rank", "mean_across", "rank", "rank_seed", "release", "rng_states", "run_on_main", "scale_mean",
           "setup", "shard", "shard_sizes", "shard_weight", "teardown", "world_size"]


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer; torchrun sets it, "
                         f"so unset it or start the command with torchrun") from None


def launched() -> bool:
    """True when this process was started by torchrun (or a launcher setting WORLD_SIZE) with more than one rank."""
    return _env_int("WORLD_SIZE", 1) > 1


def local_device(device: str | torch.device | None = None) -> torch.device:
    """The device this process trains on: ``device`` (None: cpu), with "cuda" under torchrun meaning GPU LOCAL_RANK."""
    dev = torch.device(device or "cpu")
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", _env_int("LOCAL_RANK", 0) if launched() else torch.cuda.current_device())
    return dev


def setup(device: str | torch.device | None = None) -> bool:
    """Join the torchrun process group once (a no-op when not launched or already joined); True when distributed.

    ``device``: the device this process trains on; "cuda" (or None with a GPU present) selects GPU ``LOCAL_RANK``
    and the NCCL backend, anything else gloo.
    """
    if not launched() or not dist.is_available():
        return False
    if dist.is_initialized():
        return True
    want_cuda = torch.cuda.is_available() if device is None else torch.device(device).type == "cuda"
    if want_cuda:
        torch.cuda.set_device(_env_int("LOCAL_RANK", 0))
    backend = "nccl" if want_cuda else "gloo"
    dist.init_process_group(backend=backend)
    logger.info("process %d of %d joined the %s process group", rank(), world_size(), backend)
    return True


def teardown() -> None:
    """Leave the process group after a finished command: wait for every rank (rank 0 may still be writing), then
    destroy the group, so that no process exits while gloo's threads still hold connections to the others."""
    barrier()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def is_distributed() -> bool:
    """True inside a joined process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def local_rank() -> int:
    return _env_int("LOCAL_RANK", 0) if is_distributed() else 0


def is_main() -> bool:
    """True on rank 0 (and in a one-process run): the only process that prints and writes files."""
    return rank() == 0


def barrier() -> None:
    """Wait until every process gets here (no-op in one process); used where one process wrote what all read."""
    if is_distributed():
        dist.barrier()


def shard_sizes(n: int, world: int | None = None) -> list[int]:
    """Rows of each rank for a global batch of ``n`` (sizes differ by at most one, the first ranks get more)."""
    world = world_size() if world is None else world
    if n < world:
        raise ValueError(f"a global batch of {n} examples cannot be split over {world} processes: every process needs "
                         f"at least one example; use a batch size of at least {world} or fewer processes")
    return [len(part) for part in np.array_split(np.arange(n), world)]


def shard(indices) -> np.ndarray:
    """This rank's contiguous part (n_r,) of the global batch ``indices`` (n,); all of it in one process."""
    indices = np.asarray(indices)
    if not is_distributed():
        return indices
    sizes = shard_sizes(len(indices))
    start = sum(sizes[: rank()])
    return indices[start : start + sizes[rank()]]


def shard_weight(n: int) -> float:
    """W * n_r / n: multiply a per-example mean loss by it (1.0 in one process; see the module docstring)."""
    if not is_distributed():
        return 1.0
    return world_size() * shard_sizes(n)[rank()] / n


def scale_mean(loss: torch.Tensor, n: int) -> torch.Tensor:
    """A per-example mean loss over this rank's rows, times :func:`shard_weight` (unchanged when the weight is 1)."""
    weight = shard_weight(n)
    return loss if weight == 1.0 else loss * weight


def gather_rows(rows: torch.Tensor, n: int) -> torch.Tensor:
    """(n_r, ...) rows of this rank -> (n, ...) rows of the global batch in rank order, keeping the gradient.

    Ranks with one row fewer are padded for the collective and the padding is cut off again.
    """
    if not is_distributed():
        return rows
    from torch.distributed._functional_collectives import all_gather_single

    sizes = shard_sizes(n)
    if rows.shape[0] != sizes[rank()]:
        raise ValueError(f"rank {rank()} holds {rows.shape[0]} rows, expected {sizes[rank()]} of a batch of {n}")
    pad = max(sizes) - rows.shape[0]
    if pad:
        rows = torch.cat([rows, rows.new_zeros((pad, *rows.shape[1:]))])
    gathered = all_gather_single(rows.contiguous(), 0, dist.group.WORLD)  # (W * max(sizes), ...)
    parts = gathered.split(max(sizes))
    return torch.cat([part[:size] for part, size in zip(parts, sizes, strict=True)])


def mean_across(values: dict[str, float]) -> dict[str, float]:
    """The mean of each value over the ranks (one all-reduce); the values themselves in one process."""
    if not is_distributed() or not values:
        return values
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=_collective_device())
    dist.all_reduce(t)
    return {k: float(v) / world_size() for k, v in zip(keys, t.tolist(), strict=True)}


def broadcast_value(value):
    """Rank 0's ``value`` (a JSON-like object) on every rank; ``value`` itself in one process."""
    if not is_distributed():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _collective_device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


class _TaskLoss(torch.nn.Module):
    """``forward(step, micro)`` -> ``task.loss(step, micro)``: the task's module as a submodule, for DDP to wrap."""

    def __init__(self, task):
        super().__init__()
        self.trained = task.module
        self._task = task

    def forward(self, step: int, micro: int) -> dict:
        return self._task.loss(step, micro)


def data_parallel(task) -> torch.nn.parallel.DistributedDataParallel:
    """``task.module`` wrapped in DDP; call it as ``ddp(step, micro)`` for the task's loss with synchronised gradients.

    ``find_unused_parameters``: some trained parameters get no gradient at some steps (the heads of the tasks a
    multi-task step does not train, the encoder's pooler layer that sentence models do not use); DDP then marks them
    ready itself and leaves their gradient None on every rank, as one process does.
    """
    device = next(task.module.parameters()).device
    ids = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(_TaskLoss(task), device_ids=ids, find_unused_parameters=True)


def release(ddp) -> None:
    """Remove the autograd hooks DDP put on the parameters, so that a later run of the same module wraps it anew."""
    if ddp is not None and hasattr(ddp, "_remove_autograd_hooks"):
        ddp._remove_autograd_hooks()


def rng_states() -> dict[int, torch.Tensor]:
    """Every rank's torch CPU RNG state on every rank ({} in one process): dropout differs per rank."""
    if not is_distributed():
        return {}
    states: list = [None] * world_size()
    dist.all_gather_object(states, torch.get_rng_state())
    return dict(enumerate(states))


def rank_seed(seed: int) -> int:
    """The seed of this rank's torch RNG: ``seed`` on rank 0 (and in one process), a derived one on other ranks."""
    if rank() == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), rank()]).generate_state(1)[0])


def run_on_main(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on rank 0 only, its result (or its exception, raised on every rank) everywhere."""
    if not is_distributed():
        return fn(*args, **kwargs)
    outcome = None
    if is_main():
        try:
            outcome = ("ok", fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank just below
            outcome = ("error", exc)
    kind, value = broadcast_value(outcome)
    if kind == "error":
        raise value
    return value
