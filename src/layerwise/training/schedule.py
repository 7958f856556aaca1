"""The learning-rate schedule every trainer uses: linear warm-up, then linear decay to 0 (or constant).

With W warm-up steps and T steps in all, the factor applied to each parameter group's base learning rate at
optimisation step s (0-based) is

    f(s) = (s + 1) / W                       for s < W
    f(s) = max(0, (T - s) / max(1, T - W))   after, with decay="linear"
    f(s) = 1                                 after, with decay="constant"

so the first step already moves (f(0) = 1/W), the peak is reached at step W - 1, and the last step T - 1 uses 1/(T - W).
"""

from __future__ import annotations

__all__ = ["DECAYS", "lr_factor"]

DECAYS = ("linear", "constant")


def lr_factor(step: int, *, warmup_steps: int, total_steps: int, decay: str = "linear") -> float:
    """f(step) above: the multiplier of the base learning rates at 0-based optimisation step ``step``."""
    if decay not in DECAYS:
        raise ValueError(f"unknown decay {decay!r}; valid: {', '.join(DECAYS)}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if decay == "constant":
        return 1.0
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
