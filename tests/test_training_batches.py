"""Length-grouped batches (distillation) against plain shuffled batches: the same examples per epoch, less padding,
a pure function of (seed, batch number)."""

from __future__ import annotations

import numpy as np

from layerwise.training import batch_indices, length_grouped_batch_indices, steps_per_epoch


def _epoch(fn, lengths, bs, seed, epoch):
    per = steps_per_epoch(len(lengths), bs)
    return [fn(lengths, bs, seed, epoch * per + i) for i in range(per)]


def test_each_epoch_holds_the_examples_of_the_plain_shuffle_in_batches_of_similar_length():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 200, size=1003)
    bs = 8
    for epoch in (0, 1):
        grouped = _epoch(lambda n, b, s, i: length_grouped_batch_indices(n, b, s, i, group=4), lengths, bs, 3, epoch)
        plain = _epoch(lambda n, b, s, i: batch_indices(len(n), b, s, i), lengths, bs, 3, epoch)
        assert all(len(b) == bs for b in grouped)
        assert sorted(np.concatenate(grouped).tolist()) == sorted(np.concatenate(plain).tolist())  # same tail dropped
        padded = lambda batches: sum(len(b) * lengths[b].max() for b in batches)  # noqa: E731
        assert padded(grouped) < 0.8 * padded(plain)


def test_batches_are_a_pure_function_of_seed_and_number_and_epochs_differ():
    lengths = np.random.default_rng(1).integers(1, 50, size=100)
    a = length_grouped_batch_indices(lengths, 10, 0, 13)
    assert np.array_equal(a, length_grouped_batch_indices(lengths.copy(), 10, 0, 13))
    assert not np.array_equal(length_grouped_batch_indices(lengths, 10, 0, 3), a)
    assert not np.array_equal(length_grouped_batch_indices(lengths, 10, 1, 13), a)
