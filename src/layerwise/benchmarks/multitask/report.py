"""Multi-task results as a markdown page, a JSON summary and the figure of the learned per-task layer weights."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from layerwise.benchmarks.multitask.findings import best_by_dev, judge, layer_centres, mean_dev
from layerwise.benchmarks.page_parts import run_time_table
from layerwise.benchmarks.significance_parts import ALPHA, N_RESAMPLES, NOT_TESTED, SEED, p_cell
from layerwise.evaluation.significance import SignificanceResult
from layerwise.methods.multitask.data import DATA_NOTES
from layerwise.methods.multitask.run import ExperimentResult

__all__ = ["MultitaskPage", "draw_layer_weights", "render_markdown", "summary"]

SCORES = ("sst_acc", "para_acc", "sts_pearson", "sts_spearman", "overall")
HEADERS = {"sst_acc": "SST acc", "para_acc": "PARA acc", "sts_pearson": "STS Pearson", "sts_spearman": "STS Spearman",
           "overall": "overall"}


@dataclass
class MultitaskPage:
    title: str
    model: str
    results: list[ExperimentResult]  # every (experiment, seed) shown, in page order
    provenance: list[str] = field(default_factory=list)  # markdown bullet lines
    missing: list[str] = field(default_factory=list)  # parts not computed yet
    run_times: dict[str, tuple] = field(default_factory=dict)  # part name -> run_time_row
    devices: list[str] = field(default_factory=list)  # where the runs shown trained ("cpu", "cuda"...)
    training_data: list[str] | None = None  # files the encoder's folder says it was trained on (None: not read)
    # (experiment, reference) -> score -> the paired test of their difference (None: not tested); see
    # benchmarks.multitask.significance
    tests: dict[tuple[str, str], dict[str, SignificanceResult | None]] = field(default_factory=dict)

    def experiments(self) -> list[str]:
        return list(dict.fromkeys(r.config["name"] for r in self.results))

    def of(self, name: str) -> list[ExperimentResult]:
        return [r for r in self.results if r.config["name"] == name]


def _mean_std(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def _cell(values: list[float]) -> str:
    mean, std = _mean_std(values)
    return f"{mean:.3f}" if len(values) == 1 else f"{mean:.3f} ± {std:.3f}"


def summary(page: MultitaskPage) -> dict:
    """{"model", "experiments": {name: {"seeds", "dev": {score: mean}, "test": {...}, "config"}}, "missing"}."""
    out = {}
    for name in page.experiments():
        runs = page.of(name)
        out[name] = {"seeds": [r.seed for r in runs], "config": runs[0].config,
                     **{split: {s: _mean_std([getattr(r, split).to_dict()[s] for r in runs])[0] for s in SCORES}
                        for split in ("dev", "test")},
                     "layer_weights": {r.seed: r.layer_weights for r in runs if r.layer_weights},
                     "subsets": {r.seed: r.subsets for r in runs if r.subsets}}
    return {"title": page.title, "model": page.model, "experiments": out, "missing": page.missing}


def _settings_line(config: dict) -> str:
    keys = ("epochs", "batch_size", "lr", "dropout", "schedule", "max_length", "limit", "eval_limit")
    return ", ".join(f"{k} {config[k]}" for k in keys)


def _score_table(page: MultitaskPage, split: str) -> list[str]:
    lines = ["| experiment | seeds | " + " | ".join(HEADERS[s] for s in SCORES) + " | training time (min, per run) |",
             "|---|---|" + "---|" * (len(SCORES) + 1)]
    for name in page.experiments():
        runs = page.of(name)
        cells = [_cell([getattr(r, split).to_dict()[s] for r in runs]) for s in SCORES]
        minutes = _mean_std([r.seconds / 60 for r in runs])[0]
        lines.append(f"| {name} | {len(runs)} | " + " | ".join(cells) + f" | {minutes:.1f} |")
    return lines


def _findings(page: MultitaskPage) -> list[str]:
    runs = {name: page.of(name) for name in page.experiments()}
    verdicts = judge(runs)
    if not verdicts:
        return ["No pair of experiments to compare is stored yet.", ""]
    noise = verdicts[0].noise
    lines = ["Test scores (checkpoint chosen on dev), mean over seeds; difference = experiment - the run it changes. "
             + ("Seed spread of each score: the largest sample std over seeds among the experiments run with several "
                "seeds (" + ", ".join(f"{HEADERS[k]} {v:.3f}" for k, v in noise.items()) + "); a claim whose every "
                "targeted difference is no larger than its score's spread is \"within the seed spread\"."
                if noise is not None else "Only one seed per experiment is stored: the differences are single runs."),
             "", _test_note(), "", "| idea | experiment vs reference | seeds | targeted scores: difference | "
             "targeted scores: p vs reference | overall: difference | overall: p vs reference | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        c = v.claim
        target = ", ".join(f"{HEADERS[s]} {v.differences[s]:+.3f}" for s in c.scores)
        tests = page.tests.get((c.experiment, c.reference), {})
        p = ", ".join(f"{HEADERS[s]} {p_cell(tests.get(s))}" for s in c.scores)
        idea = c.idea.replace("|", "\\|")  # a literal | (as in |u - v|) would split the markdown cell
        lines.append(f"| {idea} | {c.experiment} vs {c.reference} | {v.seeds[0]} vs {v.seeds[1]} | {target} | {p} | "
                     f"{v.differences['overall']:+.3f} | {p_cell(tests.get('overall'))} | {v.word} |")
    by_word: dict[str, list[str]] = {}
    for v in verdicts:
        by_word.setdefault(v.word, []).append(v.claim.experiment)
    lines += [""] + [f"- **{word}** ({len(names)}): {', '.join(names)}" for word, names in by_word.items()]
    return lines + ["", *_best_lines(page, noise), ""]


def _test_note() -> str:
    return (f"*p vs reference*: paired bootstrap (two-sided) of the experiment's test score against its reference's "
            f"(each the mean over its seeds), {N_RESAMPLES} resamples; SST and PARA accuracy resample the test "
            f"examples (seed {SEED}, {SEED + 1}), STS Pearson the test pairs (seed {SEED + 2}); the overall score "
            "combines the three resampled scores as the page does, each task's units drawn independently (a "
            f"stratified bootstrap); *yes* where p < {ALPHA}. The verdict column reads the differences alone. "
            f"*{NOT_TESTED}*: a run stored before its per-example test outputs were kept (or the two experiments "
            "scored on different test data); `layerwise results run multitask` recomputes it, evaluating the kept "
            "checkpoints where they exist.")


def _best_lines(page: MultitaskPage, noise: dict[str, float] | None) -> list[str]:
    """The best experiment by dev overall on the seeds every experiment has (the one the extra seeds went to), and
    the best by the mean over all stored seeds where that differs."""
    runs = {n: page.of(n) for n in page.experiments()}
    common = set.intersection(*({r.seed for r in v} for v in runs.values()))
    if not common:
        return ["No seed is stored for every experiment yet: no best experiment is named."]
    best = best_by_dev(runs, common)
    lines = [f"Best experiment by dev overall on seed(s) {sorted(common)}, which every experiment has: **{best}** "
             f"({mean_dev(runs[best], common):.3f}; the report's best: NLI_TRIPLET)."]
    every = {n: mean_dev(v) for n, v in runs.items()}
    top = best_by_dev(runs)
    if top != best:
        gap = every[top] - every[best]
        spread = "" if noise is None else (f", {'within' if gap <= noise['overall'] else 'beyond'} the overall "
                                           f"score's seed spread ({noise['overall']:.3f})")
        lines.append(f"Over all the seeds stored, {best}'s mean dev overall is {every[best]:.3f} and {top} "
                     f"({len(page.of(top))} seed(s)) has the highest, {every[top]:.3f}: {gap:.3f} apart{spread}.")
    return lines


def _seen(files: list[str], *words: str) -> list[str]:
    return [f for f in files if any(w in f.lower() for w in words)]


def _data_change_lines(page: MultitaskPage) -> list[str]:
    """What this encoder's own training and the smaller NLI and Quora data change, from the stored runs and the
    training files the encoder's folder declares."""
    lines = ["## What this encoder and the smaller data change", ""]
    files = page.training_data
    if files is None:
        lines.append("- The encoder's declared training files are not stored yet (`layerwise results run multitask` "
                     "reads them from its folder first).")
    elif not files:
        lines.append("- The encoder's folder declares no training files (no `data_config.json`).")
    nli = [r for r in page.results if r.config.get("nli")]
    if nli:
        r = nli[0]
        phase = next(p for p in r.phases if p.name == "nli")
        sample = "all" if r.config["limit"] is None else "a seeded sample"
        lines.append(f"- NLI pre-finetuning here took {phase.steps:,} steps of {r.config['batch_size']} examples "
                     f"({r.config['nli_epochs']} epoch(s) over {sample} of the SNLI dev + test examples); the report "
                     "pre-finetuned on NLI training data that is not available here.")
        nli_files = _seen(files or [], "nli")
        if nli_files:
            lines.append(f"- The encoder's own training files (its `data_config.json`) include {', '.join(nli_files)}: "
                         "it was already trained contrastively on SNLI and MultiNLI, so a small NLI pre-finetuning "
                         "repeats data it has learned from, a likely reason the NLI rows move so little here (the "
                         "report's encoder had no such training).")
    quora = _seen(files or [], "quora")
    if page.results:
        limit = page.results[0].config["limit"]
        lines.append("- PARA trains on " + ("all" if limit is None else f"at most {limit:,}") + " of the pairs in "
                     "the seeded 90 % training share of the Quora dev partition (10,000 pairs); the report trained "
                     "on the Quora train split.")
    if quora:
        lines.append(f"- The encoder's training files also include {', '.join(quora)}: Quora duplicate questions "
                     "were part of its training, so some Quora test questions may have been seen before, and PARA "
                     "accuracy says less about transfer to new data than it would for an encoder without them.")
    return lines + [""]


