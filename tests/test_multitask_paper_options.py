"""The report's protocols as options: SST_TO_STS with the encoder frozen after PARA and STS (its prototypes embedded
by the frozen encoder), the NLI contrastive temperature 1.0 of Eq. 3 as written, FREEZE_SST on the cosine STS head."""

from __future__ import annotations

import pytest
import torch

from conftest import write_multitask
from layerwise.methods.multitask.config import MultitaskConfig, get_experiment
from layerwise.methods.multitask.data import load_multitask_data
from layerwise.methods.multitask.model import MultitaskNetwork
from layerwise.methods.multitask.run import RunControl, run_experiment
from layerwise.modules.heads import PrototypeHead

TINY = {"epochs": 1, "batch_size": 8, "max_length": 16, "lr": 1e-3, "sst_prototypes": 2}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_multitask(tmp_path_factory.mktemp("mt-data"), n=24)


def _prototypes_by_hand(model: MultitaskNetwork, data, per_label: int, seed: int) -> torch.Tensor:
    """The slow twin: the same seeded pick, each sentence embedded alone by ``model``'s encoder and SST reader."""
    import numpy as np

    labels = data.sst.train.labels
    rng = np.random.default_rng([seed, 2])
    picked = np.concatenate([rng.choice(np.flatnonzero(labels == c), per_label, replace=False)
                             for c in range(data.n_classes)])
    model.eval()
    with torch.no_grad():
        return torch.cat([model.embed("sst", model.encode_texts([data.sst.train.sentences[i]])[0]) for i in picked])


def test_sst_to_sts_frozen_follows_the_reports_protocol(tiny_bert, data_dir, tmp_path):
    config = get_experiment("SST_TO_STS+FROZEN", **TINY)
    assert config.freeze_sst and config.sst_prototypes == 2 and config.name == "SST_TO_STS+FROZEN"
    data = load_multitask_data(config, data_dir)
    result = run_experiment(config, 0, tmp_path / "frozen", model_name=str(tiny_bert), data=data)
    assert [p.name for p in result.phases] == ["para_sts", "sst_head"]
    model = MultitaskNetwork.load(result.model_dir)
    head = model.heads["sst"]
    assert isinstance(head, PrototypeHead)
    # embedded once the encoder was frozen: the final encoder gives the stored prototypes back
    torch.testing.assert_close(head.prototypes, _prototypes_by_hand(model, data, 2, config.split_seed), atol=1e-5,
                               rtol=1e-5)
    # the default SST_TO_STS embeds them before training and the encoder moves on: they no longer match
    joint = get_experiment("SST_TO_STS", **TINY)
    moved = run_experiment(joint, 0, tmp_path / "joint", model_name=str(tiny_bert), data=data)
    again = MultitaskNetwork.load(moved.model_dir)
    assert not torch.allclose(again.heads["sst"].prototypes, _prototypes_by_hand(again, data, 2, joint.split_seed),
                              atol=1e-4)


def test_sst_to_sts_frozen_resumes_exactly(tiny_bert, data_dir, tmp_path):
    config = get_experiment("SST_TO_STS+FROZEN", **TINY)
    data = load_multitask_data(config, data_dir)
    straight = run_experiment(config, 0, tmp_path / "a", model_name=str(tiny_bert), data=data)
    cut = RunControl(max_steps_per_phase=1)
    while run_experiment(config, 0, tmp_path / "b", model_name=str(tiny_bert), data=data,
                         control=RunControl(resume=True, max_steps_per_phase=1) if (tmp_path / "b").exists() else cut
                         ) is None:
        pass
    resumed = run_experiment(config, 0, tmp_path / "b", model_name=str(tiny_bert), data=data,
                             control=RunControl(resume=True))
    assert resumed.dev == straight.dev and resumed.test == straight.test
    a = MultitaskNetwork.load(straight.model_dir).state_dict()
    b = MultitaskNetwork.load(resumed.model_dir).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_the_nli_temperature_of_eq3_as_written():
    assert get_experiment("NLI_CONTRASTIVE").temperature == 0.05
    assert get_experiment("NLI_CONTRASTIVE+TAU1").temperature == 1.0
    assert get_experiment("SST_TO_STS+FROZEN+MIX").layers == "mix"
    with pytest.raises(KeyError, match=r"\+FROZEN, \+TAU1"):
        get_experiment("NLI_CONTRASTIVE+TAU")
    assert MultitaskConfig(freeze_sst=True, sst_prototypes=3).sst_prototypes == 3  # no longer refused


def test_freeze_sst_on_the_cosine_sts_head(tiny_bert, data_dir, tmp_path):
    from layerwise.modules.heads import CosineHead, PairHead

    config = get_experiment("FREEZE_SST+HEADMOD", **{**TINY, "sst_prototypes": 0, "sst_transformer_layers": 1})
    assert (config.freeze_sst, config.sts_head, config.para_features) == (True, "cosine", "abs_diff")
    assert get_experiment("FREEZE_SST").sts_head == "linear"  # the library's FREEZE_SST keeps BASELINE's head
    result = run_experiment(config, 0, tmp_path / "run", model_name=str(tiny_bert),
                            data=load_multitask_data(config, data_dir))
    assert [p.name for p in result.phases] == ["para_sts", "sst_head"]
    heads = MultitaskNetwork.load(result.model_dir).heads
    assert isinstance(heads["sts"], CosineHead) and isinstance(heads["para"], PairHead)
    assert heads["para"].features == "abs_diff"


def test_cli_temperature_reaches_the_config():
    import argparse

    from layerwise.cli.multitask import add_parsers, configs_from_args

    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["multitask", "NLI_CONTRASTIVE", "SST_TO_STS+FROZEN", "--temperature", "1.0"])
    assert [(c.name, c.temperature) for c in configs_from_args(args)] == [("NLI_CONTRASTIVE", 1.0),
                                                                         ("SST_TO_STS+FROZEN", 1.0)]


def test_the_page_trains_the_paper_protocols_last_and_shows_them_after_the_experiments(tiny_bert, tmp_path):
    from layerwise.benchmarks import ResultsStore
    from layerwise.benchmarks.catalog import get_page
    from layerwise.benchmarks.multitask.pages import PageConfig
    from layerwise.benchmarks.registry import PageContext

    assert PageConfig().paper_protocols == ("SST_TO_STS+FROZEN", "NLI_CONTRASTIVE+TAU1", "FREEZE_SST+HEADMOD")
    data = write_multitask(tmp_path / "data", n=20)
    store = ResultsStore(tmp_path / "state")
    options = {"experiments": ["BASELINE"], "paper_protocols": ["NLI_CONTRASTIVE+TAU1"], "seeds": [0],
               "more_seeds": [], "model": str(tiny_bert), "checkpoints": str(tmp_path / "runs"),
               "overrides": {"epochs": 1, "batch_size": 8, "max_length": 16, "lr": 1e-3, "limit": 10, "eval_limit": 8}}
    page = get_page("multitask")
    ctx = PageContext(store=store, output=tmp_path / "out", data_dir=str(data), options=options)
    page.run(ctx)
    part = next(p for p in store.parts("multitask") if p.name == "NLI_CONTRASTIVE+TAU1-seed0")
    assert part.key["config"]["temperature"] == 1.0
    page.render(ctx)
    names = [line.split("|")[1].strip() for line in (tmp_path / "out" / "multitask.md").read_text().splitlines()
             if line.startswith("| ")]
    assert names.index("NLI_CONTRASTIVE+TAU1") > names.index("BASELINE")
