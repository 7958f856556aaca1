"""Markdown, figures and JSON of an :class:`~layerwise.benchmarks.lc.ablation_run.AblationResult`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from layerwise.benchmarks.lc.ablation_run import AblationResult
from layerwise.data.senteval import display_name
from layerwise.data.sts import sts_display_name
from layerwise.reports import fmt, plot_lines, sample_std, write_json, write_text

__all__ = ["render_ablation_markdown", "write_ablation_outputs"]


def _ms(values) -> tuple[float, float | None]:
    """Mean and sample std (ddof 1; None for one value) of the finite values."""
    v = np.asarray(values, dtype=float)
    return float(np.nanmean(v)), sample_std(v)


def _label(name: str) -> str:
    try:
        return display_name(name)
    except ValueError:
        return sts_display_name(name)


def _size_table(block: dict, unit: str) -> list[str]:
    names = list(block)
    if not names:
        return []
    sizes = sorted({s for b in block.values() for s in b.result.by_size})
    lines = ["| N (hidden states combined) | " + " | ".join(map(_label, names)) + " |", "|---|" + "---|" * len(names)]
    for s in sizes:
        cells = [fmt(*_ms(block[n].result.by_size[s])) if s in block[n].result.by_size else ""
                 for n in names]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines.append("| best of any size | " + " | ".join(fmt(*_ms(block[n].result.best)) for n in names) + " |")
    return lines + ["", f"({unit} x100, mean ± std over splits.)"]


def _without_table(block: dict) -> list[str]:
    names = list(block)
    if not names:
        return []
    layers = sorted({s for b in block.values() for s in b.result.without})
    lines = ["| hidden state excluded | " + " | ".join(map(_label, names)) + " |", "|---|" + "---|" * len(names)]
    for layer in layers:
        cells = []
        for n in names:
            r = block[n].result
            d = np.asarray(r.without[layer]) - np.asarray(r.best)
            cells.append(f"{d.mean():+.2f}")
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    return lines + ["", "(Test score of the best subset chosen on dev without that hidden state, minus the best with "
                        "every hidden state allowed; mean over splits. 0 = the layer is never needed.)"]


def render_ablation_markdown(result: AblationResult, figures: dict[str, str] | None = None) -> str:
    m = result.model
    env = result.environment
    st = result.settings
    figures = figures or {}
    lines = [f"# BERT-LC ablations: {m.name}", "",
             f"- model: `{m.name}` ({m.hf_id or m.path}), {m.n_layers} layers, hidden states "
             f"0..{m.n_layers} (0 = embedding output), weights sha256 `{m.weights_sha256[:16]}…`",
             f"- STS: {st['sts']['n_splits']} seeded dev/test splits (dev {st['sts']['dev_size']} pairs, seeds "
             f"{st['sts']['seed']}+k, aggregation `{st['sts']['aggregation']}`), every subset searched exactly on dev "
             "(Spearman), test Spearman reported",
             f"- transfer: {st['transfer']['n_outer']} stratified outer 85/15 splits (seeds {st['transfer']['seed']}+k), "
             f"{st['transfer']['n_inner']} inner 82/18 splits; subsets chosen by the closed-form ridge screen "
             "(every subset of up to 13 hidden states), test accuracy of scikit-learn LogisticRegression "
             "(saga, tol 0.01, max_iter 200, C 10)",
             f"- limited data: {st['limited'].get('test', 'one outer split per seed')}; train-dev cut to each fraction "
             f"(nested prefixes of a permutation drawn with each of {len(st['limited']['seeds'])} seeds), LC chosen on "
             "the cut part",
             f"- command: `{env.get('command', '')}`",
             f"- date: {env.get('date', '')}; machine: {env.get('machine', {}).get('platform', '')}, "
             f"{env.get('machine', {}).get('cpu_count', '')} CPUs; versions: "
             + ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items()), ""]
    for kind, unit in (("sts", "Spearman"), ("transfer", "accuracy")):
        if not result.block(kind):
            continue
        label = "STS" if kind == "sts" else "transfer"
        lines += [f"## (a) Number of layers N, {label}", ""]
        if f"n_layers_{kind}" in figures:
            lines += [f"![number of layers, {label}]({figures[f'n_layers_{kind}']})", ""]
        lines += _size_table(result.block(kind), unit) + ["", f"## (b) Excluding one hidden state, {label}", ""]
        if f"exclude_{kind}" in figures:
            lines += [f"![excluding a layer, {label}]({figures[f'exclude_{kind}']})", ""]
        lines += _without_table(result.block(kind)) + [""]
    if result.limited:
        lines += ["## (c) Limited training data: LC against last-layer mean", ""]
        if "limited" in figures:
            lines += [f"![limited data]({figures['limited']})", ""]
        names = list(result.limited)
        lines += ["| train-dev fraction | " + " | ".join(f"{_label(n)}: n / LC / last / Δ" for n in names) + " |",
                  "|---|" + "---|" * len(names)]
        fr = list(result.limited[names[0]].result.cells)
        for f in fr:
            cells = []
            for n in names:
                r = result.limited[n].result.cells[f]
                lc, last = _ms(r.lc), _ms(r.last)
                cells.append(f"{r.n_train} / {fmt(*lc)} / {fmt(*last)} / {lc[0] - last[0]:+.2f}")
            lines.append(f"| 1/{round(1 / float(f))} | " + " | ".join(cells) + " |")
        lines += ["", "(Test accuracy x100, mean ± std over seeds.)", ""]
    done = {k: v for kind in ("sts", "transfer", "limited") for k, v in
            ((f"{kind}:{n}", p) for n, p in result.block(kind).items())}
    lines += ["## Time", "", "Wall-clock seconds on the 2-core machine; a load average above ~2 means other jobs shared "
              "the cores (parts finished before these were recorded show 'not recorded').", "",
              "| part | seconds | finished | load avg at finish |", "|---|---|---|---|"]
    lines += [f"| {k} | {v.seconds:.1f} | {v.finished or 'not recorded'} | "
              f"{v.load_average_at_finish[0] if v.load_average_at_finish else 'not recorded'} |"
              for k, v in done.items()] + [""]
    return "\n".join(lines)


def write_ablation_outputs(result: AblationResult, output: str | Path, *, data_name: str | None = None) -> dict[str, Path]:
    """``ablations-<model>.json``, ``.md`` and the PNG figures in ``output``; ``data_name`` (the user's file, say)
    is added to the file names and the heading: ``ablations-<model>-<data_name>``."""
    out = Path(output)
    stem = f"ablations-{Path(result.model.name).name}" + (f"-{data_name}" if data_name else "")
    paths: dict[str, Path] = {}
    rel: dict[str, str] = {}
    for kind, unit in (("sts", "Spearman x100"), ("transfer", "accuracy x100")):
        block = result.block(kind)
        if not block:
            continue
        series = {}
        for n, p in block.items():
            sizes = sorted(p.result.by_size)
            ms = [_ms(p.result.by_size[s]) for s in sizes]
            series[_label(n)] = (sizes, [a for a, _ in ms], [b or 0.0 for _, b in ms])
        name = f"n_layers_{kind}"
        paths[name] = plot_lines(series, out / f"{stem}-{name}.png", title=f"{result.model.name}: best subset "
                                 f"of N hidden states chosen on dev, test score ({kind})", xlabel="N",
                                 ylabel=f"test {unit}")
        series = {}
        for n, p in block.items():
            layers = sorted(p.result.without)
            best = np.asarray(p.result.best)
            d = [np.asarray(p.result.without[l]) - best for l in layers]
            series[_label(n)] = (layers, [x.mean() for x in d], [sample_std(x) or 0.0 for x in d])
        name = f"exclude_{kind}"
        paths[name] = plot_lines(series, out / f"{stem}-{name}.png", title=f"{result.model.name}: excluding one "
                                 f"hidden state, change of the test score ({kind})", xlabel="hidden state excluded "
                                 "(0 = embedding output)", ylabel=f"Δ test {unit}", zero_line=True,
                                 xticks=range(result.model.n_layers + 1))
    if result.limited:
        series = {}
        for n, p in result.limited.items():
            fr = list(p.result.cells)
            x = [float(f) for f in fr]
            for method in ("lc", "last"):
                ms = [_ms(getattr(p.result.cells[f], method)) for f in fr]
                series[f"{_label(n)} {'LC' if method == 'lc' else 'last-layer mean'}"] = (x, [a for a, _ in ms], [b or 0.0 for _, b in ms])
        paths["limited"] = plot_lines(series, out / f"{stem}-limited.png", title=f"{result.model.name}: limited "
                                      "training data, test accuracy", xlabel="fraction of the train-dev part kept",
                                      ylabel="test accuracy x100", log2_x=True,
                                      xticks={v: f"1/{round(1 / v)}" for v in x})
    rel = {k: Path(p).name for k, p in paths.items()}
    paths["json"] = write_json(out / f"{stem}.json", result.to_dict())
    markdown = render_ablation_markdown(result, rel)
    if data_name:
        head, _, rest = markdown.partition("\n")
        markdown = f"{head} on {data_name}\n{rest}"
    paths["markdown"] = write_text(out / f"{stem}.md", markdown)
    return paths
