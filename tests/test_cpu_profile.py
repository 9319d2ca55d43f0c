"""benchmarks/cpu_profile.py with --tiny: every model once, its update's time split into classes that add up."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPT = REPO / "benchmarks/cpu_profile.py"


def _module():
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("cpu_profile", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "op, cls",
    [("aten::mm", "matmul"), ("aten::addmm", "matmul"), ("aten::bmm", "matmul"), ("aten::tanh_backward", "elementwise"),
     ("aten::sigmoid", "elementwise"), ("aten::_log_softmax_backward_data", "softmax+loss"),
     ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention (SDPA)"), ("aten::mkldnn_rnn_layer",
     "recurrence (oneDNN)"), ("aten::copy_", "memory"), ("aten::cat", "memory"), ("aten::t", "memory"),
     ("aten::tanh", "elementwise"), ("aten::transpose", "memory"), ("aten::gru", "other ops"),
     ("aten::mmx_something", "other ops")],
)  # fmt: skip
def test_ops_are_put_in_their_class_by_name(op, cls):
    assert _module().op_class(op) == cls


def test_tiny_profile_of_two_models_adds_up(tmp_path):
    out = tmp_path / "cpu_profile.jsonl"
    command = [sys.executable, str(SCRIPT), "--tiny", "--updates", "2", "--warmup", "1", "--out", str(out),
               "--models", "rnnsearch50_seed1", "transformer_seed1", "rnnsearch50_seed2"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| model | update (ms) | GFLOP | GFLOP/s | of peak | matmul |" in done.stdout
    rows = {r["model"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"rnnsearch50_seed1", "transformer_seed1"}  # seed 2 is the same model: measured once
    for row in rows.values():
        share = row["share"]
        assert min(share.values()) >= 0 and sum(share.values()) == pytest.approx(1, abs=0.01), share
        assert share["matmul"] > 0 and share["optimizer"] > 0 and row["counted_gflop"] > 0
        assert row["of_peak"] == pytest.approx(row["gflop_per_s"] / row["peak_gflop_per_s"], rel=0.02, abs=1e-3)
        assert row["tiny"] is True and row["threads"] == 1 and row["cpu"]
    assert rows["transformer_seed1"]["share"]["attention (SDPA)"] > 0
    assert "attention (SDPA)" not in rows["rnnsearch50_seed1"]["share"]  # additive attention: matmuls and tanh
