"""The pairs a model trains and validates on: Bahdanau's length filter on pairs for training,
and the validation pairs that a loss can be computed on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from attnrepro.config import TrainConfig
from attnrepro.data.batching import Corpus
from attnrepro.errors import DataError


def filter_pairs(corpus: Corpus, tc: TrainConfig) -> tuple[np.ndarray, dict[str, Any]]:
    """Indices of the pairs trained on, and a record of how many pairs each filter removed.

    Bahdanau's -30/-50 models were trained on sentence pairs of at most 30/50 words on both sides.
    A pair can fail several filters: each count is of the pairs that fail that one.
    """
    src, tgt = corpus.src_lens, corpus.tgt_lens
    failed = {
        "empty_source": src < 1,
        "empty_target": tgt < 1,
        "long_source": src > tc.max_src_len,
        "long_target": tgt > tc.max_tgt_len,
    }
    kept = np.flatnonzero(~np.logical_or.reduce(list(failed.values())))
    record = {"pairs": len(src), "kept": len(kept), "max_src_len": tc.max_src_len, "max_tgt_len": tc.max_tgt_len}
    return kept, record | {"removed": {name: int(mask.sum()) for name, mask in failed.items()}}


def describe_filter(record: dict[str, Any]) -> str:
    """One line for the train log: pairs kept and removed by each filter."""
    removed = record["removed"]
    return (
        f"{record['kept']:,} of {record['pairs']:,} training pairs kept; removed: {removed['empty_source']:,} with an"
        f" empty source, {removed['empty_target']:,} with an empty target, {removed['long_source']:,} with more than"
        f" {record['max_src_len']} source tokens, {removed['long_target']:,} with more than {record['max_tgt_len']}"
        " target tokens (a pair can fail several)"
    )


def scorable_pairs(corpus: Corpus, path: Path) -> tuple[np.ndarray, str]:
    """Indices of the validation pairs `valid_loss` can score, and a note naming those it cannot.

    A pair with an empty source is left out (an encoder needs a token; an empty target is scored
    on its </s>). Pair i is line i + 1 of the split's text files. No pair left is a DataError.
    """
    empty = np.flatnonzero(corpus.src_lens == 0)
    kept = np.flatnonzero(corpus.src_lens > 0)
    if len(kept) == 0:
        raise DataError(f"{path}: the validation split has no pair with a non-empty source ({len(corpus)} pairs)")
    if len(empty) == 0:
        return kept, ""
    lines = ", ".join(str(i + 1) for i in empty[:10]) + (", ..." if len(empty) > 10 else "")
    return kept, f"{path}: {len(empty)} pair(s) with an empty source left out of valid_loss (lines {lines})"


def validation_pairs(corpus: Corpus, path: Path, tc: TrainConfig) -> tuple[np.ndarray, list[str]]:
    """The validation pairs `valid_loss` scores, and lines saying which were left out: those it cannot score
    (`scorable_pairs`) and, with `train.valid_length_filter`, those beyond the model's training lengths."""
    kept, note = scorable_pairs(corpus, path)
    notes = [note] if note else []
    if tc.valid_length_filter:
        within = (corpus.src_lens[kept] <= tc.max_src_len) & (corpus.tgt_lens[kept] <= tc.max_tgt_len)
        if not within.any():
            raise DataError(f"{path}: no validation pair within max_src_len {tc.max_src_len} / max_tgt_len "
                            f"{tc.max_tgt_len} (train.valid_length_filter)")  # fmt: skip
        kept = kept[within]
        notes.append(f"validating on the {len(kept)} of {len(corpus)} validation pairs within {tc.max_src_len} source"
                     f" / {tc.max_tgt_len} target tokens (train.valid_length_filter)")  # fmt: skip
    return kept, notes
