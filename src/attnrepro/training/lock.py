"""One writer per run folder: `attnrepro train` holds an exclusive lock on `{out}/train.lock` (flock) for as
long as it runs, and a second training into the same folder stops at once with one line naming the holder,
instead of resuming from a checkpoint the first is still writing (two runs into one folder interleaved their
log rows and checkpoints without a word: issue 45).

The lock is the kernel's: it goes with the process that holds it, `kill -9` included, so a lock file left
behind never blocks the next run. The file's text (pid, host, start time, model) is only what the refusal
names. flock is local to a machine: on a cluster, Snakemake's own lock and the job scheduler keep one job per
output (two machines sharing a folder over NFS are not covered).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from attnrepro.errors import DataError

LOCK_NAME = "train.lock"


@contextlib.contextmanager
def hold_folder(out_dir: Path, name: str) -> Iterator[Path]:
    """Hold `out_dir`'s lock for the block; a `DataError` naming the lock's holder when another process
    holds it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "a process that wrote nothing yet"
            raise DataError(f"{path}: another `attnrepro train` writes this folder ({holder}); wait for it to end, "
                            "or train into another --out-dir") from None  # fmt: skip
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, model {name}, since {started}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock
