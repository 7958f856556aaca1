"""TMFT results as a markdown page and a JSON summary, from stored results only (the figures: ``figures.py``).

Scores are STS-B test Spearman x100 of the checkpoint with the best dev Spearman; "mean ± std" is over seeds
(sample std, shown when there are several). Hidden state 0 is the embedding output, L the last layer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from layerwise.benchmarks.page_parts import run_time_table
from layerwise.benchmarks.significance_parts import p_cell, significance_note
from layerwise.benchmarks.truncated.page_model import (
    LABELS,
    TMFTPage,
    curves,
    epochs_of,
    find,
    groups,
    page_models,
)
from layerwise.benchmarks.truncated.significance import group_test

__all__ = ["render_markdown", "summary"]


def summary(page: TMFTPage) -> dict:
    """{"settings", "groups": [...], "frontiers", "throughput", "lc_layers", "missing", "wall_seconds"}."""
    rows = [{"model": g.model, "pre_step": g.pre_step, "layers": list(g.layers), "epochs": g.epochs,
             "seeds": [r.config["seed"] for r in g.results], "parameters": g.parameters,
             "test_spearman": g.mean_std()[0], "test_spearman_std": g.mean_std()[1],
             "dev_spearman": g.mean_std("dev_spearman")[0], "test_pearson": g.mean_std("test_pearson")[0]}
            for g in groups(page)]
    return {"title": page.title, "settings": page.settings, "groups": rows,
            "frontiers": {k: v.to_dict() for k, v in page.frontiers.items()},
            "throughput": {k: v.to_dict() for k, v in page.throughputs.items()},
            "lc_layers": list(page.lc_layers) if page.lc_layers else None, "missing": page.missing,
            "wall_seconds": sum(page.wall_seconds.values())}


def _layer_table(page: TMFTPage, model: str, depths: list[int]) -> list[str]:
    cs, fr = curves(page), page.frontiers.get(model)
    pres = list(page.settings["pre_steps"]) if model == page_models(page)[0][0] else ["none"]
    lines = [f"### {model}", "", "| depth | parameters | " + " | ".join(LABELS[p] for p in pres)
             + " | untrained, state l alone | frontier (no training) |", "|---|---|" + "---|" * (len(pres) + 2)]
    for d in depths:
        gs = [find(cs, model, p, (d,), epochs_of(page.settings, model)) for p in pres]
        params = next((g.parameters for g in gs if g), fr.row(d).parameters if fr else None)
        cells = [g.cell() if g else "not run yet" for g in gs]
        fcells = [f"{fr.row(d).single_test_spearman:.2f}", f"{fr.row(d).test_spearman:.2f} ({','.join(map(str, fr.row(d).layers))})"] \
            if fr else ["not run yet", "not run yet"]
        lines.append(f"| {d} | {'?' if params is None else f'{params:,}'} | " + " | ".join(cells + fcells) + " |")
    return lines + [""]


def _best_table(page: TMFTPage) -> list[str]:
    lines = ["| model | method | best depth (dev) | parameters | share of full | dev | test | test at full depth |",
             "|---|---|---|---|---|---|---|---|"]
    for model, depths in page_models(page):
        for pre in page.settings["pre_steps"] if model == page_models(page)[0][0] else ["none"]:
            gs = [g for g in curves(page) if g.model == model and g.pre_step == pre]
            if not gs:
                lines.append(f"| {model} | {LABELS[pre]} | not run yet | | | | | |")
                continue
            best = max(gs, key=lambda g: g.mean_std("dev_spearman")[0])
            full = next((g for g in gs if g.depth == max(depths)), None)
            share = best.parameters / best.results[0].full_parameters
            lines.append(f"| {model} | {LABELS[pre]} | {best.depth} | {best.parameters:,} | {share:.0%} | "
                         f"{best.cell('dev_spearman')} | {best.cell()} | {full.cell() if full else 'not run yet'} |")
    return lines + [""]


def _frontier_table(page: TMFTPage) -> list[str]:
    lines = ["| model | depth | subset chosen on dev | dev | test (no training) | state l alone | TMFT | "
             "share of TMFT's gain reached with no training |", "|---|---|---|---|---|---|---|---|"]
    cs, grid = curves(page), dict(page_models(page))
    for model, fr in page.frontiers.items():
        for r in fr.rows:
            g = find(cs, model, "none", (r.depth,), epochs_of(page.settings, model))
            tm = g.mean_std()[0] if g else None
            gain = tm - r.single_test_spearman if tm is not None else None
            share = f"{(r.test_spearman - r.single_test_spearman) / gain:.0%}" if gain and gain > 0 else "n/a"
            missing = "not run yet" if r.depth in grid.get(model, ()) else "–"
            lines.append(f"| {model} | {r.depth} | {','.join(map(str, r.layers))} | {r.dev_spearman:.2f} | "
                         f"{r.test_spearman:.2f} | {r.single_test_spearman:.2f} | "
                         f"{missing if g is None else g.cell()} | {share if g else ''} |")
    depths = "; ".join(f"{m}: {', '.join(map(str, ds))}" for m, ds in grid.items())
    return lines + ["", "*share*: (frontier test - state l alone) / (TMFT test - state l alone), where TMFT gains "
                    "(n/a where TMFT does not beat the untrained state). *–*: a depth outside the page's TMFT "
                    f"depths ({depths}); the frontier is searched at every depth, TMFT trained at those only.", ""]


def _lc_lines(page: TMFTPage) -> list[str]:
    model = page_models(page)[0][0]
    if page.lc_layers is None:
        return ["LC-TMFT: not run yet (needs the frontier of the first model for the subset).", ""]
    g = find(groups(page), model, "none", tuple(page.lc_layers), page.settings["epochs"])
    base = find(curves(page), model, "none", (max(page.lc_layers),), page.settings["epochs"])
    fr = page.frontiers[model].rows[-1]
    lines = [f"Subset D = {tuple(page.lc_layers)} (chosen on STS-B dev by the full-depth search of {model}; "
             f"no training: dev {fr.dev_spearman:.2f}, test {fr.test_spearman:.2f}). The model is truncated at "
             f"max(D) = {max(page.lc_layers)} and fine-tuned with the mean of D as the sentence vector.", "",
             _note("LC-TMFT's test score", f"TMFT at {max(page.lc_layers)}"), "",
             f"| run | test | dev | p vs TMFT at {max(page.lc_layers)} |", "|---|---|---|---|"]
    if len(page.lc_layers) == 1:
        lines.insert(1, "D is a single hidden state here, so LC-TMFT is TMFT at that depth.")
    p = p_cell(group_test(page.gold, g.results, base.results)) if g and base else ""
    lines.append(f"| LC-TMFT D={','.join(map(str, page.lc_layers))} | "
                 + (f"{g.cell()} | {g.cell('dev_spearman')} | {p} |" if g else "not run yet | | |"))
    lines.append(f"| TMFT at {max(page.lc_layers)} | " + (f"{base.cell()} | {base.cell('dev_spearman')} | reference |"
                                                           if base else "not run yet | | |"))
    return lines + [""]


def _note(what: str, baseline: str) -> str:
    return significance_note(what, baseline, "the difference of the two mean test Spearman correlations over their "
                             "seeds (every seed of one against every seed of the other), the STS-B test pairs "
                             "resampled", "layerwise results run tmft")


def _sickr_section(page: TMFTPage) -> list[str]:
    """The first model's TMFT trained and tested on SICK-R per depth, against its TMFT at full depth there (paired
    test over SICK-R's test pairs) and beside the untrained model's scores on the same pairs (its frontier)."""
    s, model = page.settings, page_models(page)[0][0]
    depths = sorted(s.get("sickr_depths") or ())
    if not depths:
        return ["Not in this page's grid (`--option sickr_depths='[0, 3, 6]'` adds it).", ""]
    name, epochs = f"{model} on sickr", epochs_of(s, model)
    gs = {d: find(curves(page), name, "none", (d,), epochs) for d in depths}
    fr, top = page.other_frontiers.get(name), max(depths)
    sizes = (f" ({fr.n_dev} trial pairs, {fr.n_test} test pairs)" if fr else "")
    lines = [f"TMFT of {model} on SICK-R{sizes}: trained on SICK-R train (relatedness 1-5 mapped onto 0-1), the "
             f"checkpoint with the best SICK-R trial Spearman kept, scored on SICK-R test; {epochs} epoch(s), seed(s) "
             f"{', '.join(map(str, s['sickr_seeds']))}, every other setting as on STS-B. The untrained columns are the "
             "same model with no training on the same test pairs: hidden state l alone (TMFT's start), and the best "
             "subset of 0..l chosen on SICK-R trial by the exact search.", "",
             significance_note("each depth's TMFT test score on SICK-R", f"depth {top}",
                               "the difference of the two mean test Spearman correlations over their seeds, the "
                               "SICK-R test pairs resampled", "layerwise results run tmft"), "",
             f"| depth | parameters | TMFT on SICK-R | vs depth {top} | p vs depth {top} | untrained, state l alone | "
             "frontier (no training) |", "|---|---|---|---|---|---|---|"]
    full = gs.get(top)
    for d in depths:
        g, row = gs[d], fr.row(d) if fr and d in {r.depth for r in fr.rows} else None
        vs = f"{g.mean_std()[0] - full.mean_std()[0]:+.2f}" if g and full and d != top else ""
        p = p_cell(group_test(page.gold, g.results, full.results)) if g and full and d != top else \
            ("reference" if g else "")
        untrained = (f"{row.single_test_spearman:.2f} | {row.test_spearman:.2f} ({','.join(map(str, row.layers))})"
                     if row else "not run yet | not run yet")
        params = g.parameters if g else (row.parameters if row else None)
        lines.append(f"| {d} | {'?' if params is None else f'{params:,}'} | {g.cell() if g else 'not run yet'} | "
                     f"{vs} | {p} | {untrained} |")
    if fr and full:
        untrained_full = fr.rows[-1].single_test_spearman
        wins = [d for d in depths if gs[d] and d < top and gs[d].mean_std()[0] >= untrained_full]
        lines += ["", f"- The untrained full model on SICK-R test: {untrained_full:.2f}; TMFT at depth {top}: "
                  f"{full.mean_std()[0]:.2f} ({full.mean_std()[0] - untrained_full:+.2f}). Truncated depths whose TMFT "
                  f"reaches the untrained full model: {wins or 'none'}."]
    return lines + [""]


def _epoch_check(page: TMFTPage) -> list[str]:
    s, model = page.settings, page_models(page)[0][0]
    counts = [s["epochs"], *[e for e in s["check_epochs"] if e != s["epochs"]]]
    if len(counts) == 1:
        return [f"Every run used {s['epochs']} epochs; no check needed.", ""]
    ep = lambda e: f"{e} epoch{'s' * (e != 1)}"  # noqa: E731
    lines = [_note("each other epoch count's test score at a depth", f"{ep(counts[0])} at that depth"), "",
             f"| depth | {ep(counts[0])} | " + " | ".join(f"{ep(e)} | p vs {ep(counts[0])}" for e in counts[1:]) + " |",
             "|---|---|" + "---|---|" * (len(counts) - 1)]
    found = {}
    for d in s["check_depths"]:
        gs = [find(groups(page), model, "none", (d,), e) for e in counts]
        cells = [gs[0].cell() if gs[0] else "not run yet"]
        for g in gs[1:]:
            p = p_cell(group_test(page.gold, g.results, gs[0].results)) if g and gs[0] else ""
            cells += [g.cell() if g else "not run yet", p]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
        found[d] = gs
    done = [d for d, gs in found.items() if all(gs)]
    if len(done) >= 2:
        ranks = {e: [d for d in sorted(done, key=lambda d: -found[d][i].mean_std()[0])] for i, e in enumerate(counts)}
        same = len({tuple(r) for r in ranks.values()}) == 1
        at = ", ".join(f"{r} at {e} epoch{'s' * (e != 1)}" for e, r in ranks.items())
        lines += ["", f"Ranking of depths by test Spearman: {at}: {'the same' if same else 'DIFFERENT'}."]
    return lines + [""]


def _paper_settings(page: TMFTPage) -> list[str]:
    """The first model's TMFT at this page's epochs and seeds beside the paper's (10 epochs, 5 seeds), per depth."""
    s, model = page.settings, page_models(page)[0][0]
    ours, paper = int(s["epochs"]), int(s["paper_epochs"])
    if ours == paper:
        return [f"This page's runs already use the paper's {paper} epochs.", ""]
    lines = [f"The paper trains {paper} epochs and reports the mean of {len(s['paper_seeds'])} seeds; this page's "
             f"default is {ours} epochs and {len(s['seeds'])} seeds (CPU time). Both, per depth of {model}:", "",
             _note(f"the {paper}-epoch test score", f"{ours} epochs"), "",
             f"| depth | {ours} epochs (this page) | {paper} epochs (the paper's settings) | difference | "
             f"p vs {ours} epochs |", "|---|---|---|---|---|"]
    for d in sorted(s["paper_depths"]):
        base, g = find(groups(page), model, "none", (d,), ours), find(groups(page), model, "none", (d,), paper)
        diff = f"{g.mean_std()[0] - base.mean_std()[0]:+.2f}" if g and base else ""
        p = p_cell(group_test(page.gold, g.results, base.results)) if g and base else ""
        lines.append(f"| {d} | {base.cell() if base else 'not run yet'} | {g.cell() if g else 'not run yet'} | "
                     f"{diff} | {p} |")
    names = [k for k in page.wall_seconds if k.startswith(f"run-{model}-none-") and k.endswith(f"-ep{paper}")]
    if names:
        where = {k: page.run_devices.get(k, "cpu") for k in names}
        on_cpu = [page.wall_seconds[k] for k in names if where[k] == "cpu"]
        cost = (f"{len(on_cpu)} of them on the CPU, {sum(on_cpu) / 3600:.2f} h of it" if on_cpu else
                "none on a CPU, so their CPU hours are not measured here")
        total = sum(page.wall_seconds[k] for k in names) / 60
        lines += ["", f"The {len(names)} stored {paper}-epoch runs took {total:.1f} min of wall time in all, trained "
                  f"on {', '.join(sorted(set(where.values())))}: {cost}. Each run's machine and the processes that "
                  "shared it are under *Provenance and time*."]
    return lines + [""]


