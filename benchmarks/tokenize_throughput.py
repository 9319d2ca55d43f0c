"""Throughput of data preparation in 1 and 2 (or more) worker processes: (a) counting a Moses word
vocabulary, (b) Moses word encoding, (c) sentencepiece encoding, on a synthetic corpus (the embedded
generator with n_train = --pairs) or a real sample repeated to --pairs lines.

    python benchmarks/tokenize_throughput.py [--pairs 1000000] [--text SRC TGT --langs en fr]
        [--processes 1 2] [--repeats 1] [--cores 32] [--work DIR]

Lines are source + target lines (a pair is two). Process counts are interleaved within each repeat
(1, 2, 1, 2, ...) so that a drift of the host's speed touches both; the table gives the median.
Each run's output is checked byte for byte against the first process count's.

On a shared host the wall-clock rates say how much CPU the runs were given more than how they
scale, so the CPU seconds of every process are measured too: the parent's, and the workers' (the
fork server is stopped and reaped after each run so that their time shows in RUSAGE_CHILDREN).
CPU efficiency = CPU seconds of 1 process / CPU seconds of all processes at N: the work that
splitting into chunks adds. The projection for WMT'14 En-Fr (Moses: the 12 M selected pairs of the
2014 models; sentencepiece: the 36 M pairs of the Transformer) on `--cores` cores assumes that
each core does the 1-process work per CPU second at that efficiency, and caps the rate at what
the parent alone (reading, writing, merging) can feed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from itertools import cycle, islice
from multiprocessing import forkserver
from pathlib import Path

from attnrepro.config import SyntheticDataConfig, TokenizerConfig
from attnrepro.data.synthetic import write_splits
from attnrepro.data.tokenize import MosesWordVocab, SentencePiece, WordVocab, count_words, encode_corpus

WMT14_EN_FR_LINES = {"moses vocabulary": 2 * 12_000_000, "moses encode": 2 * 12_000_000, "spm encode": 2 * 36_000_000}


def write_corpus(args: argparse.Namespace, work: Path) -> tuple[Path, Path]:
    src, tgt = work / "train.src", work / "train.tgt"
    if args.text is None:
        write_splits(SyntheticDataConfig(n_train=args.pairs, n_valid=1, test_per_bucket=1), work)
        return src, tgt
    for sample, out in zip(args.text, (src, tgt)):
        lines = Path(sample).read_bytes().splitlines(keepends=False)
        out.write_bytes(b"".join(line + b"\n" for line in islice(cycle(lines), args.pairs)))
    return src, tgt


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap_workers() -> None:
    """Stop the fork server and wait for it: its workers' CPU time then counts as ours (a private CPython method)."""
    time.sleep(0.5)  # the server reaps the workers of the pool just closed
    forkserver._forkserver._stop()


def timed(task, processes: int) -> dict[str, float]:
    load, wall, cpu, children = os.getloadavg()[0], time.perf_counter(), time.process_time(), children_cpu_s()
    output = task(processes)
    wall = time.perf_counter() - wall
    if processes > 1:
        reap_workers()
    return {
        "wall_s": wall,
        "parent_cpu_s": time.process_time() - cpu,
        "workers_cpu_s": children_cpu_s() - children,
        "load": (load + os.getloadavg()[0]) / 2,
        "output": output,
    }


def tasks(args: argparse.Namespace, work: Path, src: Path, tgt: Path) -> dict:
    langs = tuple(args.langs)
    counts = count_words([src, tgt], langs, max(args.processes))  # the vocabulary (b) encodes with
    moses = [MosesWordVocab(WordVocab.from_counts(c, 30000), lang) for c, lang in zip(counts, langs)]
    spm_cfg = TokenizerConfig(kind="spm", vocab_size=8000, shared=True, spm_sample_sentences=200_000)
    SentencePiece.train([src, tgt], work / "spm.model", spm_cfg, 8000, threads=max(args.processes))
    spm = SentencePiece(work / "spm.model")
    reap_workers()  # the workers that counted the vocabulary above are not those of the first timed run

    def encoded(tokenizers, name):
        def run(processes):
            out = work / f"{name}_{processes}.npz"
            encode_corpus(*tokenizers, src, tgt, out, processes)
            return out.read_bytes()

        return run

    return {
        "moses vocabulary": lambda processes: count_words([src, tgt], langs, processes),
        "moses encode": encoded(moses, "moses"),
        "spm encode": encoded((spm, spm), "spm"),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--text", nargs=2, metavar=("SRC", "TGT"), help="a real sample, repeated to --pairs lines")
    parser.add_argument("--langs", nargs=2, default=["en", "en"], help="Moses rules of the two sides")
    parser.add_argument("--processes", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--cores", type=int, default=32, help="cores of the node the projection is for")
    parser.add_argument("--work", help="folder for the corpus and outputs (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        src, tgt = write_corpus(args, work)
        lines = 2 * args.pairs
        source = " / ".join(args.text) if args.text else "synthetic"
        print(f"corpus: {args.pairs} pairs ({source}), written in {time.perf_counter() - started:.0f} s")
        print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start", flush=True)
        rows = []
        for name, task in tasks(args, work, src, tgt).items():
            runs = {p: [] for p in args.processes}
            for _ in range(args.repeats):
                for processes in args.processes:
                    runs[processes].append(timed(task, processes))
                    assert runs[processes][-1]["output"] == runs[args.processes[0]][0]["output"], "outputs differ"
            for processes, measured in runs.items():
                keys = ("wall_s", "parent_cpu_s", "workers_cpu_s", "load")
                median = {k: statistics.median(m[k] for m in measured) for k in keys}
                rows.append({"task": name, "processes": processes, "lines_per_s": lines / median["wall_s"], **median})
                print(format_row(rows[-1]), flush=True)
        print(projection(rows, args.cores))


def format_row(row: dict) -> str:
    return (
        f"{row['task']:<17} {row['processes']:>2} processes: {row['lines_per_s']:>9,.0f} lines/s "
        f"({row['wall_s']:.1f} s wall; CPU s: parent {row['parent_cpu_s']:.1f}, workers {row['workers_cpu_s']:.1f}; "
        f"load {row['load']:.1f})"
    )


def projection(rows: list[dict], cores: int) -> str:
    out = [f"\nWMT'14 En-Fr on {cores} cores (1-process rate per CPU second x cores x CPU efficiency, parent-capped):"]
    for task, lines in WMT14_EN_FR_LINES.items():
        measured = {r["processes"]: r for r in rows if r["task"] == task}
        one, most = measured[min(measured)], measured[max(measured)]
        one_cpu = one["parent_cpu_s"] + one["workers_cpu_s"]
        per_cpu_s = one["lines_per_s"] * one["wall_s"] / one_cpu
        efficiency = one_cpu / (most["parent_cpu_s"] + most["workers_cpu_s"])
        wall_efficiency = most["lines_per_s"] / (one["lines_per_s"] * most["processes"] / one["processes"])
        parent_bound = most["lines_per_s"] * most["wall_s"] / max(most["parent_cpu_s"], 1e-9)
        rate = min(per_cpu_s * cores * efficiency, parent_bound)
        out.append(
            f"{task:<17} {lines / 1e6:.0f} M lines: {per_cpu_s:,.0f} lines per CPU s, CPU efficiency "
            f"{efficiency:.2f} at {most['processes']} (wall {wall_efficiency:.2f}), parent bound "
            f"{parent_bound:,.0f} lines/s -> {rate:,.0f} lines/s, {lines / rate / 60:.0f} min "
            f"(one core: {lines / per_cpu_s / 3600:.1f} h)"
        )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
