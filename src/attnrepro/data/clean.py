"""Cleaning a split: validation (same line count, UTF-8 without NUL bytes, as `attnrepro.data.text`
reads every text; errors name file:line), whitespace normalisation and, for training splits, the
filters of Moses' `clean-corpus-n.perl` as the WMT baselines ran it (`clean-corpus-n.perl CORPUS
en fr CLEAN 1 80`: drop a pair when either side is empty, has fewer than `min_len` or more than
`max_len` words, or one side is more than `max_ratio` (default 9) times longer than the other).

Pairs are streamed one at a time: memory does not grow with the corpus. Counts before and after
every filter, per corpus and in total, go to a JSON manifest beside the output.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnrepro.config import CleanConfig
from attnrepro.data.text import decode_line, raw_pairs
from attnrepro.errors import DataError

UTF8_RULE = "UTF-8 text (no invalid byte, no NUL) on both sides"


@dataclass(frozen=True)
class RawCorpus:
    name: str
    src: Path
    tgt: Path


class Filters:
    """The training-split filters, in order, each counting the pairs it drops."""

    def __init__(self, cfg: CleanConfig | None):
        self.cfg = cfg
        self.names = ["empty", "length", "ratio"] if cfg is not None else []
        self.dropped = dict.fromkeys(self.names, 0)

    def rules(self) -> dict[str, str]:
        if self.cfg is None:
            return {}
        c = self.cfg
        return {
            "empty": "both sides have at least one word",
            "length": f"{c.min_len} <= words <= {c.max_len} on both sides",
            "ratio": f"longer side <= {c.max_ratio:g} x shorter side (in words)",
        }

    def reject(self, src_words: int, tgt_words: int) -> str | None:
        """The name of the first filter that drops this pair, or None to keep it."""
        c = self.cfg
        if c is None:
            return None
        if src_words == 0 or tgt_words == 0:
            return "empty"
        if not (c.min_len <= src_words <= c.max_len and c.min_len <= tgt_words <= c.max_len):
            return "length"
        if max(src_words, tgt_words) > c.max_ratio * min(src_words, tgt_words):
            return "ratio"
        return None


def _cleaned_pairs(
    corpus: RawCorpus, chain: Filters, totals: dict[str, int], drop_invalid: bool, hint: str
) -> Iterator[tuple[str, str, int, int]]:
    """The pairs of `corpus` that pass: (source, target, source words, target words), counting the rest."""
    for lineno, (src_raw, tgt_raw) in enumerate(raw_pairs(corpus.src, corpus.tgt), start=1):
        totals["pairs_in"] += 1
        try:
            src_text = decode_line(src_raw, corpus.src, lineno)
            tgt_text = decode_line(tgt_raw, corpus.tgt, lineno)
        except DataError as err:  # not UTF-8, or a NUL byte
            if not drop_invalid:
                raise DataError(f"{err}{hint}") from None
            totals["invalid_utf8"] += 1
            continue
        # Moses clean-corpus-n.perl: collapse runs of whitespace, trim both ends.
        src_norm, tgt_norm = " ".join(src_text.split()), " ".join(tgt_text.split())
        if src_norm != src_text or tgt_norm != tgt_text:
            totals["whitespace_normalised"] += 1
        n_src, n_tgt = src_norm.count(" ") + bool(src_norm), tgt_norm.count(" ") + bool(tgt_norm)
        rejected = chain.reject(n_src, n_tgt)
        if rejected is not None:
            chain.dropped[rejected] += 1
            continue
        yield src_norm, tgt_norm, n_src, n_tgt


def _filter_steps(totals: dict[str, int], chain: Filters, filtered: bool) -> list[dict[str, Any]]:
    """What each filter saw and kept, in order (the manifest's `filters`)."""
    steps, remaining = [], totals["pairs_in"]
    if filtered:
        after = remaining - totals["invalid_utf8"]
        steps.append({"filter": "utf8", "rule": UTF8_RULE, "before": remaining, "after": after})
        remaining = after
    for name, rule in chain.rules().items():
        after = remaining - chain.dropped[name]
        steps.append({"filter": name, "rule": rule, "before": remaining, "after": after})
        remaining = after
    assert remaining == totals["pairs_out"]
    return steps


def clean_split(
    split: str,
    corpora: list[RawCorpus],
    src_out: Path,
    tgt_out: Path,
    manifest: Path,
    filters: CleanConfig | None,
    invalid_utf8: str = "error",
) -> dict[str, Any]:
    """Validate, normalise and (when `filters` is given) filter `corpora` into one parallel text.

    Evaluation splits pass filters=None: every line is kept (the test set stays 3003 sentences)
    and invalid UTF-8 is always an error there.
    """
    chain = Filters(filters)
    drop_invalid = invalid_utf8 == "drop" and filters is not None
    hint = "; set data.wmt.clean.invalid_utf8: drop to drop such pairs" if filters else ""
    totals = {"pairs_in": 0, "invalid_utf8": 0, "whitespace_normalised": 0, "pairs_out": 0}
    words = {"src": 0, "tgt": 0}
    per_corpus = []
    src_out.parent.mkdir(parents=True, exist_ok=True)
    tmp_src, tmp_tgt = (p.with_name(f".{p.name}.tmp") for p in (src_out, tgt_out))
    try:
        with (
            open(tmp_src, "w", encoding="utf-8", newline="\n") as out_s,
            open(tmp_tgt, "w", encoding="utf-8", newline="\n") as out_t,
        ):
            for corpus in corpora:
                pairs_before, kept_before = totals["pairs_in"], totals["pairs_out"]
                for src, tgt, n_src, n_tgt in _cleaned_pairs(corpus, chain, totals, drop_invalid, hint):
                    out_s.write(src + "\n")
                    out_t.write(tgt + "\n")
                    words["src"] += n_src
                    words["tgt"] += n_tgt
                    totals["pairs_out"] += 1
                pairs, kept = totals["pairs_in"] - pairs_before, totals["pairs_out"] - kept_before
                per_corpus.append({"corpus": corpus.name, "pairs": pairs, "kept": kept})
    except BaseException:
        tmp_src.unlink(missing_ok=True)
        tmp_tgt.unlink(missing_ok=True)
        raise
    record = {
        "split": split,
        "corpora": per_corpus,
        "pairs_in": totals["pairs_in"],
        "filters": _filter_steps(totals, chain, filters is not None),
        "pairs_out": totals["pairs_out"],
        "whitespace_normalised": totals["whitespace_normalised"],
        "words_out": words,
    }
    os.replace(tmp_src, src_out)
    os.replace(tmp_tgt, tgt_out)
    tmp_manifest = manifest.with_name(f".{manifest.name}.tmp")
    tmp_manifest.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp_manifest, manifest)
    return record
