"""Token-bucketed batches: the token budget holds, padding is rare, order is seeded."""

from __future__ import annotations

import numpy as np

from attnrepro.data.batching import Corpus, collate, token_batches
from attnrepro.data.tokenize import BOS, EOS, PAD


def _lengths(n: int = 20000, seed: int = 0):
    rng = np.random.default_rng(seed)
    src = rng.choice(np.arange(1, 51), size=n, p=(1 / np.arange(1, 51)) / (1 / np.arange(1, 51)).sum())
    tgt = src + rng.integers(0, 6, size=n)
    return src, tgt


def test_every_sentence_once_within_the_token_budget():
    src, tgt = _lengths()
    batches = token_batches(src, tgt, 1000, seed=3)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(src)))
    for b in batches:
        assert len(b) == 1 or len(b) * (src[b].max() + tgt[b].max() + 1) <= 1000


def test_at_least_95_percent_of_slots_are_real_tokens():
    src, tgt = _lengths()
    batches = token_batches(src, tgt, 1000, seed=3)
    real = sum(src[b].sum() + tgt[b].sum() + len(b) for b in batches)
    slots = sum(len(b) * (src[b].max() + tgt[b].max() + 1) for b in batches)
    assert real / slots >= 0.95


def test_order_is_shuffled_and_reproducible():
    src, tgt = _lengths()
    a, b, c = (token_batches(src, tgt, 1000, seed=s) for s in (1, 1, 2))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    firsts = [src[batch].max() for batch in a[:20]]
    assert firsts != sorted(firsts)  # not in length order


def test_no_two_seeds_or_epochs_share_a_batch_order():
    """Seeds 1-6 x epochs 0-3: 24 batch orders, all different (a generator seeded with seed + epoch gave
    seed 1's epoch 1 the order of seed 2's epoch 0, and the band's seeds 1-3 and 4-6 shared epochs)."""
    src, tgt = _lengths(2000)
    orders = {(s, e): token_batches(src, tgt, 1000, seed=s, epoch=e) for s in range(1, 7) for e in range(4)}
    assert len({tuple(map(tuple, batches)) for batches in orders.values()}) == 24
    firsts = {(s, e): batches[0].tolist() for (s, e), batches in orders.items()}
    assert len({tuple(first) for first in firsts.values()}) == 24  # not even the first batch repeats
    default = token_batches(src, tgt, 1000, seed=1)  # epoch 0 unless told
    assert all(np.array_equal(x, y) for x, y in zip(default, orders[1, 0], strict=True))


def test_collate_pads_and_shifts_the_target():
    corpus = Corpus(
        np.array([5, 6, 7, 8], np.int32), np.array([0, 3, 4]), np.array([9, 10, 11], np.int32), np.array([0, 1, 3])
    )
    batch = collate(corpus, np.array([0, 1]))
    assert batch.src.tolist() == [[5, 6, 7], [8, PAD, PAD]]
    assert batch.src_mask.tolist() == [[True, True, True], [True, False, False]]
    assert batch.tgt_in.tolist() == [[BOS, 9, PAD], [BOS, 10, 11]]
    assert batch.tgt_out.tolist() == [[9, EOS, PAD], [10, 11, EOS]]
    assert batch.n_tgt_tokens == 5
    assert batch.nonpad_fraction == (4 + 5) / (6 + 6)
