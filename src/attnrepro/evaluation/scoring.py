"""Scoring with sacreBLEU, both ways the literature reports BLEU:

- sacreBLEU on detokenized output (13a tokenization, exp smoothing), with its signature;
- tokenized BLEU as the papers computed it with `multi-bleu.perl`: hypothesis and reference
  Moses-tokenized (sacremoses, the Python port of `tokenizer.perl`) and scored with
  `tokenize='none'` and no smoothing (multi-bleu.perl scores 0 when an n-gram order has no match).

Also BLEU per source-length bucket (Bahdanau et al. 2014, Fig. 2) and on the sentences without
an unknown word (Bahdanau et al. 2014, Table 1, "No UNK"), which exists only for word vocabularies.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from sacrebleu.metrics import BLEU

from attnrepro.data.text import read_lines
from attnrepro.data.tokenize import UNK, Tokenizer

NO_UNK_DEFINITION = (
    "test sentences whose source and reference contain no word outside the model's source and target "
    "vocabularies (Bahdanau et al. 2014, Table 1: 'No UNK')"
)
SCORE_LABELS = {  # what each score in bleu.json is, for people and table headers
    "bleu": "sacreBLEU, detokenized output (signature in 'signature')",
    "bleu_tokenized": "tokenized BLEU as the papers' multi-bleu.perl: Moses-tokenized text, tokenize=none",
    "no_unk.bleu": "sacreBLEU on the No UNK subset",
    "no_unk.bleu_tokenized": "tokenized BLEU on the No UNK subset (Bahdanau Table 1's 'No UNK' column)",
}
NO_UNK_SUBWORD = "does not apply: a subword vocabulary (sentencepiece) spells every word, so there is no UNK subset"


def corpus_bleu(hypotheses: list[str], references: list[str]) -> tuple[float, str]:
    """sacreBLEU's default corpus BLEU (13a tokenization, exp smoothing) and its signature."""
    metric = BLEU()
    score = metric.corpus_score(hypotheses, [references])
    return score.score, str(metric.get_signature())


def moses_tokenize(lines: Sequence[str], lang: str) -> list[str]:
    """`tokenizer.perl -l LANG -no-escape` through sacremoses: words and punctuation split by spaces."""
    from sacremoses import MosesTokenizer

    moses = MosesTokenizer(lang)
    return [moses.tokenize(line, escape=False, return_str=True) for line in lines]


def tokenized_bleu(hypotheses: list[str], references: list[str], lang: str) -> tuple[float, str]:
    """multi-bleu.perl's BLEU: Moses-tokenized text, no further tokenization, no smoothing; and a signature."""
    metric = BLEU(tokenize="none", smooth_method="none")
    score = metric.corpus_score(moses_tokenize(hypotheses, lang), [moses_tokenize(references, lang)])
    return score.score, f"pretok:sacremoses-{version('sacremoses')}-{lang}-noescape|{metric.get_signature()}"


def has_no_unknown_word(tokenizer: Tokenizer, line: str) -> bool:
    """True when every word of `line` is in the tokenizer's word vocabulary (ids never hit <unk>)."""
    return UNK not in tokenizer.encode(line)


def no_unk_mask(
    sources: Sequence[str], references: Sequence[str], src_tok: Tokenizer, tgt_tok: Tokenizer
) -> list[bool]:
    """Per sentence: neither the source nor the reference has an unknown word (our reading of "No UNK")."""
    return [has_no_unknown_word(src_tok, s) and has_no_unknown_word(tgt_tok, r) for s, r in zip(sources, references)]


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
    src_path: Path,
    hyp_path: Path,
    ref_path: Path,
    width: int,
    max_len: int,
    tgt_lang: str = "en",
    tokenizers: tuple[Tokenizer, Tokenizer] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """bleu.json's summary and the per-length rows. `tokenizers` (source, target) are the model's word
    vocabularies for the "No UNK" subset; None for subword vocabularies, where the subset does not apply."""
    sources, hypotheses, references = (_read_lines(p) for p in (src_path, hyp_path, ref_path))
    if not len(sources) == len(hypotheses) == len(references):
        raise ValueError(
            f"line counts differ: {src_path} {len(sources)}, {hyp_path} {len(hypotheses)}, {ref_path} {len(references)}"
        )
    bleu, signature = corpus_bleu(hypotheses, references)
    bleu_tok, signature_tok = tokenized_bleu(hypotheses, references, tgt_lang)
    summary: dict[str, Any] = {
        "bleu": round(bleu, 2),
        "signature": signature,
        "n_sentences": len(sources),
        "bleu_tokenized": round(bleu_tok, 2),
        "signature_tokenized": signature_tok,
        "no_unk": _no_unk_summary(sources, hypotheses, references, tgt_lang, tokenizers, (bleu, bleu_tok)),
        "labels": SCORE_LABELS,
    }
    return summary, bleu_by_length(sources, hypotheses, references, width, max_len)


def _no_unk_summary(
    sources: list[str],
    hypotheses: list[str],
    references: list[str],
    tgt_lang: str,
    tokenizers: tuple[Tokenizer, Tokenizer] | None,
    overall: tuple[float, float],
) -> dict[str, Any]:
    """`overall`: (sacreBLEU, tokenized BLEU) of every sentence, the subset's scores when it is all of them."""
    if tokenizers is None:
        return {"applies": False, "definition": NO_UNK_SUBWORD}
    keep = no_unk_mask(sources, references, *tokenizers)
    summary: dict[str, Any] = {"applies": True, "definition": NO_UNK_DEFINITION, "n_sentences": sum(keep)}
    if not any(keep):
        summary["bleu"] = summary["bleu_tokenized"] = None
    elif all(keep):  # the embedded corpus: its vocabulary spells every word
        summary["bleu"], summary["bleu_tokenized"] = (round(score, 2) for score in overall)
    else:
        hyps = [h for h, k in zip(hypotheses, keep) if k]
        refs = [r for r, k in zip(references, keep) if k]
        summary["bleu"] = round(corpus_bleu(hyps, refs)[0], 2)
        summary["bleu_tokenized"] = round(tokenized_bleu(hyps, refs, tgt_lang)[0], 2)
    return summary


def write_scores(summary: dict[str, Any], rows: list[dict[str, Any]], json_path: Path, csv_path: Path) -> None:
    json_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, ["bucket_lo", "bucket_hi", "n_sentences", "bleu"])
        writer.writeheader()
        writer.writerows(rows)


def _read_lines(path: Path) -> list[str]:
    return read_lines(path)  # UTF-8 checked, a bad line named by file and line (attnrepro.data.text)
