"""Scoring with sacreBLEU, both ways the literature reports BLEU:

- sacreBLEU on detokenized output (13a tokenization, exp smoothing), with its signature;
- tokenized BLEU as the papers computed it with `multi-bleu.perl`: hypothesis and reference
  Moses-tokenized (sacremoses, the Python port of `tokenizer.perl`) and scored with
  `tokenize='none'` and no smoothing (multi-bleu.perl scores 0 when an n-gram order has no match).
  For a German target, hyphenated compounds are then split as tensor2tensor's `get_ende_bleu.sh`
  did for Vaswani et al. 2017's En-De numbers ("rich-text" -> "rich ##AT##-##AT## text");
- where the config asks for it (`evaluate.bleu_lc_tok`, the Multi30k configs), lowercased tokenized BLEU as
  the Multi30k literature computes it: hypothesis and reference made into the text of the Multi30k
  repository's `lc.norm.tok` files (lowercased, punctuation-normalised, Moses-tokenized; `lc_norm_tok`),
  then multi-bleu.perl's BLEU as above (the text is already lowercased, so `-lc` changes nothing).

A corpus that ships tokenized text (Europarl v1, `pretokenized`) is scored the other way round: tokenized BLEU
on the text as it is (the 2014 papers' multi-bleu.perl on the corpus's own tokens), and sacreBLEU on hypothesis
and reference Moses-detokenized (sacremoses) first, as it scores any detokenized output.

Also BLEU per source-length bucket (Bahdanau et al. 2014, Fig. 2), both ways, each with its interval, and on the
sentences without an unknown word (Bahdanau et al. 2014, Table 1, "No UNK"), which exists only for word vocabularies and
is scored from the translations of a search that never emits UNK (`attnrepro translate` writes them).

Every test line is scored: an empty source line has an empty translation, which is scored against
its reference and counted in the first length bucket.

Each corpus score comes with a bootstrap interval (Koehn 2004), by sacreBLEU's procedure
(`sacrebleu.significance._bootstrap_resample`): sentence indices drawn with replacement by
`numpy.random.default_rng(seed).choice`, the metric of each resample's summed sentence statistics,
and the 95 % bounds at the (n // 40)-th lowest and highest of the n resampled scores. The sentence
statistics are extracted once; resampling sums them, never re-tokenizes text.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU

from attnrepro.config import EvaluateConfig
from attnrepro.data.text import read_lines
from attnrepro.data.tokenize import Tokenizer
from attnrepro.errors import DataError
from attnrepro.evaluation.no_unk import (
    NO_UNK_BANNED,
    NO_UNK_DEFINITION,
    NO_UNK_MAIN,
    NO_UNK_SUBWORD,
    main_search_serves_no_unk,
    no_unk_mask,
)

LENGTH_UNITS = {  # what a bucket's source length counts: the words that the training filter counts
    "whitespace": "source words (whitespace-separated)",
    "moses": "Moses-tokenized source words (sacremoses -l {lang})",
}
COMPOUND_SPLIT = "compound-split:##AT##"  # tensor2tensor get_ende_bleu.sh, in the tokenized signature
# The Moses scripts that made the Multi30k repository's lc.norm.tok files: github.com/multi30k/dataset,
# scripts/moses-3a0631a/ (Moses commit 3a0631a of 12 December 2017), run by scripts/task1-tokenize.sh.
LC_TOK_MOSES = "moses-3a0631a"
LC_TOK_PROCEDURE = (
    "lowercase.perl | normalize-punctuation.perl -l {lang} | tokenizer.perl -l {lang} (Moses 3a0631a, "
    "multi30k/dataset scripts/task1-tokenize.sh; through sacremoses), then multi-bleu.perl's BLEU"
)
LENGTH_BLEU = {  # evaluate.length_bleu -> what Fig. 2's axis and the by-length tables call their score
    "sacrebleu": "sacreBLEU",
    "tokenized": "tokenized BLEU (multi-bleu.perl)",
}
BOOTSTRAP_CONFIDENCE = 0.95  # the bounds below are sacreBLEU's: 1/40 of the resamples cut from each end
RESAMPLE_CHUNK = 100  # resamples drawn at once: 3 x 100 x n_sentences x 8 bytes (7 MB for newstest2014)
SCORE_LABELS = {  # what each score in bleu.json is, for people and table headers
    "bleu": "sacreBLEU, detokenized output (signature in 'signature')",
    "bleu_ci": "95 % bootstrap interval of 'bleu' (percentile bounds; settings in 'bootstrap')",
    "bleu_tokenized": "tokenized BLEU as the papers' multi-bleu.perl: Moses-tokenized text, tokenize=none "
    "(German targets: hyphenated compounds split, ##AT##)",
    "bleu_tokenized_ci": "95 % bootstrap interval of 'bleu_tokenized'",
    "bleu_lc_tok": "lowercased tokenized BLEU as the Multi30k literature reports it: hypothesis and reference "
    "made into the Multi30k repository's lc.norm.tok text (procedure in 'procedure_lc_tok'), tokenize=none, "
    "no smoothing (multi-bleu.perl); present where evaluate.bleu_lc_tok is set",
    "bleu_lc_tok_ci": "95 % bootstrap interval of 'bleu_lc_tok'",
    "length_unit": "what the source lengths of bleu_by_length.csv's buckets count; per bucket: sacreBLEU (bleu) and "
    "tokenized BLEU (bleu_tokenized), each with its interval",
    "no_unk.bleu": "sacreBLEU on the No UNK subset",
    "no_unk.bleu_tokenized": "tokenized BLEU on the No UNK subset (Bahdanau Table 1's 'No UNK' column)",
    "no_unk.bleu_lc_tok": "lowercased tokenized BLEU on the No UNK subset (where bleu_lc_tok is scored)",
    "no_unk.decoding": f"where the subset's translations come from: '{NO_UNK_BANNED}' (UNK never emitted) "
    f"or '{NO_UNK_MAIN}' (the main translations are that search's answer)",
}
CSV_COLUMNS = ["bucket_lo", "bucket_hi", "n_sentences", "bleu", "bleu_ci_lo", "bleu_ci_hi", "resolution",
               "bleu_tokenized", "bleu_tokenized_ci_lo", "bleu_tokenized_ci_hi"]  # fmt: skip


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


def split_compounds(lines: Sequence[str]) -> list[str]:
    """Hyphenated compounds as tensor2tensor's get_ende_bleu.sh wrote them for Vaswani et al. 2017's En-De
    BLEU: `perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'` (non-overlapping, so "a-b-c" keeps its second "-")."""
    return [re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", line) for line in lines]


def lc_norm_tok(lines: Sequence[str], lang: str) -> list[str]:
    """The Multi30k repository's `lc.norm.tok` text (scripts/task1-tokenize.sh: `lowercase.perl |
    normalize-punctuation.perl -l LANG | tokenizer.perl -l LANG`, Moses 3a0631a), through sacremoses.

    Two settings make sacremoses give that snapshot's bytes (checked on every line of train, val and
    test_2016_flickr in en, de and fr against the repository's files: docs/papers.md): the 2017
    normalize-punctuation.perl turns a lone ’ ‘ ‚ into " (sacremoses' `perl_parity` does so for ’ only),
    and it reads each line with its newline, so its `(\\.+)"(\\s*[^<])` rule also moves a period that ends
    the line behind the closing quote. tokenizer.perl's default escaping (&apos; &quot; &amp; ...) is kept:
    it never changes where tokens split, so BLEU is the same without it."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    normalizer = MosesPunctNormalizer(lang, perl_parity=True)
    normalizer.substitutions = [(p, '"' if p in ("‘", "‚") else r) for p, r in normalizer.substitutions]
    tokenizer = MosesTokenizer(lang)
    return [
        tokenizer.tokenize(normalizer.normalize(line.lower() + "\n"), escape=True, return_str=True) for line in lines
    ]


