"""Encoded corpora, token-bucketed batches and padding masks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from attnrepro.data.tokenize import BOS, EOS, PAD, STAMP, TOKENIZER_FILES, tokenizer_differences
from attnrepro.errors import DataError

# A run's random streams are numpy SeedSequences of train.seed, each with a spawn key of its own, whose first
# word says what the stream seeds: (BATCH_ORDER, epoch) here, (RANK_GENERATORS, rank) in training.loop.
BATCH_ORDER, RANK_GENERATORS = 0, 1


@dataclass
class Corpus:
    """A parallel corpus as flat id arrays: sentence i is ids[offsets[i]:offsets[i+1]]."""

    src_ids: np.ndarray
    src_offsets: np.ndarray
    tgt_ids: np.ndarray
    tgt_offsets: np.ndarray
    tokenizer: dict[str, str] | None = None  # what it was encoded with (`encode_corpus`), when it says

    @classmethod
    def load(
        cls,
        path: Path,
        vocab: tuple[int, int] | None = None,
        vocab_from: str = "the tokenizer",
        tokenizer: dict[str, str] | None = None,
    ) -> Corpus:
        """The corpus in `path`; given the (source, target) vocabulary sizes, ids outside them raise (`check_ids`);
        given the fingerprint of the tokenizer it is read with, a corpus encoded with another raises."""
        with np.load(path) as f:
            stamp = dict(zip(TOKENIZER_FILES, map(str, f[STAMP]))) if STAMP in f.files else None
            corpus = cls(f["src_ids"], f["src_offsets"], f["tgt_ids"], f["tgt_offsets"], stamp)
        if vocab is not None:
            corpus.check_ids(path, vocab, vocab_from)
        if tokenizer is not None:
            corpus.check_tokenizer(path, tokenizer)
        return corpus

    def check_tokenizer(self, path: Path, tokenizer: dict[str, str]) -> None:
        """A `DataError` naming the file and both tokenizers' sha256 when the corpus says it was encoded with
        another tokenizer than `tokenizer`: ids of one vocabulary read with another of the same size are other
        words, and a model trained on them learns nothing, without an error. A corpus that says nothing passes."""
        saved, differ = self.tokenizer, tokenizer_differences(self.tokenizer, tokenizer)
        if differ:
            raise DataError(f"{path}: encoded with a tokenizer whose {' and '.join(differ)} sha256 "
                            f"{'are' if len(differ) > 1 else 'is'} {', '.join(saved[n] for n in differ)}, but the "
                            f"tokenizer in {tokenizer['folder']} has {', '.join(tokenizer[n] for n in differ)}: "
                            "encode it with this one")  # fmt: skip

    def check_ids(self, path: Path, vocab: tuple[int, int], vocab_from: str = "the tokenizer") -> None:
        """A `DataError` naming the file, the side, the sentence and both numbers when an id is not an entry of
        that side's vocabulary (`vocab_from` names where the sizes come from): the corpus was encoded with
        another tokenizer, and an embedding lookup would end in an IndexError deep in the model."""
        for side, ids, offsets, size in (("source", self.src_ids, self.src_offsets, vocab[0]),
                                         ("target", self.tgt_ids, self.tgt_offsets, vocab[1])):  # fmt: skip
            outside = (ids >= size) | (ids < 0)
            if outside.any():
                at = int(outside.argmax())
                sentence = int(np.searchsorted(offsets, at, side="right"))  # 1-based: offsets[0] is 0
                raise DataError(f"{path}: {side} id {int(ids[at])} in sentence {sentence} (ids up to "
                                f"{int(ids.max())}), but {vocab_from} has {size} {side} entries (ids 0–{size - 1}): "
                                "it was encoded with another tokenizer; encode it with this one")  # fmt: skip

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lens(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lens(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)

    def src(self, i: int) -> np.ndarray:
        return self.src_ids[self.src_offsets[i] : self.src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        return self.tgt_ids[self.tgt_offsets[i] : self.tgt_offsets[i + 1]]


@dataclass
class Batch:
    src: Tensor  # (batch, src_len) token ids, PAD-padded
    src_mask: Tensor  # (batch, src_len) True on real tokens
    tgt_in: Tensor  # (batch, tgt_len) <s> y_1 ... y_n
    tgt_out: Tensor  # (batch, tgt_len) y_1 ... y_n </s>
    indices: np.ndarray  # corpus indices of the rows

    @property
    def n_tgt_tokens(self) -> int:
        return int((self.tgt_out != PAD).sum())

    @property
    def nonpad_fraction(self) -> float:
        real = self.src_mask.sum() + (self.tgt_out != PAD).sum()
        return float(real) / (self.src.numel() + self.tgt_out.numel())

    def to(self, device: torch.device) -> Batch:
        return Batch(
            self.src.to(device), self.src_mask.to(device), self.tgt_in.to(device), self.tgt_out.to(device), self.indices
        )


def pad(rows: list[np.ndarray], length: int | None = None) -> Tensor:
    """(len(rows), max length) int64 tensor, PAD on the right."""
    length = max(len(r) for r in rows) if length is None else length
    out = np.full((len(rows), length), PAD, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return torch.from_numpy(out)


def collate(corpus: Corpus, indices: np.ndarray) -> Batch:
    src = pad([corpus.src(i) for i in indices])
    tgt = [corpus.tgt(i) for i in indices]
    tgt_in = pad([np.concatenate(([BOS], t)) for t in tgt])
    tgt_out = pad([np.concatenate((t, [EOS])) for t in tgt])
    return Batch(src, src != PAD, tgt_in, tgt_out, np.asarray(indices))


def token_batches(
    src_lens: np.ndarray, tgt_lens: np.ndarray, batch_tokens: int, seed: int, epoch: int = 0
) -> list[np.ndarray]:
    """Length-sorted buckets of at most `batch_tokens` padded (source + target) tokens, in shuffled order.

    Sentences are sorted by (source length, target length) with ties broken at random, cut
    greedily into batches, and the batch order is shuffled; (seed, epoch) fixes both, each pair
    a stream of its own (numpy's SeedSequence keyed by both: a generator seeded with seed + epoch
    gave seed s's epoch 1 the batches of seed s + 1's epoch 0).
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(BATCH_ORDER, epoch)))
    order = np.lexsort((rng.random(len(src_lens)), tgt_lens, src_lens))
    batches: list[np.ndarray] = []
    start, max_src, max_tgt = 0, 0, 0
    for pos, i in enumerate(order):
        max_src_new, max_tgt_new = max(max_src, src_lens[i]), max(max_tgt, tgt_lens[i] + 1)
        if pos > start and (pos - start + 1) * (max_src_new + max_tgt_new) > batch_tokens:
            batches.append(order[start:pos])
            start, max_src_new, max_tgt_new = pos, src_lens[i], tgt_lens[i] + 1
        max_src, max_tgt = max_src_new, max_tgt_new
    if start < len(order):
        batches.append(order[start:])
    rng.shuffle(batches)
    return batches


def sentence_batches(src_lens: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Length-sorted batches of `batch_size` sentences for decoding (corpus order restored by the caller)."""
    order = np.argsort(src_lens, kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
