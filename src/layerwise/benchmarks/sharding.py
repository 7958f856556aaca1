"""Where a page's training runs happen: ``--option device=cuda`` names the torch device they train on, and
``--option shard=i/n`` makes this process train only every n-th run of the page from the i-th, so that n processes
(or machines) share one page, each saving its own parts into the store.

Both are checked before any work starts, and neither is part of any result's key: a run trained on a GPU or in a
shard is the same part as one trained on the CPU in one process.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

__all__ = ["check_device", "check_shard", "in_shard"]

T = TypeVar("T")


def check_shard(page: str, shard: str | None) -> None:
    """Refuse a ``shard`` that is not "i/n" with 0 <= i < n (None: no sharding, accepted)."""
    if shard is None:
        return
    parts = str(shard).split("/")
    ok = len(parts) == 2 and all(p.isdigit() for p in parts) and int(parts[0]) < int(parts[1])
    if not ok:
        raise ValueError(f"{page} page: shard={shard!r} is invalid: use 'i/n' with 0 <= i < n, e.g. '0/4'")


def check_device(page: str, device: str | None) -> None:
    """Refuse a ``device`` that torch does not know (None: the default, accepted)."""
    if device is None:
        return
    import torch

    try:
        torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"{page} page: device={device!r} is not a torch device; use 'cpu', 'cuda' or "
                         "'cuda:N'") from None


def in_shard(items: Sequence[T], shard: str | None, group: Callable[[T], Hashable] | None = None) -> list[T]:
    """The ``items`` of shard "i/n" (all of them for None): every n-th group from the i-th, in first-seen order.

    ``group`` maps an item to its group (items of one group stay in one shard, e.g. runs that share a trained
    encoder); by default each item is its own group. The partition depends on ``items`` alone, so n processes given
    the same list split it without overlap or gap."""
    if shard is None:
        return list(items)
    i, n = (int(x) for x in shard.split("/"))
    key = group or (lambda item: item)
    order = {g: k for k, g in enumerate(dict.fromkeys(key(item) for item in items))}
    return [item for item in items if order[key(item)] % n == i]
