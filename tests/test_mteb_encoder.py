"""The MTEB wrapper: its protocol methods directly (no mteb needed), and ``mteb.evaluate`` on a local STS task."""

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


def test_mteb_evaluate_on_a_local_sts_task_gives_layerwise_spearman(wrapper):
    mteb = pytest.importorskip("mteb")
    datasets = pytest.importorskip("datasets")
    from mteb.models.models_protocols import EncoderProtocol
    from mteb.tasks.sts.eng.sts_benchmark_sts import STSBenchmarkSTS

    from layerwise.evaluation.sts import sts_scores

    class LocalSTS(STSBenchmarkSTS):
        """STS-B's metadata (renamed) over pairs built here: nothing is downloaded."""

        metadata = STSBenchmarkSTS.metadata.model_copy(update={"name": "LayerwiseLocalSTS", "superseded_by": None,
                                                               "eval_splits": ["test"]})

        def load_data(self, num_proc=None, **kwargs):
            rows = {"sentence1": [a for a, _, _ in PAIRS], "sentence2": [b for _, b, _ in PAIRS],
                    "score": [s for *_, s in PAIRS]}
            self.dataset = {"default": {"test": datasets.Dataset.from_dict(rows)}}
            self.data_loaded = True

    assert isinstance(wrapper, EncoderProtocol)
    result = mteb.evaluate(wrapper, [LocalSTS()], cache=None, show_progress_bar=False)
    scores = result.task_results[0].scores["test"][0]
    e1 = wrapper.embedder.encode([a for a, _, _ in PAIRS])
    e2 = wrapper.embedder.encode([b for _, b, _ in PAIRS])
    ours = sts_scores(e1, e2, np.array([s for *_, s in PAIRS]))
    assert scores["cosine_spearman"] * 100 == pytest.approx(ours["spearman"], abs=1e-3)
    assert result.model_name == wrapper.name
