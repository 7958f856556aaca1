"""Batches of texts sorted by token length, written once for every loop that encodes texts.

All texts are tokenised once up front, then cut into batches in order of decreasing token count, so each batch
is padded only to its own longest text (sentence-transformers sorts by character length instead). The caller
writes each batch's outputs back at ``idx``, which restores the original order.

Every text is first cut to :data:`CHARS_PER_TOKEN` characters per token of ``max_length`` (:func:`cut_texts`): the
tokenizer would otherwise build every token of a text before truncating, so a single 5 MB line took about 1.7 GB.
No token of a real text is longer than that bound, so the first ``max_length`` tokens are unchanged (only a text
padded with thousands of blanks between words could lose words the tokenizer would have reached).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

__all__ = ["CHARS_PER_TOKEN", "cut_texts", "length_sorted_batches", "token_lengths"]

CHARS_PER_TOKEN = 64  # generous: wordpiece and BPE tokens are a few characters; BERT makes any word of > 100 one [UNK]


def cut_texts(texts: Sequence[str], max_length: int) -> list[str]:
    """``texts`` with each cut to ``max_length * CHARS_PER_TOKEN`` characters, so the tokenizer's memory and time stay
    bounded by ``max_length`` whatever a text's size (the tokens kept after truncation are the same)."""
    limit = max(int(max_length), 1) * CHARS_PER_TOKEN
    return [t if len(t) <= limit else t[:limit] for t in texts]


def token_lengths(tokenizer, texts: Sequence[str], *, max_length: int) -> np.ndarray:
    """(n,) int64: the tokens (special tokens included) the encoder reads of each text, after the truncation to
    ``max_length`` that :func:`length_sorted_batches` applies."""
    enc = tokenizer(cut_texts(list(texts), max_length), truncation=True, max_length=max_length)
    return np.asarray([len(ids) for ids in enc["input_ids"]], dtype=np.int64)


def length_sorted_batches(tokenizer, texts: Sequence[str], *, batch_size: int, max_length: int,
                          special_tokens_mask: bool = False) -> Iterator[tuple[np.ndarray, dict]]:
    """Yield ``(idx, encoding)``: ``idx`` (b,) positions in ``texts``, ``encoding`` the padded tensors of those texts.

    ``encoding`` is a Hugging Face ``BatchEncoding`` of (b, T) tensors (``input_ids``, ``attention_mask`` ...,
    ``special_tokens_mask`` when asked), T the longest of the b texts after truncation to ``max_length`` tokens.
    Batches follow decreasing token length; ties keep the input order.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    texts = list(texts)
    if not texts:
        return
    enc = tokenizer(cut_texts(texts, max_length), truncation=True, max_length=max_length,
                    return_special_tokens_mask=special_tokens_mask, return_attention_mask=True)
    order = np.argsort([-len(ids) for ids in enc["input_ids"]], kind="stable")
    keys = list(enc.keys())
    for start in range(0, len(texts), batch_size):
        idx = order[start : start + batch_size]
        features = [{k: enc[k][i] for k in keys} for i in idx]
        yield idx, tokenizer.pad(features, padding=True, return_tensors="pt")
