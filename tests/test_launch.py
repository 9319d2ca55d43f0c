"""The job launcher: commands without a shell, shell-safe sbatch options, and a preemption
that checkpoints, exits 75 and resumes to the same weights (the SLURM side: test_slurm.py)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from attnrepro.training.launch import PREEMPTED_EXIT_CODE, slurm_extra, verb_command
from attnrepro.training.loop import load_checkpoint

from conftest import rnnsearch10_config

HOSTILE = "x$(touch PWNED_SUBST)y;touch PWNED_SEMI`touch PWNED_TICK`"  # what a shell would execute


def test_one_gpu_runs_the_verb_itself_and_more_run_torchrun_per_gpu():
    assert verb_command(["train", "--model", "m"], 0) == [
        sys.executable,
        "-m",
        "attnrepro.cli",
        "train",
        "--model",
        "m",
    ]
    assert verb_command(["train"], 1) == [sys.executable, "-m", "attnrepro.cli", "train"]
    assert verb_command(["train", "--model", "m"], 4) == [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
        "-m", "attnrepro.cli", "train", "--model", "m",
    ]  # fmt: skip


def test_slurm_extra_reaches_sbatch_as_the_same_arguments_through_a_shell(tmp_path):
    """The plugin appends slurm_extra to an sbatch command run with shell=True: a real bash
    must hand every option over verbatim and execute nothing."""
    options = [f"--mail-user={HOSTILE}", "--mail-type=FAIL", "--comment-like=a b"]
    extra = slurm_extra(options, signal_s=600, runtime_min=120)
    out = subprocess.run(
        ["bash", "-c", f"printf '%s\\n' {extra}"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines() == ["--signal=TERM@600", "--open-mode=append", *options]
    assert list(tmp_path.iterdir()) == []  # nothing was touched


def test_the_signal_comes_at_most_a_quarter_of_the_time_limit_early():
    assert slurm_extra([], signal_s=600, runtime_min=11).split()[0] == "--signal=TERM@165"
    assert slurm_extra([], signal_s=600, runtime_min=2880).split()[0] == "--signal=TERM@600"


@pytest.mark.slow
def test_a_hostile_config_string_is_an_argument_to_torchrun_workers_not_a_command(tmp_path):
    """gpus=2 starts torchrun with two workers; they receive the string as a file name.

    torchrun stops the other worker as soon as one fails, so only the first error is sure to print."""
    config = tmp_path / f"{HOSTILE}.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "attnrepro.cli", "launch", "--gpus", "2", "--", "train", "--config", str(config)]
        + ["--model", "m", "--tokenizer-dir", "t", "--train", "a", "--valid", "b", "--out-dir", "o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "--nproc-per-node=2" in done.stdout
    assert config.name in done.stderr  # a worker named the file it could not read
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no PWNED_* file: nothing was executed


def _train_command(config: Path, corpus: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "attnrepro.cli", "launch", "--gpus", "1", "--", "train", "--config", str(config),
        "--model", "rnnsearch10", "--tokenizer-dir", str(corpus / "tokenizer"), "--train",
        str(corpus / "encoded/train.npz"), "--valid", str(corpus / "encoded/valid.npz"), "--no-progress",
        "--out-dir", str(out),
    ]  # fmt: skip


@pytest.mark.slow
def test_a_signal_to_the_launcher_checkpoints_exits_75_and_the_rerun_ends_with_the_same_weights(tiny_corpus, tmp_path):
    config = rnnsearch10_config(tmp_path, max_steps=120, checkpoint_every=40, valid_every=1000)
    straight = tmp_path / "straight"
    subprocess.run(_train_command(config, tiny_corpus, straight), check=True, capture_output=True, timeout=600)

    stopped = tmp_path / "stopped"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}  # not inside a SLURM job
    proc = subprocess.Popen(
        _train_command(config, tiny_corpus, stopped), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    deadline = time.monotonic() + 120
    while not (stopped / "resume/train_log.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the log appears with the first checkpoint (step 40): training is under way
    proc.send_signal(signal.SIGUSR1)  # to the launcher only: it must pass the stop on
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == PREEMPTED_EXIT_CODE, output
    assert "received SIGTERM" in output  # forwarded as SIGTERM (torchrun relays TERM, dies of USR1)
    assert "stopped by SIGUSR1" in output
    stopped_at = load_checkpoint(stopped / "resume/last.pt")["step"]
    assert 40 <= stopped_at < 120 and not (stopped / "checkpoint.pt").exists()

    rerun = subprocess.run(_train_command(config, tiny_corpus, stopped), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert f"from step {stopped_at}" in rerun.stdout
    a = load_checkpoint(straight / "checkpoint.pt")["model"]
    b = load_checkpoint(stopped / "checkpoint.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_without_a_requeueable_job_the_launcher_still_exits_75(tiny_corpus, tmp_path):
    """SLURM_JOB_ID of no job: scontrol does not know it (or is absent); the exit status stays 75."""
    config = rnnsearch10_config(tmp_path, max_steps=100000, checkpoint_every=10, valid_every=100000)
    env = {**os.environ, "SLURM_JOB_ID": "999999999"}
    proc = subprocess.Popen(
        _train_command(config, tiny_corpus, tmp_path / "out"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "out/resume/last.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = (s.decode() for s in proc.communicate(timeout=120))
    assert proc.returncode == PREEMPTED_EXIT_CODE, stderr
    assert "SLURM job 999999999 is unknown; not requeued" in stdout
    assert f"{shlex.quote(sys.executable)} -m attnrepro.cli train --config" in stdout  # one process for 1 GPU


def test_the_launcher_does_not_import_torch():
    """It waits beside the trainer for the whole job: with torch it held 226 MB RSS for nothing."""
    code = "import sys; from attnrepro import cli; from attnrepro.training import launch; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
