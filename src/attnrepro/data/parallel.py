"""An ordered map over chunks of a corpus in worker processes, with a bounded number in flight.

`ordered_map(worker, chunks, processes)` yields `worker(chunk)` for each chunk, in order, and
equals `map(worker, chunks)` item for item whatever the number of processes: tokenisation and
encoding give byte-identical files on 1 or 64 cores. `worker` (a tokenizer wrapped in a picklable
callable) is sent once to each process, not with every chunk. At most `IN_FLIGHT` chunks per
process are read ahead (`Pool.imap` would read the whole corpus into its queue), so memory does
not grow with the corpus. Workers are forked from a fresh server process (multiprocessing's
"forkserver"), never from the parent, which may hold torch or other threads that `fork` would copy
in an undefined state; the server imports the `preload` modules once, so a worker starts in
milliseconds rather than importing them again. As with any such start method, a script that
calls this with processes > 1 runs its work under `if __name__ == "__main__":` (each worker
imports the main module; the `attnrepro` console script does this).
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from attnrepro.errors import AttnreproError

Chunk = TypeVar("Chunk")
Result = TypeVar("Result")

IN_FLIGHT = 2  # chunks per process submitted ahead: one being worked on, one waiting in the queue

# The worker of this process, installed once by the pool's initializer (each worker process's own state).
_installed: list[Callable[[Any], Any]] = []


def ordered_map(
    worker: Callable[[Chunk], Result], chunks: Iterable[Chunk], processes: int, preload: Sequence[str] = ()
) -> Iterator[Result]:
    """`map(worker, chunks)`, computed in `processes` processes (1: in this one)."""
    if processes <= 1:
        yield from map(worker, chunks)
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))  # applies when this process starts its server, once
    with ProcessPoolExecutor(processes, mp_context=context, initializer=_install, initargs=(worker,)) as pool:
        pending: deque[Future] = deque()
        try:
            chunk_iter = iter(chunks)
            while True:
                try:
                    chunk = next(chunk_iter)
                except StopIteration:
                    break
                except AttnreproError:
                    _raise_first_error(pending)  # a bad line before the reader's error is reported first
                    raise
                pending.append(pool.submit(_run_installed, chunk))
                if len(pending) >= IN_FLIGHT * processes:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:  # on an error or an early stop: no more chunks are started
                future.cancel()


def _raise_first_error(pending: deque[Future]) -> None:
    for future in pending:
        future.result()


def _install(worker: Callable[[Any], Any]) -> None:
    _installed.append(worker)


def _run_installed(chunk: Any) -> Any:
    return _installed[0](chunk)
