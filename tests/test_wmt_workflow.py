"""The WMT'14 En-Fr DAG end to end on miniature archives of real text served on 127.0.0.1: download
(pinning what has no published checksum) -> extract -> clean -> tokenizers -> encode -> train ->
translate -> score -> the BLEU-by-length table. config/wmt14_en_fr.yaml itself, with URLs, sizes and
checksums of the miniatures and tiny models. And config/multi30k_en_de.yaml: its plan, and its data
steps from a mirror of the real files."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from archive_server import ArchiveServer
from sacremoses import MosesDetokenizer, MosesTokenizer
from wmt_miniature import build_archives, real_data, real_file, real_member

from conftest import REPO, snakemake

pytestmark = pytest.mark.slow

FULL = ["europarl_v7", "commoncrawl", "un", "news_commentary_v9", "giga_fren"]
TINY_TRAIN = {
    "optimizer": "adam", "lr": 0.003, "schedule": "constant",
    "batch_tokens": 600, "max_steps": 30, "log_every": 10, "valid_every": 10, "checkpoint_every": 10,
}  # fmt: skip
OFF = {"update_tokens": 0, "average_last": 1}  # one batch per update, the last checkpoint
FULL_FROM, SELECTED_FROM = 500, 1100  # Europarl sample lines of the five training corpora, of the selection
TEST_SEGMENTS = 20  # newstest2012-2014: whole documents up to >= 20 segments each


def europarl() -> list[tuple[str, str]]:
    """The 3000 real Europarl v7 fr-en pairs (6 with an empty French side)."""
    en, fr = (
        real_file(f"europarl_sample/europarl-v7.fr-en.{lang}").read_text(encoding="utf-8") for lang in "en fr".split()
    )
    return list(zip(en.split("\n"), fr.split("\n"), strict=True))


def corpus_texts(cfg: dict) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Member name -> lines of each training corpus (100 real Europarl pairs each), and the line count of
    every corpus; the test sets are the real SGML (real_member)."""
    corpora, pairs = cfg["data"]["wmt"]["corpora"], europarl()
    texts: dict[str, list[str]] = {}
    training = [(name, FULL_FROM + 100 * i) for i, name in enumerate(FULL)]
    training += [
        (name, SELECTED_FROM + 100 * i) for i, name in enumerate(cfg["data"]["wmt"]["splits"]["train_selected"])
    ]
    for name, first in training:
        texts[corpora[name]["src"]] = [src for src, _ in pairs[first : first + 100]]
        texts[corpora[name]["tgt"]] = [tgt for _, tgt in pairs[first : first + 100]]
    lines = {name: 100 for name, _ in training}
    for name in ("newstest2012", "newstest2013", "newstest2014"):
        lines[name] = real_member(corpora[name]["src"], TEST_SEGMENTS).count(b"\n<seg ")
    return texts, lines


def miniature_config(cfg: dict, server: ArchiveServer, archives: dict[str, Path], lines: dict[str, int]) -> dict:
    wmt = cfg["data"]["wmt"]
    for spec in wmt["files"].values():
        path = urlparse(spec["url"]).path
        data = archives[Path(path).name].read_bytes()
        spec["url"] = server.add(path, data)  # same path as statmt.org / LIUM publish it
        for key, value in (("size", len(data)), ("sha256", hashlib.sha256(data).hexdigest())):
            if key in spec:
                spec[key] = value
        if "md5" in spec:
            spec["md5"] = hashlib.md5(data).hexdigest()
    for name, corpus in wmt["corpora"].items():
        corpus["lines"] = lines[name]
    wmt["retries"] = 2
    cfg["tokenizers"]["wordpiece32k"]["vocab_size"] = 200
    models = cfg["models"]
    cfg["models"] = {  # the Moses word path with attention, and the sentencepiece path
        "rnnsearch50": {
            **models["rnnsearch50"], "params": {"emb": 16, "hidden": 24, "align": 16, "maxout": 8, "init": "pytorch"},
        },
        "transformer_base": {
            **models["transformer_base"],
            "params": {"d_model": 16, "d_ff": 32, "heads": 2, "layers": 1, "dropout": 0.0, "share_embeddings": True},
        },
    }  # fmt: skip
    for model in cfg["models"].values():
        off = {key: value for key, value in OFF.items() if key in model["train"]}
        model["train"] = {**model["train"], **TINY_TRAIN, **off}
    cfg["search"] = {"beam": 2, "batch_size": 16}
    cfg["evaluate"] = {**cfg["evaluate"], "max_len": 40, "n_alignments": 1}
    cfg["resources"] = {"threads": 1}
    return cfg


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    real_data()
    root = tmp_path_factory.mktemp("wmt")
    cfg = yaml.safe_load((REPO / "config/wmt14_en_fr.yaml").read_text())
    texts, lines = corpus_texts(cfg)
    archives = build_archives(root / "published", texts, limit=TEST_SEGMENTS)
    with ArchiveServer() as server:
        config = root / "config" / "wmt14_en_fr.yaml"
        config.parent.mkdir()
        config.write_text(yaml.safe_dump(miniature_config(cfg, server, archives, lines), sort_keys=False))
        workdir = root / "work"
        out = snakemake(workdir, config, "--cores", "2", timeout=1200)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
        again = snakemake(workdir, config, "-n")
        yield {
            "results": workdir / "results" / "wmt14_en_fr",
            "downloads": workdir / "results" / "downloads",
            "config": config,
            "archives": archives,
            "server": server,
            "lines": lines,
            "again": again.stdout + again.stderr,
        }


