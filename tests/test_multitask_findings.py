"""The multi-task page's verdicts on the report's findings, from hand-made scores."""

from __future__ import annotations

import pytest

from layerwise.benchmarks.multitask.findings import CLAIMS, judge, layer_centres, noise_level
from layerwise.benchmarks.multitask.report import MultitaskPage, render_markdown
from layerwise.methods.multitask.evaluate import TaskScores
from layerwise.methods.multitask.run import ExperimentResult


def _run(name, seed, sst, para, sts, weights=None):
    scores = TaskScores(sst, para, sts, sts)
    return ExperimentResult(config={"name": name, "epochs": 1, "batch_size": 32, "lr": 2e-5, "mix_lr": 1e-3,
                                    "dropout": 0.1, "schedule": "task_by_task", "max_length": 128, "limit": None,
                                    "eval_limit": None},
                            seed=seed, model="m", dev=scores, test=scores, phases=[], layer_weights=weights or {},
                            seconds=120.0)


def test_verdicts_follow_the_signs_and_the_seed_spread():
    runs = {"BASELINE": [_run("BASELINE", 0, 0.50, 0.70, 0.80), _run("BASELINE", 1, 0.52, 0.70, 0.80)],
            "SHARED": [_run("SHARED", 0, 0.50, 0.75, 0.85)],  # PARA and STS both up by more than the spread
            "FREEZE_SST": [_run("FREEZE_SST", 0, 0.40, 0.70, 0.80)],  # SST down
            "SST_TO_STS": [_run("SST_TO_STS", 0, 0.515, 0.70, 0.80)]}  # SST +0.005 < its spread 0.014
    noise = noise_level(runs)
    assert noise["sst_acc"] == pytest.approx(0.02 / 2 ** 0.5) and noise["para_acc"] == 0.0
    verdicts = {v.claim.experiment: v for v in judge(runs)}
    assert set(verdicts) == {"SHARED", "FREEZE_SST", "SST_TO_STS"}  # the others lack one side
    assert verdicts["SHARED"].word == "holds"
    assert verdicts["SHARED"].differences["para_acc"] == pytest.approx(0.75 - 0.70)
    assert verdicts["FREEZE_SST"].word == "does not hold"
    assert verdicts["FREEZE_SST"].differences["sst_acc"] == pytest.approx(0.40 - 0.51)
    assert verdicts["SST_TO_STS"].word == "within the seed spread"
    assert verdicts["SHARED"].seeds == (1, 2)
    mixed = judge({"BASELINE": runs["BASELINE"][:1], "SHARED": [_run("SHARED", 0, 0.5, 0.75, 0.70)]})
    assert mixed[0].word == "mixed" and mixed[0].noise is None  # one seed each: no spread measured


def test_layer_centres_and_the_rendered_page():
    w = {"sst": [0.0, 0.0, 1.0], "sts": [0.5, 0.5, 0.0]}
    assert layer_centres(w) == {"sst": pytest.approx(2.0), "sts": pytest.approx(0.5)}
    results = [_run("BASELINE", 0, 0.5, 0.7, 0.8), _run("BASELINE+MIX", 0, 0.55, 0.7, 0.82, weights=w)]
    md = render_markdown(MultitaskPage("t", "m", results))
    assert "## Dev (the selection split)" in md and "## Which of the report's findings hold here" in md
    assert "| BASELINE+MIX | 2.00 |  | 0.50 |" in md
    assert "centre minus STS's centre: +1.50 hidden states on average over the 1 +MIX run(s)" in md
    assert "higher layers than similarity in 1 of them" in md
    assert "on seed(s) [0], which every experiment has: **BASELINE+MIX** (0.720" in md
    assert "- **mixed** (1): BASELINE+MIX" in md  # the verdicts summed up under the table (PARA +0.000: mixed)
    assert "2 runs, 0.07 h" in md
    # the extra seed lowers BASELINE+MIX's mean below BASELINE's: the page names both, and how far apart they are
    results += [_run("BASELINE+MIX", 1, 0.35, 0.7, 0.82)]
    md = render_markdown(MultitaskPage("t", "m", results))
    assert "on seed(s) [0], which every experiment has: **BASELINE+MIX**" in md
    assert "BASELINE+MIX's mean dev overall is 0.687 and BASELINE (1 seed(s)) has the highest, 0.700: 0.013 apart, " \
           "within the overall score's seed spread (0.047)" in md
    assert all(c.experiment != c.reference for c in CLAIMS)


def test_every_row_of_every_table_has_its_header_width():
    import re

    names = [c.experiment for c in CLAIMS] + [c.reference for c in CLAIMS]
    runs = [_run(n, 0, 0.5, 0.7, 0.8) for n in dict.fromkeys(names)]  # every claim judged, |u - v| ones included
    md = render_markdown(MultitaskPage("t", "m", runs))
    pipes = lambda line: len(re.findall(r"(?<!\\)\|", line))  # noqa: E731  (an escaped \| stays in its cell)
    table: list[str] = []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        assert len({pipes(row) for row in table}) <= 1, table
        table = []
    assert "\\|u - v\\|" in md


def test_the_page_says_what_the_encoders_own_training_data_changes(tmp_path):
    import json

    from layerwise.encoders.model_files import declared_training_data
    from layerwise.methods.multitask.run import PhaseSummary

    (tmp_path / "data_config.json").write_text(json.dumps([{"name": "AllNLI.jsonl.gz", "lines": 9},
                                                            {"name": "quora_duplicates_triplets.jsonl.gz"}, {"x": 1}]))
    files = declared_training_data(tmp_path)
    assert files == ["AllNLI.jsonl.gz", "quora_duplicates_triplets.jsonl.gz"]
    assert declared_training_data(tmp_path / "nowhere") == []
    (tmp_path / "data_config.json").write_text("{not json")
    assert declared_training_data(tmp_path) == []
    nli = _run("NLI_TRIPLET", 0, 0.5, 0.7, 0.8)
    nli.config.update(nli="triplet", nli_epochs=1, limit=4000)
    nli.phases = [PhaseSummary("nli", 125, 125, [0.1], [], None, 1.0)]
    md = render_markdown(MultitaskPage("t", "m", [nli], training_data=files))
    assert "took 125 steps of 32 examples (1 epoch(s) over a seeded sample" in md
    assert "include AllNLI.jsonl.gz: it was already trained contrastively on SNLI and MultiNLI" in md
    assert "also include quora_duplicates_triplets.jsonl.gz" in md and "at most 4,000 of the pairs" in md
    bare = render_markdown(MultitaskPage("t", "m", [nli], training_data=[]))
    assert "declares no training files" in bare and "already trained" not in bare
    assert "not stored yet" in render_markdown(MultitaskPage("t", "m", [nli]))