def _speed_table(page: TMFTPage) -> list[str]:
    lines = ["| model | depth | parameters | sentences/s | speed-up over full |", "|---|---|---|---|---|"]
    for model, t in page.throughputs.items():
        full = t.full().sentences_per_second
        for r in t.rows:
            lines.append(f"| {model} | {r.depth}{' (full)' if r.depth == t.n_layers else ''} | {r.parameters:,} | "
                         f"{r.sentences_per_second:.1f} | {r.sentences_per_second / full:.2f}x |")
    if not page.throughputs:
        lines.append("| not run yet | | | | |")
    else:
        t = next(iter(page.throughputs.values()))
        lines += ["", f"{t.n_sentences} distinct STS-B test sentences, batch {t.batch_size}, max length "
                  f"{t.max_length}, {t.device}, {t.threads} torch threads; one warm-up batch, then the median of "
                  f"{len(t.rows[0].seconds)} timed passes."]
        loads = [f"{m} {v[0]:.1f}" for m, v in page.speed_load.items() if v]
        if loads:
            lines += [f"Load average (1 min) when each model's timing was saved: {', '.join(loads)}. The timing's "
                      f"own {t.threads} threads make a load near {t.threads}; a load well above the CPU count means "
                      "other jobs shared the machine and slowed every depth; compare depths of one model (timed "
                      "together) rather than absolute numbers."]
    return lines + [""]


