"""Real truncation: the cut model's output equals the full model's hidden state l, for every architecture."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import tiny_configs, word_tokenizer
from layerwise.encoders.truncate import (
    NO_EMPTY_ENCODER,
    count_parameters,
    find_layers,
    hidden_state,
    truncate_encoder,
)

CONFIGS = list(tiny_configs())


def _model(name: str):
    from transformers import AutoModel

    torch.manual_seed(0)
    return AutoModel.from_config(tiny_configs()[name]).eval()


def _inputs():
    return word_tokenizer()(["a man is playing guitar .", "the dog runs in the park with a red ball on the street ."],
                            padding=True, return_tensors="pt")


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("layer", [0, 1, 2, 3])
def test_truncated_output_equals_hidden_state_l_of_the_full_model(name, layer):
    full = _model(name)
    if layer == 0 and full.config.model_type in NO_EMPTY_ENCODER:
        with pytest.raises(ValueError, match="cannot keep 0 layers"):
            truncate_encoder(full, 0)
        return
    inputs = _inputs()
    want = hidden_state(full, layer, **inputs)
    cut = truncate_encoder(full, layer)
    assert cut.config.num_hidden_layers == layer and full.config.num_hidden_layers == 3  # the original is untouched
    assert len(find_layers(cut)[2]) == layer
    with torch.no_grad():
        got = cut(**inputs).last_hidden_state
    mask = inputs["attention_mask"].bool()
    torch.testing.assert_close(got[mask], want[mask], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["bert", "electra-discriminator", "deberta-v2"])
def test_the_attention_mask_is_honoured(name):
    """Padding a sentence with another, longer one does not change its truncated vectors."""
    cut = truncate_encoder(_model(name), 2)
    inputs = _inputs()
    alone = {k: v[:1, : int(inputs["attention_mask"][0].sum())] for k, v in inputs.items()}
    with torch.no_grad():
        padded = cut(**inputs).last_hidden_state[0, : alone["input_ids"].shape[1]]
        single = cut(**alone).last_hidden_state[0]
    torch.testing.assert_close(padded, single, rtol=0, atol=1e-5)


def test_parameters_shrink_by_whole_layers_and_exclude_the_pooler():
    full = _model("bert")
    per_layer = sum(p.numel() for p in full.encoder.layer[0].parameters())
    assert count_parameters(full) - count_parameters(truncate_encoder(full, 1)) == 2 * per_layer
    assert count_parameters(full, exclude_pooler=False) - count_parameters(full) == 32 * 32 + 32


def test_bad_layer_is_a_clear_error():
    with pytest.raises(ValueError, match=r"hidden state 0\.\.3"):
        truncate_encoder(_model("bert"), 4)
    with pytest.raises(ValueError, match="hidden state"):
        truncate_encoder(_model("bert"), -1)


@pytest.mark.parametrize("name", ["bert", "mpnet", "electra-discriminator", "electra-generator"])
def test_truncated_save_loads_with_automodel_and_sentence_transformers(tmp_path, name):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    from layerwise.encoders.hidden_states import pool_hidden_states
    from layerwise.export import write_sentence_transformer

    cut = truncate_encoder(_model(name), 2)
    folder = write_sentence_transformer(cut, word_tokenizer(), tmp_path / "cut", provenance={"layer": 2})
    inputs = _inputs()
    loaded = AutoModel.from_pretrained(folder, local_files_only=True).eval()
    assert loaded.config.num_hidden_layers == 2 and len(find_layers(loaded)[2]) == 2
    with torch.no_grad():
        want = cut(**inputs).last_hidden_state
        torch.testing.assert_close(loaded(**inputs).last_hidden_state, want)
    mean = pool_hidden_states((want,), inputs["attention_mask"])[1][:, 0]
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=False)
    got = st.encode(["a man is playing guitar .", "the dog runs in the park with a red ball on the street ."],
                    convert_to_numpy=True)
    torch.testing.assert_close(torch.from_numpy(got), mean, rtol=1e-5, atol=1e-5)


def test_export_never_touches_a_folder_it_did_not_write(tmp_path):
    from layerwise.export import write_sentence_transformer

    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep me")
    cut = truncate_encoder(_model("bert"), 1)
    with pytest.raises(FileExistsError, match="not written by layerwise"):
        write_sentence_transformer(cut, word_tokenizer(), user)
    assert (user / "notes.txt").read_text() == "keep me"
    out = write_sentence_transformer(cut, word_tokenizer(), tmp_path / "export")
    with pytest.raises(FileExistsError, match="overwrite"):
        write_sentence_transformer(cut, word_tokenizer(), out)
    write_sentence_transformer(cut, word_tokenizer(), out, overwrite=True)
    assert not list(tmp_path.glob(".export.tmp-*"))


@pytest.mark.parametrize("layers", [(2,), (0, 2), (1, 2)])
def test_tmft_model_round_trips_through_sentence_transformers(tmp_path, tiny_bert, layers):
    """TruncatedModel's vectors == its saved folder's vectors in sentence-transformers == mean of full hidden states."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from layerwise.encoders.hidden_states import pool_hidden_states
    from layerwise.methods.truncated.model import TruncatedModel

    texts = ["a man is playing guitar .", "the dog runs in the park with a red ball on the street ."]
    model = TruncatedModel.from_pretrained(str(tiny_bert), layers, max_length=32)
    assert model.encoder.config.num_hidden_layers == max(layers)
    ours = model.encode(texts)
    tok = AutoTokenizer.from_pretrained(tiny_bert)
    full = AutoModel.from_pretrained(tiny_bert).eval()
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        mean = pool_hidden_states(full(**enc, output_hidden_states=True).hidden_states, enc["attention_mask"])[1]
    np.testing.assert_allclose(ours, mean[:, list(layers)].mean(1).numpy(), atol=1e-5)
    folder = model.save(tmp_path / "tmft")
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=False)
    np.testing.assert_allclose(st.encode(texts), ours, atol=1e-5)
    again = TruncatedModel.load(folder)
    assert again.layers == tuple(layers)
    np.testing.assert_allclose(again.encode(texts), ours, atol=1e-6)
