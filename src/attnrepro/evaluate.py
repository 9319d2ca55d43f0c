"""Scoring with sacreBLEU: corpus BLEU with its signature, and BLEU per source-length bucket
(Bahdanau et al. 2014, Fig. 2: BLEU against the length of the source sentence in words).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from sacrebleu.metrics import BLEU


def corpus_bleu(hypotheses: list[str], references: list[str]) -> tuple[float, str]:
    """sacreBLEU's default corpus BLEU (13a tokenization, exp smoothing) and its signature."""
    metric = BLEU()
    score = metric.corpus_score(hypotheses, [references])
    return score.score, str(metric.get_signature())


def bucket_of(length: int, width: int, max_len: int) -> tuple[int, int]:
    """(lo, hi] bucket of a source length: 1..10 -> (0, 10]; lengths past max_len join the last bucket."""
    lo = min((max(length, 1) - 1) // width * width, max(max_len - width, 0))
    return lo, lo + width


def bleu_by_length(
    sources: list[str], hypotheses: list[str], references: list[str], width: int, max_len: int
) -> list[dict[str, Any]]:
    """One row per (lo, hi] bucket of source words: bucket_lo, bucket_hi, n_sentences, bleu."""
    buckets: dict[tuple[int, int], list[int]] = {}
    for i, src in enumerate(sources):
        buckets.setdefault(bucket_of(len(src.split()), width, max_len), []).append(i)
    rows = []
    for (lo, hi), members in sorted(buckets.items()):
        bleu, _ = corpus_bleu([hypotheses[i] for i in members], [references[i] for i in members])
        rows.append({"bucket_lo": lo, "bucket_hi": hi, "n_sentences": len(members), "bleu": round(bleu, 2)})
    return rows


def score_files(
    src_path: Path, hyp_path: Path, ref_path: Path, width: int, max_len: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    sources, hypotheses, references = (_read_lines(p) for p in (src_path, hyp_path, ref_path))
    if not len(sources) == len(hypotheses) == len(references):
        raise ValueError(
            f"line counts differ: {src_path} {len(sources)}, {hyp_path} {len(hypotheses)}, {ref_path} {len(references)}"
        )
    bleu, signature = corpus_bleu(hypotheses, references)
    summary = {"bleu": round(bleu, 2), "signature": signature, "n_sentences": len(sources)}
    return summary, bleu_by_length(sources, hypotheses, references, width, max_len)


def write_scores(summary: dict[str, Any], rows: list[dict[str, Any]], json_path: Path, csv_path: Path) -> None:
    json_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, ["bucket_lo", "bucket_hi", "n_sentences", "bleu"])
        writer.writeheader()
        writer.writerows(rows)


def _read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]
