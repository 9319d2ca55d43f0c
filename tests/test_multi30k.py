"""config/multi30k_en_de.yaml end to end through Snakemake on a slice of the real Multi30k files: the first 2 000
/ 200 / 200 lines of train / val / test_2016_flickr, gzipped into a mirror folder (data.wmt.mirror) with their
own sizes and checksums, nothing served over the network; the word-vocabulary RNNsearch and the sentencepiece
Transformer, small, a few hundred updates. What a real run must have: sacreBLEU signatures and intervals, the
Multi30k literature's lowercased tokenized BLEU beside the published systems, detokenised plain-text
hypotheses, UNK written as one token on the word path with its No UNK subset, and the 5-word BLEU-by-length
table."""

from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
import torch
import yaml
from archive_server import ArchiveServer
from sacremoses import MosesDetokenizer
from wmt_miniature import real_data

from attnrepro.data.batching import Corpus
from attnrepro.evaluation.no_unk import NO_UNK_BANNED
from attnrepro.evaluation.scoring import corpus_bleu, lc_tok_bleu

from conftest import REPO, snakemake

pytestmark = pytest.mark.slow

SLICE = {"train": 2000, "val": 200, "test_2016_flickr": 200}
SMALL_TRAIN = {"batch_tokens": 1000, "max_steps": 300, "valid_every": 100, "checkpoint_every": 100, "log_every": 50}


def _slice(published: Path, mirror: Path, spec: dict) -> None:
    """Write the first lines of one published file into the mirror, and pin the config to the slice."""
    name = Path(urlparse(spec["url"]).path).name
    lines = gzip.decompress((published / name).read_bytes()).decode("utf-8").splitlines(keepends=True)
    data = gzip.compress("".join(lines[: SLICE[name.rsplit(".", 2)[0]]]).encode("utf-8"), mtime=0)
    (mirror / name).write_bytes(data)
    spec.update(size=len(data), sha256=hashlib.sha256(data).hexdigest(), md5=hashlib.md5(data).hexdigest())


def _config(root: Path, server: ArchiveServer) -> Path:
    raw = yaml.safe_load((REPO / "config/multi30k_en_de.yaml").read_text())
    wmt, mirror = raw["data"]["wmt"], root / "mirror"
    mirror.mkdir()
    for spec in wmt["files"].values():
        _slice(real_data() / "multi30k", mirror, spec)
        spec["url"] = f"{server.url}{urlparse(spec['url']).path}"  # serves nothing: the mirror must answer
    wmt.update(mirror=str(mirror), retries=0)
    for corpus, lines in zip(wmt["corpora"].values(), SLICE.values(), strict=True):
        corpus["lines"] = lines
    raw["tokenizers"]["word10k"]["vocab_size"] = 800  # of ~2 900 English types in the slice: UNKs on both sides
    raw["tokenizers"]["spm8k"]["vocab_size"] = 1000
    models = raw["models"]
    raw["models"] = {
        "rnnsearch": {
            **models["rnnsearch"], "params": {"emb": 64, "hidden": 64, "align": 64, "maxout": 32, "init": "pytorch"},
        },
        "transformer": {
            **models["transformer"],
            "params": {"d_model": 64, "d_ff": 128, "heads": 2, "layers": 2, "dropout": 0.1, "share_embeddings": True},
        },
    }  # fmt: skip
    for model in raw["models"].values():
        model["train"] = {**model["train"], **SMALL_TRAIN}
    raw["models"]["transformer"]["train"].update(warmup_steps=100, average_last=2, lr=0.5)  # peak 6e-3 at d_model 64
    raw["search"] = {"beam": 4, "batch_size": 50}
    config = root / "config" / "multi30k_en_de.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    real_data()  # skips, naming the folder, where ../shared/data/real is absent
    root = tmp_path_factory.mktemp("multi30k")
    with ArchiveServer() as server:
        config = _config(root, server)
        out = snakemake(root / "work", config, "--cores", "2", timeout=1500)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
        assert server.log == []
    return root / "work/results/multi30k_en_de"


