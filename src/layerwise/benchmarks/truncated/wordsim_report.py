"""The files of ``layerwise wordsim``: the per-layer word-similarity table (markdown), its JSON and its plot."""

from __future__ import annotations

from pathlib import Path

from layerwise.keys import keyed_name
from layerwise.methods.truncated.wordsim import WordSimLayers
from layerwise.reports import plot_lines, write_json, write_text

__all__ = ["render_wordsim_markdown", "write_wordsim_outputs"]


def render_wordsim_markdown(result: WordSimLayers, environment: dict | None = None) -> str:
    names = list(result.scores)
    n_states = len(next(iter(result.scores.values())))
    lines = [f"# Per-layer word similarity: {result.model['name']}", "",
             "Spearman x100 of the cosine of word vectors (mean of sub-word tokens, special tokens left out; each word "
             "encoded alone) against the gold scores, for every hidden state (0 = embedding output).", "",
             "| hidden state | " + " | ".join(f"{n} ({result.n_pairs[n]} pairs)" for n in names) + " |",
             "|---" * (len(names) + 1) + "|"]
    for k in range(n_states):
        cells = []
        for n in names:
            v = result.scores[n][k]
            cells.append(f"**{v:.2f}**" if k == result.best_layer(n) else f"{v:.2f}")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines += ["", "Best hidden state per set in bold."]
    if environment:
        lines += ["", f"Command: `{environment['command']}`; date {environment['date']}; "
                      f"layerwise {environment['versions']['layerwise']}, torch {environment['versions']['torch']}."]
    return "\n".join(lines) + "\n"


def write_wordsim_outputs(result: WordSimLayers, output: str | Path, environment: dict) -> dict[str, Path]:
    """``wordsim-<model>-<key>.{json,md,png}`` in ``output``: the key digests the model's identity and the sets'
    checksums, so that another model or other sets never replace these files."""
    output = Path(output)
    stem = keyed_name(f"wordsim-{Path(result.model['name']).name}", {"model": result.model, "data": result.data})
    paths = {"json": write_json(output / f"{stem}.json", {**result.to_dict(), "environment": environment}),
             "markdown": write_text(output / f"{stem}.md", render_wordsim_markdown(result, environment))}
    series = {n: (list(range(len(v))), v, None) for n, v in result.scores.items()}
    paths["plot"] = plot_lines(series, output / f"{stem}.png", title=f"word similarity per hidden state: "
                               f"{result.model['name']}", xlabel="hidden state (0 = embedding output)",
                               ylabel="Spearman x 100", xticks=list(range(len(next(iter(series.values()))[0]))))
    return paths