def _layer_lines(page: MultitaskPage) -> list[str]:
    lines = ["", "## Learned layer weights (+MIX rows)", "", "![per-task layer weights](multitask-layers.png)", "",
             "Where each task reads from: the weighted mean hidden-state index of its softmax weights (0 = embedding "
             "output), mean over seeds.", "", "| experiment | SST | PARA | STS |", "|---|---|---|---|"]
    every: list[dict[str, float]] = []  # the centres of every +MIX run
    for name in page.experiments():
        mine = [r for r in page.of(name) if r.layer_weights]
        if mine:
            centres = [layer_centres(r.layer_weights) for r in mine]
            every += centres
            cells = [f"{np.mean([c[t] for c in centres]):.2f}" if t in centres[0] else "" for t in ("sst", "para", "sts")]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    gaps = [c["sst"] - c["sts"] for c in every if {"sst", "sts"} <= set(c)]
    if gaps:  # do sentiment and similarity settle on different layers?
        higher = sum(g > 0 for g in gaps)
        lines += ["", f"SST's centre minus STS's centre: {np.mean(gaps):+.2f} hidden states on average over the "
                  f"{len(gaps)} +MIX run(s); sentiment reads from higher layers than similarity in {higher} of them."]
    weights = [w for r in page.results for w in r.layer_weights.values()]
    if weights:  # how far training moved the mixes from where they start (uniform)
        n = len(weights[0])
        rates = sorted({r.config["mix_lr"] for r in page.results if r.layer_weights})
        lines += ["", f"Every mix starts uniform (1/{n} = {1 / n:.3f} per hidden state) and trains at learning rate "
                  f"{', '.join(f'{x:g}' for x in rates)} (the encoder and heads: {page.results[0].config['lr']:g}); "
                  f"after training the weights "
                  f"range from {min(map(min, weights)):.3f} to {max(map(max, weights)):.3f}. A mix that stays near "
                  "uniform reads about the mean of all hidden states, not a choice of layers."]
    return lines


