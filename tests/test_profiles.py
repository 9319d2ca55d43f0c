"""profiles/slurm and profiles/default as Snakemake itself reads them (no cluster needed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.profiles import ProfileConfigFileParser

from conftest import REPO


def _parse_slurm_profile(monkeypatch, **env) -> dict:
    for name in ("SBATCH_ACCOUNT", "SBATCH_PARTITION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with open(REPO / "profiles/slurm/config.yaml") as f:
        return dict(ProfileConfigFileParser().parse(f))


def test_account_and_partition_come_from_sbatch_variables_only(monkeypatch):
    bare = _parse_slurm_profile(monkeypatch)
    assert bare["executor"] == "slurm" and bare["slurm-status-command"] == "squeue"
    assert bare["slurm-requeue"] == "True" and bare["retries"] == "2"
    assert not any(r.startswith(("slurm_account", "slurm_partition")) for r in bare["default-resources"])
    mine = _parse_slurm_profile(monkeypatch, SBATCH_ACCOUNT="proj42", SBATCH_PARTITION="gpu-long")
    assert {"slurm_account=proj42", "slurm_partition=gpu-long"} <= set(mine["default-resources"])
    assert "mem_mb=4000" in mine["default-resources"] and "runtime=240" in mine["default-resources"]


def test_the_default_profile_holds_nothing_that_would_override_the_slurm_one():
    """Snakemake applies profiles/default as the workflow profile on top of --profile."""
    with open(REPO / "profiles/default/config.yaml") as f:
        default = dict(ProfileConfigFileParser().parse(f))
    with open(REPO / "profiles/slurm/config.yaml") as f:
        slurm = dict(ProfileConfigFileParser().parse(f))
    for key in set(default) & set(slurm):
        assert default[key] == slurm[key], key


@pytest.mark.slow
def test_both_profiles_apply_and_train_jobs_ask_for_their_model_resources(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH_", "SLURM_"))}
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
        + ["--profile", str(REPO / "profiles/slurm"), "-n", "--configfile", str(REPO / "config/test.yaml")],
        capture_output=True,
        text=True,
        env={**env, "SBATCH_ACCOUNT": "proj42"},
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert re.search(
        rf"Using profiles? {REPO / 'profiles/slurm'} and workflow specific profile \S*profiles/default", log
    )
    train = [block for block in log.split("\nrule ")[1:] if block.startswith("train:")]
    assert len(train) == 2
    for block in train:
        resources = re.search(r"resources: (.*)", block).group(1)
        assert "slurm_account=proj42" in resources and "gpu=0" in resources
        assert re.search(r"slurm_extra=--signal=TERM@\d+ --open-mode=append", resources)
    generate = next(block for block in log.split("\nrule ")[1:] if block.startswith("generate:"))
    assert "mem_mb=4000" in generate and "runtime=240" in generate  # the profile's default-resources


# conda itself cannot be installed from the package registries this project's machines reach (PyPI,
# Debian, npm). A dry run with --software-deployment-method conda asks conda only where it lives, its
# version and its channel priority: this stand-in answers those three and refuses anything else, so
# nothing is ever created; everything else is Snakemake and the profile as a user runs them.
STAND_IN_CONDA = """#!/bin/sh
case "$*" in
  "info --json") echo '{"conda_prefix": "PREFIX", "platform": "linux-64"}' ;;
  "--version") echo "conda 24.11.3" ;;
  "config --get channel_priority --json") echo '{"get": {"channel_priority": "strict"}}' ;;
  *) echo "stand-in conda refuses: $*" >&2; exit 1 ;;
esac
"""

# Inputs of the jobs below (a SLURM job starts when they exist).
UPSTREAM = [
    "data/train.src", "data/train.tgt", "data/valid.src", "data/valid.tgt", "data/test.src", "data/test.tgt",
    "tokenizer/spm/src.model", "tokenizer/spm/tgt.model", "encoded/spm/train.npz", "encoded/spm/valid.npz",
    "{model}/checkpoint.pt", "{model}/train_log.csv", "{model}/hyp.txt", "{model}/hyp_no_unk.txt", "{model}/attn.npz",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rule", "target", "model", "env"),
    [
        ("train", "checkpoint.pt", "rnnsearch10", "attnrepro-cuda.yaml"),  # resources.gpu 1
        ("translate", "hyp.txt", "rnnsearch10", "attnrepro-cuda.yaml"),
        ("score", "bleu.json", "rnnsearch10", "attnrepro.yaml"),  # asks for no GPU
        ("train", "checkpoint.pt", "rnnencdec20", "attnrepro.yaml"),  # resources.gpu 0
    ],
)
def test_slurm_jobs_that_ask_for_a_gpu_get_the_cuda_build_of_torch(tmp_path, rule, target, model, env):
    """One job planned as a SLURM job's own Snakemake plans it (--allowed-rules: the DAG holds that job alone)."""
    conda = tmp_path / "bin" / "conda"
    conda.parent.mkdir()
    conda.write_text(STAND_IN_CONDA.replace("PREFIX", str(tmp_path / "conda")))
    conda.chmod(0o755)
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["models"]["rnnsearch10"]["resources"] = {"gpu": 1}
    config = tmp_path / "gpu.yaml"
    config.write_text(yaml.safe_dump(raw))
    results = tmp_path / "results" / raw["dataset"]
    for name in UPSTREAM:
        path = results / name.format(model=model)
        if path.name != target:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    env_vars = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH_", "SLURM_"))}
    target_file = str((results / model / target).relative_to(tmp_path))
    command = [sys.executable, "-m", "snakemake", target_file, "--snakefile", str(REPO / "Snakefile")]
    command += ["--directory", str(tmp_path), "--profile", str(REPO / "profiles/slurm"), "-n"]
    command += ["--software-deployment-method", "conda", "--allowed-rules", rule, "--configfile", str(config)]
    path = f"{conda.parent}{os.pathsep}{os.environ['PATH']}"
    out = subprocess.run(command, capture_output=True, text=True, env={**env_vars, "PATH": path})
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert re.findall(r"^rule (\w+):", log, re.M) == [rule]
    assert {Path(p).name for p in re.findall(r"Conda environment (\S+) will be created", log)} == {env}
