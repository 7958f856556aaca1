"""Does a plain ``SentenceTransformer(folder)`` (``trust_remote_code`` left False) load layerwise's trained exports?

Builds a tiny random BERT, trains a layer-attention pooler for three steps, saves it with
``LayerAttentionPooler.save`` and loads the folder twice: with ``layerwise.load_sentence_transformer`` and with a
plain ``SentenceTransformer(folder)``. Prints the sentence-transformers version and, for each loader, the largest
absolute difference from the estimator's own embeddings, or the loader's refusal in one line.

sentence-transformers 5.x imports an installed module class named in ``modules.json`` for a local folder;
6.0 and later import a class outside ``sentence_transformers.*`` only with ``trust_remote_code=True`` (by design),
so there the plain load is refused and ``load_sentence_transformer`` is the way. Run with any environment where
layerwise and pytest are installed:  python scripts/plain_st_check.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

TEXTS = ["a man plays guitar", "a dog runs in the park", "two people are sitting", "the cat eats food",
         "a woman is riding a bike", "children are playing football", "a red car on the street", "a big house"] * 4


def main() -> None:
    import sentence_transformers
    from conftest import build_tiny_bert
    from sentence_transformers import SentenceTransformer

    from layerwise import LayerAttentionPooler, load_sentence_transformer

    tmp = Path(tempfile.mkdtemp())
    estimator = LayerAttentionPooler(str(build_tiny_bert(tmp / "encoder")), steps=3, batch_size=8, seed=0)
    estimator.fit(TEXTS, show_progress=False).save(tmp / "pooler")
    expected = estimator.encode(TEXTS)
    print(f"sentence-transformers {sentence_transformers.__version__}")
    loaders = {"layerwise.load_sentence_transformer(folder)": load_sentence_transformer,
               "SentenceTransformer(folder)": SentenceTransformer}
    for name, load in loaders.items():
        try:
            got = load(str(tmp / "pooler")).encode(TEXTS, convert_to_numpy=True)
        except Exception as exc:  # noqa: BLE001 - the point is to report the refusal
            print(f"{name}: refused: {str(exc).splitlines()[0]}")
        else:
            print(f"{name}: max abs difference {float(np.abs(got - expected).max()):.2e}")


if __name__ == "__main__":
    main()