def _verdict(page: TMFTPage) -> list[str]:
    """Where truncation helps, per model: each truncated depth's TMFT score against the full-depth TMFT score and
    against the untrained full model, with what it saves (parameters, measured speed); then what the pre-steps add."""
    lines = []
    for model, depths in page_models(page):
        gs = {g.depth: g for g in curves(page) if g.model == model and g.pre_step == "none"}
        top, fr, speed = max(depths), page.frontiers.get(model), page.throughputs.get(model)
        if top not in gs or len(gs) < 2 or fr is None:
            lines += [f"- {model}: not enough runs yet to say.", ""]
            continue
        full, untrained = gs[top].mean_std()[0], fr.row(top).single_test_spearman
        rates = {r.depth: r.sentences_per_second for r in speed.rows} if speed else {}
        lines += [f"**{model}** (TMFT at full depth {top}: {full:.2f}; the full model untrained: {untrained:.2f})", "",
                  _note("each depth's TMFT test score", "TMFT at full depth"), "",
                  "| depth | parameters (share) | speed-up | TMFT test | vs TMFT at full depth | vs untrained full model "
                  "| p vs TMFT at full depth |", "|---|---|---|---|---|---|---|"]
        for d in sorted(x for x in gs if x < top):
            score, g = gs[d].mean_std()[0], gs[d]
            up = f"{rates[d] / rates[top]:.2f}x" if d in rates and top in rates else "not timed"
            lines.append(f"| {d} | {g.parameters:,} ({g.parameters / g.results[0].full_parameters:.0%}) | {up} | "
                         f"{score:.2f} | {score - full:+.2f} | {score - untrained:+.2f} | "
                         f"{p_cell(group_test(page.gold, g.results, gs[top].results))} |")
        wins = [d for d in gs if d < top and gs[d].mean_std()[0] >= untrained]
        lines += ["", f"- Truncated depths that reach the full model *without any training* ({untrained:.2f}): "
                  + (f"{sorted(wins)}: there truncation saves compute at no loss." if wins else
                     "none. On this sentence-trained model a truncated, fine-tuned encoder is smaller and faster but "
                     "scores below simply using the whole model as it is; truncation is a trade of quality for "
                     "speed here, not a gain (unlike the paper's ELECTRA, whose last layer was not trained for "
                     "sentences)."),
                  f"- Truncated depths at or above TMFT at full depth: "
                  f"{sorted(d for d in gs if d < top and gs[d].mean_std()[0] >= full) or 'none'}."]
        lines += _pre_step_lines(page, model, gs) + [""]
    return lines