def test_each_model_learned_and_is_scored_with_signature_and_interval(finished_run):
    for model in ("rnnsearch", "transformer"):
        bleu = json.loads((finished_run / model / "bleu.json").read_text())
        assert bleu["n_sentences"] == 200
        assert bleu["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
        lo, hi = bleu["bleu_ci"]
        assert lo <= bleu["bleu"] <= hi and hi - lo > 0
        log = list(csv.DictReader(open(finished_run / model / "train_log.csv")))
        losses = [float(r["valid_loss"]) for r in log if r["valid_loss"]]
        assert len(losses) >= 2 and losses[-1] < losses[0]  # it learned something from real text


def test_bleu_json_and_table1_carry_the_multi30k_literature_s_scoring(finished_run):
    """bleu_lc_tok (the config's evaluate.bleu_lc_tok) with interval and signature, and Table 1 with the
    published text-only systems beside it."""
    references = (finished_run / "data/test.tgt").read_text(encoding="utf-8").splitlines()
    for model in ("rnnsearch", "transformer"):
        bleu = json.loads((finished_run / model / "bleu.json").read_text())
        hyps = (finished_run / model / "hyp.txt").read_text(encoding="utf-8").splitlines()
        assert bleu["bleu_lc_tok"] == round(lc_tok_bleu(hyps, references, "de")[0], 2)
        lo, hi = bleu["bleu_lc_tok_ci"]
        assert lo <= bleu["bleu_lc_tok"] <= hi and hi - lo > 0
        assert bleu["signature_lc_tok"].startswith("pretok:lc.norm.tok-de-moses-3a0631a-sacremoses-")
    table = {r["model"]: r for r in csv.DictReader(open(finished_run / "tables/table1.csv", encoding="utf-8"))}
    assert (table["transformer"]["published"], table["rnnsearch"]["published"]) == ("41.02", "≈ 36.5–38.0")
    assert (
        float(table["transformer"]["all_lc_tok"])
        == json.loads((finished_run / "transformer/bleu.json").read_text())["bleu_lc_tok"]
    )
    header = (finished_run / "tables/table1.md").read_text(encoding="utf-8").splitlines()[0]
    assert [c.strip() for c in header.split("|")][-4:-1] == ["published (lc. tok.)", "published by", "paper row"]


def test_hypotheses_are_detokenised_plain_text(finished_run):
    de = MosesDetokenizer("de")
    for model in ("rnnsearch", "transformer"):
        hyps = (finished_run / model / "hyp.txt").read_text(encoding="utf-8").splitlines()
        assert len(hyps) == 200 and any(hyps)
        text = "\n".join(hyps)
        assert "▁" not in text and "<unk>" not in text and "&apos;" not in text and "&quot;" not in text
        assert not re.search(r" [.,!?;:](?= |$)", text, flags=re.MULTILINE)  # no Moses-tokenized punctuation
        if model == "rnnsearch":
            assert all(de.detokenize(h.split()) == h for h in hyps)  # a fixed point of detokenisation


def test_the_word_path_writes_unk_as_one_token_and_scores_a_no_unk_subset(finished_run):
    hyps = (finished_run / "rnnsearch/hyp.txt").read_text(encoding="utf-8").split()
    bleu = json.loads((finished_run / "rnnsearch/bleu.json").read_text())
    no_unk = bleu["no_unk"]
    assert "UNK" in hyps  # 800 words of real German leave many unknown
    assert no_unk["applies"] and 0 < no_unk["n_sentences"] < 200
    assert no_unk["decoding"] == NO_UNK_BANNED  # the subset translated again with UNK banned
    subset = (finished_run / "rnnsearch/hyp_no_unk.txt").read_text(encoding="utf-8").splitlines()
    assert len(subset) == no_unk["n_sentences"] and "UNK" not in " ".join(subset).split()
    transformer = json.loads((finished_run / "transformer/bleu.json").read_text())
    assert not transformer["no_unk"]["applies"]  # sentencepiece spells every word


def test_bleu_by_length_uses_five_word_buckets_of_moses_words(finished_run):
    rows = list(csv.DictReader(open(finished_run / "tables/bleu_by_length.csv")))
    assert {r["model"] for r in rows} == {"rnnsearch", "transformer"}
    buckets = sorted({(int(r["bucket_lo"]), int(r["bucket_hi"])) for r in rows})
    assert all(lo % 5 == 0 and hi - lo == 5 for lo, hi in buckets) and len(buckets) >= 3  # (lo, hi] of 5 words
    assert sum(int(r["n_sentences"]) for r in rows if r["model"] == "rnnsearch") == 200
    unit = json.loads((finished_run / "rnnsearch/bleu.json").read_text())["length_unit"]
    assert unit == "Moses-tokenized source words (sacremoses -l en)"
    assert (finished_run / "figures/bleu_by_length.png").stat().st_size > 10_000


def load_benchmark(monkeypatch):
    spec = importlib.util.spec_from_file_location("vs_joeynmt", REPO / "benchmarks/vs_joeynmt.py")
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "vs_joeynmt", bench)  # its dataclasses look their module up there
    spec.loader.exec_module(bench)
    return bench


