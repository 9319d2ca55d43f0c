"""The WMT'14 En-Fr DAG end to end on miniature archives served on 127.0.0.1: download (pinning
what has no published checksum) -> extract -> clean -> tokenizers -> encode -> train -> translate
-> score -> the BLEU-by-length table. config/wmt14_en_fr.yaml itself, with URLs, sizes and
checksums of the miniatures and tiny models."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from archive_server import ArchiveServer
from sacremoses import MosesDetokenizer
from wmt_miniature import build_archives

from attnrepro.config import SyntheticDataConfig
from attnrepro.data.synthetic import write_splits

from conftest import REPO

pytestmark = pytest.mark.slow

FULL = ["europarl_v7", "commoncrawl", "un", "news_commentary_v9", "giga_fren"]
TINY_TRAIN = {
    "optimizer": "adam", "lr": 0.003, "schedule": "constant",
    "batch_tokens": 600, "max_steps": 30, "log_every": 10, "valid_every": 10, "checkpoint_every": 10,
}  # fmt: skip
OFF = {"update_tokens": 0, "average_last": 1}  # one batch per update, the last checkpoint


def sentence(words: str) -> str:
    """Synthetic words as raw text: capitalised, a full stop attached (Moses splits it off)."""
    return words[:1].upper() + words[1:] + "."


def corpus_texts(work: Path, cfg: dict) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Member name -> lines for every corpus of the config, from a small synthetic corpus."""
    split_dir = work / "synthetic"
    write_splits(SyntheticDataConfig(seed=5, n_train=1100, n_valid=40, test_per_bucket=5, max_test_len=40), split_dir)

    def read(split: str, side: str) -> list[str]:
        return [sentence(line) for line in (split_dir / f"{split}.{side}").read_text().splitlines()]

    train = list(zip(read("train", "src"), read("train", "tgt")))
    corpora = cfg["data"]["wmt"]["corpora"]
    texts: dict[str, list[str]] = {}

    def put(name: str, pairs: list[tuple[str, str]]) -> None:
        texts[corpora[name]["src"]] = [s for s, _ in pairs]
        texts[corpora[name]["tgt"]] = [t for _, t in pairs]

    for i, name in enumerate(FULL):
        put(name, train[i * 100 : (i + 1) * 100])
    # what clean-corpus-n drops: an empty side, more than 80 words, a length ratio over 9
    europarl = corpora["europarl_v7"]
    texts[europarl["src"]] += ["", " ".join(["Long"] * 81) + ".", "Short."]
    texts[europarl["tgt"]] += ["Vide.", "Court.", " ".join(["Longue"] * 12) + "."]
    selected = [n for n in cfg["data"]["wmt"]["splits"]["train_selected"]]
    for i, name in enumerate(selected):
        put(name, train[500 + i * 100 : 600 + i * 100])
    texts[corpora[selected[0]]["src"]][0] = "Zeta only appears in the selection."  # which split trained word30k
    valid = list(zip(read("valid", "src"), read("valid", "tgt")))
    put("newstest2012", valid[:20])
    put("newstest2013", valid[20:])
    put("newstest2014", list(zip(read("test", "src"), read("test", "tgt"))))
    lines = {name: len(texts[c["src"]]) for name, c in corpora.items()}
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
    root = tmp_path_factory.mktemp("wmt")
    cfg = yaml.safe_load((REPO / "config/wmt14_en_fr.yaml").read_text())
    texts, lines = corpus_texts(root, cfg)
    archives = build_archives(root / "published", texts)
    with ArchiveServer() as server:
        config = root / "config" / "wmt14_en_fr.yaml"
        config.parent.mkdir()
        config.write_text(yaml.safe_dump(miniature_config(cfg, server, archives, lines), sort_keys=False))
        workdir = root / "work"
        command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-d", str(workdir)]
        out = subprocess.run(
            command + ["--cores", "2", "--configfile", str(config)], capture_output=True, text=True, timeout=1200
        )
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
        again = subprocess.run(command + ["-n", "--configfile", str(config)], capture_output=True, text=True)
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
    assert train["pairs_in"] == sum(lines[c] for c in FULL) == 503
    steps = {s["filter"]: s["before"] - s["after"] for s in train["filters"]}
    assert steps == {"utf8": 0, "empty": 1, "length": 1, "ratio": 1}
    assert train["pairs_out"] == len((data / "train.src").read_text().splitlines()) == 500
    test = json.loads((data / "test.manifest.json").read_text())
    assert test["filters"] == [] and test["pairs_out"] == lines["newstest2014"] == 20  # every test sentence kept
    valid = json.loads((data / "valid.manifest.json").read_text())
    assert [c["corpus"] for c in valid["corpora"]] == ["newstest2012", "newstest2013"] and valid["pairs_out"] == 40
    assert (data / "test.src").read_text().splitlines()[0].endswith(".")  # SGML -> the raw sentence
    words = (finished_run["results"] / "tokenizer/word30k/src.model").read_text().splitlines()
    assert "Zeta" in words and "." in words  # trained on train_selected, Moses-tokenized


def test_every_model_is_scored_on_detokenized_text_and_tabled_by_length(finished_run):
    results = finished_run["results"]
    fr = MosesDetokenizer("fr")
    for model in ("rnnsearch50", "transformer_base"):
        bleu = json.loads((results / model / "bleu.json").read_text())
        assert bleu["n_sentences"] == 20 and bleu["signature"].startswith("nrefs:1") and 0 <= bleu["bleu"] <= 100
        hyps = (results / model / "hyp.txt").read_text().splitlines()
        assert len(hyps) == 20
        if model != "transformer_base":  # the Moses word path: plain text, a fixed point of detokenization
            assert all(fr.detokenize(h.split()) == h for h in hyps)
    assert {p.parent.name for p in results.glob("encoded/*/train.npz")} == {"word30k", "wordpiece32k"}
    with open(results / "tables/bleu_by_length.csv") as f:
        table = list(csv.DictReader(f))
    assert {r["model"] for r in table} == {"rnnsearch50", "transformer_base"}
    assert {int(r["bucket_hi"]) for r in table} == {10, 20, 30, 40}
