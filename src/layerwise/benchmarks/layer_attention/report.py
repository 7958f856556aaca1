"""The layer-attention page from stored runs: markdown tables, a figure and a JSON summary (nothing computed)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from layerwise.benchmarks.layer_attention.attention_length import length_section
from layerwise.benchmarks.layer_attention.grid import GridConfig, RunResult
from layerwise.benchmarks.page_parts import BUSY
from layerwise.benchmarks.significance_parts import (
    ALPHA,
    N_RESAMPLES,
    NOT_TESTED,
    SEED,
    mrr_test,
    p_cell,
    significance_note,
)
from layerwise.evaluation.significance import SignificanceResult
from layerwise.reports import fmt, sample_std

__all__ = ["REFERENCE", "PageRuns", "draw_figure", "render_markdown", "summary"]

#: The row every other pooler of a table is tested against (the page compares the poolers with it).
REFERENCE = "layer_attention"
UNTOUCHED_REFERENCE = ("last-layer mean", "exact (numpy)")  # the search every other untouched search is tested against


@dataclass
class PageRuns:
    """What the page shows: the stored runs of each regime, the grid's order, and what is not run yet."""

    config: GridConfig
    model: str  # model name from the runs' keys
    runs: list[RunResult]
    provenance: list[str] = field(default_factory=list)  # markdown bullet lines (commands, dates, versions)
    not_run: dict[str, list[str]] = field(default_factory=dict)  # regime -> "objective / pooler / seed n" not stored
    untouched_search: list[dict] = field(default_factory=list)  # SearchRow dicts with "vector": no pooler at all
    # (regime, objective, pooler) -> its avg against REFERENCE's, paired bootstrap; None: a side has no predictions
    tests: dict[tuple[str, str, str], SignificanceResult | None] = field(default_factory=dict)
    machines: list[str] = field(default_factory=list)  # machines[i]: where runs[i] ran ("2 CPUs"); [] not known

    def regime(self, regime: str) -> list[RunResult]:
        return [r for r in self.runs if r.regime == regime]

    @property
    def sets(self) -> list[str]:
        return list(self.runs[0].sts) if self.runs else []


def _select(runs, obj, pooler) -> list[RunResult]:
    return [r for r in runs if r.objective == obj and r.pooler == pooler]


def pooler_means(runs: list[RunResult], sets, obj, pooler) -> dict | None:
    """Mean and std over seeds per set, the average over sets and steps/s of one pooler, or None."""
    rs = _select(runs, obj, pooler)
    if not rs:
        return None
    return {"seeds": len(rs), "sts": {d: (float(np.mean([r.sts[d] for r in rs])), sample_std([r.sts[d] for r in rs]))
                                      for d in sets},
            "avg": float(np.mean([np.mean([r.sts[d] for d in sets]) for r in rs])),
            "steps_per_second": _mean_or_none([r.steps_per_second for r in rs])}