def moses_detokenize(lines: Sequence[str], lang: str) -> list[str]:
    """`detokenizer.perl -l LANG` through sacremoses: the text sacreBLEU expects, from a corpus's tokens."""
    from sacremoses import MosesDetokenizer

    moses = MosesDetokenizer(lang)
    return [moses.detokenize(line.split()) for line in lines]


def tokenize_for_bleu(lines: Sequence[str], lang: str) -> list[str]:
    """The text multi-bleu.perl scored: Moses-tokenized; German compounds split (get_ende_bleu.sh)."""
    tokenized = moses_tokenize(lines, lang)
    return split_compounds(tokenized) if lang == "de" else tokenized


def tokenized_metric() -> BLEU:
    """multi-bleu.perl's BLEU on already tokenized text; `force`: lines ending in " ." are meant so."""
    return BLEU(tokenize="none", smooth_method="none", force=True)


def tokenized_signature(metric: BLEU, lang: str, pretokenized: bool = False) -> str:
    if pretokenized:  # the corpus's own tokens, scored as they are
        return f"pretok:corpus|{metric.get_signature()}"
    compounds = f"|{COMPOUND_SPLIT}" if lang == "de" else ""
    return f"pretok:sacremoses-{version('sacremoses')}-{lang}-noescape{compounds}|{metric.get_signature()}"


