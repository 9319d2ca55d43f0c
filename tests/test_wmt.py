"""Extraction from the published layouts: members of an archive (plain, gzip-in-tar, SGML) and one
file per side (Multi30k), checked line by line against real WMT text and sacreBLEU's own reading."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest
from sacrebleu.dataset.fake_sgml import FakeSGMLDataset
from wmt_miniature import LAYOUTS, build_archives, member_bytes, real_data, real_file

from attnrepro import cli
from attnrepro.config import CorpusSpec, from_dict, load_config
from attnrepro.data.wmt import extract_corpus, sgm_segments
from attnrepro.errors import ConfigError, DataError

from conftest import REPO

TRICKY = [
    "The  cat\tsat on the mat.",
    "  Leading and trailing spaces  ",
    "Quotes « like this » & ampersands < > too",
    "Ünïcödé — dashes – and … ellipses",
]


def extract(archive: Path, name: str, spec: CorpusSpec, out: Path) -> dict[str, int]:
    """Both sides out of one archive into out/NAME.src, out/NAME.tgt."""
    return extract_corpus(archive, archive, name, spec, out / f"{name}.src", out / f"{name}.tgt")


def sacrebleu_lines(sgm: Path, tmp_path: Path) -> list[str]:
    """sacreBLEU 2.6's text of a fake-SGML file (FakeSGMLDataset, as `sacrebleu -t wmt14/full` makes it)."""
    converted = tmp_path / f"{sgm.name}.sacrebleu.txt"
    FakeSGMLDataset._convert_format(FakeSGMLDataset.__new__(FakeSGMLDataset), str(sgm), str(converted))
    return converted.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.mark.parametrize("config", ["wmt14_en_fr.yaml", "wmt14_en_de.yaml"])
def test_every_member_the_shipped_configs_name_is_in_its_archives_real_layout(config):
    cfg = load_config(REPO / "config" / config)
    for name, corpus in cfg.wmt.corpora.items():
        for side in ("src", "tgt"):
            archive = cfg.wmt.files[corpus.file_of(side)].name
            assert archive in LAYOUTS, f"{config}: data.wmt.corpora.{name} {side}: {archive}"
            assert corpus.member_of(side) in LAYOUTS[archive], f"{config}: data.wmt.corpora.{name}.{side}"
    assert cfg.wmt.corpora["newstest2014"].lines == 3003
    assert len(cfg.wmt.splits["test"]) == 1 and cfg.wmt.splits["test"][0] == "newstest2014"


# newstest2014 full (fr-en and de-en) and newstest2012/2013, as the configs name them
REAL_TEST_SETS = [
    ("test-full.tgz", "test-full/newstest2014-fren-src.en.sgm", "test-full/newstest2014-fren-ref.fr.sgm", 3003),
    ("test-full.tgz", "test-full/newstest2014-deen-src.en.sgm", "test-full/newstest2014-deen-ref.de.sgm", 3003),
    ("dev.tgz", "dev/newstest2012-src.en.sgm", "dev/newstest2012-ref.fr.sgm", 3003),
    ("dev.tgz", "dev/newstest2013-src.en.sgm", "dev/newstest2013-ref.de.sgm", 3000),
]


@pytest.fixture(scope="module")
def real_archives(tmp_path_factory) -> dict[str, Path]:
    """dev.tgz, test-full.tgz and the Europarl pack holding the real files whole."""
    real_data()
    only = ["dev.tgz", "test-full.tgz", "training-parallel-europarl-v7.tgz"]
    return build_archives(tmp_path_factory.mktemp("published"), only=only)


@pytest.mark.parametrize(("archive", "src", "tgt", "lines"), REAL_TEST_SETS)
def test_real_test_sets_come_out_line_for_line_as_sacrebleu_reads_them(
    real_archives, tmp_path, archive, src, tgt, lines
):
    name = Path(src).name.split("-")[0]
    spec = CorpusSpec(archive, src, tgt, lines=lines)
    assert extract(real_archives[archive], name, spec, tmp_path) == {"src_lines": lines, "tgt_lines": lines}
    for side, member in (("src", src), ("tgt", tgt)):
        ours = (tmp_path / f"{name}.{side}").read_text(encoding="utf-8").split("\n")[:-1]
        theirs = sacrebleu_lines(real_file(member.replace("test-full/", "newstest2014/")), tmp_path)
        assert len(ours) == len(theirs) == lines
        assert ours == theirs


