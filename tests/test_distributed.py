"""Data parallelism: ranks from torchrun and srun, and real 2-process gloo runs through torchrun
(one update on 2 ranks equals one update on 1 rank over the same global batch; a SIGTERM to
torchrun checkpoints both ranks and the rerun continues bit-identically)."""

from __future__ import annotations

import csv
import dataclasses
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from attnrepro.data.tokenize import load_tokenizer
from attnrepro.training.distributed import Ranks, first_host, from_environment
from attnrepro.training.loop import load_checkpoint, train

from conftest import REPO


def test_ranks_come_from_torchrun_or_srun():
    assert from_environment({}) == Ranks(0, 1, 0)
    torchrun = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "0"}
    assert from_environment(torchrun) == Ranks(3, 8, 1, "env://")  # torchrun wins inside a SLURM step
    srun = {"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_JOB_ID": "123456",
            "SLURM_STEP_NODELIST": "gpu[07-08]"}  # fmt: skip
    assert from_environment(srun) == Ranks(2, 4, 0, "tcp://gpu07:23456")
    assert from_environment({**srun, "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500"}).init_method == (
        "tcp://10.0.0.5:29500"
    )
    assert from_environment({"SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"}) == Ranks()  # a one-task step


@pytest.mark.parametrize(
    ("nodelist", "host"),
    [("node1", "node1"), ("gpu[07-09,12],cpu1", "gpu07"), ("a[3,5]", "a3"), ("x-1,x-2", "x-1")],
)
def test_first_host_of_a_slurm_nodelist(nodelist, host):
    assert first_host(nodelist) == host


def _config(tmp_path: Path, **train_keys) -> Path:
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["models"] = {"rnnsearch10": raw["models"]["rnnsearch10"]}
    raw["models"]["rnnsearch10"]["train"].update(update_tokens=800, **train_keys)  # 2 batches of 400 per update
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _torchrun(config: Path, corpus: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
        "-m", "attnrepro.cli", "train", "--config", str(config), "--model", "rnnsearch10",
        "--tokenizer-dir", str(corpus / "tokenizer"), "--train", str(corpus / "encoded/train.npz"),
        "--valid", str(corpus / "encoded/valid.npz"), "--no-progress", "--out-dir", str(out),
    ]  # fmt: skip


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in csv.DictReader(f)]


@pytest.mark.slow
@pytest.mark.parametrize("loss_norm", ["token", "sentence"])
def test_one_update_on_two_gloo_ranks_equals_one_update_on_one_rank(test_config, tiny_corpus, tmp_path, loss_norm):
    """Each rank divides its batches' summed token losses by the whole update's tokens or sentences."""
    config = _config(tmp_path, max_steps=1, loss_norm=loss_norm)
    subprocess.run(_torchrun(config, tiny_corpus, tmp_path / "two"), check=True, capture_output=True)

    # One process, 2 micro-batches accumulated: the same global batch of 2 batches.
    mc = test_config.model("rnnsearch10")
    one_rank = dataclasses.replace(mc.train, max_steps=1, update_tokens=800, loss_norm=loss_norm)
    mc = dataclasses.replace(mc, train=one_rank)
    vocab = [len(load_tokenizer(test_config.tokenizer, tiny_corpus / f"tokenizer/{s}.model")) for s in ("src", "tgt")]
    one = train(mc, tiny_corpus / "encoded/train.npz", tiny_corpus / "encoded/valid.npz", *vocab, tmp_path / "one",
                progress=False)  # fmt: skip

    before = _initial_weights(mc, vocab)
    a, b = load_checkpoint(one)["model"], load_checkpoint(tmp_path / "two/checkpoint.pt")["model"]
    moved = max(float((a[k] - before[k]).abs().max()) for k in a)
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    print(f"largest weight change {moved:.3g}; largest 1-rank vs 2-rank difference {worst:.3g}")
    assert moved > 1e-3  # the update did something
    assert worst <= 1e-6  # float tolerance (observed: 0.0, bit-identical)
    assert _rows(tmp_path / "one/train_log.csv") == _rows(tmp_path / "two/train_log.csv")  # same loss, same tokens
    written = sorted(p.name for p in (tmp_path / "two").iterdir())
    assert written == ["checkpoint.pt", "filter.json", "resume", "tb", "train.lock", "train_log.csv"]  # rank 0's
    assert len(list((tmp_path / "two/tb").iterdir())) == 1  # rank 0 alone logs
    rngs = load_checkpoint(tmp_path / "two/resume/last.pt")["rng"]
    assert len(rngs) == 2 and not torch.equal(rngs[0]["torch"], rngs[1]["torch"])  # each rank's own generator


def _initial_weights(mc, vocab) -> dict[str, torch.Tensor]:
    from attnrepro.models import build_model
    from attnrepro.training.loop import seed_everything

    seed_everything(mc.train.seed, 0)  # rank 0's, which DDP copies to every rank
    return build_model(mc.arch, *vocab, mc.params).state_dict()


@pytest.mark.slow
def test_sigterm_to_torchrun_checkpoints_both_ranks_and_the_rerun_is_bit_identical(tiny_corpus, tmp_path):
    config = _config(tmp_path, max_steps=100, checkpoint_every=1000, log_every=10, valid_every=1000)
    subprocess.run(_torchrun(config, tiny_corpus, tmp_path / "straight"), check=True, capture_output=True)

    stopped = tmp_path / "stopped"
    proc = subprocess.Popen(_torchrun(config, tiny_corpus, stopped), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    for line in proc.stdout:
        if "parameters" in line:  # rank 0 is about to run step 1
            proc.send_signal(signal.SIGTERM)  # torchrun relays it to both ranks
            break
    output = proc.stdout.read()
    proc.wait(timeout=120)
    assert proc.returncode != 0  # torchrun reports its own death by signal, not the ranks' 75
    assert "stopped by a signal after step" in output
    at = load_checkpoint(stopped / "resume/last.pt")["step"]
    assert 0 < at < 100 and not (stopped / "checkpoint.pt").exists()

    rerun = subprocess.run(_torchrun(config, tiny_corpus, stopped), capture_output=True, text=True, check=True)
    assert f"resuming rnnsearch10 from step {at} " in rerun.stdout
    a, b = load_checkpoint(tmp_path / "straight/checkpoint.pt")["model"], load_checkpoint(stopped / "checkpoint.pt")
    assert all(torch.equal(a[k], b["model"][k]) for k in a)
    assert _rows(stopped / "train_log.csv") == _rows(tmp_path / "straight/train_log.csv")
