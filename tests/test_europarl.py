"""Europarl release v1 through the DAG (attnrepro.data.europarl): the manifest, downloads over a real HTTP server
on 127.0.0.1 (verified, resumed after a cut, a wrong byte refused naming the file), explicit Latin-1 decoding,
a day whose sides differ refused naming it, splits by date, the seeded per-bucket sample and its committed ids,
and the whole DAG on three days of the real corpus."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from archive_server import ArchiveServer, Behaviour
from wmt_miniature import real_data

from attnrepro.config import EuroparlSample, load_config
from attnrepro.data.download import ChecksumError
from attnrepro.data.europarl import (
    MANIFEST_COLUMNS,
    Pair,
    date_of,
    days_of_splits,
    draw_sample,
    fetch_days,
    read_ids,
    read_manifest,
    split_pairs,
)
from attnrepro.errors import DataError

from conftest import REPO, snakemake

CONFIG = REPO / "config" / "europarl_en_it.yaml"
MANIFEST = REPO / "config" / "europarl_it_en.manifest.tsv"
SAMPLE_IDS = REPO / "config" / "europarl_en_it.test_ids.tsv"


def write_days(root: Path, days: dict[str, tuple[bytes, bytes]], manifest: Path) -> None:
    """Day files it-en/{en,it}/NAME.al under `root` and their manifest (bytes, lines, sha256 of each)."""
    rows = ["\t".join(MANIFEST_COLUMNS)]
    for name, sides in days.items():
        for lang, data in zip(("en", "it"), sides):
            path = root / "it-en" / lang / f"{name}.al"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            rel = f"it-en/{lang}/{name}.al"
            lines = data.count(b"\n")
            rows.append(f"{rel}\t{len(data)}\t{lines}\t{hashlib.sha256(data).hexdigest()}")
    manifest.write_text("\n".join(rows) + "\n", encoding="utf-8")


def europarl_config(tmp_path: Path, manifest: Path, mirror: Path | None, **europarl) -> Path:
    """config/europarl_en_it.yaml on a manifest of our own, tiny models and samples, written to tmp_path."""
    raw = yaml.safe_load(CONFIG.read_text())
    data = raw["data"]["europarl"]
    data.update(manifest=str(manifest), download_dir=str(tmp_path / "downloads"), first_day="2000-07-01",
                last_day="2000-10-31", **europarl)  # fmt: skip
    data["test"] = {"first_day": "2000-10-01", "last_day": "2000-10-31", "per_bucket": 4, "max_len": 40}
    data["valid"] = {"first_day": "2000-09-01", "last_day": "2000-09-30", "per_bucket": 3, "max_len": 30}
    if mirror is not None:
        data["mirror"] = str(mirror)
    raw["dataset"] = "europarl_test"
    raw["tokenizers"]["word"]["vocab_size"] = 300
    tiny = {
        "rnnenc": {"emb": 8, "hidden": 12, "maxout": 6},
        "rnnsearch": {"emb": 8, "hidden": 12, "align": 8, "maxout": 6},
        "transducer": {"emb": 8, "hidden": 12},
    }
    for model in raw["models"].values():
        model["params"] = tiny[model["arch"]]
        model["train"].update(max_steps=6, log_every=3, valid_every=3, checkpoint_every=3, batch_tokens=400)
    raw["search"] = {"beam": 2, "batch_size": 16}
    raw["evaluate"] |= {"max_len": 40, "n_alignments": 1, "bootstrap_resamples": 50}  # tokenized BLEU by length
    path = tmp_path / "europarl.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


SIMPLE_DAYS = {  # three sittings: a training day, a validation day in September, a test day in October 2000
    "ep-00-07-03": (b"Good morning .\nThe sitting is open .\n", b"Buongiorno .\nLa seduta \xe8 aperta .\n"),
    "ep-00-09-04": (b"Thank you .\n", b"Grazie .\n"),
    "ep-00-10-02": (b"Why not ?\nIt is so .\n", b"Perch\xe9 no ?\nCos\xec \xe8 .\n"),
}


def test_a_day_name_is_its_sitting_s_date():
    assert date_of("ep-96-04-15") == dt.date(1996, 4, 15)
    assert date_of("ep-00-10-02") == dt.date(2000, 10, 2)
    with pytest.raises(ValueError, match="not a day name"):
        date_of("ep-2000-10-02")


def test_the_manifest_refuses_a_bad_row_and_a_day_with_one_side(tmp_path):
    manifest = tmp_path / "m.tsv"
    write_days(tmp_path, SIMPLE_DAYS, manifest)
    assert [d.name for d in read_manifest(manifest, "en", "it")] == list(SIMPLE_DAYS)
    lines = manifest.read_text().splitlines()
    (tmp_path / "bad.tsv").write_text("\n".join([*lines[:3], "it-en/en/ep-00-11-13.al\t12\tmany\t" + "0" * 64]) + "\n")
    with pytest.raises(DataError, match=r"bad.tsv:4: not a row"):
        read_manifest(tmp_path / "bad.tsv", "en", "it")
    (tmp_path / "one.tsv").write_text("\n".join([*lines[:-1]]) + "\n")  # ep-00-10-02's Italian file is gone
    with pytest.raises(DataError, match=r"day ep-00-10-02 has no it file"):
        read_manifest(tmp_path / "one.tsv", "en", "it")


def test_latin1_is_decoded_as_latin1_never_guessed(tmp_path):
    """'Perch\\xe9' is not UTF-8 (a lone continuation byte); read as ISO-8859-1 it is 'Perché'. The extracted text
    is UTF-8, so every later step reads it as every other corpus."""
    manifest = tmp_path / "m.tsv"
    write_days(tmp_path / "corpus", SIMPLE_DAYS, manifest)
    with pytest.raises(UnicodeDecodeError):
        SIMPLE_DAYS["ep-00-10-02"][1].decode("utf-8")
    config = europarl_config(tmp_path, manifest, tmp_path / "corpus")
    cfg = load_config(config).europarl
    days = days_of_splits(cfg, read_manifest(manifest, "en", "it"))
    pairs = split_pairs(cfg, "train", days["test"], tmp_path / "corpus")  # every line of the test day
    assert [p.tgt for p in pairs] == ["Perché no ?", "Così è ."]
    out = tmp_path / "raw"
    run = subprocess.run(
        [sys.executable, "-m", "attnrepro.cli", "europarl-extract", "--config", str(config), "--split", "train",
         "--download-dir", str(tmp_path / "corpus"), "--out-dir", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert (out / "train.tgt").read_text(encoding="utf-8") == "Buongiorno .\nLa seduta è aperta .\n"
    assert (out / "train.ids").read_text().splitlines()[1:] == ["ep-00-07-03\t1\t3", "ep-00-07-03\t2\t5"]


def test_a_day_whose_sides_differ_in_line_count_is_refused_naming_the_day(tmp_path):
    days = dict(SIMPLE_DAYS)
    days["ep-00-07-03"] = (b"Good morning .\nThe sitting is open .\n", b"Buongiorno .\n")
    manifest = tmp_path / "m.tsv"
    write_days(tmp_path / "corpus", days, manifest)
    config = europarl_config(tmp_path, manifest, tmp_path / "corpus")
    run = subprocess.run(
        [sys.executable, "-m", "attnrepro.cli", "europarl-extract", "--config", str(config), "--split", "train",
         "--download-dir", str(tmp_path / "corpus"), "--out-dir", str(tmp_path / "raw")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode != 0
    error = run.stderr.strip().splitlines()
    assert len(error) == 1 and "Traceback" not in run.stderr
    assert "day ep-00-07-03:" in error[0] and "has 2 lines" in error[0] and "it/ep-00-07-03.al 1" in error[0]
    assert not (tmp_path / "raw" / "train.src").exists()


def test_splits_are_by_date_and_disjoint():
    """The real manifest under the shipped config: Q4 2000 is the test window, September 2000 validation, and no
    training day falls in either."""
    cfg = load_config(CONFIG).europarl
    splits = days_of_splits(cfg, read_manifest(MANIFEST, "en", "it"))
    assert {d.name[:8] for d in splits["test"]} == {"ep-00-10", "ep-00-11", "ep-00-12"}
    assert len(splits["test"]) == 22 and {d.name[:8] for d in splits["valid"]} == {"ep-00-09"}
    train = {d.date for d in splits["train"]}
    assert not train & {d.date for d in splits["test"] + splits["valid"]}
    assert max(train) < min(d.date for d in splits["valid"]) < min(d.date for d in splits["test"])
    assert len(train) + len(splits["valid"]) + len(splits["test"]) == 325


def test_the_sample_is_the_seeded_rule_s_and_stable():
    pairs = [Pair("ep-00-10-02", i, " ".join(["w"] * (1 + i % 37)), "x") for i in range(1, 400)]
    spec = EuroparlSample(dt.date(2000, 10, 1), dt.date(2000, 12, 31), per_bucket=5, bucket_width=10, max_len=30)
    first, again = draw_sample(pairs, spec), draw_sample(pairs, spec)
    assert first == again and len(first) == 15  # 5 in each of 1-10, 11-20, 21-30; none longer
    assert [p.line for p in first] == sorted(p.line for p in first)
    assert sorted({(p.src_words - 1) // 10 for p in first}) == [0, 1, 2]
    other = draw_sample(pairs, EuroparlSample(spec.first_day, spec.last_day, 5, 10, 30, seed=2))
    assert other != first
    empty_target = [Pair("ep-00-10-02", 1, "a b", "")]
    assert draw_sample(empty_target, spec) == []  # a pair with an empty side is never sampled


def test_downloads_are_verified_resumed_after_a_cut_and_a_wrong_byte_is_refused_naming_the_file(tmp_path):
    corpus, manifest = tmp_path / "published", tmp_path / "m.tsv"
    write_days(corpus, SIMPLE_DAYS, manifest)
    with ArchiveServer() as server:
        for path in sorted(corpus.rglob("*.al")):
            rel = path.relative_to(corpus).as_posix()
            cut = Behaviour(cut_after=[5]) if rel == "it-en/it/ep-00-07-03.al" else None
            server.add(f"/pinned/{rel}", path.read_bytes(), cut)
        config = europarl_config(tmp_path, manifest, None, url=f"{server.url}/pinned", retries=2)
        cfg = load_config(config).europarl
        days = read_manifest(manifest, "en", "it")
        out = tmp_path / "downloads"
        fetch_days(cfg, days, out, progress=False)
        for path in corpus.rglob("*.al"):
            assert (out / path.relative_to(corpus)).read_bytes() == path.read_bytes()
        cut = server.requests("/pinned/it-en/it/ep-00-07-03.al")
        assert [r.range for r in cut] == [None, "bytes=5-"]  # resumed from the byte where it stopped
        assert not list(out.rglob("*.part"))
        wrong = bytearray(SIMPLE_DAYS["ep-00-09-04"][0])
        wrong[3] ^= 1
        server.files["/pinned/it-en/en/ep-00-09-04.al"] = bytes(wrong)
        (out / "it-en/en/ep-00-09-04.al").unlink()
        with pytest.raises(ChecksumError, match=r"ep-00-09-04\.al.*sha256 mismatch"):
            fetch_days(cfg, days, out, progress=False)
        assert not (out / "it-en/en/ep-00-09-04.al").exists()  # never renamed, so never used


def test_the_project_s_manifest_is_the_corpus_s(tmp_path):
    """Every day file the manifest lists, read from the real copy: its bytes, lines and sha256."""
    root = real_data() / "europarl_it_en"
    rows = list(csv.DictReader(MANIFEST.read_text().splitlines(), delimiter="\t"))
    assert len(rows) == 650
    for row in rows:
        data = (root / row["path"]).read_bytes()
        assert (len(data), data.count(b"\n"), hashlib.sha256(data).hexdigest()) == (
            int(row["bytes"]), int(row["lines"]), row["sha256"]
        ), row["path"]  # fmt: skip


def test_the_committed_test_sample_is_what_the_rule_draws():
    """config/europarl_en_it.test_ids.tsv is the seeded draw on Q4 2000's days: drawn again here, the same 2 400
    (day, line) ids, 300 in every 10-word bucket of English lengths up to 80."""
    cfg = load_config(CONFIG).europarl
    root = real_data() / "europarl_it_en"
    test_days = days_of_splits(cfg, read_manifest(MANIFEST, "en", "it"))["test"]
    pairs = split_pairs(cfg, "train", test_days, root)  # every line of the test days
    drawn = draw_sample(pairs, cfg.test)
    assert [(p.day, p.line) for p in drawn] == read_ids(SAMPLE_IDS)
    assert len(drawn) == 2400
    per_bucket = {}
    for p in drawn:
        per_bucket[(p.src_words - 1) // 10] = per_bucket.get((p.src_words - 1) // 10, 0) + 1
    assert per_bucket == {b: 300 for b in range(8)}
    committed = split_pairs(cfg, "test", test_days, root)  # what a run takes: the committed ids
    assert committed == drawn


@pytest.mark.slow
def test_the_whole_dag_on_three_days_of_the_corpus(tmp_path):
    """Three real sittings (July, September, October 2000) from the corpus copy as the mirror: download ->
    extract by date -> clean -> tokenize -> five models trained -> translated -> scored both ways -> tables,
    Fig. 2 with tokenized BLEU per bucket."""
    root = real_data() / "europarl_it_en"
    keep = {"ep-00-07-07", "ep-00-09-08", "ep-00-10-06"}
    lines = MANIFEST.read_text().splitlines()
    manifest = tmp_path / "three_days.tsv"
    manifest.write_text("\n".join([lines[0], *[r for r in lines[1:] if Path(r.split("\t")[0]).stem in keep]]) + "\n")
    config = europarl_config(tmp_path, manifest, root)
    run = snakemake(tmp_path / "work", config, "--cores", "2", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    results = tmp_path / "work" / "results" / "europarl_test"
    manifests = {s: json.loads((results / "data" / f"{s}.manifest.json").read_text()) for s in ("train", "valid")}
    assert manifests["train"]["corpora"] == [{"corpus": "train", "pairs": 487, "kept": manifests["train"]["pairs_out"]}]
    ids = read_ids(results / "raw" / "test.ids")
    assert {day for day, _ in ids} == {"ep-00-10-06"} and len(ids) == 16  # 4 per bucket, 1-10 .. 31-40
    for model in ("rnnencdec30", "rnnencdec50", "rnnsearch30", "rnnsearch50", "transducer50"):
        scores = json.loads((results / model / "bleu.json").read_text())
        assert scores["n_sentences"] == 16
        assert scores["signature"].startswith("detok:sacremoses-") and scores["signature_tokenized"].startswith(
            "pretok:corpus|"
        )
        rows = list(csv.DictReader((results / model / "bleu_by_length.csv").read_text().splitlines()))
        assert [int(r["n_sentences"]) for r in rows] == [4, 4, 4, 4]
        assert all(r["bleu_tokenized"] != "" and r["bleu_tokenized_ci_lo"] != "" for r in rows)
    assert (results / "figures" / "bleu_by_length.png").stat().st_size > 10_000
    by_length = list(csv.DictReader((results / "tables" / "bleu_by_length.csv").read_text().splitlines()))
    assert len(by_length) == 5 * 4  # Fig. 2's numbers: tokenized BLEU (evaluate.length_bleu), sacreBLEU beside it
    assert all(r["bleu"] == r["bleu_tokenized"] and r["bleu_sacrebleu"] != "" for r in by_length)
    assert "tokenized BLEU (multi-bleu.perl) of each" in (results / "tables" / "bleu_by_length.md").read_text()
    assert "Transducer-50" in (results / "tables" / "table1.md").read_text()


def test_the_files_a_config_names_are_read_beside_it_from_any_working_directory(tmp_path, monkeypatch):
    """The shipped config names its manifest and test sample beside itself: read from another folder (and in an
    overlay that names its own manifest, beside the overlay), the paths resolve, and the jobs' copy is absolute."""
    monkeypatch.chdir(tmp_path)
    cfg = load_config(CONFIG).europarl
    assert Path(cfg.manifest) == MANIFEST and Path(cfg.test.ids) == SAMPLE_IDS
    (tmp_path / "overlay").mkdir()
    (tmp_path / "overlay" / "mine.tsv").write_text(MANIFEST.read_text())
    overlay = tmp_path / "overlay" / "o.yaml"
    overlay.write_text("data:\n  europarl:\n    manifest: mine.tsv\n")
    cfg = load_config(CONFIG, overlay).europarl
    assert Path(cfg.manifest) == tmp_path / "overlay" / "mine.tsv" and Path(cfg.test.ids) == SAMPLE_IDS
