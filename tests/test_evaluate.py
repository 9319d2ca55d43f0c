"""Scoring: our BLEU is sacreBLEU's (checked against its CLI), buckets follow Fig. 2, UNK is one token,
German compounds are split as tensor2tensor did, the Multi30k literature's lowercased BLEU is scored on
text byte-identical to the Multi30k repository's lc.norm.tok files, the No UNK column comes from a search
that bans UNK, and every score has a bootstrap interval equal to resampling the texts themselves."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from sacrebleu.metrics import BLEU
from wmt_miniature import real_data

from attnrepro.cli import main
from attnrepro.config import ConfigError, EvaluateConfig, SearchConfig, from_dict
from attnrepro.data.tokenize import UNK, UNK_WORD, WordVocab
from attnrepro.errors import DataError
from attnrepro.evaluation.no_unk import (
    NO_UNK_BANNED,
    NO_UNK_MAIN,
    main_search_serves_no_unk,
    no_unk_mask,
    no_unk_translations,
)
from attnrepro.evaluation.scoring import (
    NoUnkInput,
    SentenceStats,
    bleu_by_length,
    bucket_of,
    corpus_bleu,
    lc_norm_tok,
    lc_tok_bleu,
    moses_tokenize,
    score_files,
    sentence_stats,
    source_lengths,
    split_compounds,
    tokenized_bleu,
)
from attnrepro.models.base import Seq2SeqModel

from conftest import REPO, tiny_model

HYPS = ["the cat sat on the mat", "a quick brown dog jumps", "hello there world"]
REFS = ["the cat sat on a mat", "the quick brown fox jumps", "hello world"]
EV = EvaluateConfig()
EV_OFF = EvaluateConfig(bootstrap_resamples=0)


def write(tmp_path: Path, **files: list[str]) -> dict[str, Path]:
    paths = {}
    for name, lines in files.items():
        paths[name] = tmp_path / name
        paths[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return paths


def test_bleu_of_a_known_pair_equals_the_sacrebleu_cli(tmp_path):
    p = write(tmp_path, hyp=HYPS, ref=REFS)
    out = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(p["ref"]), "-i", str(p["hyp"]), "-m", "bleu", "-b"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    bleu, signature = corpus_bleu(HYPS, REFS)
    assert round(bleu, 1) == float(out.stdout.strip())
    assert "tok:13a" in signature and "nrefs:1" in signature
    assert SentenceStats.extract(sentence_stats(HYPS, REFS, "en")[0].metric, HYPS, REFS).bleu() == bleu


def test_identical_text_scores_100_and_disjoint_text_0():
    assert corpus_bleu(REFS, REFS)[0] == pytest.approx(100.0)
    assert corpus_bleu(["x y z w"] * 3, REFS)[0] == pytest.approx(0.0, abs=1e-9)


def test_an_unknown_word_is_one_token_in_every_bleu():
    """The decoded UNK is one 13a and one Moses token ("<unk>" was three: "<", "unk", ">")."""
    vocab = WordVocab.build(["the cat sat on mat"], 10)
    ids = [vocab.index["the"], UNK, vocab.index["sat"], vocab.index["on"], vocab.index["the"], vocab.index["mat"]]
    hypothesis = vocab.decode(ids)
    # Against "the dog sat on the mat", 6 tokens each side (brevity penalty 1). Matches / totals:
    # 1-grams the, sat, on, the, mat: 5/6; 2-grams "sat on", "on the", "the mat": 3/5;
    # 3-grams "sat on the", "on the mat": 2/4; 4-gram "sat on the mat": 1/3.
    by_hand = 100 * math.exp((math.log(5 / 6) + math.log(3 / 5) + math.log(2 / 4) + math.log(1 / 3)) / 4)
    assert corpus_bleu([hypothesis], ["the dog sat on the mat"])[0] == pytest.approx(by_hand)
    assert tokenized_bleu([hypothesis], ["the dog sat on the mat"], "en")[0] == pytest.approx(by_hand)
    assert hypothesis == f"the {UNK_WORD} sat on the mat"


@pytest.mark.parametrize(
    ("length", "bucket"), [(0, (0, 10)), (1, (0, 10)), (10, (0, 10)), (11, (10, 20)), (80, (70, 80)), (95, (70, 80))]
)
def test_buckets_are_half_open_on_the_left(length, bucket):
    assert bucket_of(length, 10, 80) == bucket


def test_bleu_by_length_rows(tmp_path):
    sources = ["w " * 3, "w " * 12, "w " * 15]
    stats, tokenized, _ = sentence_stats(HYPS, REFS, "en")
    rows = bleu_by_length([3, 12, 15], stats, EV_OFF, tokenized)
    assert [(r["bucket_lo"], r["bucket_hi"], r["n_sentences"]) for r in rows] == [(0, 10, 1), (10, 20, 2)]
    assert rows[0]["bleu"] == round(corpus_bleu(HYPS[:1], REFS[:1])[0], 2)
    assert rows[1]["bleu"] == round(corpus_bleu(HYPS[1:], REFS[1:])[0], 2)
    assert rows[1]["bleu_tokenized"] == round(tokenized_bleu(HYPS[1:], REFS[1:], "en")[0], 2)
    assert rows[0]["bleu_ci_lo"] is None and rows[0]["bleu_ci_hi"] is None  # bootstrap_resamples: 0
    assert rows[0]["bleu_tokenized_ci_lo"] is None
    p = write(tmp_path, src=[line.strip() for line in sources], hyp=HYPS, ref=REFS)
    summary, rows2 = score_files(p["src"], p["hyp"], p["ref"], EV_OFF)
    assert summary["n_sentences"] == 3 and rows2 == rows
    assert summary["bleu_ci"] is None and summary["bootstrap"]["resamples"] == 0
    json.dumps(summary)


def test_length_unit_counts_moses_words_on_wmt_and_whitespace_words_otherwise(tmp_path):
    sources = ["Hello, world! (Yes.)", "a b c d e f"]
    assert source_lengths(sources, "whitespace", "en") == [3, 6]
    assert source_lengths(sources, "moses", "en") == [8, 6]  # Hello , world ! ( Yes . )
    p = write(tmp_path, src=sources, hyp=HYPS[:2], ref=REFS[:2])
    ev = EvaluateConfig(bucket_width=5, bootstrap_resamples=0)
    for unit, buckets, described in (
        ("whitespace", [(0, 5, 1), (5, 10, 1)], "source words (whitespace-separated)"),
        ("moses", [(5, 10, 2)], "Moses-tokenized source words (sacremoses -l en)"),
    ):
        summary, rows = score_files(p["src"], p["hyp"], p["ref"], ev, length_unit=unit)
        assert [(r["bucket_lo"], r["bucket_hi"], r["n_sentences"]) for r in rows] == buckets
        assert summary["length_unit"] == described


def test_a_bad_test_split_is_a_data_error_naming_the_file(tmp_path):
    p = write(tmp_path, src=["a"] * 3, hyp=["a"] * 2, ref=["a"] * 3, empty=[])
    with pytest.raises(DataError, match="hyp 2"):
        score_files(p["src"], p["hyp"], p["ref"], EV)
    with pytest.raises(DataError, match=f"{p['empty']}: the test split is empty"):
        score_files(p["empty"], p["empty"], p["empty"], EV)  # was an IndexError inside sacreBLEU
    (tmp_path / "hyp").write_bytes(b"a\n\xff\na\n")
    with pytest.raises(DataError, match=f"{tmp_path / 'hyp'}:2: not UTF-8"):
        score_files(p["src"], tmp_path / "hyp", p["ref"], EV)


def test_translate_stops_on_an_empty_test_split_naming_it(tmp_path, capsys):
    p = write(tmp_path, src=[], ref=[])
    tokenizer = tmp_path / "tokenizer"  # present (main checks that), never read: the split is checked first
    tokenizer.mkdir()
    for name in ("src.model", "tgt.model", "checkpoint.pt"):
        (tokenizer / name).write_text("")
    args = ["--config", str(REPO / "config/test.yaml"), "--checkpoint", str(tokenizer / "checkpoint.pt")]
    args += ["--tokenizer-dir", str(tokenizer)]
    args += ["--src", str(p["src"]), "--ref", str(p["ref"]), "--out", "h", "--out-no-unk", "n", "--attention", "a"]
    assert main(["translate", *args]) == 1
    assert f"{p['src']}: the test split is empty" in capsys.readouterr().err


def test_empty_test_lines_are_scored_in_the_first_bucket(tmp_path):
    """An empty source gets an empty translation (search.translate_lines), scored against its reference."""
    sources, hyps, refs = ["a b c d", "", "c d e f"], ["x y z w", "", "z w v u"], ["x y z w", "q r", "z w v u"]
    p = write(tmp_path, src=sources, hyp=hyps, ref=refs)
    summary, rows = score_files(p["src"], p["hyp"], p["ref"], EV)
    assert summary["n_sentences"] == 3 and rows[0]["n_sentences"] == 3 and rows[0]["bucket_lo"] == 0
    assert summary["bleu"] == round(corpus_bleu(hyps, refs)[0], 2) < round(corpus_bleu(hyps[::2], refs[::2])[0], 2)


# Tokenized BLEU (multi-bleu.perl on Moses-tokenized text), with tensor2tensor's compound split for German.
PUNCT_HYPS = ["Don't stop, it's fine.", "The cat (a big one) sat on the mat!", "Hello there, world."]
PUNCT_REFS = ["Don't stop; it's fine.", "The cat (a big one) sat on a mat.", "Hello, world."]
DE_HYPS = ["Die US-Regierung hat am Montag eine neue Regel eingeführt.", "Das ist ein Bio-Apfel."]
DE_REFS = ["Die US-Behörden haben am Montag eine neue Regel eingeführt.", "Das ist ein Bio-Apfel aus Baden-Baden."]


def multi_bleu(tmp_path: Path, hyps: list[str], refs: list[str], lang: str, perl: str | None = None) -> float:
    """sacremoses' CLI (tokenizer.perl defaults), `perl -ple PERL` if given, then sacreBLEU's CLI (multi-bleu)."""
    for name, lines in (("hyp", hyps), ("ref", refs)):
        text = subprocess.run(
            [sys.executable, "-m", "sacremoses", "-l", lang, "-q", "tokenize"],
            input="\n".join(lines) + "\n", capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        if perl:
            text = subprocess.run(["perl", "-ple", perl], input=text, capture_output=True, text=True, check=True).stdout
        (tmp_path / name).write_text(text)
    out = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(tmp_path / "ref"), "-i", str(tmp_path / "hyp"), "-m", "bleu", "-b",
         "--tokenize", "none", "--smooth-method", "none", "-w", "4"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(out.stdout.strip())


def test_tokenized_bleu_equals_sacremoses_cli_then_sacrebleu_tokenize_none(tmp_path):
    bleu, signature = tokenized_bleu(PUNCT_HYPS, PUNCT_REFS, "en")
    assert round(bleu, 4) == multi_bleu(tmp_path, PUNCT_HYPS, PUNCT_REFS, "en")
    assert "tok:none" in signature and "smooth:none" in signature and signature.startswith("pretok:sacremoses")
    assert "compound-split" not in signature
    assert moses_tokenize(["Don't stop, it's fine."], "en") == ["Don 't stop , it 's fine ."]
    assert round(bleu, 2) != round(corpus_bleu(PUNCT_HYPS, PUNCT_REFS)[0], 2)  # 13a splits differently


PERL_ATAT = "s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g"  # tensor2tensor's get_ende_bleu.sh, verbatim


@pytest.mark.skipif(shutil.which("perl") is None, reason="perl is not installed: get_ende_bleu.sh's split runs on it")
def test_german_tokenized_bleu_splits_compounds_as_get_ende_bleu_sh(tmp_path):
    assert split_compounds(["rich-text a-b-c -x y-"]) == [
        subprocess.run(
            ["perl", "-ple", PERL_ATAT], input="rich-text a-b-c -x y-", capture_output=True, text=True
        ).stdout.rstrip("\n")
    ]
    bleu, signature = tokenized_bleu(DE_HYPS, DE_REFS, "de")
    assert round(bleu, 4) == multi_bleu(tmp_path, DE_HYPS, DE_REFS, "de", perl=PERL_ATAT)
    unsplit = multi_bleu(tmp_path, DE_HYPS, DE_REFS, "de")
    assert abs(bleu - unsplit) > 1  # "US ##AT##-##AT## Regierung" shares two tokens with "US-Behörden"
    assert "-de-noescape|compound-split:##AT##|" in signature


def test_tokenized_bleu_is_zero_when_an_ngram_order_has_no_match():
    # multi-bleu.perl has no smoothing: no 4-gram match, BLEU 0 (sacreBLEU's default would smooth it).
    assert tokenized_bleu(["a b c x d e"], ["a b c y d e"], "en")[0] == 0.0
    assert corpus_bleu(["a b c x d e"], ["a b c y d e"])[0] > 0.0


# Lowercased tokenized BLEU as the Multi30k literature scores it: multi-bleu.perl on lc.norm.tok text.
M30K_HYPS = ["Zwei Männer spielen „Fußball“.", "Ein Hund läuft."]
M30K_REFS = ['zwei Männer spielen "Fußball".', "Ein Hund rennt."]


def test_lc_norm_tok_lowercases_normalises_punctuation_then_moses_tokenizes():
    assert lc_norm_tok(M30K_HYPS, "de") == ["zwei männer spielen &quot; fußball &quot; .", "ein hund läuft ."]
    assert lc_norm_tok(M30K_REFS, "de")[0] == "zwei männer spielen &quot; fußball &quot; ."
    # The two lines of Multi30k where sacremoses' defaults and the 2017 scripts differ, as the repository's
    # lc.norm.tok files have them (test_2016_flickr.fr line 694, val.fr line 861):
    assert lc_norm_tok(['qui s\'appelle "32 De Neude."'], "fr") == ["qui s&apos; appelle &quot; 32 de neude &quot; ."]
    assert lc_norm_tok(["Une femme jette un coup d’œil."], "fr") == ["une femme jette un coup d &quot; œil ."]
    assert lc_norm_tok(["“Hi,” she said."], "en") == ["&quot; hi , &quot; she said ."]  # English keeps ," order


def test_lc_tok_bleu_of_a_known_pair_is_the_hand_count():
    # lc.norm.tok: "zwei männer spielen &quot; fußball &quot; ." on both sides (7 tokens), then
    # "ein hund läuft ." against "ein hund rennt ." (4 tokens); 11 tokens each side, brevity penalty 1.
    # Matches / totals: 1-grams 7 + 3 of 11; 2-grams 6 + 1 ("ein hund") of 9; 3-grams 5 + 0 of 7; 4-grams 4 of 5.
    by_hand = 100 * math.exp((math.log(10 / 11) + math.log(7 / 9) + math.log(5 / 7) + math.log(4 / 5)) / 4)
    bleu, signature = lc_tok_bleu(M30K_HYPS, M30K_REFS, "de")
    assert bleu == pytest.approx(by_hand)
    assert round(bleu, 2) == 79.73
    assert signature.startswith("pretok:lc.norm.tok-de-moses-3a0631a-sacremoses-")
    assert "|tok:none|smooth:none|" in signature
    # The cased scorings count "Zwei"/"zwei" and „“/"" as different words: no 4-gram is left to multi-bleu
    # (BLEU 0), sacreBLEU's smoothing keeps 15.98.
    assert tokenized_bleu(M30K_HYPS, M30K_REFS, "de")[0] == 0.0
    assert round(corpus_bleu(M30K_HYPS, M30K_REFS)[0], 2) == 15.98


# sha256, lines and whitespace tokens of the Multi30k repository's lc.norm.tok files (github.com/multi30k/dataset,
# data/task1/tok/, made by scripts/task1-tokenize.sh in January 2018); 12 103 is also the reference length
# Wu et al. 2021's evaluation printed for its 41.02 (docs/papers.md).
LC_NORM_TOK_FILES = {
    ("test_2016_flickr", "de"): ("c6a33d39d48f9f510de147651316cd9d918e09ad0219df734a2f16b6baccacc4", 1000, 12103),
    ("test_2016_flickr", "fr"): ("1463bd5960f9bfe098ec3cd752d3df0c49c84dc646fb518964a29232658cd836", 1000, 13988),
    ("test_2016_flickr", "en"): ("5b7f32627cf99eced828311b955dae9800bb52bc8b91cf8b6526829e605b29d2", 1000, 12968),
    ("val", "fr"): ("b303e301aa21fe7822a846b2b3fb2d5a1121ec807cd5b1d006fb7b2b5507168a", 1014, 14381),
}


@pytest.mark.parametrize(("split", "lang"), list(LC_NORM_TOK_FILES))
def test_lc_norm_tok_of_the_raw_multi30k_files_is_the_published_lc_norm_tok_file(split, lang):
    import gzip
    import hashlib

    raw = gzip.decompress((real_data() / "multi30k" / f"{split}.{lang}.gz").read_bytes()).decode("utf-8")
    text = "".join(line + "\n" for line in lc_norm_tok(raw.splitlines(), lang))
    digest, lines, tokens = LC_NORM_TOK_FILES[split, lang]
    assert (len(text.splitlines()), len(text.split())) == (lines, tokens)
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == digest  # byte for byte


def test_bleu_json_has_lc_tok_bleu_only_where_the_config_asks(tmp_path):
    p = write(tmp_path, src=["a b", "c d"], hyp=M30K_HYPS, ref=M30K_REFS)
    plain, _ = score_files(p["src"], p["hyp"], p["ref"], EV, ("en", "de"))
    assert not {k for k in plain if "lc_tok" in k}
    ev = EvaluateConfig(bleu_lc_tok=True, bootstrap_resamples=200)
    summary, _ = score_files(p["src"], p["hyp"], p["ref"], ev, ("en", "de"))
    assert summary["bleu_lc_tok"] == 79.73 and summary["bleu"] == plain["bleu"]
    lo, hi = summary["bleu_lc_tok_ci"]
    assert lo <= 79.73 <= hi and hi - lo > 0  # resampling two sentences: 100 (twice the first) to 0
    assert summary["signature_lc_tok"] == lc_tok_bleu(M30K_HYPS, M30K_REFS, "de")[1]
    assert summary["procedure_lc_tok"].startswith("lowercase.perl | normalize-punctuation.perl -l de | tokenizer")
    assert "bleu_lc_tok" in summary["labels"]
    json.dumps(summary)


def test_the_multi30k_configs_ask_for_lc_tok_bleu_and_no_other_does():
    for name in ("multi30k_en_de.yaml", "multi30k_en_fr.yaml", "config.yaml", "wmt14_en_fr.yaml", "wmt14_en_de.yaml"):
        raw = yaml.safe_load((REPO / "config" / name).read_text())
        assert from_dict(raw).evaluate.bleu_lc_tok == name.startswith("multi30k"), name


# Bootstrap intervals: sacreBLEU's resampling of sentence statistics.
MIXED_HYPS = ["the cat sat on the mat", "a b c d e f", "one two three four", "it rains today in paris", "x y"]
MIXED_REFS = ["the cat sat on the mat", "a b c x e f", "one two six four", "it rained today in rome", "x y z"]


def slow_interval(hyps: list[str], refs: list[str], resamples: int, seed: int) -> tuple[float, float]:
    """The interval recomputed from resampled texts: corpus_bleu of every resample (same draws)."""
    import numpy as np

    draws = np.random.default_rng(seed).choice(len(hyps), size=(resamples, len(hyps)), replace=True)
    scores = sorted(corpus_bleu([hyps[i] for i in d], [refs[i] for i in d])[0] for d in draws)
    return scores[resamples // 40], scores[resamples - resamples // 40 - 1]


def test_bootstrap_interval_equals_rescoring_resampled_texts_and_sacrebleus_own(monkeypatch):
    stats = sentence_stats(MIXED_HYPS, MIXED_REFS, "en")[0]
    lo, hi = stats.interval(200, seed=7)
    assert (lo, hi) == pytest.approx(slow_interval(MIXED_HYPS, MIXED_REFS, 200, seed=7), abs=1e-9)
    monkeypatch.setenv("SACREBLEU_SEED", "7")  # sacreBLEU seeds its own bootstrap through the environment
    from sacrebleu.metrics import BLEU

    own = BLEU().corpus_score(MIXED_HYPS, [MIXED_REFS], n_bootstrap=200)
    assert own._ci == pytest.approx((hi - lo) / 2, abs=1e-3)  # it reports the half-width of the same bounds


def test_bootstrap_interval_contains_the_estimate_is_seeded_and_shrinks_with_the_bucket():
    small = sentence_stats(MIXED_HYPS * 10, MIXED_REFS * 10, "en")[0]
    large = sentence_stats(MIXED_HYPS * 200, MIXED_REFS * 200, "en")[0]
    for stats in (small, large):
        lo, hi = stats.interval(1000, seed=1)
        assert lo < stats.bleu() < hi
    assert small.interval(1000, seed=1) == small.interval(1000, seed=1)
    assert small.interval(1000, seed=1) != small.interval(1000, seed=2)
    width = {
        name: s.interval(1000, seed=1)[1] - s.interval(1000, seed=1)[0] for name, s in (("10", small), ("200", large))
    }
    assert width["200"] < width["10"] / 3  # ~ 1 / sqrt(n): 20x the sentences, ~4.5x narrower
    assert small.bleu() == pytest.approx(large.bleu())


def test_bleu_json_and_csv_carry_the_intervals(tmp_path):
    sources = [f"w{i} " * (3 if i % 2 else 15) for i in range(len(MIXED_HYPS) * 4)]
    p = write(tmp_path, src=sources, hyp=MIXED_HYPS * 4, ref=MIXED_REFS * 4)
    summary, rows = score_files(p["src"], p["hyp"], p["ref"], EvaluateConfig(bootstrap_resamples=300))
    assert summary["bootstrap"] == {"resamples": 300, "seed": 12345, "confidence": 0.95}
    lo, hi = summary["bleu_ci"]
    assert lo <= summary["bleu"] <= hi and summary["bleu_tokenized_ci"][0] <= summary["bleu_tokenized"]
    for row, parity in zip(rows, (1, 0)):
        members = [i for i in range(len(sources)) if i % 2 == parity]
        bucket = sentence_stats([p["hyp"].read_text().splitlines()[i] for i in members],
                                [p["ref"].read_text().splitlines()[i] for i in members], "en")[0]  # fmt: skip
        assert [row["bleu_ci_lo"], row["bleu_ci_hi"]] == [round(x, 2) for x in bucket.interval(300, 12345)]
    (tmp_path / "bleu.json").write_text(json.dumps(summary))


def test_bootstrap_keys_are_validated():
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    assert from_dict(raw).evaluate.bootstrap_resamples == 1000
    raw["evaluate"] = {"bootstrap_resamples": -1}
    with pytest.raises(Exception, match="bootstrap_resamples"):
        from_dict(raw)
    raw["evaluate"] = {"bootstrap_seed": "x"}
    with pytest.raises(Exception, match="bootstrap_seed"):
        from_dict(raw)
    assert issubclass(ConfigError, ValueError)


# Bahdanau's "No UNK" subset, scored from a search that never emits UNK.
def no_unk_case(tmp_path: Path, subset_hyps: list[str]) -> tuple[dict, NoUnkInput, dict[str, Path]]:
    src_vocab = WordVocab.build(["a b c d"], 10)
    tgt_vocab = WordVocab.build(["w x y z"], 10)
    sources = ["a b", "a q", "c d", "d c b a"]  # "q" unknown
    references = ["w x", "w x", "y v", "z y x w"]  # "v" unknown
    hypotheses = ["w UNK", "w w", "y y", "z y w x"]
    assert no_unk_mask(sources, references, src_vocab, tgt_vocab) == [True, False, False, True]
    p = write(tmp_path, src=sources, hyp=hypotheses, ref=references, hyp_no_unk=subset_hyps)
    return {"hypotheses": hypotheses, "references": references}, NoUnkInput(src_vocab, tgt_vocab, p["hyp_no_unk"]), p


def test_no_unk_is_scored_from_the_banned_search_of_the_subset(tmp_path):
    texts, no_unk, p = no_unk_case(tmp_path, ["w x", "z y w x"])
    summary, _ = score_files(p["src"], p["hyp"], p["ref"], EV, no_unk=no_unk)
    block = summary["no_unk"]
    assert block["applies"] and block["n_sentences"] == 2 and block["decoding"] == NO_UNK_BANNED
    subset = (["w x", "z y w x"], [texts["references"][0], texts["references"][3]])
    main_subset = ([texts["hypotheses"][0], texts["hypotheses"][3]], subset[1])  # "w UNK", "z y w x"
    assert block["bleu"] == round(corpus_bleu(*subset)[0], 2) > round(corpus_bleu(*main_subset)[0], 2)
    assert block["bleu_tokenized"] == round(tokenized_bleu(*subset, "en")[0], 2)
    assert block["bleu_ci"][0] <= block["bleu"] <= block["bleu_ci"][1]
    assert summary["bleu_tokenized"] == round(tokenized_bleu(texts["hypotheses"], texts["references"], "en")[0], 2)
    assert {"bleu", "signature", "n_sentences", "labels", "length_unit"} <= set(summary)
    json.dumps(summary)
    p["hyp_no_unk"].write_text("w x\n")
    with pytest.raises(DataError, match="hyp_no_unk: 1 lines, but the No UNK subset has 2"):
        score_files(p["src"], p["hyp"], p["ref"], EV, no_unk=no_unk)


def test_no_unk_of_a_fully_known_test_set_without_unk_is_the_main_search(tmp_path):
    """The embedded corpus's vocabulary spells every word: the subset is the test set, scored once."""
    sources = ["a b c d", "d c b a", "a b"]
    references = ["w x it 's z y w", "z y x w w y", "w x y z w x"]
    hypotheses = ["w x it's z y w", "z y w x w y", "w x y z w x"]  # "it's": one 13a token, two Moses tokens
    src_vocab, tgt_vocab = WordVocab.build(sources, 10), WordVocab.build(references, 10)
    p = write(tmp_path, src=sources, hyp=hypotheses, ref=references, hyp_no_unk=hypotheses)
    no_unk = NoUnkInput(src_vocab, tgt_vocab, p["hyp_no_unk"])
    summary, _ = score_files(p["src"], p["hyp"], p["ref"], EV, no_unk=no_unk)
    assert summary["no_unk"]["n_sentences"] == 3 and summary["no_unk"]["decoding"] == NO_UNK_MAIN
    assert summary["bleu"] != summary["bleu_tokenized"]
    for key in ("bleu", "bleu_ci", "bleu_tokenized", "bleu_tokenized_ci"):
        assert summary["no_unk"][key] == summary[key]
    p["hyp_no_unk"].write_text("w x\nz y\nw\n")
    with pytest.raises(DataError, match="differs from"):
        score_files(p["src"], p["hyp"], p["ref"], EV, no_unk=no_unk)


