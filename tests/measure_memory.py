"""Peak resident memory of cleaning and of encoding a large synthetic parallel corpus.

    python tests/measure_memory.py PAIRS [WORKDIR] [PROCESSES]

Writes PAIRS pairs of raw text (lengths 1-100 words, a realistic mix of what the filters drop),
then runs `clean_split` and `encode_corpus` (word shortlist, in PROCESSES worker processes,
default 1) each in a fresh process and prints one JSON line: pairs, bytes of raw text, and each
phase's peak RSS (VmHWM) in MiB; with worker processes, that of the parent, which reads the
corpus and writes the ids (a worker holds one chunk at a time). Used by tests/test_clean.py
(memory must not grow with the corpus) and for the numbers in the notes.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

PHASE = r"""
import json, sys
from pathlib import Path
work = Path(sys.argv[2])
if sys.argv[1] == "clean":
    from attnrepro.config import CleanConfig
    from attnrepro.data.clean import RawCorpus, clean_split
    clean_split("train", [RawCorpus("big", work / "raw.src", work / "raw.tgt")], work / "train.src",
                work / "train.tgt", work / "train.manifest.json", CleanConfig())
else:
    import attnrepro.data.tokenize
    from attnrepro.data.tokenize import WordVocab, encode_corpus
    attnrepro.data.tokenize.CHUNK_LINES = int(sys.argv[3])
    vocab = WordVocab([*"<pad> <unk> <s> </s>".split(), *(f"w{i}" for i in range(30000))])
    encode_corpus(vocab, vocab, work / "train.src", work / "train.tgt", work / "train.npz", int(sys.argv[4]))
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        print(json.dumps({"peak_rss_mib": int(line.split()[1]) / 1024}))
"""


def write_corpus(work: Path, pairs: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(50000)]
    with open(work / "raw.src", "w") as src, open(work / "raw.tgt", "w") as tgt:
        for _ in range(pairs):
            n = rng.randint(1, 100)
            m = max(1, int(n * rng.uniform(0.8, 1.3)))
            src.write(" ".join(rng.choices(words, k=n)) + "\n")
            tgt.write(" ".join(rng.choices(words, k=m)) + "\n")
    return (work / "raw.src").stat().st_size + (work / "raw.tgt").stat().st_size


def peak_rss_mib(phase: str, work: Path, chunk_lines: int = 10_000, processes: int = 1) -> float:
    """Peak RSS of `phase` ("clean" or "encode") run in a fresh process on the corpus in `work`."""
    out = subprocess.run(
        [sys.executable, "-c", PHASE, phase, str(work), str(chunk_lines), str(processes)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])["peak_rss_mib"]


def measure(pairs: int, work: Path, chunk_lines: int = 10_000, processes: int = 1) -> dict:
    """`chunk_lines`: lines encoded between writes (attnrepro.data.tokenize.CHUNK_LINES)."""
    result = {"pairs": pairs, "raw_bytes": write_corpus(work, pairs), "processes": processes}
    for phase in ("clean", "encode"):
        result[f"{phase}_peak_rss_mib"] = peak_rss_mib(phase, work, chunk_lines, processes)
    result["pairs_kept"] = json.loads((work / "train.manifest.json").read_text())["pairs_out"]
    result["npz_bytes"] = (work / "train.npz").stat().st_size
    return result


if __name__ == "__main__":
    pairs = int(sys.argv[1])
    processes = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    if len(sys.argv) > 2:
        print(json.dumps(measure(pairs, Path(sys.argv[2]), processes=processes)))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(measure(pairs, Path(tmp), processes=processes)))
