"""Shared fixtures: tiny random encoders built offline from a config, and small STS files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["reliability_cases"]  # the `case` fixture; LAYERWISE_RELIABILITY_REPORT=path records the cases


def pytest_configure(config):
    """Under pytest-xdist (``make test`` runs ``pytest -n auto``) each worker takes its share of the cores for
    torch's threads, so that the workers do not oversubscribe the machine."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))


WORDS = (
    "a an the man woman dog cat child is are was playing plays guitar piano football running runs "
    "eats food on in at with of and to red blue big small car bike riding rides park street house "
    "two three people group sitting sits standing stands water swimming . , ?"
).split()

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

TINY_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def word_tokenizer():
    """A word-level BERT tokenizer over WORDS (every tiny model here shares its vocabulary)."""
    from transformers import BertTokenizerFast

    return BertTokenizerFast(vocab={w: i for i, w in enumerate(TINY_SPECIALS + WORDS)}, do_lower_case=True)


def build_tiny_bert(folder: Path, *, num_hidden_layers: int = 2, seed: int = 0, dropout: float = 0.1) -> Path:
    """A random BERT (hidden 32, 4 heads) with a word-level tokenizer, saved as a Hugging Face folder.

    ``dropout``: hidden and attention dropout (0 makes training deterministic in the batch split, for DDP tests)."""
    import torch
    from transformers import BertConfig, BertModel

    folder.mkdir(parents=True, exist_ok=True)
    tok = word_tokenizer()
    tok.save_pretrained(folder)
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=num_hidden_layers,
        num_attention_heads=4, intermediate_size=37, max_position_embeddings=64,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
    )
    BertModel(cfg).eval().save_pretrained(folder)
    return folder


def build_tiny_mpnet(folder: Path, *, seed: int = 0) -> Path:
    import torch
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<s>", "<pad>", "</s>", "[UNK]", "<mask>"]
    tok = MPNetTokenizerFast(vocab={w: i for i, w in enumerate(specials + WORDS)})
    tok.save_pretrained(folder)
    torch.manual_seed(seed)
    cfg = MPNetConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=66,
    )
    MPNetModel(cfg).eval().save_pretrained(folder)
    return folder


def tiny_configs() -> dict:
    """Tiny random configs of each architecture TMFT supports (3 layers, hidden 32), sharing the word vocabulary."""
    from transformers import BertConfig, DebertaV2Config, ElectraConfig, MPNetConfig, RobertaConfig

    common = dict(vocab_size=len(TINY_SPECIALS) + len(WORDS), hidden_size=32, num_hidden_layers=3,
                  num_attention_heads=4, intermediate_size=37, max_position_embeddings=64, pad_token_id=0)
    return {
        "bert": BertConfig(**common),
        "roberta": RobertaConfig(**{**common, "max_position_embeddings": 66}),
        "mpnet": MPNetConfig(**{**common, "max_position_embeddings": 66}),
        "deberta-v2": DebertaV2Config(**common),
        # ELECTRA discriminator: embeddings smaller than the hidden size, so the embedding projection is used
        "electra-discriminator": ElectraConfig(**{**common, "embedding_size": 16}),
        # ELECTRA generator: a smaller hidden size with embeddings of the same size (no projection)
        "electra-generator": ElectraConfig(**{**common, "hidden_size": 16, "embedding_size": 16,
                                              "intermediate_size": 20}),
    }


def build_tiny_encoder(folder: Path, name: str, *, seed: int = 0) -> Path:
    """The tiny random ``name`` model of :func:`tiny_configs` with the word tokenizer, saved as a Hugging Face folder."""
    import torch
    from transformers import AutoModel

    folder.mkdir(parents=True, exist_ok=True)
    word_tokenizer().save_pretrained(folder)
    torch.manual_seed(seed)
    AutoModel.from_config(tiny_configs()[name]).eval().save_pretrained(folder)
    return folder


@pytest.fixture()
def env(tmp_path, monkeypatch):
    """A fresh $LAYERWISE_HOME under the test's tmp_path, and no $LAYERWISE_DATA: nothing outside the test leaks in."""
    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LAYERWISE_DATA", raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert")


@pytest.fixture(scope="session")
def tiny_mpnet(tmp_path_factory) -> Path:
    return build_tiny_mpnet(tmp_path_factory.mktemp("models") / "tiny-mpnet")


SENTENCES = [
    "a man is playing guitar .",
    "a man plays the guitar .",
    "a woman is riding a bike in the park .",
    "two people are sitting on the street .",
    "the dog is swimming in the water .",
    "a child eats food .",
    "a group of people are standing .",
    "the cat sits on a red car .",
    "a woman plays piano .",
    "three big dogs are running in the park .",
    "a man is riding a blue bike .",
    "the small child is playing football .",
]


