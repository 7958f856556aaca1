"""The files the examples of docs/guide.md read: a tiny encoder and small data files in each role's default layout.

Every example in the guide runs in a fresh folder holding exactly these (see ``write_guide_files``), so the guide
can say ``"encoder"`` and ``"train.csv"`` as a user would say their own folder and files.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from conftest import SENTENCES, build_tiny_bert

GUIDE_FILES = {
    "encoder/": "a tiny random BERT (2 layers, hidden 32) with its tokenizer: a Hugging Face folder",
    "train.csv, dev.csv, test.csv": "sentence pairs: sentence1,sentence2,score (0-5); 40, 20 and 20 rows",
    "labeled.csv": "single texts: text,label (pos/neg); 60 rows",
    "nli.csv": "pairs: sentence1,sentence2,label (entailment/neutral/contradiction); 60 rows",
    "triplets.csv": "anchor,positive,negative; 40 rows",
    "corpus.txt": "one sentence per line; 100 lines",
    "words.csv": "word1,word2,score (0-10); 30 rows",
    "beir/": "corpus.jsonl (_id,title,text), queries.jsonl (_id,text), qrels/test.tsv (query-id corpus-id score)",
}

POSITIVE = "a man woman child is playing plays guitar piano football on in the park".split()
NEGATIVE = "dog cat eats food red blue big small car bike street house water".split()


def _sentence(rnd: random.Random, words: list[str], n: int = 6) -> str:
    return " ".join(rnd.choice(words) for _ in range(n)) + " ."


def _write_csv(path: Path, header: list[str], rows: list[tuple]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def write_guide_files(folder: Path, *, seed: int = 0) -> Path:
    """Write every file of :data:`GUIDE_FILES` into ``folder``."""
    rnd = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    build_tiny_bert(folder / "encoder")
    for name, n in (("train", 40), ("dev", 20), ("test", 20)):
        rows = []
        for _ in range(n):
            a, b = rnd.sample(SENTENCES, 2)
            rows.append((a, b, rnd.choice([0.0, 1.0, 1.5, 2.5, 3.0, 4.2, 5.0])))
        _write_csv(folder / f"{name}.csv", ["sentence1", "sentence2", "score"], rows)
    labeled = [(_sentence(rnd, POSITIVE), "pos") if i % 2 else (_sentence(rnd, NEGATIVE), "neg") for i in range(60)]
    _write_csv(folder / "labeled.csv", ["text", "label"], labeled)
    nli = [(rnd.choice(SENTENCES), rnd.choice(SENTENCES), ("entailment", "neutral", "contradiction")[i % 3])
           for i in range(60)]
    _write_csv(folder / "nli.csv", ["sentence1", "sentence2", "label"], nli)
    triplets = [(s, s.replace(" a ", " the "), rnd.choice(SENTENCES)) for s in rnd.choices(SENTENCES, k=40)]
    _write_csv(folder / "triplets.csv", ["anchor", "positive", "negative"], triplets)
    (folder / "corpus.txt").write_text("".join(_sentence(rnd, POSITIVE + NEGATIVE) + "\n" for _ in range(100)))
    words = sorted(set(POSITIVE + NEGATIVE))
    _write_csv(folder / "words.csv", ["word1", "word2", "score"],
               [(*rnd.sample(words, 2), round(rnd.uniform(0, 10), 2)) for _ in range(30)])
    beir = folder / "beir"
    (beir / "qrels").mkdir(parents=True, exist_ok=True)
    docs = {f"d{i}": s for i, s in enumerate(SENTENCES)}
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n"
                                               for k, v in docs.items()))
    queries = {f"q{i}": SENTENCES[i].replace(" a ", " the ") for i in range(0, len(SENTENCES), 2)}
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{i}\t1\n" for i in range(0, len(SENTENCES), 2)))
    return folder