def test_each_archive_was_fetched_once_verified_and_the_unpublished_ones_pinned(finished_run):
    archives, server = finished_run["archives"], finished_run["server"]
    for name, path in archives.items():
        assert (finished_run["downloads"] / name).read_bytes() == path.read_bytes()
        (request,) = [r for r in server.log if r.path.endswith("/" + name)]
        assert (request.status, request.bytes_sent) == (200, path.stat().st_size)
    lock = yaml.safe_load(finished_run["config"].with_name("wmt14_en_fr.lock.yaml").read_text())
    assert set(lock) == {"dev", "test_full", "bitexts"}  # no published size/sha256
    for key, name in (("dev", "dev.tgz"), ("test_full", "test-full.tgz"), ("bitexts", "bitexts.tgz")):
        data = archives[name].read_bytes()
        assert (lock[key]["size"], lock[key]["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert "Nothing to be done" in finished_run["again"]


def test_splits_come_out_cleaned_with_counts_in_the_manifests(finished_run):
    data, lines = finished_run["results"] / "data", finished_run["lines"]
    train = json.loads((data / "train.manifest.json").read_text())
    assert train["pairs_in"] == sum(lines[c] for c in FULL) == 500
    steps = {s["filter"]: s["before"] - s["after"] for s in train["filters"]}
    # Europarl sample lines 500-999: line 549's French side is empty; 12 pairs have more than 80 words
    assert steps == {"utf8": 0, "empty": 1, "length": 12, "ratio": 0}
    assert train["pairs_out"] == len((data / "train.src").read_text().splitlines()) == 487
    test = json.loads((data / "test.manifest.json").read_text())
    assert test["filters"] == [] and test["pairs_out"] == lines["newstest2014"] == 68  # every test sentence kept
    assert (data / "test.src").read_text().splitlines()[:2] == [
        "Spectacular Wingsuit Jump Over Bogota",  # the real newstest2014 SGML -> its raw sentences
        "Sportsman Jhonathan Florez jumped from a helicopter above Bogota, the capital of Colombia, on Thursday.",
    ]
    valid = json.loads((data / "valid.manifest.json").read_text())
    assert [c["corpus"] for c in valid["corpora"]] == ["newstest2012", "newstest2013"]
    assert valid["pairs_out"] == lines["newstest2012"] + lines["newstest2013"]


def test_the_word_vocabulary_is_trained_on_the_selection_and_moses_tokenized(finished_run):
    moses = MosesTokenizer("en")

    def words(split: str) -> set[str]:  # the alphabetic Moses tokens of the cleaned split
        lines = (finished_run["results"] / "data" / f"{split}.src").read_text(encoding="utf-8").splitlines()
        return {w for line in lines for w in moses.tokenize(line, escape=False) if re.fullmatch(r"[A-Za-z]+", w)}

    selected, full = words("train_selected"), words("train")
    vocabulary = set((finished_run["results"] / "tokenizer/word30k/src.model").read_text().splitlines())
    assert len(selected - full) > 100 and selected - full <= vocabulary
    assert len(full - selected) > 100 and (full - selected) & vocabulary == set()
    assert "." in vocabulary and "," in vocabulary  # split off by Moses


def test_every_model_is_scored_on_detokenized_text_and_tabled_by_length(finished_run):
    results = finished_run["results"]
    fr, n_test = MosesDetokenizer("fr"), finished_run["lines"]["newstest2014"]
    for model in ("rnnsearch50", "transformer_base"):
        bleu = json.loads((results / model / "bleu.json").read_text())
        assert bleu["n_sentences"] == n_test and bleu["signature"].startswith("nrefs:1") and 0 <= bleu["bleu"] <= 100
        hyps = (results / model / "hyp.txt").read_text().splitlines()
        assert len(hyps) == n_test
        if model != "transformer_base":  # the Moses word path: plain text, a fixed point of detokenization
            assert all(fr.detokenize(h.split()) == h for h in hyps)
    assert {p.parent.name for p in results.glob("encoded/*/train.npz")} == {"word30k", "wordpiece32k"}
    with open(results / "tables/bleu_by_length.csv") as f:
        table = list(csv.DictReader(f))
    assert {r["model"] for r in table} == {"rnnsearch50", "transformer_base"}
    assert {int(r["bucket_hi"]) for r in table} == {10, 20, 30, 40}


# ---- config/multi30k_en_de.yaml: every job planned offline; its data steps from a mirror ----------

MULTI30K = REPO / "config" / "multi30k_en_de.yaml"


def _planned(out) -> dict[str, str]:
    """Job counts of a Snakemake plan ("rule  n" rows of its job stats), from a run that succeeded."""
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return dict(re.findall(r"^(\w+)\s+(\d+)$", out.stdout, flags=re.MULTILINE))


def test_the_multi30k_config_plans_every_job_offline(tmp_path):
    jobs = _planned(snakemake(tmp_path, MULTI30K, "-n"))
    n_models = str(len(yaml.safe_load(MULTI30K.read_text())["models"]))  # one run each (no seeds)
    per_model = {"train": n_models, "translate": n_models, "score": n_models}
    assert {"download": "6", "extract": "3", "clean": "3", "tokenizer": "2", **per_model}.items() <= jobs.items()
    assert not (tmp_path / "results" / "downloads").exists()


def _mirrored(name: str, config_dir: Path, server: ArchiveServer, mirror: Path) -> Path:
    """config/NAME with its URLs on `server` (which serves nothing) and `mirror` as its data.wmt.mirror."""
    raw = yaml.safe_load((REPO / "config" / name).read_text())
    for spec in raw["data"]["wmt"]["files"].values():
        spec["url"] = f"{server.url}{urlparse(spec['url']).path}"
    raw["data"]["wmt"].update(mirror=str(mirror), retries=0)
    config = config_dir / name
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config


def test_multi30k_download_extract_clean_from_a_mirror_of_the_real_files(tmp_path):
    mirror = real_data() / "multi30k"
    (tmp_path / "config").mkdir()
    with ArchiveServer() as server:  # serves nothing: every file must come from the mirror
        config = _mirrored("multi30k_en_de.yaml", tmp_path / "config", server, mirror)
        data = "results/multi30k_en_de/data"
        targets = [f"{data}/{split}.{side}" for split in ("train", "valid", "test") for side in ("src", "tgt")]
        out = snakemake(tmp_path / "work", config, "--cores", "2", *targets)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert server.log == []
        # En-Fr shares the English files' downloads: planning it fetches only the French three, and En-De,
        # planned again, has nothing to do (the config's path is not a param of the download)
        en_fr = _mirrored("multi30k_en_fr.yaml", tmp_path / "config", server, mirror)
        fr_data = [
            f"results/multi30k_en_fr/data/{split}.{side}"
            for split in ("train", "valid", "test")
            for side in ("src", "tgt")
        ]
        assert _planned(snakemake(tmp_path / "work", en_fr, "-n", *fr_data))["download"] == "3"
        assert "download" not in _planned(snakemake(tmp_path / "work", config, "-n", *targets))
    for name in ("train.en.gz", "val.de.gz", "test_2016_flickr.en.gz"):
        assert (tmp_path / "work/results/downloads/multi30k" / name).read_bytes() == (mirror / name).read_bytes()
    assert sorted(config.parent.iterdir()) == [config, en_fr]  # every size and sha256 published: nothing pinned
    first = {
        "train": ("Two young, White males are outside near many bushes.",
                  "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche."),
        "valid": ("A group of men are loading cotton onto a truck",
                  "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen"),
        "test": ("A man in an orange hat starring at something.",
                 "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."),
    }  # fmt: skip
    for split, lines in (("train", 29000), ("valid", 1014), ("test", 1000)):
        src, tgt = (
            (tmp_path / "work" / data / f"{split}.{side}").read_text(encoding="utf-8") for side in ("src", "tgt")
        )
        assert len(src.splitlines()) == len(tgt.splitlines()) == lines
        assert (src.splitlines()[0], tgt.splitlines()[0]) == first[split]
        manifest = json.loads((tmp_path / "work" / data / f"{split}.manifest.json").read_text())
        assert manifest["pairs_in"] == manifest["pairs_out"] == lines  # clean-corpus-n 1-80, ratio 9 keeps all