def write_stsb(folder: Path, n_pairs: int = 40, seed: int = 0) -> Path:
    """A small STS-B folder (sts/STSB/sts-{train,dev,test}.csv) in the real tab-separated format."""
    import random

    rnd = random.Random(seed)
    d = folder / "sts" / "STSB"
    d.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        rows = []
        for i in range(n_pairs):
            a, b = rnd.sample(SENTENCES, 2)
            score = rnd.choice([0.0, 1.0, 1.5, 2.5, 3.0, 4.2, 5.0])
            rows.append(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score:.3f}\t{a}\t{b}")
        (d / f"sts-{split}.csv").write_text("\n".join(rows) + "\n")
    return folder


def write_unlabeled(folder: Path, seed: int = 0) -> Path:
    """Small SNLI dev/test files (SentEval format) and a wiki head whose last line is cut off."""
    import random

    rnd = random.Random(seed)
    # sentences that are not in the STS files written by write_stsb (training must never see those)
    pool = [f"{a[:-2]} and {b[:-2]} ." for a in SENTENCES[:6] for b in SENTENCES[6:]]
    nli = folder / "nli" / "snli_devtest"
    nli.mkdir(parents=True, exist_ok=True)
    for part in ("dev", "test"):
        rows = [(rnd.choice(pool), rnd.choice(SENTENCES), rnd.choice(["entailment", "neutral", "contradiction"]))
                for _ in range(20)]
        (nli / f"s1.{part}").write_text("".join(f"{a} \n" for a, _, _ in rows))
        (nli / f"s2.{part}").write_text("".join(f"{b} \n" for _, b, _ in rows))
        (nli / f"labels.{part}").write_text("".join(f"{c}\n" for _, _, c in rows))
    wiki = folder / "unlabeled" / "wiki1m_head"
    wiki.mkdir(parents=True, exist_ok=True)
    (wiki / "wiki1m_for_simcse.txt").write_text("\n".join(pool[::-1]) + "\nthe cut off li")
    return folder


def write_senteval(folder: Path, n: int = 40, seed: int = 0) -> Path:
    """Small CR (two files, one class each) and MRPC (BOM, header, pairs) folders in SentEval's formats.

    The classes differ in their words (positive sentences use the first half of the vocabulary), so a
    classifier can learn them even on a tiny random model.
    """
    import random

    rnd = random.Random(seed)
    half = len(WORDS) // 2

    def sentence(cls: int) -> str:
        pool = WORDS[:half] if cls else WORDS[half:]
        return " ".join(rnd.choice(pool) for _ in range(rnd.randint(3, 8))) + " ."

    cr = folder / "senteval" / "CR"
    cr.mkdir(parents=True, exist_ok=True)
    (cr / "custrev.pos").write_text("".join(f"{sentence(1)} \n" for _ in range(n // 2)), encoding="latin-1")
    (cr / "custrev.neg").write_text("".join(f"{sentence(0)} \n" for _ in range(n - n // 2)), encoding="latin-1")
    mrpc = folder / "senteval" / "MRPC"
    mrpc.mkdir(parents=True, exist_ok=True)
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    for part, m in (("train", n), ("test", n // 2)):
        rows = []
        for i in range(m):
            label = i % 2
            a = sentence(rnd.randint(0, 1))
            b = a if label else sentence(rnd.randint(0, 1))
            rows.append(f"{label}\t{i}\t{i + 1000}\t{a}\t{b}\n")
        (mrpc / f"msr_paraphrase_{part}.txt").write_text(header + "".join(rows), encoding="utf-8")
    return folder


def write_multitask(folder: Path, n: int = 30, seed: int = 0) -> Path:
    """Small SST-5 (senteval/SST5), Quora (quora/{dev,test}.tsv), STS-B and SNLI files in their real formats.

    SST labels follow the words (label = the first word's position in SENTENCES mod 5), so a head can learn them.
    """
    import random

    rnd = random.Random(seed)
    write_stsb(folder, n_pairs=n, seed=seed)
    write_unlabeled(folder, seed=seed)
    sst = folder / "senteval" / "SST5"
    sst.mkdir(parents=True, exist_ok=True)
    for part in ("train", "dev", "test"):
        rows = []
        for i in range(n):
            k = rnd.randrange(len(SENTENCES))
            rows.append(f"{i % 5 if part == 'train' and i < 10 else k % 5} {SENTENCES[k]}")
        (sst / f"sentiment-{part}").write_text("\n".join(rows) + "\n")
    quora = folder / "quora"
    quora.mkdir(parents=True, exist_ok=True)
    for part in ("dev", "test"):
        rows = []
        for i in range(n):
            a, b = rnd.sample(SENTENCES, 2)
            dup = i % 2
            rows.append(f"{dup}\t{a}\t{a if dup else b}\t{i}")
        (quora / f"{part}.tsv").write_text("\n".join(rows) + "\n")
    return folder