def test_no_unk_does_not_apply_to_subword_vocabularies(tmp_path):
    p = write(tmp_path, src=["a b c"], hyp=["a b c"], ref=["a b c"])
    summary, _ = score_files(p["src"], p["hyp"], p["ref"], EV, no_unk=None)
    assert summary["no_unk"]["applies"] is False and "does not apply" in summary["no_unk"]["definition"]


def test_the_main_search_serves_only_when_the_subset_is_everything_and_no_unk_was_written():
    assert main_search_serves_no_unk([True, True], ["a b", "UNKNOWN words"])
    assert not main_search_serves_no_unk([True, False], ["a b", "c"])
    for with_unk in ("a UNK b", "UNK.", "(UNK)", "UNK's"):  # Moses detokenization may glue punctuation on
        assert not main_search_serves_no_unk([True, True], ["a b", with_unk])


class PrefersUnk(Seq2SeqModel):
    """A tiny RNNsearch whose every step prefers <unk> by far; counts its encoder calls (= searches)."""

    def __init__(self):
        super().__init__()
        self.inner = tiny_model("rnnsearch", seed=3)
        self.searches = 0

    def encode(self, src, src_mask):
        self.searches += 1
        return self.inner.encode(src, src_mask)

    def init_state(self, memory):
        return self.inner.init_state(memory)

    def decode_step(self, memory, state, prev_tokens):
        log_probs, state, attn = self.inner.decode_step(memory, state, prev_tokens)
        return log_probs + 30.0 * (torch.arange(log_probs.size(1)) == UNK), state, attn

    def reorder(self, memory, state, index):
        return self.inner.reorder(memory, state, index)


