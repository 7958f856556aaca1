"""argparse ``type=`` functions: a bad number stops the parse with one line naming the option, the value and the
range (the checks that need the files, the device or the model are :func:`layerwise.cli._checks.preflight`)."""

from __future__ import annotations

import argparse
import math

__all__ = ["SEED_MAX", "finite_float", "layer_list", "max_length", "nonnegative_float", "nonnegative_int",
           "positive_float", "positive_int", "probability", "seed"]

SEED_MAX = 2**32 - 1  # numpy's SeedSequence and torch.manual_seed accept 0 .. 2**32 - 1 everywhere


def _int(text: str, fix: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; {fix}") from None


def _float(text: str, fix: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; {fix}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; {fix}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (counts of splits, epochs, batch sizes)."""
    value = _int(text, "pass a whole number of at least 1")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive; pass a whole number of at least 1")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    value = _int(text, "pass a whole number of at least 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; pass a whole number of at least 0")
    return value


def seed(text: str) -> int:
    """A random seed: an integer in 0 .. 2**32 - 1 (what numpy and torch accept)."""
    value = _int(text, f"pass a whole number in 0..{SEED_MAX}")
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"seed {value} is outside 0..{SEED_MAX}; pass a seed in that range")
    return value


def max_length(text: str) -> int:
    """Tokens per text: at least 3 (a word between two special tokens); the model's own limits are checked on load."""
    value = _int(text, "pass a whole number of at least 3")
    if value < 3:
        raise argparse.ArgumentTypeError(
            f"{value} tokens leaves no room for a word beside the special tokens; pass at least 3 (e.g. 128)")
    return value


def layer_list(text: str) -> tuple[int, ...]:
    """Hidden states as comma-separated integers, e.g. ``0,6`` (0 = embedding output, -1 = the last layer)."""
    try:
        layers = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of hidden states; pass e.g. 0,6 "
                                         "(0 = embedding output, -1 = last layer)") from None
    if len(set(layers)) != len(layers):
        raise argparse.ArgumentTypeError(f"{text!r} names a hidden state twice; name each once")
    return layers


def finite_float(text: str) -> float:
    """Any finite number (no nan, inf)."""
    return _float(text, "pass a finite number such as 0.001")


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates, penalties, temperatures)."""
    value = _float(text, "pass a finite number above 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not above 0; pass a finite number above 0")
    return value


def nonnegative_float(text: str) -> float:
    """A finite number >= 0."""
    value = _float(text, "pass a finite number of at least 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; pass a finite number of at least 0")
    return value


def probability(text: str) -> float:
    """A number in [0, 1]."""
    value = _float(text, "pass a number between 0 and 1")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is outside [0, 1]; pass a number between 0 and 1")
    return value
