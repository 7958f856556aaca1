"""The ``compress`` page's stored parts read back: per model, the depth parts of its main protocol, every candidate
once, the original and the choice under the protocol's budget (:class:`ModelResults`), and the earlier run a depth
part carried candidates over from (:func:`donor_part`, :meth:`~layerwise.Compressor.adopt`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from layerwise.benchmarks.store import Part
from layerwise.methods.compress.frontier import Candidate, choose

__all__ = ["ADDITIVE", "MODELS", "NAME", "STS_AVERAGE", "TESTS", "ModelResults", "by_model", "donor_part", "home_depth",
           "model_candidates", "other_protocols", "started", "sts_average", "tests_average"]

NAME = "compress"
MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")
TESTS = ("stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16")
STS_AVERAGE = TESTS  # the "STS average" column: the mean of these test sets' Spearman (those present)

#: protocol fields that add candidates without changing any candidate's numbers: a part stored under a protocol
#: that differs only in these gives its candidates to the new part (Compressor.adopt)
ADDITIVE = ("backends", "every_depth")


def _core(protocol: dict) -> dict:
    """``protocol`` less its :data:`ADDITIVE` fields: what makes each candidate's numbers what they are."""
    return {k: v for k, v in protocol.items() if k not in ADDITIVE}


def _depthless(part: Part) -> dict:
    """A depth part's key less its depth: the model's, the data's and the protocol's share, alike for every depth."""
    return {k: v for k, v in part.key.items() if k != "depth"}


def donor_part(parts: list[Part], name: str, key: dict) -> Part | None:
    """The newest stored part ``name`` of the same model and data whose protocol differs from ``key``'s only in
    :data:`ADDITIVE` fields, with no backend the new one lacks (its candidates are the new part's, measured)."""
    found = [p for p in parts if p.name == name and p.key.get("model") == key["model"]
             and p.key.get("data") == key["data"] and _core(p.key["protocol"]) == _core(key["protocol"])
             and set(p.key["protocol"]["backends"]) <= set(key["protocol"]["backends"])
             and p.key["protocol"] != key["protocol"]]
    return max(found, key=started, default=None)


def started(part: Part) -> str:
    """When the newest run of ``part`` started ("" where none is recorded)."""
    return max((run.get("started", "") for run in part.runs), default="")


def model_candidates(parts: list[Part], key: dict, budget: float) -> tuple[list[Candidate], Candidate, Candidate]:
    """Every candidate of the depth parts stored under ``key`` (each once: the original is in every part, the first
    kept), the original on torch, and the choice under ``budget``."""
    candidates = _read_candidates(sorted((p for p in parts if "depth" in p.key and _depthless(p) == key),
                                         key=lambda p: p.key["depth"]))
    plain = {c.layers for c in candidates if c.recipe in ("cut", "original")}
    # a depth's LC cut may be a lower depth's plain cut (the best subset of 0..2 is {1}, say): listed once, as the cut
    candidates = [c for c in candidates if not (c.recipe == "lc-cut" and c.layers in plain)]
    if not candidates:
        raise ValueError("no stored depth parts under this key")
    original = next(c for c in candidates if c.recipe == "original" and c.backend == "torch")
    return candidates, original, choose(candidates, original.dev, budget)


def home_depth(parts: list[Part], key: dict, chosen: Candidate) -> int:
    """The shallowest stored depth part under ``key`` that holds ``chosen`` (where :func:`model_candidates` read it
    from; an LC cut of hidden state 0 alone, depth 0, is in a deeper part), whose fit reads it back without building
    another depth."""
    return min(p.key["depth"] for p in parts if "depth" in p.key and _depthless(p) == key
               and any((c["recipe"], tuple(c["layers"]), c["backend"]) == (chosen.recipe, chosen.layers, chosen.backend)
                       for c in p.payload["result"]["candidates"]))


def _read_candidates(parts) -> list[Candidate]:
    """The candidates of ``parts``, each (recipe, hidden states, backend) once: the first part's."""
    seen, candidates = set(), []
    for part in parts:
        for c in (Candidate.from_dict(d) for d in part.payload["result"]["candidates"]):
            if (c.recipe, c.layers, c.backend) not in seen:
                seen.add((c.recipe, c.layers, c.backend))
                candidates.append(c)
    return candidates