def render_markdown(page: MultitaskPage) -> str:
    lines = [f"# {page.title}", "", f"Model: `{page.model}`. Scores as fractions; overall = "
             "(SST acc + PARA acc + (STS Pearson + 1) / 2) / 3. Mean over seeds (± sample std when several).", ""]
    if page.results:
        c = page.results[0].config
        lines += [f"Settings of the first run: {_settings_line(c)}.", ""]
        if c["epochs"] != 10 or c["limit"] is not None:
            lines += [f"**Smaller than this library's default training:** {c['epochs']} epoch(s) over "
                      + ("all" if c["limit"] is None else f"a seeded sample of at most {c['limit']:,}")
                      + " training examples per task (NLI pre-finetuning included), against the default 10 epochs "
                      "over all of them (the report does not state its epoch count): settings sized for a 2-core CPU "
                      f"(the runs shown trained on {', '.join(page.devices) or 'cpu'}). Differences that need longer "
                      "training to appear may not show here.", ""]
    lines += ["## Test (checkpoint chosen on dev)", "", *_score_table(page, "test"), "",
              "## Dev (the selection split)", "", *_score_table(page, "dev"), "",
              "## Which of the report's findings hold here", "", *_findings(page), *_data_change_lines(page)]
    subsets = [r for r in page.results if r.subsets]
    if subsets:
        lines += ["## Layer subsets chosen on the frozen encoder (+SUBSET rows)", "",
                  "| experiment | seed | SST | PARA | STS |", "|---|---|---|---|---|"]
        for r in subsets:
            cells = [",".join(map(str, r.subsets[t]["layers"])) for t in ("sst", "para", "sts")]
            lines.append(f"| {r.config['name']} | {r.seed} | " + " | ".join(cells) + " |")
        lines += ["", "Hidden state 0 is the embedding output, L the last layer. STS: exact subset search on STS-B "
                  "train; SST and PARA: ridge screen on an 80/20 split of their training data."]
    if any(r.layer_weights for r in page.results):
        lines += _layer_lines(page)
    lines += ["", "## Data", "", *[f"- {n}" for n in DATA_NOTES],
              "- The report (Lee, CS224N) reached dev overall 0.784 with NLI_TRIPLET vs 0.596 for BASELINE on its "
              "own data; the numbers above are not comparable with those."]
    if page.results:
        total = sum(r.seconds for r in page.results)
        lines += ["", "## Time", "", f"- {len(page.results)} runs, {total / 3600:.2f} h of training and evaluation in "
                  f"all (sum of the runs' wall-clock time), device: {', '.join(page.devices) or 'cpu'} (the machine "
                  "is in the provenance below)" + (": this is what a CPU-only run of these parts costs."
                                                  if page.devices in ([], ["cpu"]) else "."), ""]
        if page.run_times:
            lines += run_time_table(page.run_times)
    if page.missing:
        lines += ["", "## Not run yet", "", *[f"- {m}" for m in page.missing]]
    if page.provenance:
        lines += ["", "## Provenance", "", *page.provenance]
    return "\n".join(lines) + "\n"


