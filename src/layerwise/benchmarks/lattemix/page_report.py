"""The Latte-Mix results page from stored parts: markdown, the per-layer figure and a JSON summary (nothing computed)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from layerwise.benchmarks.lattemix.grid import FirstPCResult, LayerPoint, MainResult, SweepRow
from layerwise.benchmarks.lattemix.report import METHOD_NAMES
from layerwise.benchmarks.significance_parts import p_cell, significance_note
from layerwise.evaluation.significance import SignificanceResult
from layerwise.reports import fmt, sample_std

__all__ = ["MAIN_BASELINE", "SWEEP_BASELINE", "SWEEP_TESTED", "PageParts", "draw_layers", "render_markdown",
           "summary"]

MAIN_BASELINE = "mean"  # every row of a main table is tested against mean pooling of the same hidden state
SWEEP_BASELINE = "default"  # every sweep row against the default setting, for each of SWEEP_TESTED
SWEEP_TESTED = ("cosine", "js", "l2")
_RERUN = "layerwise results run lattemix"


@dataclass
class PageParts:
    main: list[MainResult]  # page model order
    layers: list[LayerPoint]  # hidden state order (first model)
    sweep: list[SweepRow]  # page sweep order (first model)
    small_sets: list[str]
    curve_seed: int | None = None
    provenance: list[str] = field(default_factory=list)
    first_pc: FirstPCResult | None = None  # first model, the sweep's training text
    # each comparison row against its baseline (pages.page_tests keys); None: a side has no stored predictions
    tests: dict[tuple, SignificanceResult | None] = field(default_factory=dict)


def _averages(main: MainResult, sets) -> dict[str, float]:
    avgs = {meth: float(np.mean([per[d] for d in sets])) for meth, per in main.baselines.items()}
    for kind, run in main.runs.items():
        for metric, per in run.scores.items():
            avgs[f"{kind}/{metric}"] = float(np.mean([np.mean(per[d]) for d in sets]))
    return avgs


def _main_section(main: MainResult, tests: dict) -> list[str]:
    m, sets = main.model, list(main.data)
    seeds = next(iter(main.runs.values())).seeds
    avgs = _averages(main, sets)

    def p(method: str) -> str:
        return "reference" if method == MAIN_BASELINE else p_cell(tests.get(("main", m["name"], method)))

    base = METHOD_NAMES[MAIN_BASELINE]
    lines = [f"## {m['name']} (hidden state {main.layer}, the last)", "",
             f"Training: {main.training_text['n_sentences']} sentences, {main.training_text['n_tokens']} "
             f"tokens; trained rows: mean ± std over seeds {seeds}.", "",
             significance_note("each row's avg", base, f"the row's avg minus {base}'s (the mean Spearman over the "
                               "sets, and for a trained row over its seeds, each seed scored on each set; the union "
                               "of the sets' test pairs is resampled)", _RERUN), "",
             "| method | " + " | ".join(sets) + f" | avg | p vs {base} (avg) |", "|---|" + "---|" * (len(sets) + 2)]
    for meth, per in main.baselines.items():
        lines.append(f"| {METHOD_NAMES[meth]} | " + " | ".join(f"{per[d]:.2f}" for d in sets)
                     + f" | {avgs[meth]:.2f} | {p(meth)} |")
    for kind, run in main.runs.items():
        for metric, per in run.scores.items():
            key = f"{kind}/{metric}"
            lines.append(f"| {METHOD_NAMES[key]} | " + " | ".join(fmt(float(np.mean(per[d])), sample_std(per[d]))
                                                                for d in sets) + f" | {avgs[key]:.2f} | {p(key)} |")
    lines += ["", "| model | train seconds per seed | final loss | final KL |", "|---|---|---|---|"]
    for kind, run in main.runs.items():
        lines.append(f"| {kind} | {np.mean(run.train_seconds):.1f} | {np.mean(run.final_loss):.2f} | "
                     f"{np.mean(run.final_kl):.3f} |")
    best = max(("categorical/cosine", "categorical/js"), key=lambda k: avgs[k])
    per_set = {d: float(np.mean(main.runs["categorical"].scores[best.split("/")[1]][d])) - main.baselines["mean"][d]
               for d in sets}
    wins = [d for d, v in per_set.items() if v > 0]
    return lines + ["", f"**Verdict ({m['name']})**: the better Latte-Mix similarity ({METHOD_NAMES[best]}) averages "
                    f"{avgs[best]:.2f} against {avgs['mean']:.2f} for mean pooling ({avgs[best] - avgs['mean']:+.2f}); "
                    f"it beats mean pooling on {len(wins)} of {len(sets)} sets" + (f" ({', '.join(wins)})" if wins else "")
                    + ".", f"Encoding: training text {main.seconds['encode_train']:.0f} s, evaluation sentences "
                    f"{main.seconds['encode_eval']:.0f} s; whole model {main.total_seconds:.0f} s.", ""]


def _curve_section(parts: PageParts, model: str) -> list[str]:
    sets = parts.small_sets
    lines = [f"## Per-layer curve ({model}, seed {parts.curve_seed}, "
             f"{parts.layers[0].training_text['n_sentences']} training sentences)", "",
             "![per-layer](lattemix-layers.png)", "",
             "| hidden state | " + " | ".join(f"mean {d} | Latte-Mix cos {d} | Latte-Mix -JS {d}" for d in sets) + " |",
             "|---|" + "---|---|---|" * len(sets)]
    for p in parts.layers:
        lines.append(f"| {p.layer} | " + " | ".join(
            f"{p.mean[d]:.2f} | {p.categorical['cosine'][d][0]:.2f} | {p.categorical['js'][d][0]:.2f}" for d in sets)
            + " |")
    return lines + [""]


def _sweep_section(parts: PageParts, model: str) -> list[str]:
    sets, rows = parts.small_sets, parts.sweep
    metrics = [("cosine", "cos"), ("js", "-JS")] + ([("l2", "-L2")] if any("l2" in r.scores for r in rows) else [])
    lines = [f"## Hyper-parameters ({model}, last hidden state, categorical VAE, seed {parts.curve_seed}, "
             f"{rows[0].training_text.get('n_sentences', '?')} training sentences)", "",
             "Default: " + ", ".join(f"{k} {v}" for k, v in rows[0].config.items()
                                     if k in ("n_groups", "n_classes", "tau", "depth", "beta")) + " (the decoder "
             "mirrors the encoder, plain KL). The paper's settings: tau 0.3, a 3-layer decoder, KL thresholding at "
             "0.3 nats per latent group (`paper:` rows). -L2: minus the squared L2 distance of the categorical "
             "mixtures (rows stored before it existed show –).", "",
             significance_note("each setting's cos, -JS and -L2", "default", "the row's Spearman minus the default "
                               f"row's, averaged over {' and '.join(sets)} (one seed each; the union of the sets' "
                               "test pairs is resampled)", _RERUN), "",
             "| varied | setting (others as default) | " + " | ".join(f"{d} {label}" for d in sets
                                                                     for _, label in metrics)
             + " | train s | " + " | ".join(f"p vs default ({label})" for m, label in metrics if m in SWEEP_TESTED)
             + " |", "|---|---|" + "---|" * (len(sets) * len(metrics)) + "---|"
             + "---|" * sum(m in SWEEP_TESTED for m, _ in metrics)]
    for r in rows:
        sc = r.scores
        ps = ["reference" if r.vary == SWEEP_BASELINE else p_cell(parts.tests.get(("sweep", r.vary, str(r.change), m)))
              for m, _ in metrics if m in SWEEP_TESTED]
        lines.append(f"| {r.vary} | {r.change or 'default'} | " + " | ".join(
            f"{sc[m][d][0]:.2f}" if m in sc else "–" for d in sets for m, _ in metrics)
            + f" | {r.train_seconds[0]:.1f} | " + " | ".join(ps) + " |")
    return lines + ["", "AE vs Normal VAE vs categorical VAE (the paper's Table 2) are the rows of the main tables "
                    "above.", ""]


def _first_pc_section(parts: PageParts, model: str) -> list[str]:
    pc, sets = parts.first_pc, parts.small_sets
    rows = (("mean pooling (no special tokens)", "mean"), ("the same, first principal component removed",
                                                           "mean_pc1_removed"))
    return [f"## First principal component of the token vectors ({model}, last hidden state)", "",
            f"Fitted on the {pc.n_tokens} (non-special) tokens of the sweep's "
            f"{pc.training_text.get('n_sentences', '?')} training sentences: it holds {100 * pc.share:.1f}% of their "
            "variance. A token's coordinate on it is its first-principal-component word embedding "
            "(`layerwise.methods.lattemix.principal.FirstComponent.coordinate`); removing it from the mean vector "
            "(`remove`) tests how much that one direction pulls the cosine of mean pooling.", "",
            significance_note("the component removed", rows[0][0], f"the row's Spearman minus {rows[0][0]}'s, "
                              f"averaged over {' and '.join(sets)} (the union of the sets' test pairs is resampled)",
                              _RERUN), "",
            "| pooling | " + " | ".join(sets) + f" | p vs {rows[0][0]} |", "|---|" + "---|" * (len(sets) + 1),
            *(f"| {label} | " + " | ".join(f"{pc.scores[key][d]:.2f}" for d in sets) + " | "
              + ("reference" if key == "mean" else p_cell(parts.tests.get(("pc",)))) + " |" for label, key in rows),
            "", *_first_pc_words(pc.words)]


def _first_pc_words(words: dict) -> list[str]:
    """The component read per word type (Fig. 2 / Tables 8 and 10: the first-principal-component word embeddings),
    or a line saying the stored part predates that reading."""
    if not words:
        return ["*Per word type*: not read by the stored part (computed before it was); `layerwise results run "
                "lattemix` reads it.", ""]
    rho = words["spearman_log_count"]

    def listed(rows: list) -> str:
        return ", ".join(f"`{token}` ({count}, {coord:+.2f})" for token, count, coord in rows)

    return [f"*Per word type* (the paper's first-principal-component word embeddings, Fig. 2 / Tables 8 and 10, as "
            f"read here): each token type's coordinate averaged over its occurrences in the training text "
            f"(`principal.word_coordinates`), for the {words['n_types_read']} types seen at least "
            f"{words['min_count']} times (of {words['n_types']} in it). Spearman's rho of that coordinate with the type's log count: "
            + ("not defined (too few types)" if rho is None else f"{rho:+.3f}")
            + (" (|rho| < 0.3: this component does not order these words by how often they occur; the types at its "
               "ends, below, show what it does separate)" if rho is not None and abs(rho) < 0.3 else
               " (how far the component orders words by frequency)") + ".", "",
            "| types by count (rarest first) | types | mean coordinate |", "|---|---|---|",
            *(f"| {b['counts'][0]}-{b['counts'][1]} | {b['n_types']} | {b['mean_coordinate']:+.3f} |"
              for b in words["count_bins"]), "",
            f"Highest on the component (token, count, coordinate): {listed(words['highest'])}.", "",
            f"Lowest: {listed(words['lowest'])}.", ""]


def render_markdown(parts: PageParts) -> str:
    cat = parts.main[0].runs["categorical"].config if parts.main else {}
    lines = [
        "# Latte-Mix: zero-shot STS from mixtures of token latent distributions", "", *parts.provenance,
        "- method: a VAE over frozen token vectors of one hidden state (0 = embedding output), trained without labels "
        "for one epoch; a sentence is the mean of its (non-special) tokens' posteriors; similarity = cosine or minus "
        "the Jensen-Shannon divergence of two mixtures (categorical VAE), minus the closed-form L2 distance between "
        "Gaussian mixtures (Normal VAE), cosine of mean codes (AE). Baselines: cosine of CLS / mean / max pooling of "
        "the same hidden state.",
        "- training text: SNLI dev+test sentences and the 11,914-sentence wiki1m head, minus every evaluation sentence. "
        "This is not the paper's training text; numbers are not comparable with the paper's.",
        "- STS12-16 aggregation `all`; STS-B test split; SICK-R SemEval-2014 test split (4,927 pairs). Spearman x100.",
    ]
    if cat:
        lines.append(f"- defaults: categorical VAE with {cat['n_groups']} groups of {cat['n_classes']} classes, tau "
                     f"{cat['tau']}, one linear encoder layer, beta 1 with a {cat['beta_warmup_steps']}-step linear "
                     "warm-up, Adam lr 1e-3 with a 200-step linear warm-up, batch 256 tokens, one epoch; Normal VAE "
                     "and AE with a 32-d latent.")
    lines.append("")
    for main in parts.main:
        lines += _main_section(main, parts.tests)
    first = parts.main[0].model["name"] if parts.main else "?"
    if parts.layers:
        lines += _curve_section(parts, first)
    if parts.sweep:
        lines += _sweep_section(parts, first)
    if parts.first_pc is not None:
        lines += _first_pc_section(parts, first)
    lines += _departures_section(parts)
    return "\n".join(lines)


def _departures_section(parts: PageParts) -> list[str]:
    """The closing note: each departure from the paper and what its setting changed here (sweep rows, seed 0)."""
    rows = {r.vary: r for r in parts.sweep}
    default, sets = rows.get("default"), parts.small_sets
    paper = [r for r in parts.sweep if r.vary.startswith("paper: ")]
    if default is None or not paper:
        return []

    def delta(r, metric):
        return ", ".join(f"{d} {r.scores[metric][d][0] - default.scores[metric][d][0]:+.2f}" for d in sets)

    lines = ["## Departures from the paper", "",
             "Each of the paper's settings that this library does not use by default, against the default "
             "(sweep above, one seed: differences under about 0.5 are within the seed-to-seed spread of the main "
             "tables):", ""]
    for r in paper:
        lines.append(f"- {r.vary.removeprefix('paper: ')} ({r.change}): cosine {delta(r, 'cosine')}; -JS "
                     f"{delta(r, 'js')}.")
    if "l2" in default.scores:
        lines.append("- the categorical -L2 similarity (the paper's; this page's main measures are cosine and -JS): "
                     + ", ".join(f"{d} {default.scores['l2'][d][0]:.2f} against cosine "
                                 f"{default.scores['cosine'][d][0]:.2f}" for d in sets) + " (default model).")
    if parts.first_pc is not None:
        pc = parts.first_pc.scores
        lines.append("- the first principal component of the token vectors: removing it from mean pooling changes "
                     + ", ".join(f"{d} {pc['mean_pc1_removed'][d] - pc['mean'][d]:+.2f}" for d in sets) + ".")
    lines.append("- not the paper's, and not offered: the training text (SNLI dev+test and the wiki1m head) and the "
                 "encoders (sentence-transformer fine-tunes; none of the paper's models is on this machine).")
    return lines + [""]


def summary(parts: PageParts) -> dict:
    """Plain JSON of the page's numbers: per model and method the mean over seeds per set; the curve; the sweep."""
    main = {}
    for m in parts.main:
        rows = {meth: dict(per) for meth, per in m.baselines.items()}
        for kind, run in m.runs.items():
            for metric, per in run.scores.items():
                rows[f"{kind}/{metric}"] = {d: float(np.mean(v)) for d, v in per.items()}
        main[m.model["name"]] = {"layer": m.layer, "methods": rows}
    return {"main": main, "small_sets": parts.small_sets,
            "layers": [{"layer": p.layer, "mean": p.mean, "categorical": p.categorical} for p in parts.layers],
            "sweep": [{"vary": r.vary, "change": r.change, "scores": r.scores} for r in parts.sweep],
            **({"first_pc": {"share": parts.first_pc.share, "scores": parts.first_pc.scores}} if parts.first_pc else {})}


def draw_layers(parts: PageParts):
    """Mean pooling vs Latte-Mix (-JS and cosine) on every hidden state, one panel per data set (a ``Figure``)."""
    from matplotlib.figure import Figure

    sets, layers = parts.small_sets, [p.layer for p in parts.layers]
    fig = Figure(figsize=(4.5 * len(sets), 3.5), dpi=120)
    axes = fig.subplots(1, len(sets), squeeze=False)[0]
    for ax, d in zip(axes, sets):
        ax.plot(layers, [p.mean[d] for p in parts.layers], marker="o", label="mean pooling")
        ax.plot(layers, [p.categorical["js"][d][0] for p in parts.layers], marker="s", label="Latte-Mix (-JS)")
        ax.plot(layers, [p.categorical["cosine"][d][0] for p in parts.layers], marker="^", label="Latte-Mix (cosine)")
        ax.set_title(d)
        ax.set_xlabel("hidden state (0 = embedding output)")
        ax.set_ylabel("Spearman x 100")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig
