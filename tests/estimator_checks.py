"""A check of the estimator contract, modelled on scikit-learn's ``check_estimator`` (the parts that apply).

``check_estimator(make, fit)`` takes a factory of an unfitted estimator and a function that fits it (returning what
``fit`` returned); each method's test calls it with a tiny model and tiny data.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from layerwise.base import SentenceEstimator

PROBE = ["a man is playing guitar .", "the dog is swimming in the water ."]


def check_params(est) -> None:
    """``__init__`` stores every parameter under its own name, unchanged; clone and set_params round trip."""
    signature = inspect.signature(type(est).__init__)
    names = [p for p in signature.parameters if p != "self"]
    assert all(signature.parameters[p].kind is not inspect.Parameter.VAR_KEYWORD for p in names), \
        "no **kwargs in __init__ (get_params cannot list them)"
    params = est.get_params(deep=False)
    assert sorted(params) == sorted(names)
    copy = clone(est)
    assert copy is not est
    for name, value in copy.get_params(deep=False).items():
        assert value is params[name] or value == params[name], name
    copy.set_params(**params)
    assert copy.get_params(deep=False).keys() == params.keys()
    with pytest.raises(ValueError):
        copy.set_params(no_such_parameter=1)


def check_estimator(make, fit, *, probe=PROBE) -> SentenceEstimator:
    """Run the contract checks; returns the fitted estimator for further checks by the caller."""
    est = make()
    assert isinstance(est, SentenceEstimator)
    check_params(est)
    with pytest.raises(NotFittedError):
        est.encode(probe)
    before = est.get_params(deep=False)
    returned = fit(est)
    assert returned is est, "fit must return self"
    after = est.get_params(deep=False)
    assert before.keys() == after.keys()
    for name in before:  # fit does not change a parameter
        assert after[name] is before[name] or after[name] == before[name], name
    learned = [a for a in vars(est) if a.endswith("_") and not a.startswith("_")]
    assert learned, "fit sets learned attributes ending in _"
    vectors = est.encode(probe)
    assert isinstance(vectors, np.ndarray) and vectors.dtype == np.float32
    assert vectors.ndim == 2 and vectors.shape[0] == len(probe)
    one = est.encode(probe[0])
    assert one.shape == vectors.shape[1:] == (est.get_sentence_embedding_dimension(),)
    for empty in ([], ()):  # as SentenceTransformer.encode([]), but (0, d), so that it stacks with the others
        none = est.encode(empty)
        assert none.shape == (0, vectors.shape[1]) and none.dtype == np.float32
    np.testing.assert_allclose(one, vectors[0], atol=1e-5)
    unit = est.encode(probe, normalize_embeddings=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-5)
    fresh = clone(est)
    with pytest.raises(NotFittedError):
        fresh.encode(probe)
    return est