def draw_layer_weights(page: MultitaskPage):
    """A matplotlib ``Figure``: softmax layer weights of each task (lines) per +MIX experiment (panels)."""
    from matplotlib.figure import Figure

    runs = [r for r in page.results if r.layer_weights]
    names = list(dict.fromkeys(r.config["name"] for r in runs))
    fig = Figure(figsize=(4.2 * max(1, len(names)), 3.4), layout="constrained")
    axes = fig.subplots(1, max(1, len(names)), squeeze=False)[0]
    for ax, name in zip(axes, names, strict=False):  # one empty panel when there is no +MIX run
        mine = [r for r in runs if r.config["name"] == name]
        for task in [t for t in ("sst", "para", "sts") if t in mine[0].layer_weights]:
            w = np.mean([r.layer_weights[task] for r in mine], axis=0)
            ax.plot(range(len(w)), w, marker="o", label=task.upper())
        n = len(next(iter(mine[0].layer_weights.values())))
        ax.axhline(1 / n, color="grey", linestyle="--", linewidth=0.8, label=f"start (uniform, 1/{n})")
        ax.set_title(f"{name} ({len(mine)} seed{'s' if len(mine) > 1 else ''})", fontsize=9)
        ax.set_xlabel("hidden state (0 = embeddings)")
        ax.set_ylabel("softmax weight")
        ax.legend(fontsize=8)
    return fig
