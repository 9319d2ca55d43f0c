"""Scoring: our BLEU is sacreBLEU's (checked against its CLI), buckets follow Fig. 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from attnrepro.data.tokenize import WordVocab
from attnrepro.evaluation.scoring import (
    bleu_by_length,
    bucket_of,
    corpus_bleu,
    moses_tokenize,
    no_unk_mask,
    score_files,
    tokenized_bleu,
)

HYPS = ["the cat sat on the mat", "a quick brown dog jumps", "hello there world"]
REFS = ["the cat sat on a mat", "the quick brown fox jumps", "hello world"]


def test_bleu_of_a_known_pair_equals_the_sacrebleu_cli(tmp_path):
    (tmp_path / "hyp").write_text("\n".join(HYPS) + "\n")
    (tmp_path / "ref").write_text("\n".join(REFS) + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(tmp_path / "ref"), "-i", str(tmp_path / "hyp"), "-m", "bleu", "-b"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    bleu, signature = corpus_bleu(HYPS, REFS)
    assert round(bleu, 1) == float(out.stdout.strip())
    assert "tok:13a" in signature and "nrefs:1" in signature


def test_identical_text_scores_100_and_disjoint_text_0():
    assert corpus_bleu(REFS, REFS)[0] == pytest.approx(100.0)
    assert corpus_bleu(["x y z w"] * 3, REFS)[0] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(
    ("length", "bucket"), [(1, (0, 10)), (10, (0, 10)), (11, (10, 20)), (80, (70, 80)), (95, (70, 80))]
)
def test_buckets_are_half_open_on_the_left(length, bucket):
    assert bucket_of(length, 10, 80) == bucket


def test_bleu_by_length_rows(tmp_path):
    sources = ["w " * 3, "w " * 12, "w " * 15]
    rows = bleu_by_length(sources, HYPS, REFS, 10, 80)
    assert [(r["bucket_lo"], r["bucket_hi"], r["n_sentences"]) for r in rows] == [(0, 10, 1), (10, 20, 2)]
    assert rows[0]["bleu"] == round(corpus_bleu(HYPS[:1], REFS[:1])[0], 2)
    for name, lines in (("src", sources), ("hyp", HYPS), ("ref", REFS)):
        (tmp_path / name).write_text("\n".join(line.strip() for line in lines) + "\n")
    summary, rows2 = score_files(tmp_path / "src", tmp_path / "hyp", tmp_path / "ref", 10, 80)
    assert summary["n_sentences"] == 3 and rows2 == rows
    json.dumps(summary)


def test_line_count_mismatch_names_the_files(tmp_path):
    for name, n in (("src", 3), ("hyp", 2), ("ref", 3)):
        (tmp_path / name).write_text("a\n" * n)
    with pytest.raises(ValueError, match="hyp 2"):
        score_files(tmp_path / "src", tmp_path / "hyp", tmp_path / "ref", 10, 80)


# Tokenized BLEU (multi-bleu.perl on Moses-tokenized text) and Bahdanau's "No UNK" subset.
PUNCT_HYPS = ["Don't stop, it's fine.", "The cat (a big one) sat on the mat!", "Hello there, world."]
PUNCT_REFS = ["Don't stop; it's fine.", "The cat (a big one) sat on a mat.", "Hello, world."]


def test_tokenized_bleu_equals_sacremoses_cli_then_sacrebleu_tokenize_none(tmp_path):
    for name, lines in (("hyp", PUNCT_HYPS), ("ref", PUNCT_REFS)):
        tokenized = subprocess.run(
            [sys.executable, "-m", "sacremoses", "-l", "en", "-q", "tokenize"],  # tokenizer.perl defaults
            input="\n".join(lines) + "\n", capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        (tmp_path / name).write_text(tokenized)
    out = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(tmp_path / "ref"), "-i", str(tmp_path / "hyp"), "-m", "bleu", "-b",
         "--tokenize", "none", "--smooth-method", "none"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    bleu, signature = tokenized_bleu(PUNCT_HYPS, PUNCT_REFS, "en")
    assert round(bleu, 1) == float(out.stdout.strip())
    assert "tok:none" in signature and "smooth:none" in signature and signature.startswith("pretok:sacremoses")
    assert moses_tokenize(["Don't stop, it's fine."], "en") == ["Don 't stop , it 's fine ."]
    assert round(bleu, 2) != round(corpus_bleu(PUNCT_HYPS, PUNCT_REFS)[0], 2)  # 13a splits differently


def test_tokenized_bleu_is_zero_when_an_ngram_order_has_no_match():
    # multi-bleu.perl has no smoothing: no 4-gram match, BLEU 0 (sacreBLEU's default would smooth it).
    assert tokenized_bleu(["a b c x d e"], ["a b c y d e"], "en")[0] == 0.0
    assert corpus_bleu(["a b c x d e"], ["a b c y d e"])[0] > 0.0


def test_no_unk_keeps_sentences_whose_source_and_reference_are_in_vocabulary(tmp_path):
    src_vocab = WordVocab.build(["a b c d"], 10)
    tgt_vocab = WordVocab.build(["w x y z"], 10)
    sources = ["a b", "a q", "c d", "d c b a"]  # "q" unknown
    references = ["w x", "w x", "y v", "z y x w"]  # "v" unknown
    hypotheses = ["w x", "w w", "y y", "z y w x"]
    assert no_unk_mask(sources, references, src_vocab, tgt_vocab) == [True, False, False, True]
    for name, lines in (("src", sources), ("hyp", hypotheses), ("ref", references)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    summary, _ = score_files(
        tmp_path / "src", tmp_path / "hyp", tmp_path / "ref", 10, 80, tokenizers=(src_vocab, tgt_vocab)
    )
    keep = [0, 3]
    assert summary["no_unk"]["applies"] and summary["no_unk"]["n_sentences"] == 2
    subset = ([hypotheses[i] for i in keep], [references[i] for i in keep])
    assert summary["no_unk"]["bleu"] == round(corpus_bleu(*subset)[0], 2)
    assert summary["no_unk"]["bleu_tokenized"] == round(tokenized_bleu(*subset, "en")[0], 2)
    assert summary["bleu_tokenized"] == round(tokenized_bleu(hypotheses, references, "en")[0], 2)
    assert {"bleu", "signature", "n_sentences", "labels"} <= set(summary)
    json.dumps(summary)


def test_no_unk_of_a_fully_known_test_set_is_the_overall_score(tmp_path):
    """The embedded corpus's vocabulary spells every word: the subset is the test set, scored once."""
    sources = ["a b c d", "d c b a", "a b"]
    references = ["w x it 's z y w", "z y x w w y", "w x y z w x"]
    hypotheses = ["w x it's z y w", "z y w x w y", "w x y z w x"]  # "it's": one 13a token, two Moses tokens
    src_vocab, tgt_vocab = WordVocab.build(sources, 10), WordVocab.build(references, 10)
    for name, lines in (("src", sources), ("hyp", hypotheses), ("ref", references)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    summary, _ = score_files(
        tmp_path / "src", tmp_path / "hyp", tmp_path / "ref", 10, 80, tokenizers=(src_vocab, tgt_vocab)
    )
    assert summary["no_unk"]["n_sentences"] == 3
    assert summary["bleu"] != summary["bleu_tokenized"]
    assert (summary["no_unk"]["bleu"], summary["no_unk"]["bleu_tokenized"]) == (
        round(corpus_bleu(hypotheses, references)[0], 2),
        round(tokenized_bleu(hypotheses, references, "en")[0], 2),
    )


def test_no_unk_does_not_apply_to_subword_vocabularies(tmp_path):
    for name in ("src", "hyp", "ref"):
        (tmp_path / name).write_text("a b c\n")
    summary, _ = score_files(tmp_path / "src", tmp_path / "hyp", tmp_path / "ref", 10, 80, tokenizers=None)
    assert summary["no_unk"]["applies"] is False and "does not apply" in summary["no_unk"]["definition"]
