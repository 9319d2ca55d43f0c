"""Extraction of the WMT archives, in their real layouts, into one plain-text line per sentence.

A corpus of `data.wmt.corpora` names two members of one downloaded archive (a .tgz or .tar):
plain text (`training/europarl-v7.fr-en.en`), gzip members inside the tar
(`giga-fren.release2.fixed.en.gz`, decompressed on the fly), or the fake-SGML test sets
(`test-full/newstest2014-fren-src.en.sgm`), whose `<seg>` lines are turned into text exactly
as sacreBLEU turns them (so our references are the ones `sacrebleu -t wmt14/full` scores
against). The archive is read once, as a stream; nothing is unpacked to disk but the two
outputs, which appear atomically. Line counts are checked against each other and against the
published count where the config gives one.
"""

from __future__ import annotations

import difflib
import gzip
import os
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from attnrepro.config import CorpusSpec

BLOCK = 1 << 20
SEG = re.compile(r"<seg.*?>(.*)</seg>.*?")


def sgm_segments(lines: Iterator[str]) -> Iterator[str]:
    """The text of every `<seg ...>...</seg>` line, whitespace collapsed (sacreBLEU's FakeSGMLDataset rule)."""
    for line in lines:
        if line.startswith("<seg "):
            yield re.sub(r"\s+", " ", SEG.sub(r"\1", line).strip())


def _decoded_lines(stream: IO[bytes], name: str) -> Iterator[str]:
    for lineno, line in enumerate(stream, 1):
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"{name}:{lineno}: not valid UTF-8 at byte {err.start} of the line") from None


def _member_name(name: str) -> str:
    return name[2:] if name.startswith("./") else name


def _write_member(member: IO[bytes], name: str, out: IO[bytes]) -> tuple[int, int]:
    """Copy one archive member to `out` as text lines; returns (lines, newlines in the member):
    they differ by one when the member's last line has no newline (`wc -l` counts newlines)."""
    stream: IO[bytes] = gzip.GzipFile(fileobj=member) if name.endswith(".gz") else member
    base = name[:-3] if name.endswith(".gz") else name
    if base.endswith(".sgm"):
        text = _decoded_lines(stream, name)  # lines end at "\n" only, as sacreBLEU reads them
        n = 0
        for segment in sgm_segments(text):
            out.write(segment.encode("utf-8") + b"\n")
            n += 1
        return n, n
    n, last = 0, b"\n"
    while block := stream.read(BLOCK):
        out.write(block)
        n += block.count(b"\n")
        last = block[-1:]
    if last != b"\n":  # a last line without its newline is still a line
        out.write(b"\n")
        return n + 1, n
    return n, n


def extract_corpus(archive: Path, name: str, spec: CorpusSpec, src_out: Path, tgt_out: Path) -> dict[str, int]:
    """Write the corpus's source and target members of `archive` to `src_out`/`tgt_out` (one pass)."""
    wanted = {spec.src: src_out, spec.tgt: tgt_out}
    counts: dict[str, int] = {}
    newlines: dict[str, int] = {}
    seen: list[str] = []
    tmp = {member: path.with_name(f".{path.name}.tmp") for member, path in wanted.items()}
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for info in tar:
                member = _member_name(info.name)
                seen.append(member)
                if member in wanted and info.isfile():
                    tmp[member].parent.mkdir(parents=True, exist_ok=True)
                    with tar.extractfile(info) as f, open(tmp[member], "wb") as out:
                        counts[member], newlines[member] = _write_member(f, member, out)
                    if len(counts) == len(wanted):
                        break
    except (tarfile.TarError, EOFError, OSError) as err:
        for path in tmp.values():
            path.unlink(missing_ok=True)
        raise ValueError(f"{archive}: cannot read it as a tar archive ({err})") from err
    for member in wanted:
        if member not in counts:
            for path in tmp.values():
                path.unlink(missing_ok=True)
            close = difflib.get_close_matches(member, seen, n=3, cutoff=0.5)
            hint = f"; similar members: {', '.join(close)}" if close else ""
            raise ValueError(f"{archive}: no member {member!r} (data.wmt.corpora.{name}){hint}")
    problems = []
    if counts[spec.src] != counts[spec.tgt]:
        problems.append(f"{spec.src} has {counts[spec.src]} lines but {spec.tgt} has {counts[spec.tgt]}")
    if spec.lines is not None and spec.lines not in (counts[spec.src], newlines[spec.src]):
        problems.append(
            f"{spec.src} has {counts[spec.src]} lines, the published count is {spec.lines} "
            f"(data.wmt.corpora.{name}.lines)"
        )
    if problems:
        for path in tmp.values():
            path.unlink(missing_ok=True)
        raise ValueError(f"{archive}: " + "; ".join(problems))
    for member, path in wanted.items():
        os.replace(tmp[member], path)
    return {"src_lines": counts[spec.src], "tgt_lines": counts[spec.tgt]}
