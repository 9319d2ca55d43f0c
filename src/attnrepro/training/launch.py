"""Run one `attnrepro` verb as a cluster job step: on 1 GPU (or the CPU) as one process, on
N > 1 GPUs through torchrun, and turn a preemption into a SLURM requeue.

Commands are argument lists handed to `subprocess` without a shell, so no string from a
config (a path, a model name) is ever parsed by a shell. `slurm_extra` is the one string
that does pass through a shell (snakemake-executor-plugin-slurm appends it to an `sbatch`
command line run with `shell=True`), so it is built with `shlex.join`.

Preemption. snakemake-executor-plugin-slurm 2.8.0 runs a job as
`/bin/sh` batch script -> `snakemake` (jobstep) -> `srun` -> `snakemake` -> this launcher ->
the trainer. SLURM's `--signal=B:USR1@T` reaches only the batch shell, which has no trap and
dies (job FAILED, exit 0:10); `--signal=USR1@T` reaches every process of the step, and the
in-job Snakemake dies of it (Python's default action). SIGTERM is the one signal the chain
survives: Snakemake finishes its running job on it. So train jobs ask for
`--signal=TERM@T`; the trainer checkpoints and exits with `PREEMPTED_EXIT_CODE`, and this
launcher then runs `scontrol requeue $SLURM_JOB_ID` if the job is still RUNNING: the same job
id goes back to the queue, its batch script reruns the same Snakemake job, and training
resumes from `resume/last.pt`. `scancel` also sends SIGTERM first, but leaves the job
CANCELLED, which SLURM would requeue too; that job is not requeued (Snakemake reports it).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence

from attnrepro.errors import AttnreproError, ConfigError

# No torch here: the launcher waits beside its trainer for the whole job (it was 226 MB RSS with torch).
PREEMPTED_EXIT_CODE = 75  # EX_TEMPFAIL (sysexits.h): checkpoint written, run the same command again
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)  # SIGINT: Ctrl-C, a stop like SIGTERM


def verb_command(verb_args: Sequence[str], gpus: int) -> list[str]:
    """The argument list that runs `attnrepro VERB_ARGS...` on `gpus` GPUs of this node.

    One process for gpus <= 1; torchrun with one process per GPU otherwise (it exports
    RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous that attnrepro.training.distributed reads).
    """
    if not verb_args:
        raise AttnreproError("launch: no attnrepro verb to run (expected e.g. `-- train --config ...`)")
    module = [sys.executable, "-m", "attnrepro.cli"]
    if gpus <= 1:
        return [*module, *verb_args]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}"]
    return [*torchrun, "-m", "attnrepro.cli", *verb_args]


def slurm_extra(options: Sequence[str], signal_s: int, runtime_min: int) -> str:
    """sbatch options of a training job, as one shell-safe string for the `slurm_extra` resource.

    `--signal=TERM@S`: SIGTERM to the job's steps S seconds before its time limit (see the
    module docstring for why not USR1), S = signal_s but at most a quarter of the limit, so a
    short job is not stopped right after it starts; `--open-mode=append`: a requeued job
    appends to its SLURM log instead of truncating it, so the log shows every run.
    """
    for option in options:
        if not option.startswith("-"):
            raise ConfigError(f"slurm_extra: {option!r} is not an sbatch option (one option per list item)")
    lead_s = max(1, min(signal_s, runtime_min * 60 // 4))
    return shlex.join([f"--signal=TERM@{lead_s}", "--open-mode=append", *options])


def job_state(job_id: str) -> str | None:
    """SLURM's state of job `job_id` (RUNNING, CANCELLED, TIMEOUT, ...), None if scontrol cannot tell."""
    try:
        shown = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"\bJobState=(\w+)", shown.stdout)
    return match.group(1) if shown.returncode == 0 and match else None


