"""profiles/slurm and profiles/default as Snakemake itself reads them (no cluster needed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
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
