"""The training loop: it learns, its schedule follows the papers, and resume is bit-exact."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from attnrepro.config import TrainConfig
from attnrepro.tokenize import load_tokenizer
from attnrepro.train import atomic_save, load_checkpoint, lr_at, train

from conftest import REPO


def _run(test_config, corpus: Path, out: Path, model: str = "rnnsearch10", **train_overrides):
    mc = test_config.model(model)
    mc = dataclasses.replace(mc, train=dataclasses.replace(mc.train, **train_overrides))
    vocab = [len(load_tokenizer(test_config.tokenizer, corpus / f"tokenizer/{s}.model")) for s in ("src", "tgt")]
    return train(mc, corpus / "encoded/train.npz", corpus / "encoded/valid.npz", *vocab, out, progress=False)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["model"]


def test_training_lowers_the_loss_and_logs_every_field(test_config, tiny_corpus, tmp_path):
    ckpt = _run(test_config, tiny_corpus, tmp_path / "run", max_steps=40, log_every=10, valid_every=20)
    log = (tmp_path / "run/train_log.csv").read_text().splitlines()
    assert log[0] == "step,epoch,loss,lr,tokens_per_s,nonpad_fraction,valid_loss,src_tokens,tgt_tokens"
    rows = [dict(zip(log[0].split(","), line.split(","))) for line in log[1:]]
    assert [int(r["step"]) for r in rows] == [10, 20, 30, 40]
    assert float(rows[-1]["loss"]) < float(rows[0]["loss"]) - 0.5
    assert rows[1]["valid_loss"] and rows[3]["valid_loss"] and not rows[0]["valid_loss"]
    assert all(float(r["nonpad_fraction"]) > 0.8 for r in rows)
    tgt_tokens = [int(r["tgt_tokens"]) for r in rows]
    assert tgt_tokens == sorted(tgt_tokens) and tgt_tokens[0] > 0  # cumulative
    assert load_checkpoint(ckpt)["step"] == 40


def test_resume_in_process_is_bit_identical(test_config, tiny_corpus, tmp_path):
    straight = _run(test_config, tiny_corpus, tmp_path / "a", max_steps=30, checkpoint_every=10)
    _run(test_config, tiny_corpus, tmp_path / "b", max_steps=17, checkpoint_every=10)  # stops at 17
    resumed = _run(test_config, tiny_corpus, tmp_path / "b", max_steps=30, checkpoint_every=10)
    a, b = _weights(straight), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    steps = [int(line.split(",")[0]) for line in (tmp_path / "b/train_log.csv").read_text().splitlines()[1:]]
    straight_steps = [int(line.split(",")[0]) for line in (tmp_path / "a/train_log.csv").read_text().splitlines()[1:]]
    assert steps == sorted(straight_steps + [17])  # the first run also logged its last step, 17


def test_resume_after_sigkill_is_bit_identical(test_config, tiny_corpus, tmp_path):
    """Kill a real training process after its first checkpoint; the rerun ends with the same weights."""
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["models"]["rnnsearch10"]["train"].update(max_steps=400, checkpoint_every=5, valid_every=1000)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    command = [
        sys.executable, "-m", "attnrepro.cli", "train", "--config", str(config), "--model", "rnnsearch10",
        "--tokenizer-dir", str(tiny_corpus / "tokenizer"), "--train", str(tiny_corpus / "encoded/train.npz"),
        "--valid", str(tiny_corpus / "encoded/valid.npz"), "--no-progress",
    ]  # fmt: skip
    subprocess.run(command + ["--out-dir", str(tmp_path / "straight")], check=True, capture_output=True)

    killed = tmp_path / "killed"
    proc = subprocess.Popen(command + ["--out-dir", str(killed)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not (killed / "resume/last.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    interrupted_at = load_checkpoint(killed / "resume/last.pt")["step"]
    assert 0 < interrupted_at < 400, "the process was not interrupted mid-run"
    assert not (killed / "checkpoint.pt").exists()

    rerun = subprocess.run(command + ["--out-dir", str(killed)], check=True, capture_output=True, text=True)
    assert f"from step {interrupted_at}" in rerun.stdout
    a, b = _weights(tmp_path / "straight/checkpoint.pt"), _weights(killed / "checkpoint.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_checkpoint_write_is_atomic_and_bad_files_are_named(tmp_path):
    path = tmp_path / "ckpt.pt"
    atomic_save({"x": torch.ones(2)}, path)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temp file left behind
    path.write_bytes(path.read_bytes()[:20])  # truncated
    with pytest.raises(ValueError, match="ckpt.pt"):
        load_checkpoint(path)


def test_nonfinite_loss_stops_training(test_config, tiny_corpus, tmp_path):
    # An infinite learning rate ruins the weights in update 1: the loss of step 2 is not finite.
    with pytest.raises(FloatingPointError, match="at step 2"):
        _run(test_config, tiny_corpus, tmp_path / "nan", max_steps=5, lr=float("inf"), clip_norm=0.0)
    assert not (tmp_path / "nan/checkpoint.pt").exists()


def test_inverse_sqrt_schedule_is_vaswani_eq_3():
    tc = TrainConfig(schedule="inverse_sqrt", warmup_steps=4000, lr=1.0)
    for step in (1, 4000, 16000):
        assert lr_at(tc, step, 512) == pytest.approx(512**-0.5 * min(step**-0.5, step * 4000**-1.5))
    assert lr_at(tc, 4000, 512) == pytest.approx(512**-0.5 / 4000**0.5)
    assert lr_at(TrainConfig(lr=0.3), 10) == 0.3
