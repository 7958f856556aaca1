"""Retrieval with the layer-attention paper's settings: nlist 1024 refused on a small corpus before anything loads,
[CLS]_Last once the pooler is removed, latency one query at a time, the index's resident size."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from layerwise.cli import main
from layerwise.encoders.trainable import SentenceModel
from layerwise.evaluation.retrieval import (
    DEFAULT_NLIST,
    FaissIndex,
    RetrievalData,
    check_nlist,
    evaluate_retrieval,
    search,
)


def _quora(folder):
    q = folder / "quora"
    q.mkdir(parents=True)
    (q / "dev.tsv").write_text(
        "1\ta man is playing guitar .\ta man plays the guitar .\t1\n"
        "0\ta child eats food .\tthe dog is swimming in the water .\t2\n"
        "1\ta woman plays piano .\ta woman is riding a bike in the park .\t3\n")
    return folder


def test_nlist_defaults_to_the_papers_and_a_small_corpus_is_refused_naming_the_largest_valid_value():
    assert DEFAULT_NLIST == FaissIndex("ivf").nlist == 1024
    check_nlist(1024, 1024)
    check_nlist(5000, 10, indexes=("exact", "flat"))  # no IVF index: nothing to check
    with pytest.raises(ValueError, match="largest valid nlist is 6"):
        check_nlist(1024, 6)
    calls = []
    data = RetrievalData([f"t{i}" for i in range(6)], [0], [frozenset({1})], "dev", "mem")
    with pytest.raises(ValueError, match="largest valid nlist is 6"):
        evaluate_retrieval(lambda texts: calls.append(texts), data, indexes=("exact", "ivf"))
    assert calls == []  # refused before anything was encoded


def test_cli_refuses_nlist_before_the_model_loads(tmp_path, capsys):
    data = _quora(tmp_path / "data")
    (tmp_path / "empty").mkdir()
    # the model folder holds no model: the nlist error comes first, so nothing was loaded
    assert main(["retrieval", str(tmp_path / "empty"), "--data-dir", str(data), "--index", "ivf", "-q"]) == 2
    err = capsys.readouterr().err
    assert "nlist=1024" in err and "largest valid nlist is 6" in err and len(err.strip().splitlines()) == 1
    assert main(["retrieval", str(tmp_path / "empty"), "--data-dir", str(data), "--unpooled", "cls", "-q"]) == 2
    assert "--without-pooler" in capsys.readouterr().err


def test_search_reports_batch1_latency_and_resident_size():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(300, 16)).astype(np.float32)
    data = RetrievalData([f"t{i}" for i in range(300)], list(range(20)), [frozenset({i + 1}) for i in range(20)],
                         "dev", "mem")
    exact = search(data, emb)
    ivf = search(data, emb, index=FaissIndex("ivf", nlist=8, nprobe=8))  # every cell probed: exact results
    for out in (exact, ivf):
        assert out["ms_per_query_batch1"] > 0 and out["n_latency_queries"] == 20
    assert exact["index_resident_bytes"] == exact["index_bytes"] == 300 * 16 * 4
    # the slow twin: every vector is in exactly one list (4 bytes a number and an 8-byte id), plus 8 centroids
    assert ivf["index_resident_bytes"] == 300 * (16 * 4 + 8) + 8 * 16 * 4
    flat = search(data, emb, index=FaissIndex("flat"))
    assert flat["index_resident_bytes"] == 300 * 16 * 4 and flat["index_bytes"] >= flat["index_resident_bytes"]
    assert exact["mrr@10"] == pytest.approx(ivf["mrr@10"])


def test_unpooled_cls_is_the_last_layers_first_token(tiny_bert):
    sm = SentenceModel.from_pretrained(str(tiny_bert), pooler="last_cls")
    texts = ["a man plays the guitar .", "a dog runs"]
    got_cls = sm.encode(texts, use_pooler=False, unpooled="cls")
    got_mean = sm.encode(texts, use_pooler=False)
    sm.eval()
    for i, text in enumerate(texts):  # the slow twin: one text through the encoder by hand
        batch = sm.tokenizer([text], return_tensors="pt")
        with torch.inference_mode():
            last = sm.encoder(**batch).last_hidden_state[0]
        np.testing.assert_allclose(got_cls[i], last[0].numpy(), atol=1e-5)
        np.testing.assert_allclose(got_mean[i], last.mean(0).numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="unpooled='max'"):
        sm.encode(texts, use_pooler=False, unpooled="max")
