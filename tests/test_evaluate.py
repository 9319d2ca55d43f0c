"""Scoring: our BLEU is sacreBLEU's (checked against its CLI), buckets follow Fig. 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from attnrepro.evaluate import bleu_by_length, bucket_of, corpus_bleu, score_files

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