def _pre_step_lines(page: TMFTPage, model: str, plain: dict) -> list[str]:
    """Each pre-step against plain TMFT per depth, with the seed spread that tells a difference from noise."""
    out = []
    spread = [g.mean_std()[1] for g in plain.values() if len(g.results) > 1]
    noise = (f" TMFT's seed spread: up to {max(spread):.2f} (largest sample std over the depths run with several "
             "seeds); a difference no larger than that is within seed noise." if spread else
             " Single runs: TMFT's seed spread is not measured yet, so these differences may be seed noise.")
    for pre in [p for p in page.settings["pre_steps"] if p != "none"]:
        gs = {g.depth: g for g in curves(page) if g.model == model and g.pre_step == pre}
        both = sorted(d for d in gs if d in plain)
        if both:
            diffs = ", ".join(f"{d}: {gs[d].mean_std()[0] - plain[d].mean_std()[0]:+.2f} "
                              f"(p: {p_cell(group_test(page.gold, gs[d].results, plain[d].results))})" for d in both)
            out.append(f"- {LABELS[pre]} against plain TMFT, per depth (p: the paired bootstrap of the difference "
                       f"over the test pairs, as in the table above): {diffs}.{noise}")
    return out


def _time_lines(page: TMFTPage) -> list[str]:
    """Total time of the parts shown, mean time per TMFT run and model, and the estimated cost of what is missing."""
    total = sum(page.wall_seconds.values())
    cpu_only = page.devices in ([], ["cpu"])
    lines = [f"- total wall time of the parts shown: {total / 3600:.2f} h, device: {', '.join(page.devices) or 'cpu'} "
             "(the machine is named below)" + (", which is what a CPU-only run of these parts costs" if cpu_only
                                              else "")
             + "; a run that was interrupted and resumed counts only the process that finished it, so the epochs done "
             "before the interruption are missing from its time"]
    for model, _ in page_models(page):
        runs = [v for k, v in page.wall_seconds.items() if k.startswith(f"run-{model}-")]
        todo = page.estimates.get(model, [])
        known = [e for e in todo if e is not None]
        done = (f"{len(runs)} TMFT run(s) done, {np.mean(runs) / 60:.1f} min each on average (pre-steps included)"
                if runs else "no TMFT run done yet")
        if todo:
            done += (f"; {len(todo)} not run yet" + (f", about {sum(known) / 3600:.1f} h more for {len(known)} of "
                     f"them on {page.settings.get('device') or 'cpu'} (each from the stored runs of its depth and pre-step there, per "
                     "epoch, times its epochs)"
                     if known else "") + (f"; {len(todo) - len(known)} with no comparable run stored on that device to estimate"
                                          if len(known) < len(todo) else ""))
        lines.append(f"- {model}: {done}")
    if page.run_loads:
        lines += ["", *run_time_table(page.run_loads)]
    return lines