def sacre_signature(metric: BLEU, lang: str, pretokenized: bool = False) -> str:
    detok = f"detok:sacremoses-{version('sacremoses')}-{lang}|" if pretokenized else ""
    return f"{detok}{metric.get_signature()}"


def lc_tok_signature(metric: BLEU, lang: str) -> str:
    return f"pretok:lc.norm.tok-{lang}-{LC_TOK_MOSES}-sacremoses-{version('sacremoses')}|{metric.get_signature()}"


def lc_tok_bleu(hypotheses: list[str], references: list[str], lang: str) -> tuple[float, str]:
    """The Multi30k literature's BLEU: multi-bleu.perl on the lc.norm.tok text of both sides; and a signature."""
    metric = tokenized_metric()
    score = metric.corpus_score(lc_norm_tok(hypotheses, lang), [lc_norm_tok(references, lang)])
    return score.score, lc_tok_signature(metric, lang)


def tokenized_bleu(hypotheses: list[str], references: list[str], lang: str) -> tuple[float, str]:
    """multi-bleu.perl's BLEU: Moses-tokenized text, no further tokenization, no smoothing; and a signature."""
    metric = tokenized_metric()
    score = metric.corpus_score(tokenize_for_bleu(hypotheses, lang), [tokenize_for_bleu(references, lang)])
    return score.score, tokenized_signature(metric, lang)