def sts_average(c: Candidate) -> float | None:
    return tests_average(c.tests)


def tests_average(tests: dict[str, float]) -> float | None:
    """The mean of the :data:`STS_AVERAGE` test sets' scores present in ``tests`` (None: none is)."""
    values = [tests[t] for t in STS_AVERAGE if t in tests]
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class ModelResults:
    """One model's stored depth parts under its main protocol (:func:`by_model`), read back: every candidate, the original, the
    choice under that protocol's budget."""

    model: str
    protocol: dict
    counts: dict
    parts: list[Part]
    candidates: list[Candidate]
    original: Candidate
    chosen: Candidate
    # depth -> the earlier run's part whose candidates a depth part carried over (their timing is that run's)
    donors: dict[int, Part] = field(default_factory=dict)

    def carried(self, c: Candidate) -> Part | None:
        """The earlier run's part ``c`` was carried over from (timed there), or None (timed in its own part): the
        donor whose candidate of the same recipe, states and backend has ``c``'s timing, unchanged (a candidate
        measured again, a retrained student's, has its own). Its own depth's donor first; the original, which every
        part holds, may come from another depth's (the run that first timed it in the shared work folder)."""
        donors = sorted(self.donors.items(), key=lambda kv: (kv[0] != c.depth, kv[0]))
        for _, donor in donors:
            if c.speed and any((d["recipe"], tuple(d["layers"]), d["backend"]) == (c.recipe, c.layers, c.backend)
                               and d.get("speed") == c.speed for d in donor.payload["result"]["candidates"]):
                return donor
        return None


def by_model(parts: list[Part]) -> list[ModelResults]:
    """Per model (in MODELS order, then others), the depth parts of its main protocol: the one stored at the most
    depths, the most recently run among equals. A protocol run at one depth beside a complete one (to read one
    student under another recipe) stands in the earlier-protocols table, not in the complete one's place, until it
    has as many depths."""
    depth_parts = [p for p in parts if "depth" in p.key]
    out = []
    for model in dict.fromkeys(p.payload["model"] for p in depth_parts):
        mine = [p for p in depth_parts if p.payload["model"] == model]
        groups: dict[str, list[Part]] = {}
        for part in mine:
            groups.setdefault(json.dumps(_depthless(part), sort_keys=True), []).append(part)
        main = max(groups.values(), key=lambda g: (len({p.key["depth"] for p in g}), max(map(started, g))))
        newest = max(main, key=started)
        key = _depthless(newest)
        protocol = key["protocol"]
        candidates, original, chosen = model_candidates(mine, key, float(protocol["budget"]))
        kept = [p for p in mine if p.key["protocol"] == protocol]
        # a part that found an earlier run's part carried its candidates over: adopted into the work folder, or
        # already there (read back with their timing; "adopted" counts only the first), timed in that run either way
        donors = {p.key["depth"]: d for p in kept if "adopted" in p.payload
                  and (d := donor_part(mine, p.name, p.key)) is not None}
        out.append(ModelResults(model, protocol, newest.payload["corpus"], kept, candidates, original, chosen,
                                 donors))
    order = {Path(m).name: i for i, m in enumerate(MODELS)}
    return sorted(out, key=lambda r: (order.get(Path(r.model).name, len(order)), r.model))


def other_protocols(parts: list[Part], r: ModelResults) -> list[tuple[dict, list[Candidate]]]:
    """The depth parts of ``r``'s model stored under other protocols (earlier runs kept in the store), newest first:
    each protocol (its newest run's) with its candidates, each once, the newest part's. Protocols that differ only in
    :data:`ADDITIVE` fields are one (the later ones carried the earlier ones' candidates over); ``r``'s own is left
    out."""
    def rest(part: Part) -> str:
        return json.dumps({**_depthless(part), "protocol": _core(part.key["protocol"])}, sort_keys=True)

    mine = rest(r.parts[0]) if r.parts else None
    groups: dict[str, list[Part]] = {}
    for part in parts:
        if "depth" in part.key and part.payload.get("model") == r.model and rest(part) != mine:
            groups.setdefault(rest(part), []).append(part)
    out = []
    for group in sorted(groups.values(), key=lambda g: max(map(started, g)), reverse=True):
        newest = sorted(group, key=started, reverse=True)
        out.append((newest[0].key["protocol"], _read_candidates(newest)))
    return out