def _mean_or_none(values: list) -> float | None:
    """The mean of the values that are not None (None: none is)."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def _sts_table(page: PageRuns, regime: str, poolers, obj) -> list[str]:
    runs, sets = page.regime(regime), page.sets
    tested = any(_select(runs, obj, REFERENCE))  # a p column where the table has the reference row
    where = {id(r): m for r, m in zip(page.runs, page.machines, strict=False)}
    machines = {where.get(id(r)) for r in runs if r.objective == obj}
    busy = any(BUSY in (m or "") for m in machines)
    mixed = len(machines) > 1 or busy  # then each speed names its machine
    lines = ["| pooler | seeds | " + " | ".join(sets) + " | avg | training steps/s (evaluation excluded) |"
             + (f" p vs {REFERENCE} (avg) |" if tested else ""),
             "|---|---|" + "---|" * (len(sets) + 2 + tested)]
    for pooler in poolers:
        m = pooler_means(runs, sets, obj, pooler)
        if m is None:
            continue
        name = f"**{pooler}**" if pooler == REFERENCE else pooler
        p = ("reference" if pooler == REFERENCE else p_cell(page.tests.get((regime, obj, pooler))))
        speed = "–" if m["steps_per_second"] is None else f"{m['steps_per_second']:.2f}"
        if mixed:
            speed += f" ({', '.join(sorted({where.get(id(r), '?') for r in _select(runs, obj, pooler)}))})"
        lines.append(f"| {name} | {m['seeds']} | " + " | ".join(fmt(*m["sts"][d]) for d in sets)
                     + f" | {m['avg']:.2f} | {speed} |" + (f" {p} |" if tested else ""))
    if any(r.steps_per_second is None for r in runs if r.objective == obj):
        lines += ["", "*–* (speed): the model was trained by an earlier run and only evaluated in this one (a search "
                  "setting changed since): its training was not timed here."]
    if busy:
        lines += ["", f"*{BUSY}*: at least one of the row's runs started with the machine's 1-minute load average "
                  "above its CPU count (other work beside it): that speed is low and not comparable."]
    return lines


def _test_note() -> str:
    return significance_note(
        "each pooler's avg", REFERENCE, f"the pooler's avg minus {REFERENCE}'s (each the mean Spearman over its "
        "seeds and the sets; every pair of every set is a unit, the union of the sets' test pairs is resampled)",
        "layerwise results run layer-attention")


def _verdict(runs, poolers, obj) -> str:
    def avg(p):
        rs = _select(runs, obj, p)
        return float(np.mean([np.mean(list(r.sts.values())) for r in rs])) if rs else None

    a = avg("layer_attention")
    if a is None:
        return ""
    others = {p: avg(p) for p in poolers if p != "layer_attention" and avg(p) is not None}
    beaten = [p for p, v in others.items() if a > v]
    best = max(others.items(), key=lambda kv: kv[1]) if others else None
    return (f"**{obj}**: layer attention averages {a:.2f} over the sets; it beats {len(beaten)} of {len(others)} other "
            f"poolers ({', '.join(beaten) or 'none'})" + (f"; the best other is {best[0]} at {best[1]:.2f}." if best else "."))


def _retrieval_table(runs) -> list[str]:
    """Every searched run's rows; each tested against :data:`REFERENCE`'s search with its pooler on the same
    index (MRR@10, paired over the queries)."""
    ret = [r for r in runs if r.search_with_pooler]
    if not ret:
        return []
    reference = {(r.objective, x.index): x for r in ret if r.pooler == REFERENCE for x in r.search_with_pooler}
    lines = [f"| objective | pooler | search with | index | MRR@10 | R@1 | R@10 | ms/query batched | ms/query batch 1 | "
             f"index MiB | resident MiB | p vs {REFERENCE} (MRR@10) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in ret:
        for label, rows in (("pooler", r.search_with_pooler), ("last-layer mean", r.search_without_pooler),
                            ("[CLS]_Last", r.search_cls_last)):
            for x in rows:
                base = reference.get((r.objective, x.index))
                p = ("reference" if base is x else "–" if base is None else
                     p_cell(mrr_test(x.first_hits, base.first_hits, x.n_queries)))
                one = "–" if x.ms_per_query_batch1 is None else f"{x.ms_per_query_batch1:.3f}"
                lines.append(f"| {r.objective} | {r.pooler} | {label} | {x.index} | {x.mrr10:.2f} | {x.recall1:.2f} | "
                             f"{x.recall10:.2f} | {x.ms_per_query:.3f} | {one} | {_mib(x.index_bytes)} | "
                             f"{_mib(x.index_resident_bytes)} | {p} |")
    return lines


def _search_test_note(baseline: str) -> str:
    return (f"*p vs {baseline}*: MRR@10 against {baseline}, paired bootstrap (two-sided) over the queries (each "
            f"query's reciprocal rank@10 is a unit), {N_RESAMPLES} resamples, seed {SEED}; *yes* where p < {ALPHA}. "
            f"*{NOT_TESTED}*: a search stored before each query's rank was kept; `layerwise results run "
            f"layer-attention` computes it again.")


def _lr(x: float) -> str:
    return f"{x:.0e}".replace("e-0", "e-")


def _header(page: PageRuns) -> list[str]:
    first = page.runs[0].history["config"] if page.runs else page.config.contrastive("frozen", "unsup", 0).__dict__
    return ["# Layer-wise attention pooling vs pooling baselines", "", *page.provenance,
            f"- model `{page.model}`; every run: {first['steps']} steps, batch {first['batch_size']}, pooler lr "
            f"{_lr(first['pooler_lr'])} (encoder lr {_lr(first['lr'])} when trained), warm-up {first['warmup_steps']} "
            f"steps then linear decay, temperature {first['temperature']}, max length {page.config.max_length}, "
            f"gradient clipping {first['max_grad_norm']}; checkpoint chosen on STS-B dev every {first['eval_every']} steps; "
            "test sets never trained on; STS Spearman x100, aggregation `all`.",
            "- training data: unsup = the wiki1m head (11,914 sentences); sup_hard_neg = ~5.9k SNLI dev+test triplets "
            "(premises with an entailment and a contradiction). Not SimCSE's 1M sentences / the paper's 275k "
            "triplets: not comparable with the paper's numbers.",
            "- all-MiniLM-L6-v2 is already a contrastively fine-tuned sentence encoder (mean pooling); the paper "
            "starts from raw BERT/RoBERTa. Every pooler here starts with a fresh MLP head.",
            "- `first0_last_mean` = mean of hidden states 0 (embedding output) and L (last layer); earlier results "
            "files called it `first_last_mean`.",
            "- `layer_attention` is this library's operator (each state's CLS queries every state's mean: a K x K "
            "softmax); `layer_attention_ratio` is the paper's Eq. 1-5 (one weight per hidden state, from its own CLS "
            "and mean, a ratio over the states; its scores are divided by sqrt(d), as the library's operator's are, "
            "where Eq. 1-5, as read here, have none: a constant temperature that the learned query and key maps can absorb, kept "
            "so that both softmaxes start from the same scale); `concat_last_cls_mean` = MLP([CLS_L ; mean_L]) and "
            "`concat_last_cls_layer_mean` = MLP([CLS_L ; mean over states of the means]) are the plain "
            "concatenations of the paper's pooling ablation (Table 2).", ""]


def _frozen_section(page: PageRuns) -> list[str]:
    frozen, cfg = page.regime("frozen"), page.config
    missing = page.not_run.get("frozen", [])
    if not frozen:
        return ["## Frozen encoder", "", "Not run yet: `layerwise results run layer-attention` computes it.", ""] if missing else []
    lines = [f"## Frozen encoder: every pooler, both objectives, {len(cfg.frozen_seeds)} seeds (mean ± std over seeds)",
             "", "The encoder's layer vectors are computed once (training views with dropout: two independent passes "
             "for unsup, one per column for sup_hard_neg; evaluation without dropout) and only the pooler trains, "
             "so the dropout noise is drawn once per example rather than at every step.", "",
             "![frozen grid](layer-attention-frozen.png)", ""]
    if missing:
        lines += ["**Not run yet**: " + "; ".join(missing) + " (objective / pooler / seed).", ""]
    lines += [_test_note(), ""]
    for obj in cfg.objectives:
        lines += [f"### `{obj}`", "", *_sts_table(page, "frozen", cfg.poolers, obj), "",
                  _verdict(frozen, cfg.poolers, obj), ""]
    table = _retrieval_table(frozen)
    if table:
        lines += [f"### Quora duplicate-question search, frozen encoder ({cfg.retrieval.split} split, seed "
                  f"{cfg.frozen_seeds[0]})", "",
                  "'last-layer mean' is the untouched encoder (the paper's 'train with the pooler, search "
                  "without it' is the same thing when the encoder is frozen).", "", _search_test_note(REFERENCE), "",
                  *table, ""]
    return lines + _untouched_section(page)


def _mib(n) -> str:
    return "–" if n is None else f"{n / 2**20:.1f}"


def _untouched_section(page: PageRuns) -> list[str]:
    rows = page.untouched_search
    if not rows:
        return []
    nlists = sorted({int(m) for r in rows for m in re.findall(r"nlist=(\d+)", r["index"])})
    lines = [f"### Quora search without a pooler: last-layer mean vs [CLS]_Last, IVF nlist "
             f"{' vs '.join(map(str, nlists))} ({page.config.retrieval.split} split)", "",
             "The untouched encoder. The paper searches with the last layer's [CLS] once the pooler is removed "
             "([CLS]_Last) and an IVF index of nlist = 1024 cells; the rows above use the last-layer mean and "
             f"nlist {page.config.retrieval.nlist}. Speed: every query in one batch, and one query at a time (batch 1: the mean over the first "
             "1,000 queries, each searched alone). Memory: the "
             "serialised index, and its resident size (the arrays it holds in memory: vectors or codes, ids, "
             "centroids; the normalised matrix for the exact search).", "",
             _search_test_note(", ".join(UNTOUCHED_REFERENCE)), "",
             "| vector | index | MRR@10 | R@1 | R@10 | ms/query batched | ms/query batch 1 | index MiB | resident MiB | "
             f"p vs {UNTOUCHED_REFERENCE[0]}, {UNTOUCHED_REFERENCE[1].split()[0]} (MRR@10) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    base = next((r for r in rows if (r["vector"], r["index"]) == UNTOUCHED_REFERENCE), None)
    for r in rows:
        one = "–" if r.get("ms_per_query_batch1") is None else f"{r['ms_per_query_batch1']:.3f}"
        p = ("reference" if r is base else "–" if base is None else
             p_cell(mrr_test(r.get("first_hits"), base.get("first_hits"), r["n_queries"])))
        lines.append(f"| {r['vector']} | {r['index']} | {r['mrr10']:.2f} | {r['recall1']:.2f} | {r['recall10']:.2f} "
                     f"| {r['ms_per_query']:.3f} | {one} | {_mib(r['index_bytes'])} | "
                     f"{_mib(r.get('index_resident_bytes'))} | {p} |")
    return lines + [""]


def _encoder_section(page: PageRuns) -> list[str]:
    enc, cfg = page.regime("encoder"), page.config
    lines = ["## Encoder trained with the pooler (the paper's setting)", ""]
    if page.not_run.get("encoder"):
        lines += ["**Not run yet**: " + "; ".join(page.not_run["encoder"]) + " (objective / pooler / seed). "
                  "`layerwise results run layer-attention` trains them (resumable).", ""]
    if not enc:
        return lines + ["The conclusions above are about poolers on a frozen encoder only.", ""]
    lines += [_test_note(), ""]
    for obj in cfg.objectives:
        if any(r.objective == obj for r in enc):
            lines += [f"### `{obj}`", "", *_sts_table(page, "encoder", cfg.encoder_poolers, obj), "",
                      _verdict(enc, cfg.encoder_poolers, obj), ""]
    table = _retrieval_table(enc)
    if table:
        lacking = [f"{r.objective} / {r.pooler} / seed {r.seed}" for r in enc if r.search_with_pooler
                   and not r.search_cls_last]
        lines += [f"### Quora duplicate-question search, encoder trained ({cfg.retrieval.split} split)", "",
                  "'last-layer mean' and '[CLS]_Last' = the fine-tuned encoder searched without its pooler, with "
                  "its last layer's mean or first token ([CLS]_Last is the paper's Table 3 vector)."
                  + (f" **[CLS]_Last not searched yet** for {'; '.join(lacking)} (stored before that search "
                     "existed; `layerwise results run layer-attention` trains and searches them again)."
                     if lacking else ""), "", _search_test_note(REFERENCE), "", *table, ""]
    return lines


def render_markdown(page: PageRuns) -> str:
    length = length_section(page.runs, page.config.objectives, page.model) if page.regime("frozen") else []
    return "\n".join(_header(page) + _frozen_section(page) + length + _encoder_section(page)) + "\n"


def summary(page: PageRuns) -> dict:
    """The page's numbers as plain JSON: per regime, objective and pooler the means over seeds."""
    out = {"model": page.model, "sets": page.sets, "not_run": page.not_run, "regimes": {}}
    for regime in ("frozen", "encoder"):
        runs = page.regime(regime)
        poolers = page.config.poolers if regime == "frozen" else page.config.encoder_poolers
        out["regimes"][regime] = {obj: {p: m for p in poolers if (m := pooler_means(runs, page.sets, obj, p))}
                                  for obj in page.config.objectives}
    return out


def draw_figure(page: PageRuns):
    """Average STS over the sets per pooler (mean ± std over seeds), frozen encoder, one panel per objective."""
    from matplotlib.figure import Figure

    frozen, cfg = page.regime("frozen"), page.config
    fig = Figure(figsize=(5.5 * len(cfg.objectives), 3.6), dpi=110)
    axes = fig.subplots(1, len(cfg.objectives), squeeze=False)[0]
    for ax, obj in zip(axes, cfg.objectives):
        names, means, stds = [], [], []
        for p in cfg.poolers:
            rs = _select(frozen, obj, p)
            if rs:
                per_seed = [np.mean([r.sts[d] for d in page.sets]) for r in rs]
                names.append(p), means.append(np.mean(per_seed)), stds.append(sample_std(per_seed) or 0.0)
        ax.barh(np.arange(len(names)), means, xerr=stds, color=["C3" if n == "layer_attention" else "C0" for n in names])
        ax.set_yticks(np.arange(len(names)), labels=names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(min(means, default=0) - 5, max(means, default=1) + 2)
        ax.set_xlabel("average STS Spearman x100")
        ax.set_title(f"frozen encoder, {obj}", fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