def test_real_sgml_keeps_raw_ampersands_and_quotes_and_collapses_no_break_spaces(real_archives, tmp_path):
    members = "test-full/newstest2014-fren-src.en.sgm", "test-full/newstest2014-fren-ref.fr.sgm"
    extract(real_archives["test-full.tgz"], "nt14", CorpusSpec("t", *members), tmp_path)
    english = (tmp_path / "nt14.src").read_text(encoding="utf-8")
    assert "Standard & Poor's" in english and '"' in english and "&amp;" not in english and "&quot;" not in english
    sgml = real_file("newstest2014/newstest2014-fren-ref.fr.sgm").read_text(encoding="utf-8")
    assert sum("\u00a0" in line for line in sgml.splitlines() if line.startswith("<seg ")) == 707
    assert "\u00a0" not in (tmp_path / "nt14.tgt").read_text(encoding="utf-8")  # \s+ -> " ", as sacreBLEU does


def test_real_europarl_lines_come_out_whole_with_the_missing_last_newline_added(real_archives, tmp_path):
    members = "training/europarl-v7.fr-en.en", "training/europarl-v7.fr-en.fr"
    counts = extract(
        real_archives["training-parallel-europarl-v7.tgz"], "ep", CorpusSpec("e", *members, 3000), tmp_path
    )
    assert counts == {"src_lines": 3000, "tgt_lines": 3000}
    french = real_file("europarl_sample/europarl-v7.fr-en.fr").read_bytes()
    assert not french.endswith(b"\n") and (tmp_path / "ep.tgt").read_bytes() == french + b"\n"
    assert (tmp_path / "ep.tgt").read_text(encoding="utf-8").split("\n").count("") == 6 + 1  # 6 empty lines
    # `wc -l` counts 2999 newlines: a published count of either kind is accepted
    extract(real_archives["training-parallel-europarl-v7.tgz"], "ep", CorpusSpec("e", *members, 2999), tmp_path)


def test_one_gzip_file_per_side_as_multi30k_publishes_them(tmp_path):
    src, tgt = real_file("multi30k/val.en.gz"), real_file("multi30k/val.de.gz")
    spec = CorpusSpec(src_file="val_en", tgt_file="val_de", lines=1014)
    counts = extract_corpus(src, tgt, "multi30k_val", spec, tmp_path / "v.src", tmp_path / "v.tgt")
    assert counts == {"src_lines": 1014, "tgt_lines": 1014}
    assert (tmp_path / "v.src").read_bytes() == gzip.decompress(src.read_bytes())
    assert (tmp_path / "v.tgt").read_text(encoding="utf-8").splitlines()[0] == (
        "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen"
    )


def test_plain_gzip_and_sgml_members_come_out_as_parallel_lines(tmp_path):
    texts = {
        "giga-fren.release2.fixed.en.gz": [f"giga {i}" for i in range(50)],
        "giga-fren.release2.fixed.fr.gz": [f"giga fr {i}" for i in range(50)],
        "test-full/newstest2014-fren-src.en.sgm": TRICKY,
        "test-full/newstest2014-fren-ref.fr.sgm": [f"ref {i}" for i in range(4)],
    }
    archives = build_archives(tmp_path / "dl", texts, only=["training-giga-fren.tar", "test-full.tgz"])
    spec = CorpusSpec("x", "giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz")
    assert extract(archives["training-giga-fren.tar"], "giga", spec, tmp_path) == {"src_lines": 50, "tgt_lines": 50}
    assert (tmp_path / "giga.tgt").read_text().splitlines()[49] == "giga fr 49"  # gzip member decompressed
    spec = CorpusSpec("x", "test-full/newstest2014-fren-src.en.sgm", "test-full/newstest2014-fren-ref.fr.sgm", 4)
    extract(archives["test-full.tgz"], "newstest2014", spec, tmp_path)
    assert (tmp_path / "newstest2014.src").read_text().splitlines() == [
        "The cat sat on the mat.",
        "Leading and trailing spaces",
        "Quotes « like this » & ampersands < > too",
        "Ünïcödé — dashes – and … ellipses",
    ]


def test_sgml_text_is_exactly_what_sacrebleu_makes_of_the_same_file(tmp_path):
    sgm_path = tmp_path / "newstest2014-fren-src.en.sgm"
    sgm_path.write_bytes(member_bytes(sgm_path.name, TRICKY))
    with open(sgm_path, encoding="utf-8", newline="\n") as f:
        assert list(sgm_segments(f)) == sacrebleu_lines(sgm_path, tmp_path)


# ---- inputs that are not what the config says: each stops with the file, member, line or key named ----