def requeue(job_id: str) -> bool:
    """Put SLURM job `job_id` back in the queue (its batch script reruns); False if SLURM refused."""
    try:
        done = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        print(f"attnrepro launch: scontrol requeue {job_id} failed: {err}", file=sys.stderr, flush=True)
        return False
    if done.returncode != 0:
        print(f"attnrepro launch: scontrol requeue {job_id}: {done.stderr.strip()}", file=sys.stderr, flush=True)
        return False
    print(f"attnrepro launch: requeued SLURM job {job_id}; it resumes from its checkpoint", flush=True)
    return True


def run(command: Sequence[str], env: Mapping[str, str], allow_requeue: bool = True) -> int:
    """Run `command`, forwarding SIGTERM/SIGUSR1/SIGINT to it as SIGTERM; returns its exit status.

    A stop requested by a signal (the child exits with PREEMPTED_EXIT_CODE, or dies after we
    received one) returns PREEMPTED_EXIT_CODE, after requeueing the SLURM job when `env` has
    SLURM_JOB_ID and `allow_requeue` and the job is still RUNNING: a job that `scancel` stopped
    (CANCELLED) or that ran out of time (TIMEOUT) is not brought back, since Snakemake has
    seen it fail; without SLURM, rerunning the command resumes.
    """
    received: list[int] = []
    children: list[subprocess.Popen] = []

    def forward(signum, frame):  # torchrun relays SIGTERM to its workers; USR1 would kill it
        received.append(signum)
        if children and children[0].poll() is None:
            children[0].send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        children.append(subprocess.Popen(list(command), env=dict(env)))
        if received:  # a signal that came before the child existed
            children[0].send_signal(signal.SIGTERM)
        status = children[0].wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if status == PREEMPTED_EXIT_CODE or (received and status != 0):
        names = ", ".join(dict.fromkeys(signal.Signals(s).name for s in received)) or "a signal"  # once each
        print(f"attnrepro launch: stopped by {names} (exit status {status}); checkpoint kept", flush=True)
        job_id = env.get("SLURM_JOB_ID")
        if allow_requeue and job_id:
            state = job_state(job_id)
            if state == "RUNNING":  # the signal came before the time limit (or from a preemption)
                requeue(job_id)
            else:
                print(f"attnrepro launch: SLURM job {job_id} is {state or 'unknown'}; not requeued", flush=True)
        return PREEMPTED_EXIT_CODE
    return status if status >= 0 else 128 - status  # killed by signal N: the shell's 128 + N


def pass_interrupts_to_jobs() -> None:
    """Make SIGINT to Snakemake alone stop its running jobs as Ctrl-C in a terminal does (which signals the
    whole process group): on SIGINT, Snakemake's local executor starts nothing new but waits for the jobs it
    started, so a training job ran to its end and was still counted as not done. The handler sends SIGINT to
    every process Snakemake started (training checkpoints and exits 75, other verbs stop), then raises
    KeyboardInterrupt, as Python's own handler does, for Snakemake to stop as on Ctrl-C. Called by the
    Snakefile; only the main thread can set a handler (Snakemake parses there)."""
    import psutil  # a dependency of Snakemake, which is where this runs

    def interrupt(signum, frame):
        for process in psutil.Process().children(recursive=True):
            try:
                process.send_signal(signal.SIGINT)
            except psutil.Error:  # it ended meanwhile
                pass
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, interrupt)


def main(verb_args: Sequence[str], gpus: int, allow_requeue: bool) -> int:
    command = verb_command(verb_args, gpus)
    if "SLURM_JOB_ID" in os.environ:  # which job ran this (a requeued job keeps its id)
        devices = os.environ.get("CUDA_VISIBLE_DEVICES", "none")
        print(f"attnrepro launch: SLURM job {os.environ['SLURM_JOB_ID']}, GPUs {devices}", flush=True)
    print(f"attnrepro launch: {shlex.join(command)}", flush=True)
    return run(command, os.environ, allow_requeue)
