"""What ``LayerCombination.fit`` was given: STS pairs with scores, or texts (or text pairs) with labels, told apart
by the arguments passed (never guessed from the values), each checked with a one-line UsageError naming it."""

from __future__ import annotations

import numpy as np

from layerwise.base import check_labels, check_scores, check_texts
from layerwise.errors import UsageError
from layerwise.evaluation.sts import check_gold

__all__ = ["fit_arguments"]


def fit_arguments(sentences1, middle, scores, labels):
    """("sts" | "classification", (texts, texts2 or None, scores or labels)), or a UsageError naming the
    argument."""
    if scores is not None and labels is not None:
        raise UsageError("fit got both scores and labels: pass fit(sentences1, sentences2, scores) for STS pairs "
                         "or fit(texts, labels) / fit(texts1, texts2, labels=labels) for classification")
    if middle is None:
        raise UsageError("fit needs a second argument: fit(sentences1, sentences2, scores) for STS pairs or "
                         "fit(texts, labels) for classification")
    if scores is not None:
        s1 = check_texts(sentences1, name="sentences1")
        s2 = check_texts(middle, name="sentences2")
        gold = _as_scores(scores, len(s1))
        if len(s2) != len(s1):
            raise UsageError(f"sentences1 has {len(s1)} texts but sentences2 has {len(s2)}; pass one pair per row")
        return "sts", (s1, s2, gold)
    if labels is not None:
        t1 = check_texts(sentences1, name="texts1")
        t2 = check_texts(middle, name="texts2")
        if len(t2) != len(t1):
            raise UsageError(f"texts1 has {len(t1)} texts but texts2 has {len(t2)}; pass one pair per row")
        return "classification", (t1, t2, check_labels(labels, len(t1)))
    texts = check_texts(sentences1, name="texts")
    if isinstance(middle, (str, bytes)):
        raise UsageError("labels must be a list with one label per text, got a single string")
    middle = list(middle)
    if middle and all(isinstance(x, str) for x in middle) and len(set(middle)) == len(middle):
        raise UsageError(f"the second argument holds {len(middle)} distinct strings, which is a second list of "
                         "sentences rather than labels: for STS pairs pass fit(sentences1, sentences2, scores); "
                         "for pair classification fit(texts1, texts2, labels=labels)")
    return "classification", (texts, None, check_labels(middle, len(texts)))


def _as_scores(scores, n: int) -> np.ndarray:
    """``scores`` as float64 (n,) that can rank subsets, or a UsageError naming ``scores``."""
    gold = check_scores(scores, n)
    if n < 3:
        raise UsageError(f"{n} pairs are too few to rank layer subsets; pass at least 3")
    try:
        return check_gold(gold)
    except ValueError as exc:
        raise UsageError(f"scores: {exc}") from None