def test_a_missing_member_is_named_with_the_archive_and_similar_members(tmp_path):
    archives = build_archives(tmp_path / "dl", only=["training-parallel-europarl-v7.tgz"])
    spec = CorpusSpec("x", "training/europarl-v7.fr-en.eng", "training/europarl-v7.fr-en.fr")
    out = tmp_path / "raw"
    with pytest.raises(DataError) as info:
        extract(archives["training-parallel-europarl-v7.tgz"], "europarl_v7", spec, out)
    message = str(info.value)
    assert "training-parallel-europarl-v7.tgz" in message and "'training/europarl-v7.fr-en.eng'" in message
    assert "data.wmt.corpora.europarl_v7" in message and "training/europarl-v7.fr-en.en" in message
    assert list(out.glob("*")) == []  # nothing under the final names, no temporary files left


def test_line_counts_are_checked_against_each_other_and_the_published_count(tmp_path):
    texts = {
        "un/undoc.2000.fr-en.en": ["a", "b", "c"],
        "un/undoc.2000.fr-en.fr": ["a", "b"],
        "dev/newstest2013-src.en.sgm": ["s"] * 5,
        "dev/newstest2013-ref.fr.sgm": ["r"] * 5,
    }
    archives = build_archives(tmp_path / "dl", texts, only=["training-parallel-un.tgz", "dev.tgz"])
    out = tmp_path / "raw"
    spec = CorpusSpec("un", "un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr")
    with pytest.raises(DataError, match="un/undoc.2000.fr-en.en has 3 lines but un/undoc.2000.fr-en.fr has 2"):
        extract(archives["training-parallel-un.tgz"], "un", spec, out)
    spec = CorpusSpec("dev", "dev/newstest2013-src.en.sgm", "dev/newstest2013-ref.fr.sgm", lines=3000)
    with pytest.raises(DataError, match=r"has 5 lines, the published count is 3000 \(data.wmt.corpora.nt13.lines\)"):
        extract(archives["dev.tgz"], "nt13", spec, out)
    assert list(out.glob("*")) == []


def test_separate_files_with_different_line_counts_name_both_files(tmp_path):
    src, tgt = tmp_path / "val.en.gz", tmp_path / "val.de.gz"
    src.write_bytes(gzip.compress(b"a\nb\nc\n"))
    tgt.write_bytes(gzip.compress(b"a\nb\n"))
    spec = CorpusSpec(src_file="val_en", tgt_file="val_de")
    with pytest.raises(DataError) as info:
        extract_corpus(src, tgt, "val", spec, tmp_path / "v.src", tmp_path / "v.tgt")
    assert str(src) in str(info.value) and str(tgt) in str(info.value)
    assert "val.en.gz has 3 lines but val.de.gz has 2" in str(info.value)


def test_a_last_line_without_newline_still_counts(tmp_path):
    path = tmp_path / "nc.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (("a.en", b"x\ny"), ("a.fr", b"x\ny\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    counts = extract(path, "nc", CorpusSpec("nc", "a.en", "a.fr", 2), tmp_path)
    assert counts == {"src_lines": 2, "tgt_lines": 2}
    assert (tmp_path / "nc.src").read_text() == "x\ny\n"


def test_a_file_that_is_not_an_archive_is_named_with_the_corpus(tmp_path):
    bogus = tmp_path / "dev.tgz"
    bogus.write_text("<html>not found</html>")
    with pytest.raises(DataError, match=r"dev.tgz: cannot read it as a tar archive: .*\(data.wmt.corpora.nt13\)"):
        extract(bogus, "nt13", CorpusSpec("dev", "a", "b"), tmp_path)