def test_the_joey_benchmark_trains_both_toolkits_to_a_plateau_and_scores_both_ways(finished_run, tmp_path, monkeypatch):
    """vs_joeynmt.py --plateau at a toy size (validation every 10 updates, patience 1, a 30-update cap): each
    toolkit stops by the rule or the cap, decodes with the weights of its own best validation, and the reported
    BLEU is sacreBLEU and lc.norm.tok BLEU of the detokenised output against the raw references. Joey NMT runs
    where its venv (.venv-joeynmt, made by the benchmark) exists; ours always."""
    bench = load_benchmark(monkeypatch)
    joey = REPO / ".venv-joeynmt"
    toolkits = ["attnrepro", *(["joeynmt"] if (joey / "bin" / "python").exists() else [])]
    out = tmp_path / "vs"
    args = ["--corpus", "multi30k", "--plateau", "--dag", str(finished_run), "--out", str(out), "--models", "rnn"]
    args += ["--toolkits", *toolkits, "--joey-venv", str(joey), "--rnn-updates", "30", "--valid-every", "10"]
    args += ["--log-every", "5", "--patience", "1", "--repeats", "1", "--threads", "1", "--test-lines", "20"]
    bench.main(args)
    rows = {r["toolkit"]: r for r in csv.DictReader(open(tmp_path / "vs.csv", encoding="utf-8"))}
    assert set(rows) == set(toolkits)
    references = (finished_run / "data/test.tgt").read_text(encoding="utf-8").splitlines()[:20]
    for toolkit, row in rows.items():
        updates, best = int(row["updates"]), int(row["best_step"])
        assert best in (10, 20, 30) and best <= updates <= 30
        if row["stop_reason"] == "plateau":  # patience 1: at the first validation without a 1 % gain
            assert updates - best in (0, 10)
        else:
            assert (row["stop_reason"], updates) == ("max_steps", 30)
        hyps = (out / "hyp" / f"{toolkit}_rnn.detok.txt").read_text(encoding="utf-8").splitlines()
        assert float(row["bleu"]) == round(corpus_bleu(hyps, references)[0], 2)
        assert float(row["bleu_lc_tok"]) == round(lc_tok_bleu(hyps, references, "de")[0], 2)
        assert float(row["train_wall_s"]) > 0 and float(row["train_tokens_per_s"]) > 0
    assert int(torch.load(out / "attnrepro/rnn/checkpoint.pt", weights_only=False)["step"]) == int(
        rows["attnrepro"]["best_step"]
    )  # the weights ours decoded: its lowest validation loss
    if "joeynmt" in rows:  # Joey's own choice: the checkpoint its best.ckpt points to
        assert (out / "joeynmt/rnn/best.ckpt").resolve().stem == rows["joeynmt"]["best_step"]
        assert "| lc. tok. BLEU ours - Joey |" in (tmp_path / "vs.md").read_text(encoding="utf-8")


def test_the_joey_benchmark_reads_the_pipeline_s_own_tokens(finished_run, tmp_path, monkeypatch):
    """benchmarks/vs_joeynmt.py --corpus multi30k writes whitespace tokens for both toolkits: read back
    through its vocabulary files they must be the ids the pipeline encoded, and its detokenisation must
    give back the raw references, or the comparison would be on another tokenisation than the table's."""
    bench = load_benchmark(monkeypatch)
    s = bench.settings_for("multi30k")
    settings = bench.prepare_multi30k(tmp_path, s, [], dag=finished_run)
    assert settings["languages"] == ["en", "de"] or settings["languages"] == ("en", "de")
    references = (finished_run / "data/test.tgt").read_text(encoding="utf-8").splitlines()
    for model, tokenizer in bench.MULTI30K_TOKENIZERS.items():
        paths = bench.paths_for(tmp_path, s, model)
        ours, pipeline = Corpus.load(paths.npz), Corpus.load(finished_run / "encoded" / tokenizer / "train.npz")
        for side in ("src", "tgt"):
            assert np.array_equal(getattr(ours, f"{side}_offsets"), getattr(pipeline, f"{side}_offsets"))
            assert np.array_equal(getattr(ours, f"{side}_ids"), getattr(pipeline, f"{side}_ids")), (model, side)
        tokens = (paths.data / "test.tgt").read_text(encoding="utf-8").splitlines()
        restored = [bench.detokenize(s, model, line, "de") for line in tokens]
        same = sum(r == ref for r, ref in zip(restored, references, strict=True)) / len(references)
        assert same >= {"rnn": 0.95, "transformer": 1.0}[model], (model, same)
    assert (tmp_path / "test.ref").read_text(encoding="utf-8").splitlines() == references
    assert bench.detokenize(s, "rnn", "Ein <unk> , der läuft .", "de") == "Ein UNK, der läuft."  # Joey's <unk>
    assert bench.detokenize(s, "transformer", "▁Ein ▁Hund ▁läuft .", "de") == "Ein Hund läuft."
