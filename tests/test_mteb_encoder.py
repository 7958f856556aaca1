"""The MTEB wrapper: its protocol methods directly, and ``mteb.evaluate`` on an STS task read from a local file.

mteb is part of what ``make setup`` installs (the ``mteb`` extra), so the second test runs in CI, not skipped.
"""

import random

import numpy as np
import pytest
import torch

from conftest import SENTENCES
from layerwise.encode import PoolingSpec
from layerwise.encode.mteb_encoder import LayerwiseMTEBEncoder

PAIRS = [(random.Random(i).choice(SENTENCES), random.Random(i + 99).choice(SENTENCES), random.Random(i).uniform(0, 5))
         for i in range(40)]


@pytest.fixture()
def wrapper(tiny_bert, tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    return LayerwiseMTEBEncoder.from_spec(str(tiny_bert), PoolingSpec("mean", (0, 2)), max_length=32, batch_size=4)


def test_protocol_methods_equal_layerwise_and_numpy(wrapper, tiny_bert):
    from layerwise import LayerEncoder
    from layerwise.pooling import layer_mean

    batches = [{"text": SENTENCES[:5]}, {"text": SENTENCES[5:]}]  # what MTEB's DataLoader yields
    got = wrapper.encode(batches, task_metadata=None, hf_split="test", hf_subset="default")
    ref = layer_mean(LayerEncoder(str(tiny_bert), max_length=32, cache_dir=False).encode(SENTENCES), (0, 2))
    np.testing.assert_allclose(got, ref, atol=1e-6)
    unit = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(wrapper.similarity(got, got[:3]).numpy(), unit @ unit[:3].T, atol=1e-5)
    np.testing.assert_allclose(wrapper.similarity_pairwise(torch.from_numpy(got[:4]), got[4:8]).numpy(),
                               (unit[:4] * unit[4:8]).sum(1), atol=1e-5)
    assert wrapper.name == "layerwise/tiny-bert-mean-0-2" and len(wrapper.revision) == 12
    with pytest.raises(ValueError, match="dicts with a 'text' list"):
        wrapper.encode([{"image": [0]}])


def test_mteb_evaluate_on_a_local_sts_task_gives_layerwise_spearman(wrapper, tmp_path):
    """mteb runs (installed by `make setup`: the mteb extra) on an STS task read from a file written here."""
    try:  # the mteb extra is part of `make setup`/`make test`: this test runs there, it is not skipped
        import mteb
    except ImportError:
        pytest.fail("mteb is not installed: run `make setup` (it installs layerwise[dev,faiss,mteb])")
    from datasets import Dataset
    from mteb.models.models_protocols import EncoderProtocol
    from mteb.tasks.sts.eng.sts_benchmark_sts import STSBenchmarkSTS

    from layerwise.data import read_pairs
    from layerwise.evaluation.sts import sts_scores

    path = tmp_path / "local pairs.tsv"
    path.write_text("left\tright\tgold\n" + "".join(f"{a}\t{b}\t{2 * s:.3f}\n" for a, b, s in PAIRS),
                    encoding="utf-8")  # a 0-10 scale and column names of its own

    class LocalSTS(STSBenchmarkSTS):
        """STS-B's metadata (renamed) over the pairs of a local file: nothing is downloaded."""

        metadata = STSBenchmarkSTS.metadata.model_copy(update={"name": "LayerwiseLocalSTS", "superseded_by": None,
                                                               "eval_splits": ["test"]})

        def load_data(self, num_proc=None, **kwargs):
            pairs = read_pairs(path, sentence1="left", sentence2="right", score="gold")
            self.min_score, self.max_score = float(pairs.scores.min()), float(pairs.scores.max())  # read, not assumed
            rows = {"sentence1": pairs.sentences1, "sentence2": pairs.sentences2, "score": pairs.scores.tolist()}
            self.dataset = {"default": {"test": Dataset.from_dict(rows)}}
            self.data_loaded = True

    assert isinstance(wrapper, EncoderProtocol)
    result = mteb.evaluate(wrapper, [LocalSTS()], cache=None, show_progress_bar=False)
    scores = result.task_results[0].scores["test"][0]
    pairs = read_pairs(path, sentence1="left", sentence2="right", score="gold")
    ours = sts_scores(wrapper.embedder.encode(pairs.sentences1), wrapper.embedder.encode(pairs.sentences2),
                      pairs.scores)
    assert scores["cosine_spearman"] * 100 == pytest.approx(ours["spearman"], abs=1e-3)
    assert result.model_name == wrapper.name
