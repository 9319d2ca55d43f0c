"""Cleaning: validation with file:line errors, Moses clean-corpus-n filters, counts in the manifest,
and memory that does not grow with the corpus."""

from __future__ import annotations

import json

import pytest
from measure_memory import measure, peak_rss_mib

from attnrepro.config import CleanConfig
from attnrepro.data.clean import RawCorpus, clean_split
from attnrepro.errors import DataError


def corpus(tmp_path, name: str, src: bytes, tgt: bytes) -> RawCorpus:
    (tmp_path / f"{name}.src").write_bytes(src)
    (tmp_path / f"{name}.tgt").write_bytes(tgt)
    return RawCorpus(name, tmp_path / f"{name}.src", tmp_path / f"{name}.tgt")


def lines(*items: str) -> bytes:
    return "".join(item + "\n" for item in items).encode()


MOSES_BASELINE = CleanConfig(min_len=1, max_len=80, max_ratio=9)


def run(tmp_path, corpora, filters=MOSES_BASELINE, **kwargs):
    out = tmp_path / "out"
    record = clean_split("train", corpora, out / "train.src", out / "train.tgt", out / "m.json", filters, **kwargs)
    return record, (out / "train.src").read_text().splitlines(), (out / "train.tgt").read_text().splitlines()


def test_each_filter_drops_what_clean_corpus_n_drops_and_the_manifest_counts_it(tmp_path):
    long = " ".join(["w"] * 81)
    a = corpus(
        tmp_path,
        "europarl",
        lines("a good pair", "", "  spaced \t  out  ", long, "one", "x y z"),
        lines("une bonne paire", "non vide", "espacé", "court", " ".join(["w"] * 10), "x y z"),
    )
    b = corpus(tmp_path, "nc", lines("last pair ok"), lines("dernière paire"))
    record, src, tgt = run(tmp_path, [a, b])
    assert src == ["a good pair", "spaced out", "x y z", "last pair ok"]
    assert tgt == ["une bonne paire", "espacé", "x y z", "dernière paire"]
    steps = {s["filter"]: (s["before"], s["after"]) for s in record["filters"]}
    assert steps == {"utf8": (7, 7), "empty": (7, 6), "length": (6, 5), "ratio": (5, 4)}  # 1 : 10 words > 9
    assert record["corpora"] == [{"corpus": "europarl", "pairs": 6, "kept": 3}, {"corpus": "nc", "pairs": 1, "kept": 1}]
    assert record["pairs_in"] == 7 and record["pairs_out"] == 4 and record["whitespace_normalised"] == 1
    assert record["words_out"] == {"src": 11, "tgt": 9}
    assert json.loads((tmp_path / "out/m.json").read_text()) == record


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        (b"caf\xe9 noir\n", r"not UTF-8 \(byte 0xe9 at column 4\)"),
        (b"h\x00i\x00\n", r"NUL byte at column 2 \(UTF-16 text\? convert the file to UTF-8\)"),
    ],
)
def test_text_that_is_not_utf8_names_file_and_line_or_is_dropped(tmp_path, bad_line, message):
    bad = corpus(tmp_path, "cc", lines("fine", "fine") + bad_line, lines("bien", "bien", "café"))
    with pytest.raises(DataError, match=rf"^{tmp_path}/cc\.src:3: {message}; set data.wmt.clean.invalid_utf8: drop"):
        run(tmp_path, [bad])
    assert not (tmp_path / "out/train.src").exists() and not list((tmp_path / "out").glob(".*"))
    record, src, _ = run(tmp_path, [bad], invalid_utf8="drop")
    assert src == ["fine", "fine"] and record["filters"][0] == {
        "filter": "utf8", "rule": "UTF-8 text (no invalid byte, no NUL) on both sides", "before": 3, "after": 2,
    }  # fmt: skip


def test_windows_line_ends_clean_to_the_same_text_and_are_not_counted_as_whitespace(tmp_path):
    crlf = corpus(tmp_path, "crlf", b"a  b\r\nc\r\n", b"x\r\ny\r\n")
    record, src, tgt = run(tmp_path, [crlf])
    assert src == ["a b", "c"] and tgt == ["x", "y"] and (tmp_path / "out/train.src").read_bytes() == b"a b\nc\n"
    assert record["whitespace_normalised"] == 1  # the double space; a line end is not whitespace to normalise


def test_a_missing_line_names_the_file_and_line_where_the_other_ends(tmp_path):
    short = corpus(tmp_path, "un", lines("a", "b", "c"), lines("a", "b"))
    with pytest.raises(DataError, match=r"un\.src:3: line 3 has no counterpart: .*un\.tgt has only 2 lines$"):
        run(tmp_path, [short])


def test_evaluation_splits_keep_every_line_and_never_drop_invalid_utf8(tmp_path):
    test = corpus(tmp_path, "newstest2014", lines("", " ".join(["w"] * 120), "a b"), lines("x", "y", "z"))
    record, src, _ = run(tmp_path, [test], filters=None)
    assert len(src) == 3 and record["filters"] == [] and record["pairs_out"] == 3
    bad = corpus(tmp_path, "newstest2013", b"\xff\n", b"x\n")
    with pytest.raises(DataError, match=r"newstest2013\.src:1: not UTF-8 \(byte 0xff at column 1\)$"):
        run(tmp_path, [bad], filters=None, invalid_utf8="drop")


def test_unicode_line_separators_inside_a_line_do_not_split_it(tmp_path):
    odd = corpus(tmp_path, "cc", lines("a\u2028b\x85c\rd"), lines("x"))
    _, src, _ = run(tmp_path, [odd])
    assert src == ["a b c d"]  # every later reader sees one line


def test_memory_does_not_grow_with_the_corpus(tmp_path):
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()
    small = measure(10_000, tmp_path / "small", chunk_lines=500)  # 20 chunks: past the allocator's warm-up
    large = measure(80_000, tmp_path / "large", chunk_lines=500)
    assert large["raw_bytes"] > 7 * small["raw_bytes"]
    # 8x the text (+48 MB): peak RSS of each phase within a few MB of the small run's
    assert large["clean_peak_rss_mib"] - small["clean_peak_rss_mib"] < 8
    assert large["encode_peak_rss_mib"] - small["encode_peak_rss_mib"] < 8
    # 2 worker processes: the parent reads ahead a fixed number of chunks, not the corpus
    small_parent, large_parent = (peak_rss_mib("encode", tmp_path / size, 500, 2) for size in ("small", "large"))
    assert large_parent - small_parent < 8
