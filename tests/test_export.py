"""`layerwise export`: each kind loads with SentenceTransformer and gives layerwise's embeddings to 1e-5."""

import json

import numpy as np
import pytest
import torch

from conftest import SENTENCES, build_tiny_bert, write_stsb
from layerwise.benchmarks.lc.run import subset_from_results
from layerwise.export import EXPORT_MARKER, source_kind
from layerwise.methods.layer_attention.export import export_trained_pooler
from layerwise.methods.lc.export import SubsetExport, export_layer_subset
from layerwise.methods.multitask.export import export_multitask
from layerwise.methods.truncated.export import export_tmft

ST = pytest.importorskip("sentence_transformers")
TOL = 1e-5


@pytest.fixture(scope="module")
def bert4(tmp_path_factory):
    return build_tiny_bert(tmp_path_factory.mktemp("models") / "bert4", num_hidden_layers=4, seed=1)


def _st(folder, *, trust=False):
    return ST.SentenceTransformer(str(folder), device="cpu", trust_remote_code=trust)


def _layer_keys(folder) -> set[int]:
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return {int(k.split("encoder.layer.")[1].split(".")[0]) for k in f.keys() if "encoder.layer." in k}


@pytest.mark.parametrize(("layers", "pooling", "head"), [((0, 2), "mean", False), ((3,), "cls", False),
                                                          ((1, 2, 4), "mean", True), ((1, 3), "cls", False)])
def test_layer_subset_export_equals_layerwise_and_runs_only_the_layers_it_needs(tmp_path, bert4, layers, pooling,
                                                                                head):
    from layerwise import LayerEncoder
    from layerwise.pooling import head_pooling, layer_mean

    encoder = LayerEncoder(str(bert4), max_length=32, cache_dir=False)
    stack = encoder.encode(SENTENCES)
    ref = head_pooling(stack, layers, *encoder.pooler_head()[:2]) if head else layer_mean(stack, layers, kind=pooling)
    out = export_layer_subset(SubsetExport(model=str(bert4), layers=layers, pooling=pooling, head=head,
                                           max_length=32), tmp_path / "exp")
    model = _st(out, trust=False)  # built-in modules only
    got = model.encode(SENTENCES, convert_to_numpy=True, batch_size=5)
    np.testing.assert_allclose(got, ref, atol=TOL)
    assert _layer_keys(out) == set(range(max(layers)))  # the layers above the highest state used are gone
    assert model[0].auto_model.config.num_hidden_layers == max(layers)
    modules = json.loads((out / "modules.json").read_text())
    assert all(m["type"].startswith("sentence_transformers.") for m in modules)
    info = json.loads((out / EXPORT_MARKER).read_text())
    assert info["layers"] == list(layers) and info["source"]["weights_sha256"] == encoder.identity.weights_sha256
    assert info["layerwise_version"] and "hidden states used" in (out / "README.md").read_text()


def test_layer_subset_from_a_search_results_file_records_it_and_its_scores(tmp_path, tiny_bert, monkeypatch):
    from layerwise.cli import main
    from layerwise.export.card import file_sha256

    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    data = write_stsb(tmp_path / "data", n_pairs=30)
    assert main(["search", "--model", str(tiny_bert), "--data-dir", str(data), "--split", "all", "--dev-size", "20",
                 "--splits", "3", "--output", str(tmp_path / "runs"), "-q"]) == 0
    results = next((tmp_path / "runs").glob("search-*.json"))
    doc = json.loads(results.read_text())
    chosen = [tuple(s["layers"]) for s in doc["lc"]["splits"]]
    out = export_layer_subset(SubsetExport(model=str(tiny_bert), choice=subset_from_results(results)), tmp_path / "exp")
    info = json.loads((out / EXPORT_MARKER).read_text())
    assert tuple(info["layers"]) in chosen and chosen.count(tuple(info["layers"])) == max(map(chosen.count, chosen))
    assert info["results_file"]["sha256"] == file_sha256(results)
    lc = doc["lc"]["summary"]["spearman"]["lc"]
    card = (out / "README.md").read_text()
    assert f"{lc['mean']:.2f} ± {lc['std']:.2f}" in card and results.name in card
    # the subset read from a search on other weights is refused before anything is written
    other = build_tiny_bert(tmp_path / "other", seed=5)
    with pytest.raises(ValueError, match="export the model the search ran on"):
        export_layer_subset(SubsetExport(model=str(other), choice=subset_from_results(results)), tmp_path / "exp2")
    assert not (tmp_path / "exp2").exists()