def test_translate_searches_the_no_unk_subset_again_with_unk_banned():
    words = ["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(15)]  # tiny_model's target vocabulary
    vocab = WordVocab(words)
    sources, references = ["w1 w2", "w3 zz", "w4 w5 w6"], ["w1 w2", "w3 w4", "w5 w6 w7"]  # "zz" unknown
    model, search = PrefersUnk(), SearchConfig(beam=2, max_len_a=1.0, max_len_b=2)
    from attnrepro.decoding.search import translate_lines

    main_texts = [vocab.decode(h.tokens) for h in translate_lines(model, vocab, vocab, sources, search)]
    assert all(UNK_WORD in text for text in main_texts)
    searches = model.searches
    subset, how = no_unk_translations(model, (vocab, vocab), search, (sources, references, main_texts))
    assert how == NO_UNK_BANNED and len(subset) == 2 and model.searches > searches
    assert all(text and UNK_WORD not in text.split() for text in subset)
    # The whole set known and no UNK written: the main translations serve, and nothing is searched again.
    clean = ["w1 w2", "w3", "w4 w5"]
    searches = model.searches
    assert no_unk_translations(model, (vocab, vocab), search, (sources[::2], references[::2], clean[::2])) == (
        clean[::2],
        NO_UNK_MAIN,
    )
    assert model.searches == searches


def test_the_resolution_is_what_one_wrong_last_word_takes_from_a_perfect_translation():
    from attnrepro.evaluation.scoring import bleu_resolution

    refs = ["the cat sees the dog .", "a small bird sings in the tree today .", "we go home ."]
    hyps = refs[:2] + ["we go home !"]  # the last token of one sentence wrong
    stats = sentence_stats(hyps, refs, "en")[0]
    resolution = bleu_resolution(stats.rows[:, 1])
    assert 100 - stats.bleu() == pytest.approx(resolution)
    assert bleu_resolution([1, 1]) == 100.0  # no 4-gram at all: one wrong word leaves BLEU at 0


def test_a_corpus_s_tokens_are_scored_as_they_are_and_detokenized_for_sacrebleu(tmp_path):
    """Europarl v1 ships tokenized text: tokenized BLEU scores its tokens as they are (multi-bleu.perl), sacreBLEU
    the Moses-detokenized text. Re-tokenizing would split the corpus's "l' Unione" no further, but detokenizing
    joins "Unione ," into "Unione,": the two scores differ, and each is what its signature says."""
    src = ["the Union , of course .", "I agree ."]
    ref = ["l' Unione , naturalmente .", "Sono d' accordo ."]
    hyp = ["l' Unione , ovviamente .", "Sono d' accordo ."]
    p = write(tmp_path, src=src, hyp=hyp, ref=ref)
    summary, rows = score_files(p["src"], p["hyp"], p["ref"], EV_OFF, ("en", "it"), pretokenized=True)
    as_is = BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(hyp, [ref]).score
    assert summary["bleu_tokenized"] == round(as_is, 2)
    detok = ["l'Unione, ovviamente.", "Sono d'accordo."], ["l'Unione, naturalmente.", "Sono d'accordo."]
    assert summary["bleu"] == round(corpus_bleu(*detok)[0], 2)
    assert summary["signature_tokenized"].startswith("pretok:corpus|")
    assert summary["signature"].startswith("detok:sacremoses-")
    assert rows[0]["bleu_tokenized"] == summary["bleu_tokenized"]  # both sentences in the 1-10 bucket
