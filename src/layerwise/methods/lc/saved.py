"""What a fitted :class:`~layerwise.methods.lc.estimator.LayerCombination` keeps beside its exported model, and
reading it back: plain JSON and a numpy archive (numbers only, ``allow_pickle=False``; nothing is unpickled).

``layer_combination.json`` holds the parameters, the task, the chosen subset and its score; ``layer_combination.npz``
every subset's score and mask, and for classification the logistic regression's weights and intercepts.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from layerwise.base import restorable_params
from layerwise.encoders.layer_encoder import ModelIdentity
from layerwise.errors import UsageError
from layerwise.evaluation.classification import CLASSIFIER
from layerwise.export.sentence_transformers import EXPORT_MARKER
from layerwise.reports import write_bytes, write_json

__all__ = ["ARRAYS_FILE", "STATE_FILE", "read_fitted", "write_learned"]

STATE_FILE = "layer_combination.json"  # what fit learned beyond the subset: scores, settings, classifier
ARRAYS_FILE = "layer_combination.npz"  # every subset's score (and the classifier's weights): numbers only


def write_learned(est, out: Path) -> None:
    """Write what ``est`` learned beyond its subset (the exported model is already in ``out``)."""
    state = {"params": {k: (str(v) if isinstance(v, os.PathLike) else v) for k, v in est.get_params().items()},
             "task": est.task_, "layers": list(est.layers_), "score": est.score_, "n_states": est.n_states_}
    arrays = {"scores": np.asarray(est.scores_, dtype=np.float64), "masks": np.asarray(est.masks_, dtype=bool)}
    if est.task_ == "classification":
        state.update(classes=est.classes_.tolist(), is_pair=bool(est.is_pair_))
        arrays.update(_classifier_arrays(est.classifier_))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_bytes(out / ARRAYS_FILE, buf.getvalue())
    write_json(out / STATE_FILE, state)


def read_fitted(cls, folder: str | os.PathLike, params: dict):
    """A fitted ``cls`` from ``folder`` (see ``LayerCombination.load``)."""
    folder = Path(folder)
    marker = folder / EXPORT_MARKER
    if not marker.is_file():
        raise UsageError(f"{folder} holds no {EXPORT_MARKER}: it was not written by LayerCombination.save or "
                         "layerwise export; pass the folder save() wrote")
    info = json.loads(marker.read_text())
    if info.get("kind") != "layer_subset":
        raise UsageError(f"{folder} holds a {info.get('kind')!r} export, not a layer combination; load it with "
                         "SentenceTransformer(folder) (or the estimator that wrote it)")
    state_path = folder / STATE_FILE
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    kept = {k: v for k, v in restorable_params(state.get("params", {})).items() if k in cls._get_param_names()}
    kept.update(pooling=info["pooling"], max_length=int(info.get("max_length", kept.get("max_length", 256))))
    est = cls(**{**kept, "model": str(folder), **params})
    est.model_identity_ = ModelIdentity.from_dict(info["source"])
    est.layers_ = tuple(int(x) for x in info["layers"])
    est.score_ = float(state["score"]) if state.get("score") is not None else float("nan")
    n_states = int(info.get("layers_kept", max(est.layers_))) + 1
    est.n_states_ = int(state.get("n_states", n_states))
    est.task_ = state.get("task", "sts")
    arrays_path = folder / ARRAYS_FILE
    if arrays_path.is_file():
        with np.load(arrays_path, allow_pickle=False) as arrays:
            est.scores_ = arrays["scores"]
            est.masks_ = arrays["masks"]
            if est.task_ == "classification":
                est.classes_ = np.asarray(state["classes"])
                est.is_pair_ = bool(state["is_pair"])
                est.classifier_ = _classifier_from_arrays(arrays, len(est.classes_), int(est.seed))
    else:
        est.scores_ = np.zeros(0)
        est.masks_ = np.zeros((0, est.n_states_), dtype=bool)
    return est


def _classifier_arrays(classifier) -> dict[str, np.ndarray]:
    """The fitted logistic regression as plain arrays (no pickle): its weights and intercepts."""
    return {"coef": classifier.coef_, "intercept": classifier.intercept_}


def _classifier_from_arrays(arrays, n_classes: int, seed: int):
    """The classifier back from :func:`_classifier_arrays` (predictions equal to the saved one's)."""
    clf = LogisticRegression(random_state=seed, **CLASSIFIER)
    clf.coef_ = np.asarray(arrays["coef"])
    clf.intercept_ = np.asarray(arrays["intercept"])
    clf.classes_ = np.arange(n_classes)
    clf.n_features_in_ = clf.coef_.shape[1]
    return clf