def test_subset_export_refuses_bad_settings_and_foreign_folders(tmp_path, tiny_bert):
    with pytest.raises(ValueError, match="exactly one of layers"):
        SubsetExport(model=str(tiny_bert))
    with pytest.raises(ValueError, match="unknown pooling 'max'"):
        SubsetExport(model=str(tiny_bert), layers=(1,), pooling="max")
    with pytest.raises(ValueError, match="does not exist"):
        export_layer_subset(SubsetExport(model=str(tiny_bert), layers=(0, 7)), tmp_path / "exp")
    bad = tmp_path / "results.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="cannot be read as JSON"):
        subset_from_results(bad)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="not written by layerwise"):
        export_layer_subset(SubsetExport(model=str(tiny_bert), layers=(1,)), mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    spec = SubsetExport(model=str(tiny_bert), layers=(0, 2), head=True)
    assert SubsetExport.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_trained_pooler_export_needs_no_remote_code_and_equals_sentence_model(tmp_path, tiny_bert):
    from layerwise import load_sentence_transformer
    from layerwise.encoders.trainable import SentenceModel

    torch.manual_seed(3)
    model = SentenceModel.from_pretrained(str(tiny_bert), pooler="layer_attention", max_length=16)
    with torch.no_grad():  # weights away from their initialisation, as after training
        for p in model.pooler.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save(tmp_path / "trained")
    assert source_kind(tmp_path / "trained") == "trained_pooler"
    out = export_trained_pooler(tmp_path / "trained", tmp_path / "exp")
    ref = model.encode(SENTENCES)
    assert not list(out.rglob("*.py"))  # the pooler is the installed layerwise class, named in modules.json
    got = load_sentence_transformer(out, device="cpu").encode(SENTENCES, convert_to_numpy=True, batch_size=4)
    np.testing.assert_allclose(got, ref, atol=TOL)
    readme = (out / "README.md").read_text()
    assert "load_sentence_transformer(" in readme and "trust_remote_code=True)" not in readme


def test_multitask_export_is_its_encoder_mean_pooled(tmp_path, tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    from layerwise.methods.multitask.config import MultitaskConfig
    from layerwise.methods.multitask.model import MultitaskNetwork, build_heads

    enc = AutoModel.from_pretrained(tiny_bert)
    heads, shared = build_heads(MultitaskConfig(), 32, 5, 4)
    model = MultitaskNetwork(enc, AutoTokenizer.from_pretrained(tiny_bert), heads, shared=shared, max_length=20)
    model.save(tmp_path / "mt")
    assert source_kind(tmp_path / "mt") == "multitask"
    out = export_multitask(tmp_path / "mt", tmp_path / "exp")
    with torch.no_grad():
        ref = torch.cat([model.eval().sentence_embeddings([s]) for s in SENTENCES]).numpy()
    np.testing.assert_allclose(_st(out).encode(SENTENCES, convert_to_numpy=True), ref, atol=TOL)


def test_tmft_export_keeps_its_model_and_adds_a_card(tmp_path, tiny_bert):
    from layerwise.methods.truncated.model import TruncatedModel

    model = TruncatedModel.from_pretrained(str(tiny_bert), (0, 1), max_length=16)
    model.save(tmp_path / "tmft")
    assert source_kind(tmp_path / "tmft") == "tmft" and source_kind(tiny_bert) == "layer_subset"
    out = export_tmft(tmp_path / "tmft", tmp_path / "exp")
    np.testing.assert_allclose(_st(out).encode(SENTENCES, convert_to_numpy=True), model.encode(SENTENCES), atol=TOL)
    assert _layer_keys(out) == {0} and TruncatedModel.load(out).layers == (0, 1)
    assert json.loads((out / EXPORT_MARKER).read_text())["kind"] == "tmft"


@pytest.mark.parametrize("kind", ["categorical", "ae"])
def test_lattemix_export_gives_the_mixture_vectors_and_their_cosine(tmp_path, tiny_bert, kind):
    from layerwise import LayerEncoder
    from layerwise.methods.lattemix import LatteMixConfig, build_model, pair_similarity, sentence_mixtures
    from layerwise.methods.lattemix.export import export_lattemix

    torch.manual_seed(0)
    latent = build_model(LatteMixConfig(kind=kind, input_dim=32, n_classes=4, n_groups=3, latent_dim=8, depth=2,
                                        hidden_dim=16))
    encoder = LayerEncoder(str(tiny_bert), max_length=32, cache_dir=False)
    tokens = encoder.encode_tokens(SENTENCES, [1])
    latent.set_input_stats(torch.from_numpy(tokens.token_vectors(1)))
    latent.save(tmp_path / "latent")
    out = export_lattemix(tmp_path / "latent", tmp_path / "exp", model=str(tiny_bert), layer=1, max_length=32)
    mix = sentence_mixtures(latent.eval(), tokens, 1)
    from layerwise import load_sentence_transformer

    st = load_sentence_transformer(out, device="cpu")
    got = st.encode(SENTENCES, convert_to_numpy=True, batch_size=5)
    np.testing.assert_allclose(got, mix.probs.reshape(len(SENTENCES), -1), atol=TOL)
    cos = st.similarity_pairwise(torch.from_numpy(got[:6]), torch.from_numpy(got[6:])).numpy()
    np.testing.assert_allclose(cos, pair_similarity(mix.take(np.arange(6)), mix.take(np.arange(6, 12)), "cosine"),
                               atol=TOL)
    assert _layer_keys(out) == {0}  # the encoder is cut at hidden state 1
    with pytest.raises(ValueError, match="trust_remote_code"):
        _st(out, trust=False)


def test_lattemix_export_refuses_a_gaussian_model_and_a_wrong_encoder(tmp_path, tiny_bert, tiny_mpnet):
    from layerwise.methods.lattemix import LatteMixConfig, build_model
    from layerwise.methods.lattemix.export import export_lattemix

    build_model(LatteMixConfig(kind="normal", input_dim=32, latent_dim=4)).save(tmp_path / "normal")
    with pytest.raises(ValueError, match="only categorical and ae"):
        export_lattemix(tmp_path / "normal", tmp_path / "exp", model=str(tiny_bert), layer=1)
    build_model(LatteMixConfig(kind="ae", input_dim=64, latent_dim=4)).save(tmp_path / "wide")
    with pytest.raises(ValueError, match="reads 64-d tokens"):
        export_lattemix(tmp_path / "wide", tmp_path / "exp", model=str(tiny_bert), layer=1)
    assert not (tmp_path / "exp").exists()


def test_export_command_routes_each_kind_and_refuses_options_that_do_not_apply(tmp_path, tiny_bert, capsys):
    from layerwise.cli import main
    from layerwise.encoders.trainable import SentenceModel
    from layerwise.methods.lattemix import LatteMixConfig, build_model

    SentenceModel.from_pretrained(str(tiny_bert), pooler="scalar_mix", max_length=16).save(tmp_path / "trained")
    assert main(["export", str(tmp_path / "trained"), str(tmp_path / "a"), "--layers", "1"]) == 2
    assert "leave out --layers" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "trained"), str(tmp_path / "a")]) == 0
    assert "load it with layerwise.load_sentence_transformer(" in capsys.readouterr().out
    assert json.loads((tmp_path / "a" / EXPORT_MARKER).read_text())["kind"] == "trained_pooler"
    build_model(LatteMixConfig(kind="ae", input_dim=32, latent_dim=4)).save(tmp_path / "latent")
    assert source_kind(tmp_path / "latent") == "lattemix"
    assert main(["export", str(tmp_path / "latent"), str(tmp_path / "b")]) == 2
    assert "pass --encoder MODEL and --layer N" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "latent"), str(tmp_path / "b"), "--encoder", str(tiny_bert), "--layer",
                 "2"]) == 0
    assert json.loads((tmp_path / "b" / EXPORT_MARKER).read_text())["layers"] == [2]
    assert main(["export", str(tiny_bert), str(tmp_path / "c"), "--layers", "1", "--layer", "1"]) == 2
    assert "apply to a Latte-Mix token model only" in capsys.readouterr().err


