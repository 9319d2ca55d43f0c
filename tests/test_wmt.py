"""Extraction from archives in the real WMT layouts: plain, gzip-in-tar and SGML members."""

from __future__ import annotations

import io
import tarfile

import pytest
from sacrebleu.dataset.fake_sgml import FakeSGMLDataset
from wmt_miniature import LAYOUTS, build_archives, member_bytes

from attnrepro.config import CorpusSpec, load_config
from attnrepro.data.wmt import extract_corpus, sgm_segments

from conftest import REPO

TRICKY = [
    "The  cat\tsat on the mat.",
    "  Leading and trailing spaces  ",
    "Quotes « like this » & ampersands < > too",
    "Ünïcödé — dashes – and … ellipses",
]


@pytest.mark.parametrize("config", ["wmt14_en_fr.yaml", "wmt14_en_de.yaml"])
def test_every_member_the_shipped_configs_name_is_in_its_archives_real_layout(config):
    cfg = load_config(REPO / "config" / config)
    for name, corpus in cfg.wmt.corpora.items():
        archive = cfg.wmt.files[corpus.file].name
        assert archive in LAYOUTS, f"{config}: data.wmt.files.{corpus.file} is {archive}"
        assert {corpus.src, corpus.tgt} <= set(LAYOUTS[archive]), f"{config}: data.wmt.corpora.{name}"
    assert cfg.wmt.corpora["newstest2014"].lines == 3003
    assert len(cfg.wmt.splits["test"]) == 1 and cfg.wmt.splits["test"][0] == "newstest2014"


def test_plain_gzip_and_sgml_members_come_out_as_parallel_lines(tmp_path):
    texts = {
        "training/europarl-v7.fr-en.en": ["one", "two", "three"],
        "training/europarl-v7.fr-en.fr": ["un", "deux", "trois"],
        "giga-fren.release2.fixed.en.gz": [f"giga {i}" for i in range(50)],
        "giga-fren.release2.fixed.fr.gz": [f"giga fr {i}" for i in range(50)],
        "test-full/newstest2014-fren-src.en.sgm": TRICKY,
        "test-full/newstest2014-fren-ref.fr.sgm": [f"ref {i}" for i in range(4)],
    }
    archives = build_archives(tmp_path / "dl", texts)
    out = tmp_path / "raw"
    spec = CorpusSpec("x", "training/europarl-v7.fr-en.en", "training/europarl-v7.fr-en.fr", lines=3)
    assert extract_corpus(archives["training-parallel-europarl-v7.tgz"], "europarl", spec, out / "e.src", out / "e.tgt")
    assert (out / "e.src").read_text() == "one\ntwo\nthree\n" and (out / "e.tgt").read_text() == "un\ndeux\ntrois\n"

    spec = CorpusSpec("x", "giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz")
    counts = extract_corpus(archives["training-giga-fren.tar"], "giga", spec, out / "g.src", out / "g.tgt")
    assert counts == {"src_lines": 50, "tgt_lines": 50}
    assert (out / "g.tgt").read_text().splitlines()[49] == "giga fr 49"  # gzip member decompressed

    spec = CorpusSpec("x", "test-full/newstest2014-fren-src.en.sgm", "test-full/newstest2014-fren-ref.fr.sgm", 4)
    extract_corpus(archives["test-full.tgz"], "newstest2014", spec, out / "t.src", out / "t.tgt")
    assert (out / "t.src").read_text().splitlines() == [
        "The cat sat on the mat.",
        "Leading and trailing spaces",
        "Quotes « like this » &amp; ampersands &lt; &gt; too",  # sacreBLEU keeps the SGML escapes
        "Ünïcödé — dashes – and … ellipses",
    ]


def test_sgml_text_is_exactly_what_sacrebleu_makes_of_the_same_file(tmp_path):
    sgm_path = tmp_path / "newstest2014-fren-src.en.sgm"
    sgm_path.write_bytes(member_bytes(sgm_path.name, TRICKY))
    converted = tmp_path / "sacrebleu.txt"
    FakeSGMLDataset._convert_format(FakeSGMLDataset.__new__(FakeSGMLDataset), str(sgm_path), str(converted))
    with open(sgm_path, encoding="utf-8", newline="\n") as f:
        ours = list(sgm_segments(f))
    assert ours == converted.read_text(encoding="utf-8").splitlines()


def test_a_missing_member_is_named_with_the_archive_and_similar_members(tmp_path):
    archives = build_archives(tmp_path / "dl", {})
    spec = CorpusSpec("x", "training/europarl-v7.fr-en.eng", "training/europarl-v7.fr-en.fr")
    out = tmp_path / "raw"
    with pytest.raises(ValueError) as info:
        extract_corpus(archives["training-parallel-europarl-v7.tgz"], "europarl_v7", spec, out / "a", out / "b")
    message = str(info.value)
    assert "training-parallel-europarl-v7.tgz" in message and "'training/europarl-v7.fr-en.eng'" in message
    assert "data.wmt.corpora.europarl_v7" in message and "training/europarl-v7.fr-en.en" in message
    assert not (out / "a").exists() and not (out / "b").exists() and list(out.glob("*")) == []


def test_line_counts_are_checked_against_each_other_and_the_published_count(tmp_path):
    texts = {
        "un/undoc.2000.fr-en.en": ["a", "b", "c"],
        "un/undoc.2000.fr-en.fr": ["a", "b"],
        "dev/newstest2013-src.en.sgm": ["s"] * 5,
        "dev/newstest2013-ref.fr.sgm": ["r"] * 5,
    }
    archives = build_archives(tmp_path / "dl", texts)
    out = tmp_path / "raw"
    spec = CorpusSpec("un", "un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr")
    with pytest.raises(ValueError, match="un/undoc.2000.fr-en.en has 3 lines but un/undoc.2000.fr-en.fr has 2"):
        extract_corpus(archives["training-parallel-un.tgz"], "un", spec, out / "u.src", out / "u.tgt")
    spec = CorpusSpec("dev", "dev/newstest2013-src.en.sgm", "dev/newstest2013-ref.fr.sgm", lines=3000)
    with pytest.raises(ValueError, match=r"has 5 lines, the published count is 3000 \(data.wmt.corpora.nt13.lines\)"):
        extract_corpus(archives["dev.tgz"], "nt13", spec, out / "d.src", out / "d.tgt")
    assert list(out.glob("*")) == []  # nothing under the final names, no temporary files left


def test_a_last_line_without_newline_still_counts(tmp_path):
    path = tmp_path / "nc.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (("a.en", b"x\ny"), ("a.fr", b"x\ny\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    counts = extract_corpus(path, "nc", CorpusSpec("nc", "a.en", "a.fr", 2), tmp_path / "s", tmp_path / "t")
    assert counts == {"src_lines": 2, "tgt_lines": 2}
    assert (tmp_path / "s").read_text() == "x\ny\n"
    # a published `wc -l` count (newlines: 1 here) is accepted too
    extract_corpus(path, "nc", CorpusSpec("nc", "a.en", "a.fr", 1), tmp_path / "s", tmp_path / "t")


def test_a_file_that_is_not_an_archive_is_reported(tmp_path):
    bogus = tmp_path / "dev.tgz"
    bogus.write_text("<html>not found</html>")
    with pytest.raises(ValueError, match="dev.tgz: cannot read it as a tar archive"):
        extract_corpus(bogus, "nt13", CorpusSpec("dev", "a", "b"), tmp_path / "s", tmp_path / "t")
