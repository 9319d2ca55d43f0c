"""The DAG on a real SLURM cluster through profiles/slurm (snakemake-executor-plugin-slurm).

`bash ci/slurm-up.sh` starts a one-node cluster with accounting and one fake GPU; `.ci/run`
does so and sets ATTNREPRO_REQUIRE_SLURM=1, under which a missing cluster fails these tests
instead of skipping them. Checks read the Snakemake log, the SLURM log files and
`scontrol show job` (MinJobAge keeps finished jobs there), never `sacct`.

The profile's own settings (profiles/slurm/config.yaml) are what a user gets; the tests add
only `--slurm-init-seconds-before-status-checks 5` (the default 40 s would triple the run)
and `--slurm-keep-successful-logs` (to read the logs of finished jobs).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from attnrepro.config import load_config
from attnrepro.training.estimate import estimate
from attnrepro.training.loop import load_checkpoint

from conftest import REPO

ACCOUNT = os.environ.get("ATTNREPRO_SLURM_ACCOUNT", "attnrepro")  # the account ci/slurm-up.sh creates
HOSTILE_MAIL_USER = "a$(touch PWNED_SUBST)b;touch PWNED_SEMI"
SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.")


def _slurm_problem() -> str | None:
    """Why the tests cannot use a SLURM cluster here, or None if they can."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no SLURM client (sinfo/sbatch) on PATH"
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
        assoc = subprocess.run(
            ["sacctmgr", "-n", "-P", "show", "assoc", f"user={getpass.getuser()}", "format=account"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"SLURM does not answer: {err}"
    if states.returncode != 0:
        return f"sinfo failed: {states.stderr.strip()}"
    if not {"idle", "mixed", "allocated"} & {s.strip().rstrip("*~#") for s in states.stdout.split()}:
        return f"no SLURM node is up (sinfo: {states.stdout.split()})"
    if ACCOUNT not in assoc.stdout.split():
        return f"user {getpass.getuser()} has no SLURM account {ACCOUNT!r} (sacctmgr: {assoc.stdout.split()})"
    return None


@pytest.fixture(scope="module")
def cluster() -> dict[str, str]:
    problem = _slurm_problem()
    if problem is not None:
        message = f"{problem}; start a test cluster with `bash ci/slurm-up.sh`"
        if os.environ.get("ATTNREPRO_REQUIRE_SLURM") == "1":
            pytest.fail(f"ATTNREPRO_REQUIRE_SLURM=1 but {message}")
        pytest.skip(message)
    partitions = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True).stdout.split()
    default = next((p.rstrip("*") for p in partitions if p.endswith("*")), partitions[0])
    return {"SBATCH_ACCOUNT": ACCOUNT, "SBATCH_PARTITION": default}


pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _config(path: Path, **extra_models) -> Path:
    """config/test.yaml with every model on one GPU, plus `extra_models` (name: train overrides)."""
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    for model in raw["models"].values():
        model["resources"] = {"gpu": 1, "mem_mb": 1000}
    raw["models"]["rnnsearch10"]["resources"]["slurm_extra"] = ["--mail-type=FAIL", f"--mail-user={HOSTILE_MAIL_USER}"]
    for name, train in extra_models.items():
        raw["models"][name] = {**raw["models"]["rnnsearch10"], "label": name}
        raw["models"][name]["train"] = {**raw["models"]["rnnsearch10"]["train"], **train}
        raw["models"][name]["resources"] = {"gpu": 1, "mem_mb": 1000}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _snakemake_command(workdir: Path, config: Path, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
        "--profile", str(REPO / "profiles/slurm"), "--configfile", str(config),
        "--slurm-init-seconds-before-status-checks", "5", "--slurm-keep-successful-logs", *args,
    ]  # fmt: skip


def _env(cluster: dict[str, str]) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}, **cluster}


def _submissions(log: str) -> dict[str, tuple[str, Path]]:
    """{'train/rnnsearch10': (slurm job id, SLURM log file)} from a Snakemake log."""
    found = {}
    for _, job_id, path in SUBMITTED.findall(log):
        parts = Path(path).parts  # .../slurm_logs/rule_{rule}/{wildcard values}/{job id}.log
        rule, *wildcards = parts[parts.index("slurm_logs") + 1 : -1]
        found["/".join([rule.removeprefix("rule_"), *wildcards])] = (job_id, Path(path))
    return found