def test_every_method_registers_its_exporter_and_one_kind_detects_each_folder(tmp_path, tiny_bert):
    from layerwise.export import Exporter, export_kinds, export_trained, exporters, register_exporter
    from layerwise.methods.multitask.model import MODEL_FILE

    assert set(export_kinds()) == {"layer_subset", "trained_pooler", "multitask", "tmft", "lattemix", "compress"}
    # each exporter is defined by its own method's export module; export/ names none of them
    for e in exporters():
        assert e.export.__module__ == f"layerwise.methods.{e.export.__module__.split('.')[2]}.export", e.kind
    with pytest.raises(ValueError, match="registered twice"):
        register_exporter(Exporter(kind="tmft", detects=None, export=export_tmft))
    # a folder that two kinds claim is refused rather than exported as the first one asked
    both = tmp_path / "both"
    both.mkdir()
    (both / EXPORT_MARKER).write_text(json.dumps({"method": "tmft"}))
    assert source_kind(both) == "tmft"
    (both / MODEL_FILE).write_text("{}")  # and the files of a multi-task run
    (both / "encoder").mkdir()
    with pytest.raises(ValueError, match="more than one method writes"):
        source_kind(both)
    # a pretrained model is exported with its layers, not as a trained folder
    with pytest.raises(ValueError, match="not a folder of a trained model"):
        export_trained(tiny_bert, tmp_path / "exp")