@dataclass(frozen=True)
class SentenceStats:
    """sacreBLEU's statistics of each sentence (hypothesis and reference length, n-gram matches and totals):
    the score of any set of sentences is the metric of the sum of their rows, as in `corpus_score`."""

    metric: BLEU
    rows: np.ndarray  # (n_sentences, 2 + 2 * max_ngram_order), int64

    @classmethod
    def extract(cls, metric: BLEU, hypotheses: Sequence[str], references: Sequence[str]) -> SentenceStats:
        stats = metric._extract_corpus_statistics(hypotheses, [references])
        return cls(metric, np.asarray(stats, dtype=np.int64).reshape(len(hypotheses), -1))

    def subset(self, members: Sequence[int] | np.ndarray) -> SentenceStats:
        return SentenceStats(self.metric, self.rows[np.asarray(members, dtype=np.int64)])

    def bleu(self) -> float:
        return self._score(self.rows.sum(0))

    def interval(self, resamples: int, seed: int) -> tuple[float, float] | None:
        """95 % bootstrap interval of `bleu()`, sacreBLEU's procedure (module docstring); None when off (0)."""
        if resamples == 0:
            return None
        rng = np.random.default_rng(seed)
        sizes = [min(RESAMPLE_CHUNK, resamples - start) for start in range(0, resamples, RESAMPLE_CHUNK)]
        # chunks draw the same stream as sacreBLEU's one rng.choice(n, size=(resamples, n)), in bounded memory
        scores = sorted(self._score(summed) for size in sizes for summed in self._resampled_sums(rng, size))
        cut = resamples // 40  # sacreBLEU's estimate_ci: 2.5 % of the resamples on each side
        return scores[cut], scores[resamples - cut - 1]

    def _resampled_sums(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """The summed statistics of `size` resamples, (size, columns): how often each resample drew each
        sentence, times the rows; exact in float64 (counts far below 2**53) and 6x faster than summing
        the drawn rows one resample at a time."""
        n = len(self.rows)
        draws = rng.choice(n, size=(size, n), replace=True)  # sentence indices
        counts = np.bincount((draws + n * np.arange(size)[:, None]).ravel(), minlength=size * n)
        sums = counts.reshape(size, n).astype(np.float64) @ self.rows.astype(np.float64)
        return np.rint(sums).astype(np.int64)

    def _score(self, summed: np.ndarray) -> float:
        return self.metric._compute_score_from_stats(summed.tolist()).score


def sentence_stats(
    hypotheses: Sequence[str],
    references: Sequence[str],
    tgt_lang: str,
    lc_tok: bool = False,
    pretokenized: bool = False,
) -> tuple[SentenceStats, SentenceStats, SentenceStats | None]:
    """The statistics of every sentence for sacreBLEU, for tokenized BLEU and (`lc_tok`) for lowercased
    tokenized BLEU on lc.norm.tok text; None for the last when not asked for. `pretokenized`: the text is the
    corpus's tokens (module docstring)."""
    if pretokenized:
        detok = moses_detokenize(hypotheses, tgt_lang), moses_detokenize(references, tgt_lang)
        sacre = SentenceStats.extract(BLEU(), *detok)
        tokenized = SentenceStats.extract(tokenized_metric(), hypotheses, references)
    else:
        sacre = SentenceStats.extract(BLEU(), hypotheses, references)
        hyps, refs = tokenize_for_bleu(hypotheses, tgt_lang), tokenize_for_bleu(references, tgt_lang)
        tokenized = SentenceStats.extract(tokenized_metric(), hyps, refs)
    if not lc_tok:
        return sacre, tokenized, None
    lowered = lc_norm_tok(hypotheses, tgt_lang), lc_norm_tok(references, tgt_lang)
    return sacre, tokenized, SentenceStats.extract(tokenized_metric(), *lowered)


def bucket_of(length: int, width: int, max_len: int) -> tuple[int, int]:
    """(lo, hi] bucket of a source length: 1..10 -> (0, 10]; an empty line joins the first bucket,
    lengths past max_len the last."""
    lo = min((max(length, 1) - 1) // width * width, max(max_len - width, 0))
    return lo, lo + width


def source_lengths(sources: Sequence[str], unit: str, lang: str) -> list[int]:
    """Length of each source in `unit` (a key of LENGTH_UNITS)."""
    words = moses_tokenize(sources, lang) if unit == "moses" else sources
    return [len(line.split()) for line in words]


def bleu_by_length(
    lengths: Sequence[int], stats: SentenceStats, ev: EvaluateConfig, tokenized: SentenceStats | None = None
) -> list[dict[str, Any]]:
    """One row per (lo, hi] bucket of source lengths: CSV_COLUMNS (sacreBLEU from `stats`, tokenized BLEU from
    `tokenized`, empty without it), each interval None when bootstrapping is off."""
    buckets: dict[tuple[int, int], list[int]] = {}
    for i, length in enumerate(lengths):
        buckets.setdefault(bucket_of(length, ev.bucket_width, ev.max_len), []).append(i)
    rows = []
    for (lo, hi), members in sorted(buckets.items()):
        row: dict[str, Any] = {"bucket_lo": lo, "bucket_hi": hi, "n_sentences": len(members)}
        for prefix, scores in (("bleu", stats), ("bleu_tokenized", tokenized)):
            bucket = scores.subset(members) if scores is not None else None
            score = bucket.bleu() if bucket is not None else None
            ci = bucket.interval(ev.bootstrap_resamples, ev.bootstrap_seed) if bucket is not None else None
            row |= {
                prefix: _round(score),
                f"{prefix}_ci_lo": _round(ci and ci[0]),
                f"{prefix}_ci_hi": _round(ci and ci[1]),
            }
            if prefix == "bleu":
                row["resolution"] = _round(bleu_resolution(bucket.rows[:, 1]))
        rows.append(row)
    return rows


def bleu_resolution(ref_lengths: Sequence[int] | np.ndarray, order: int = 4) -> float:
    """The test set's resolution at the top of the scale: the BLEU a perfect translation of these references
    loses when the last word of one sentence is wrong (one n-gram match fewer of every order; sacreBLEU's
    tokens). The smallest step a bucket's BLEU takes from 100: `attnrepro compare` floors a band's half-width
    with it, so that runs which all scored the same do not make a band no other run can hit."""
    lengths = np.asarray(ref_lengths, dtype=np.int64)
    totals = [int(np.clip(lengths - n + 1, 0, None).sum()) for n in range(1, order + 1)]
    if min(totals) <= 1:
        return 100.0  # one wrong word leaves an order without a match: BLEU 0
    return 100.0 * (1.0 - math.exp(sum(math.log(1 - 1 / t) for t in totals) / order))


@dataclass(frozen=True)
class NoUnkInput:
    """What the No UNK subset is scored from: the model's word vocabularies and `hyp_no_unk.txt` (the
    subset's translations, in test order, one line per subset sentence)."""

    src_tok: Tokenizer
    tgt_tok: Tokenizer
    hypotheses: Path


def score_files(
    src_path: Path,
    hyp_path: Path,
    ref_path: Path,
    ev: EvaluateConfig,
    languages: tuple[str, str] = ("en", "en"),
    length_unit: str = "whitespace",
    no_unk: NoUnkInput | None = None,
    pretokenized: bool = False,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """bleu.json's summary and the per-length rows. `no_unk` is None for subword vocabularies, where the
    No UNK subset does not apply; `length_unit` is a key of LENGTH_UNITS; `pretokenized`: the test set is a
    corpus's tokens (module docstring)."""
    sources, hypotheses, references = read_test_split(src_path, hyp_path, ref_path)
    src_lang, tgt_lang = languages
    sacre, tokenized, lc_tok = sentence_stats(hypotheses, references, tgt_lang, ev.bleu_lc_tok, pretokenized)
    overall = _scores(sacre, tokenized, lc_tok, ev)
    summary: dict[str, Any] = {
        "bleu": overall["bleu"],
        "bleu_ci": overall["bleu_ci"],
        "signature": sacre_signature(sacre.metric, tgt_lang, pretokenized),
        "n_sentences": len(sources),
        "bleu_tokenized": overall["bleu_tokenized"],
        "bleu_tokenized_ci": overall["bleu_tokenized_ci"],
        "signature_tokenized": tokenized_signature(tokenized.metric, tgt_lang, pretokenized),
        **_lc_tok_summary(overall, lc_tok, tgt_lang),
        "bootstrap": {
            "resamples": ev.bootstrap_resamples,
            "seed": ev.bootstrap_seed,
            "confidence": BOOTSTRAP_CONFIDENCE,
        },
        "length_unit": LENGTH_UNITS[length_unit].format(lang=src_lang),
        "no_unk": {"applies": False, "definition": NO_UNK_SUBWORD},
        "labels": SCORE_LABELS,
    }
    if no_unk is not None:
        texts = (sources, hypotheses, references)
        summary["no_unk"] = _no_unk_summary(texts, hyp_path, no_unk, overall, tgt_lang, ev, pretokenized)
    rows = bleu_by_length(source_lengths(sources, length_unit, src_lang), sacre, ev, tokenized)
    return summary, rows


def _lc_tok_summary(overall: dict[str, Any], lc_tok: SentenceStats | None, lang: str) -> dict[str, Any]:
    """bleu.json's lowercased tokenized BLEU, its interval, signature and procedure; nothing when not asked for."""
    if lc_tok is None:
        return {}
    return {
        "bleu_lc_tok": overall["bleu_lc_tok"],
        "bleu_lc_tok_ci": overall["bleu_lc_tok_ci"],
        "signature_lc_tok": lc_tok_signature(lc_tok.metric, lang),
        "procedure_lc_tok": LC_TOK_PROCEDURE.format(lang=lang),
    }


def _scores(
    sacre: SentenceStats, tokenized: SentenceStats, lc_tok: SentenceStats | None, ev: EvaluateConfig
) -> dict[str, Any]:
    """sacreBLEU, tokenized BLEU and (where asked for) lowercased tokenized BLEU of one set of sentences, each
    with its interval (None when off)."""
    scores = {
        "bleu": _round(sacre.bleu()),
        "bleu_ci": _round_pair(sacre.interval(ev.bootstrap_resamples, ev.bootstrap_seed)),
        "bleu_tokenized": _round(tokenized.bleu()),
        "bleu_tokenized_ci": _round_pair(tokenized.interval(ev.bootstrap_resamples, ev.bootstrap_seed)),
    }
    if lc_tok is not None:
        scores["bleu_lc_tok"] = _round(lc_tok.bleu())
        scores["bleu_lc_tok_ci"] = _round_pair(lc_tok.interval(ev.bootstrap_resamples, ev.bootstrap_seed))
    return scores


def _no_unk_summary(
    texts: tuple[list[str], list[str], list[str]],
    hyp_path: Path,
    no_unk: NoUnkInput,
    overall: dict[str, Any],
    tgt_lang: str,
    ev: EvaluateConfig,
    pretokenized: bool = False,
) -> dict[str, Any]:
    """The No UNK block; `overall` holds the scores of every sentence, the subset's when it is all of them."""
    sources, hypotheses, references = texts
    keep = no_unk_mask(sources, references, no_unk.src_tok, no_unk.tgt_tok)
    subset_hyps = read_lines(no_unk.hypotheses)
    if len(subset_hyps) != sum(keep):
        raise DataError(
            f"{no_unk.hypotheses}: {len(subset_hyps)} lines, but the No UNK subset has {sum(keep)} sentences;"
            " it was not written by `attnrepro translate` for this test set and vocabulary: translate again"
        )
    summary: dict[str, Any] = {"applies": True, "definition": NO_UNK_DEFINITION, "n_sentences": sum(keep)}
    if not any(keep):
        return {**summary, "decoding": None, **dict.fromkeys(overall)}
    if main_search_serves_no_unk(keep, hypotheses):  # the embedded corpus: its vocabulary spells every word
        if subset_hyps != hypotheses:
            raise DataError(f"{no_unk.hypotheses}: differs from {hyp_path}, which it should repeat: translate again")
        return {**summary, "decoding": NO_UNK_MAIN, **overall}
    refs = [r for r, k in zip(references, keep) if k]
    stats = sentence_stats(subset_hyps, refs, tgt_lang, ev.bleu_lc_tok, pretokenized)
    return {**summary, "decoding": NO_UNK_BANNED, **_scores(*stats, ev)}


def write_scores(summary: dict[str, Any], rows: list[dict[str, Any]], json_path: Path, csv_path: Path) -> None:
    json_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def read_test_split(src_path: Path, *aligned: Path) -> list[list[str]]:
    """The lines of a test source and of the files aligned with it (references, translations); DataError
    when the source is empty or a line count differs."""
    texts = [read_lines(path) for path in (src_path, *aligned)]
    if not texts[0]:
        raise DataError(f"{src_path}: the test split is empty: there is nothing to translate or score")
    if len({len(lines) for lines in texts}) > 1:
        counts = ", ".join(f"{path} {len(lines)}" for path, lines in zip((src_path, *aligned), texts))
        raise DataError(f"line counts differ: {counts}")
    return texts


def _round(score: float | None) -> float | None:
    return None if score is None else round(score, 2)


def _round_pair(pair: tuple[float, float] | None) -> list[float] | None:
    return None if pair is None else [round(pair[0], 2), round(pair[1], 2)]