def _pre_step_section(page: TMFTPage) -> list[str]:
    """What each pre-step did, from the stored runs: data, settings, steps; WS's word-pair scores per depth."""
    model, lines = page_models(page)[0][0], []
    by_pre = {pre: sorted((g for g in curves(page) if g.model == model and g.pre_step == pre), key=lambda g: g.depth)
              for pre in ("ws", "mlm")}
    if by_pre["ws"]:
        r = by_pre["ws"][0].results[0]
        c, info = r.config["ws"], r.pre_step
        lines += [f"**WS + TMFT.** Word pairs of {', '.join(c['sets'])} pooled (each file's scores divided by its "
                  "maximum; SimVerb-3500, in the paper, is not here), split train/dev/test = "
                  f"{'/'.join(map(str, info['pairs']))} pairs with the run's seed; {c['epochs']} epochs, batch "
                  f"{c['batch_size']}, lr {c['lr']:g} ({info['steps']} steps) on the truncated encoder with mean "
                  "pooling of the same layer, then TMFT on STS-B. Word-pair Spearman x100 after the word step (its "
                  "own dev and test pairs):", "", "| depth | word pairs dev | word pairs test | WS + TMFT STS-B test |",
                  "|---|---|---|---|"]
        lines += [f"| {g.depth} | {g.results[0].pre_step['dev_spearman']:.2f} | "
                  f"{g.results[0].pre_step['test_spearman']:.2f} | {g.cell()} |" for g in by_pre["ws"]]
    if by_pre["mlm"]:
        lines += [""] if lines else []
        r = by_pre["mlm"][0].results[0]
        c, info = r.config["mlm"], r.pre_step
        lines += [f"**MLM + TMFT.** The whole encoder is trained once by masked-language modelling and shared by "
                  f"every depth: {info['sentences']:,} sentences ({' + '.join(c['sources'])}: SNLI dev+test and the "
                  "wiki1m head; the paper used SNLI + MultiNLI train, which are not here), "
                  f"{c['mlm_probability']:.0%} of tokens masked (80/10/10), batch {c['batch_size']} x "
                  f"{c['grad_accumulation']} accumulation steps, {c['epochs']} epoch(s), lr {c['lr']:g}: "
                  f"{info['steps']} optimizer steps. The checkpoints here ship no MLM head, so a fresh head was "
                  f"trained with the encoder (the run records: {info['head']})."]
    return lines or ["No pre-step run stored yet."]


