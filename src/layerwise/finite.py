"""One check for every number layerwise writes or reports, and for the settings training takes: finite, or one line.

NaN weights give all-NaN vectors, a "best dev nan" and NaN tables without any error; an infinite learning rate trains
an encoder to NaN. Every command therefore checks, before it writes or prints a number, that the numbers are finite,
and every trainer checks its learning rates with :func:`check_rate` (the CLI's ``positive_float`` refuses the same
values on the command line). A non-finite value raises :class:`NonFiniteError` (a :class:`~layerwise.errors.UsageError`,
so the command line prints one line and exits 2) naming what holds it and the fix.
"""

from __future__ import annotations

import math

import numpy as np

from layerwise.errors import UsageError

__all__ = ["NonFiniteError", "check_finite", "check_finite_weights", "check_rate"]


class NonFiniteError(UsageError):
    """A value that must be a finite number is NaN or infinite."""


def _count_bad(values) -> tuple[int, int]:
    """(non-finite count, total count) of an array, tensor, number or nested list."""
    try:
        import torch

        if isinstance(values, torch.Tensor):
            if not values.is_floating_point():
                return 0, values.numel()
            return int((~torch.isfinite(values.detach())).sum()), values.numel()
    except ImportError:  # pragma: no cover - torch is a dependency; numpy inputs need nothing more
        pass
    arr = np.asarray(values, dtype=np.float64) if not isinstance(values, np.ndarray) else values
    if not np.issubdtype(arr.dtype, np.inexact):
        return 0, arr.size
    return int((~np.isfinite(arr)).sum()), arr.size


def check_finite(values, what: str, *, fix: str):
    """Return ``values`` when every entry is finite; else raise :class:`NonFiniteError` naming ``what`` and ``fix``.

    ``values``: a number, a numpy array, a torch tensor or a (nested) list of numbers; ``what`` says what they are
    ("the vectors of chunk 3 from all-MiniLM-L6-v2"); ``fix`` is the remedy.
    """
    bad, total = _count_bad(values)
    if bad:
        some = f"{bad} of {total} values are" if total > 1 else "the value is"
        raise NonFiniteError(f"{what}: {some} NaN or inf; {fix}")
    return values


def check_finite_weights(state, source: str) -> None:
    """Refuse weights holding NaN or inf: ``state`` a module or a state dict, ``source`` the model or folder named.

    Checked at load, so a damaged model stops there with its name instead of giving all-NaN vectors later.
    """
    tensors = state.state_dict() if hasattr(state, "state_dict") else state
    for name, tensor in tensors.items():
        bad, total = _count_bad(tensor)
        if bad:
            raise NonFiniteError(f"the weights of {source} hold NaN or inf ({name}: {bad} of {total} values); the "
                                 "model is damaged or its training diverged: load another copy or retrain it with a "
                                 "lower learning rate")


def check_rate(value, name: str) -> float:
    """A learning rate (or any step size) that is a finite number above 0; ``name`` is the argument named in the
    error. One validation for every trainer (layer attention, Latte-Mix, TMFT, multi-task)."""
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name}={value!r} is not a number; pass a finite number above 0 such as 2e-5") from None
    if not math.isfinite(rate) or rate <= 0:
        raise UsageError(f"{name}={value!r} is not a finite number above 0; pass e.g. 2e-5")
    return rate
