"""benchmarks/gpu_train.py on the CPU with --tiny: what it measures, and that its `measured` entry prices a model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attnrepro.config import from_dict
from attnrepro.training.estimate import estimate

from conftest import REPO


def _benchmark(tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "gpu_train.jsonl"
    command = [sys.executable, str(REPO / "benchmarks/gpu_train.py"), "--device", "cpu", "--tiny", "--out", str(out)]
    done = subprocess.run(command + list(args), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| model | variant | tokens/s |" in done.stdout  # the summary table
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_every_variant_that_applies_is_measured_once_per_distinct_model(tmp_path):
    models = ["rnnsearch50", "seq2seq", "transformer_base"]
    variants = ["fp32", "bf16+chunked", "fp32+explicit", "fp32+b25000"]
    results = _benchmark(tmp_path, "--models", *models, "--variants", *variants)
    measured = {(r["config"], r["model"], r["variant"]) for r in results}
    assert measured == {
        ("wmt14_en_fr", "rnnsearch50", "fp32"),  # En-De's RNNsearch-50 is the same model and batch: once
        ("wmt14_en_fr", "seq2seq", "fp32"),
        ("wmt14_en_fr", "transformer_base", "fp32"),
        ("wmt14_en_de", "transformer_base", "fp32"),  # 37 000 pieces, not 32 000
        ("wmt14_en_fr", "transformer_base", "bf16+chunked"),  # chunked and explicit: the Transformer's only
        ("wmt14_en_de", "transformer_base", "bf16+chunked"),
        ("wmt14_en_fr", "transformer_base", "fp32+explicit"),
        ("wmt14_en_de", "transformer_base", "fp32+explicit"),
        ("wmt14_en_fr", "transformer_base", "fp32+b25000"),  # 25 000-token batches: 2 to an update, not 4
        ("wmt14_en_de", "transformer_base", "fp32+b25000"),
    }
    for r in results:
        assert "error" not in r, r
        batches = {"rnnsearch": 1, "seq2seq": 1}.get(r["arch"], 2 if "b25000" in r["variant"] else 4)  # of 50 000
        assert r["tokens_per_update"] == batches * r["sentences"] * 2 * r["length"]
        assert r["tokens_per_s"] == pytest.approx(r["tokens_per_update"] / r["update_s"], rel=1e-3)
        assert r["tgt_tokens_per_s"] == pytest.approx(r["tokens_per_s"] / 2, abs=1)
        assert r["counted_flops_per_update"] > 0 and r["saved_gb"] >= 0
        assert r["mfu_counted"] is None and r["peak_memory_gb"] is None  # a CPU has no stated peak
    by_variant = {(r["config"], r["model"], r["variant"]): r for r in results}
    rnn = by_variant["wmt14_en_fr", "rnnsearch50", "fp32"]
    assert (rnn["length"], rnn["sentences"]) == (25, 3)  # 160-token tiny batches of the -50 models' 25 + 25
    chunked = by_variant["wmt14_en_de", "transformer_base", "bf16+chunked"]["measured"]["train"]
    assert chunked == {"precision": "bf16", "compile": False, "step_compile": "none", "loss_chunk_tokens": 4096,
                       "batch_tokens": 12500}  # fmt: skip


def test_its_measured_entry_is_a_resources_key_that_estimate_prices_from(tmp_path):
    (result,) = _benchmark(tmp_path, "--models", "rnnsearch50", "--variants", "bf16", "--configs",
                           str(REPO / "config/wmt14_en_fr.yaml"))  # fmt: skip
    raw = yaml.safe_load((REPO / "config/wmt14_en_fr.yaml").read_text())
    raw["models"]["rnnsearch50"]["resources"] = {"measured": result["measured"]}
    b = estimate(from_dict(raw), "rnnsearch50")
    assert b.priced_from.startswith("measured") and b.priced_from.endswith("on cpu")
    assert b.gpu_hours == pytest.approx(300000 * 4000 / result["tokens_per_s"] / 3600)
    assert b.notes == ("train.precision: measured with 'bf16', configured 'fp32'",)


@pytest.mark.slow  # compiles the steps (about a minute on a cold cache)
def test_graphed_steps_run_fused_on_a_cpu_and_give_the_eager_loss(tmp_path):
    results = _benchmark(tmp_path, "--models", "rnnencdec50", "--variants", "fp32", "fp32+graphed", "--configs",
                         str(REPO / "config/wmt14_en_fr.yaml"))  # fmt: skip
    eager, graphed = results
    assert graphed["measured"]["train"]["step_compile"] == "graphed" and "error" not in graphed
    assert graphed["first_loss"] == pytest.approx(eager["first_loss"], rel=1e-6)  # the same weights and batches
