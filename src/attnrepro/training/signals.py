"""Stopping on a signal: SIGTERM or SIGUSR1 (what SLURM sends before a time limit or a preemption), or
SIGINT (Ctrl-C), turns a flag on; the training loop writes a checkpoint at the end of the current update
and raises `Preempted`, which the `train` verb turns into `PREEMPTED_EXIT_CODE` (the same command resumes).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path


class Preempted(Exception):
    """SIGTERM/SIGUSR1/SIGINT arrived; the checkpoint of `step` is written."""

    def __init__(self, name: str, step: int, path: Path):
        super().__init__(f"{name}: stopped by a signal after step {step}; resume state in {path}")
        self.step = step


@contextlib.contextmanager
def stop_requests() -> Iterator[dict[str, bool]]:
    """{'requested': bool} that turns True on SIGTERM, SIGUSR1 or SIGINT while training runs."""
    flag = {"requested": False}
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield flag
        return

    # Ctrl-C reaches the trainer twice, from the terminal and from its launcher, and the second signal's
    # handler can run inside the first one (between any two bytecodes): list.pop() is one C call, so
    # exactly one handler takes the announcement.
    unannounced = [True]

    def handler(signum, frame):
        flag["requested"] = True
        try:
            unannounced.pop()
        except IndexError:
            return
        print(f"received {signal.Signals(signum).name}: checkpointing at the end of this update", flush=True)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)}
    try:
        yield flag
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