def test_a_cut_archive_names_the_member_being_read(tmp_path):
    texts = {"un/undoc.2000.fr-en.en": ["word"] * 20_000}
    archives = build_archives(tmp_path / "dl", texts, only=["training-parallel-un.tgz"])
    data = archives["training-parallel-un.tgz"].read_bytes()
    cut = tmp_path / "training-parallel-un.tgz"
    cut.write_bytes(data[: len(data) // 2])
    spec = CorpusSpec("un", "un/undoc.2000.fr-en.en", "un/undoc.2000.fr-en.fr")
    with pytest.raises(DataError, match=r"training-parallel-un.tgz: cannot read it as a tar archive \(reading un/"):
        extract(cut, "un", spec, tmp_path / "raw")
    assert list((tmp_path / "raw").glob("*")) == []


@pytest.mark.parametrize(("data", "problem"), [(b"<html>rate limited</html>", "Not a gzipped file"), (None, "ended")])
def test_a_side_file_that_is_not_gzip_or_is_cut_is_named_with_its_key(tmp_path, data, problem):
    path = tmp_path / "train.en.gz"
    whole = gzip.compress("".join(f"a man number {i}\n" for i in range(5000)).encode())
    path.write_bytes(data if data is not None else whole[: len(whole) // 2])
    tgt = tmp_path / "train.de.gz"
    tgt.write_bytes(gzip.compress(b"ein Mann\n"))
    spec = CorpusSpec(src_file="train_en", tgt_file="train_de")
    with pytest.raises(
        DataError, match=rf"{path}: cannot read it as gzip \(.*{problem}.*\(data.wmt.corpora.m.src_file\)"
    ):
        extract_corpus(path, tgt, "m", spec, tmp_path / "m.src", tmp_path / "m.tgt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.de.gz", "train.en.gz"]


def test_invalid_utf8_in_an_sgml_member_names_archive_member_and_line(tmp_path):
    sgml = member_bytes("x.sgm", ["fine", "also fine"]).replace(b"also", b"al\xe9so")
    path = tmp_path / "dev.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (("dev/a.en.sgm", sgml), ("dev/a.fr.sgm", member_bytes("x.sgm", ["a", "b"]))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(DataError, match=rf"{path}: dev/a.en.sgm:5: not valid UTF-8 at byte 14 of the line"):
        extract(path, "a", CorpusSpec("dev", "dev/a.en.sgm", "dev/a.fr.sgm"), tmp_path)


def test_invalid_utf8_in_plain_text_is_left_byte_for_byte_to_the_clean_step(tmp_path):
    src, tgt = tmp_path / "a.en", tmp_path / "a.fr"
    src.write_bytes(b"caf\xe9\nok\n")  # Latin-1: clean names it (file:line) or drops it, as data.wmt.clean says
    tgt.write_bytes(b"x\ny\n")
    extract_corpus(src, tgt, "a", CorpusSpec(src_file="s", tgt_file="t"), tmp_path / "o.src", tmp_path / "o.tgt")
    assert (tmp_path / "o.src").read_bytes() == b"caf\xe9\nok\n"


def test_the_cli_prints_one_line_naming_the_file_and_the_corpus(tmp_path, capsys):
    bogus = tmp_path / "val.en.gz"
    bogus.write_text("<html>not found</html>")
    args = ["extract", "--config", str(REPO / "config/multi30k_en_de.yaml"), "--corpus", "multi30k_val"]
    args += ["--src-input", str(bogus), "--tgt-input", str(bogus), "--src", str(tmp_path / "s")]
    args += ["--tgt", str(tmp_path / "t")]
    assert cli.main(args) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert str(bogus) in line and "data.wmt.corpora.multi30k_val.src_file" in line


# ---- the corpus forms of the config ---------------------------------------------------------------


def wmt_config(corpus: dict) -> dict:
    """config/multi30k_en_de.yaml with one corpus replaced."""
    import yaml

    raw = yaml.safe_load((REPO / "config/multi30k_en_de.yaml").read_text())
    raw["data"]["wmt"]["corpora"]["multi30k_val"] = corpus
    return raw


def test_a_corpus_takes_one_archive_for_both_sides_or_a_file_per_side():
    sides = from_dict(wmt_config({"src_file": "val_en", "tgt_file": "val_de"})).wmt.corpora["multi30k_val"]
    assert (sides.file_of("src"), sides.member_of("src"), sides.file_of("tgt")) == ("val_en", None, "val_de")
    both = from_dict(wmt_config({"file": "train_en", "src": "a.en", "tgt": "a.de"})).wmt.corpora["multi30k_val"]
    assert (both.file_of("src"), both.file_of("tgt"), both.member_of("tgt")) == ("train_en", "train_en", "a.de")


@pytest.mark.parametrize(
    ("corpus", "message"),
    [
        ({"src_file": "val_en"}, r"data.wmt.corpora.multi30k_val: no file for tgt: give file .* or tgt_file"),
        ({"src_file": "val_en", "tgt_file": "val_xx"}, r"multi30k_val.tgt_file: no file named 'val_xx'"),
        ({"file": "val_en"}, r"multi30k_val: both sides are in 'val_en'; name each side's member \(src, tgt\)"),
        ({"file": "val_en", "src": "a", "tgt": "a"}, r"multi30k_val: src and tgt are the same member 'a'"),
    ],
)
def test_a_corpus_without_a_file_per_side_names_the_key(corpus, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(wmt_config(corpus))