def _job(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout


@contextlib.contextmanager
def _running_until_checkpoint(command: list[str], env: dict, out_dir: Path, log: Path):
    """Snakemake in the background, from the moment its training has written a first checkpoint."""
    with open(log, "w") as sink:
        proc = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while not (out_dir / "resume/last.pt").exists():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "training never wrote a checkpoint"
            time.sleep(0.2)
        yield proc
    finally:
        if proc.poll() is None:  # a failed test leaves no Snakemake (and its jobs) behind
            proc.terminate()
            proc.wait(timeout=120)


@pytest.fixture(scope="module")
def dag_run(cluster, tmp_path_factory) -> tuple[Path, Path, str]:
    """The whole DAG of config/test.yaml (models on the fake GPU) through profiles/slurm."""
    workdir = tmp_path_factory.mktemp("slurm")
    config = _config(workdir / "config.yaml")
    started = time.monotonic()
    command = _snakemake_command(workdir, config)
    out = subprocess.run(command, env=_env(cluster), capture_output=True, text=True, timeout=1800)
    print(f"the DAG through SLURM took {time.monotonic() - started:.0f} s")
    assert out.returncode == 0, out.stderr[-6000:]
    return workdir, config, out.stderr


def test_the_dag_completes_with_every_train_job_a_slurm_gpu_job(dag_run, cluster):
    workdir, config, log = dag_run
    results = workdir / "results/synthetic_test"
    models = list(yaml.safe_load(config.read_text())["models"])
    assert all((results / m / "bleu.json").exists() for m in models)
    jobs = _submissions(log)
    assert {key.split("/")[0] for key in jobs} == {"generate", "tokenizer", "encode", "train", "translate"}
    for model in models:
        job_id, slurm_log = jobs[f"train/{model}"]
        text = slurm_log.read_text()
        assert f"wildcards: model={model}" in text and "1 of 1 steps (100%) done" in text
        train_log = (results / f"logs/train_{model}.log").read_text()
        assert f"attnrepro launch: SLURM job {job_id}, GPUs 0" in train_log  # ran inside that job, on its GPU
        job = _job(job_id)
        assert "JobState=COMPLETED" in job and re.search(r"\bTRES=\S*gres/gpu=1", job)
        assert f"Account={cluster['SBATCH_ACCOUNT']}" in job and f"Partition={cluster['SBATCH_PARTITION']}" in job
        minutes = estimate(load_config(config), model).runtime_min  # the budget is the time limit
        assert f"TimeLimit={minutes // 60:02d}:{minutes % 60:02d}:00" in job
    assert not any(key.startswith(("score", "tables", "figure")) for key in jobs)  # localrules


def test_a_hostile_slurm_extra_reaches_sbatch_as_one_argument(dag_run):
    workdir, _, log = dag_run
    job = _job(_submissions(log)["train/rnnsearch10"][0])
    assert f"MailUser={HOSTILE_MAIL_USER} MailType=FAIL" in job
    assert not list(workdir.rglob("PWNED*")) and not list(REPO.glob("PWNED*"))


def test_a_training_job_signalled_before_its_time_limit_requeues_and_ends_with_unbroken_weights(
    dag_run, cluster, tmp_path
):
    """SIGTERM to the job's steps, as --signal=TERM@S does: the trainer checkpoints, the launcher
    requeues the same job id, and the rerun resumes to the weights of an uninterrupted run."""
    workdir, _, _ = dag_run
    model = "requeued"
    config = _config(tmp_path / "config.yaml", **{model: {"max_steps": 150, "checkpoint_every": 10}})
    results = workdir / "results/synthetic_test"
    target = f"results/synthetic_test/{model}/checkpoint.pt"
    log = tmp_path / "snakemake.log"
    command = _snakemake_command(workdir, config, target)
    with _running_until_checkpoint(command, _env(cluster), results / model, log) as proc:
        job_id, slurm_log = _submissions(log.read_text())[f"train/{model}"]
        subprocess.run(["scancel", "--signal=TERM", job_id], check=True)

        reference = tmp_path / "reference"  # the same training, never interrupted, outside SLURM
        subprocess.run(
            [sys.executable, "-m", "attnrepro.cli", "train", "--config", str(results / "config.yaml")]
            + ["--model", model, "--tokenizer-dir", str(results / "tokenizer/spm")]
            + ["--train", str(results / "encoded/spm/train.npz"), "--valid", str(results / "encoded/spm/valid.npz")]
            + ["--out-dir", str(reference), "--no-progress"],
            check=True,
            capture_output=True,
        )
        assert proc.wait(timeout=900) == 0, log.read_text()[-6000:]

    # Snakemake empties a job's log before it runs, so the train log is the requeued run's
    train_log = (results / f"logs/train_{model}.log").read_text()
    assert f"attnrepro launch: SLURM job {job_id}, GPUs 0" in train_log  # the same job id, run again
    stopped_at = int(re.search(rf"resuming {model} from step (\d+)", train_log).group(1))
    assert 10 <= stopped_at < 150
    assert slurm_log.read_text().count(f"wildcards: model={model}") >= 2  # both runs: appended, not truncated
    job = _job(job_id)
    assert re.search(r"\bRestarts=1\b", job) and "JobState=COMPLETED" in job  # requeued once, by the launcher
    a = load_checkpoint(reference / "checkpoint.pt")["model"]
    b = load_checkpoint(results / model / "checkpoint.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_cancelled_training_job_fails_the_run_and_a_rerun_completes(dag_run, cluster, tmp_path):
    workdir, _, _ = dag_run
    model = "cancelled"
    config = _config(tmp_path / "config.yaml", **{model: {"max_steps": 150, "checkpoint_every": 10}})
    results = workdir / "results/synthetic_test"
    target = f"results/synthetic_test/{model}/checkpoint.pt"
    log = tmp_path / "snakemake.log"
    command = _snakemake_command(workdir, config, target, "--retries", "0")
    with _running_until_checkpoint(command, _env(cluster), results / model, log) as proc:
        job_id, _ = _submissions(log.read_text())[f"train/{model}"]
        subprocess.run(["scancel", job_id], check=True)
        assert proc.wait(timeout=600) != 0
    failed = log.read_text()
    assert f"SLURM-job '{job_id}' failed, SLURM status is: 'CANCELLED'" in failed
    assert "Error in rule train" in failed and not (results / model / "checkpoint.pt").exists()
    assert "JobState=CANCELLED" in _job(job_id)  # SLURM would requeue it; the launcher must not
    launcher = (results / f"logs/train_{model}.log").read_text()
    assert re.search(rf"SLURM job {job_id} is (COMPLETING|CANCELLED); not requeued", launcher)

    rerun = subprocess.run(command, env=_env(cluster), capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-6000:]
    new_id, _ = _submissions(rerun.stderr)[f"train/{model}"]
    assert new_id != job_id
    train_log = (results / f"logs/train_{model}.log").read_text()
    assert re.search(rf"resuming {model} from step [1-9]\d*", train_log)  # from the checkpoint, not step 0
    assert load_checkpoint(results / model / "checkpoint.pt")["step"] == 150
