"""Which stored parts the ``compress`` page reads each model by (:func:`page_results`): the page's protocol, the
model's main one otherwise, or the page's at the model's own learning rate where its students fail at the page's;
and the protocols shown beside it (:func:`beside`). Read from the store alone; :mod:`.report` writes the page."""

from __future__ import annotations

import json

from layerwise.benchmarks.compress.stored import ModelResults, _read_candidates, by_model, other_protocols, started
from layerwise.benchmarks.compress.stored import _core as _settings  # the package's one definition
from layerwise.benchmarks.store import Part
from layerwise.methods.compress.diagnostics import failed_students
from layerwise.methods.compress.frontier import Candidate

__all__ = ["OWN_SETTING", "beside", "own_setting_lines", "page_protocol", "page_results"]

RENDER_ONLY = True  # chooses which stored parts the page shows; no stored number goes through it (measured_code)

#: the one setting of the page's protocol a model may be read under its own value of: the learning rate, where the
#: model's students fail to train at the page's and train at another stored one (:func:`page_results`)
OWN_SETTING = "lr"


def _core(part: Part) -> dict:
    return _settings(part.key["protocol"])


def page_protocol(parts: list[Part]) -> dict | None:
    """The page's protocol: the settings (but the :data:`~.stored.ADDITIVE` ones, which only add candidates) of the
    first model (in :data:`~.stored.MODELS` order) stored at every depth; None where no model is."""
    complete = [r for r in by_model(parts)
                if len({p.key["depth"] for p in r.parts}) == r.parts[0].payload["result"].get("n_layers")]
    return _core(complete[0].parts[0]) if complete else None


def page_results(parts: list[Part]) -> list[ModelResults]:
    """Each model's stored depth parts under the protocol the page reads it by: the page's protocol
    (:func:`page_protocol`) wherever the model has a depth part under it; otherwise :func:`~.stored.by_model`'s (the
    one stored at the most depths, the newest among equals). So a model whose earlier runs, under settings the page
    has since left, cover more depths is read under the page's settings once one depth of them is stored: the goals
    compare the models under one protocol, and the earlier runs stand with the earlier protocols
    (:func:`~.stored.other_protocols`). One exception, :data:`OWN_SETTING`: where a student of the model fails to
    train under the page's protocol (:func:`~layerwise.methods.compress.diagnostics.failed_students`: below the
    untrained cut of its depth on dev) and none fails under the page's protocol with another learning rate, on at
    least the backends of the model's run under the page's, the model is read under that one (the most depths, the
    newest among equals), and its section says so (:func:`own_setting_lines`). With no protocol stored at every
    depth, every model is :func:`~.stored.by_model`'s."""
    results = by_model(parts)
    page = page_protocol(parts)
    return results if page is None else [_read_under(page, r, parts) for r in results]


def _read_under(page: dict, r: ModelResults, parts: list[Part]) -> ModelResults:
    """``r``'s model as :func:`page_results` reads it."""
    mine = [p for p in parts if "depth" in p.key and p.payload.get("model") == r.model]
    rest = [p for p in parts if not ("depth" in p.key and p.payload.get("model") == r.model)]

    def under(protocol: dict) -> ModelResults:
        return next(s for s in by_model([*rest, *(p for p in mine if _core(p) == protocol)]) if s.model == r.model)

    if _core(r.parts[0]) != page and not any(_core(p) == page for p in mine):
        return r
    at_page = r if _core(r.parts[0]) == page else under(page)
    if not failed_students(at_page.candidates):
        return at_page
    own = {_core(p)[OWN_SETTING]: {**page, OWN_SETTING: _core(p)[OWN_SETTING]} for p in mine
           if OWN_SETTING in _core(p) and _core(p)[OWN_SETTING] != page.get(OWN_SETTING)
           and {**_core(p), OWN_SETTING: page.get(OWN_SETTING)} == page}
    # a run at another rate that measured fewer backends than the page's run of the model would drop candidates
    # (the int8 ones, say) that do not depend on the rate: not read in its place
    backends = set(at_page.protocol["backends"])
    trained = [s for s in map(under, own.values())
               if not failed_students(s.candidates) and backends <= set(s.protocol["backends"])]
    return max(trained, key=lambda s: (len({p.key["depth"] for p in s.parts}), max(map(started, s.parts))),
               default=at_page)


def beside(parts: list[Part], r: ModelResults) -> list[tuple[dict, list[Candidate]]]:
    """The stored protocols shown beside ``r``'s: :func:`~.stored.other_protocols`, and the runs of ``r``'s own settings
    with other :data:`~.stored.ADDITIVE` ones (fewer backends, say) at depths ``r`` does not read, which a model read
    at its own learning rate (:func:`page_results`) may have from before: each protocol once, newest first."""
    depths = {p.key["depth"] for p in r.parts}
    groups: dict[str, list[Part]] = {}
    for part in parts:
        if ("depth" in part.key and part.payload.get("model") == r.model and part.key["depth"] not in depths
                and part.key["protocol"] != r.protocol and _core(part) == _settings(r.protocol)):
            groups.setdefault(json.dumps(part.key["protocol"], sort_keys=True), []).append(part)
    own = [(max(map(started, g)), g[0].key["protocol"], _read_candidates(sorted(g, key=lambda p: p.key["depth"])))
           for g in groups.values()]
    return [(protocol, cands) for _, protocol, cands in sorted(own, key=lambda o: o[0], reverse=True)] \
        + other_protocols(parts, r)


def own_setting_lines(r: ModelResults, page: dict | None, others: list[tuple[dict, list[Candidate]]]) -> list[str]:
    """Where :func:`page_results` reads ``r`` under its own :data:`OWN_SETTING`: which, the page's, and the students
    that failed under the page's (the table of the other protocols shows them)."""
    own = r.protocol.get(OWN_SETTING)
    if page is None or own == page.get(OWN_SETTING) or _settings(r.protocol) != {**page, OWN_SETTING: own}:
        return []
    failed = failed_students(next((c for p, c in others if _settings(p) == page), []))
    if not failed:  # not read here by the rule (no depth under the page's protocol, say)
        return []
    named = "; ".join(f"{c.recipe}-l{c.depth} STS-B dev {c.dev:.2f} against the untrained cut's {cut.dev:.2f}"
                      for c, cut in failed)
    return [f"**Learning rate {r.protocol[OWN_SETTING]:g}, not the page's {page[OWN_SETTING]:g}**: under the page's "
            f"protocol this model's students failed to train ({named}; the table of the other protocols above), and "
            f"at {r.protocol[OWN_SETTING]:g} none did, so the page reads it there, every other setting the page's. "
            "The rule is fixed in the code, not chosen per result: a model is read at its own learning rate only "
            "where a student fails at the page's (below the untrained cut of its depth on STS-B dev) and none fails at "
            "the other; no test set enters the choice.", ""]