def render_markdown(page: TMFTPage) -> str:
    s = page.settings
    lines = [f"# {page.title}", "",
             "TMFT (Rep, Dukić, Šnajder, Findings of EMNLP 2024) cuts the encoder at hidden state l (0 = embedding "
             "output) and fine-tunes it on STS-B train with mean pooling; the checkpoint with the best STS-B dev "
             "Spearman is kept. Scores: STS-B test Spearman x100, mean ± sample std over seeds (number of seeds).",
             "", f"Epochs: {s['epochs']} for {Path(s['minilm']).name}"
             + (f", {s['mpnet_epochs']} for {Path(s['mpnet']).name} (its runs cost about 4x per layer on CPU)"
                if s["mpnet"] else "")
             + f" (the paper: 10; the epoch check below compares {[s['epochs'], *s['check_epochs']]} epochs on "
             f"depths {list(s['check_depths'])}). Per-run settings overridden: {dict(s['overrides']) or 'none'}.", "",
             "## Test Spearman per depth", ""]
    for model, depths in page_models(page):
        lines += _layer_table(page, model, depths)
    lines += ["![per-layer curves](tmft-layers.png)", "", "## Best depth chosen on dev", "", *_best_table(page),
              "## Parameters against quality", "", "![parameters vs test Spearman](tmft-cost.png)", "",
              "The Pareto front joins the runs that no other run beats on both fewer parameters and higher test "
              "Spearman (every model and pre-step pooled).", "",
              "## Zero-training frontier", "", *_frontier_table(page), "## LC-TMFT", "", *_lc_lines(page),
              "## Epoch check", "", *_epoch_check(page), "## The paper's settings", "", *_paper_settings(page),
              "## TMFT on SICK-R", "", *_sickr_section(page),
              "## Throughput", "", *_speed_table(page),
              "![throughput per depth](tmft-speed.png)", "", "## Where truncation helps", "", *_verdict(page), "",
              "## Notes", "",
              "- The paper's ELECTRA rows cannot be reproduced here: no ELECTRA checkpoint can be installed on this "
              "machine (no model hub access); only all-MiniLM-L6-v2 and all-mpnet-base-v2 are available.",
              "- Both models are already sentence-trained (contrastively, on 1B pairs), unlike the paper's BERT and "
              "ELECTRA; truncation is measured against a model whose last layer was trained for sentences.",
              "", "## Pre-steps", "", *_pre_step_section(page)]
    if page.missing:
        lines += ["", "## Not run yet", "", *[f"- {m}" for m in page.missing]]
    lines += ["", "## Provenance and time", "", *_time_lines(page), *page.provenance]
    return "\n".join(lines) + "\n"
