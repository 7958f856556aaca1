"""Truncated model fine-tuning (TMFT; Rep, Dukić, Šnajder, Findings of EMNLP 2024). Not built yet: issue #12.

It will keep the embeddings and layers 1..l of an encoder, fine-tune on STS (optionally after word-similarity or MLM
steps) with :mod:`layerwise.training`, and save an ordinary Hugging Face folder.
"""
