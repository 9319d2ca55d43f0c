"""Extraction of the downloaded corpora, in their published layouts, into one plain-text line per sentence.

A corpus of `data.wmt.corpora` takes each side from a downloaded file: a member of an archive
(a .tgz or .tar holding both sides, as statmt.org packs WMT) or the file itself (one file per
side, as Multi30k publishes `train.en.gz`). A side is plain text (`training/europarl-v7.fr-en.en`),
gzip (`giga-fren.release2.fixed.en.gz`, `train.de.gz`: decompressed on the fly), or a fake-SGML test
set (`test-full/newstest2014-fren-src.en.sgm`), whose `<seg>` lines are turned into text exactly as
sacreBLEU turns them (so our references are the ones `sacrebleu -t wmt14/full` scores against).
An archive is read once, as a stream; nothing is unpacked to disk but the two outputs, which appear
atomically. Line counts are checked against each other and against the published count where the
config gives one.

Plain and gzip text is copied byte for byte: a line that is not UTF-8 is left to the clean step,
which names it (file:line) or drops it as `data.wmt.clean.invalid_utf8` says. SGML is decoded here,
and a line that is not UTF-8 stops extraction naming the archive, member and line.
"""

from __future__ import annotations

import difflib
import gzip
import os
import re
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from attnrepro.config import CorpusSpec
from attnrepro.errors import DataError

BLOCK = 1 << 20
SEG = re.compile(r"<seg.*?>(.*)</seg>.*?")
SIDES = ("src", "tgt")
# What a damaged or mislabelled archive or gzip file raises while it is read.
UNREADABLE = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile)


def sgm_segments(lines: Iterator[str]) -> Iterator[str]:
    """The text of every `<seg ...>...</seg>` line, whitespace collapsed (sacreBLEU's FakeSGMLDataset rule)."""
    for line in lines:
        if line.startswith("<seg "):
            yield re.sub(r"\s+", " ", SEG.sub(r"\1", line).strip())


def _decoded_lines(stream: IO[bytes], label: str) -> Iterator[str]:
    for lineno, line in enumerate(stream, 1):
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(f"{label}:{lineno}: not valid UTF-8 at byte {err.start} of the line") from None


def _member_name(name: str) -> str:
    return name[2:] if name.startswith("./") else name


def _write_text(stream: IO[bytes], name: str, label: str, out: IO[bytes]) -> tuple[int, int]:
    """Copy one side (an archive member or a whole file called `name`) to `out` as text lines; returns
    (lines, newlines): they differ by one when the last line has no newline (`wc -l` counts newlines)."""
    text: IO[bytes] = gzip.GzipFile(fileobj=stream) if name.endswith(".gz") else stream
    base = name[:-3] if name.endswith(".gz") else name
    if base.endswith(".sgm"):
        n = 0
        for segment in sgm_segments(_decoded_lines(text, label)):  # lines end at "\n" only, as sacreBLEU reads them
            out.write(segment.encode("utf-8") + b"\n")
            n += 1
        return n, n
    n, last = 0, b"\n"
    while block := text.read(BLOCK):
        out.write(block)
        n += block.count(b"\n")
        last = block[-1:]
    if last != b"\n":  # a last line without its newline is still a line
        out.write(b"\n")
        return n + 1, n
    return n, n


def _copy_file(path: Path, out_path: Path, key: str) -> tuple[int, int]:
    """A whole downloaded file as one side's text (data.wmt.corpora.NAME.{src,tgt}_file without a member)."""
    try:
        with open(path, "rb") as f, open(out_path, "wb") as out:
            return _write_text(f, path.name, str(path), out)
    except UNREADABLE as err:
        kind = "gzip" if path.name.endswith(".gz") else "text"
        raise DataError(f"{path}: cannot read it as {kind} ({err}) ({key})") from err


def _copy_members(archive: Path, wanted: dict[str, Path], key: str) -> dict[str, tuple[int, int]]:
    """Members of one tar archive (any compression) to their output paths, in one pass over the stream."""
    counts: dict[str, tuple[int, int]] = {}
    seen: list[str] = []
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for info in tar:
                member = _member_name(info.name)
                seen.append(member)
                if member in wanted and info.isfile():
                    with tar.extractfile(info) as f, open(wanted[member], "wb") as out:
                        counts[member] = _write_text(f, member, f"{archive}: {member}", out)
                    if len(counts) == len(wanted):
                        break
    except UNREADABLE as err:
        reading = f" (reading {seen[-1]})" if seen else ""
        raise DataError(f"{archive}: cannot read it as a tar archive{reading}: {err} ({key})") from err
    for member in wanted:
        if member not in counts:
            close = difflib.get_close_matches(member, seen, n=3, cutoff=0.5)
            hint = f"; similar members: {', '.join(close)}" if close else ""
            raise DataError(f"{archive}: no member {member!r} ({key}){hint}")
    return counts


def _extract_sides(
    inputs: dict[str, Path], spec: CorpusSpec, tmp: dict[str, Path], key: str
) -> dict[str, tuple[int, int]]:
    """(lines, newlines) per side, each side written to tmp[side]; an archive holding both is read once."""
    counts: dict[str, tuple[int, int]] = {}
    archives: dict[Path, dict[str, str]] = {}  # archive -> member -> side
    for side in SIDES:
        tmp[side].parent.mkdir(parents=True, exist_ok=True)
        member = spec.member_of(side)
        if member is None:
            counts[side] = _copy_file(inputs[side], tmp[side], f"{key}.{side}_file")
        else:
            archives.setdefault(inputs[side], {})[member] = side
    for archive, sides in archives.items():
        found = _copy_members(archive, {member: tmp[side] for member, side in sides.items()}, key)
        counts.update({side: found[member] for member, side in sides.items()})
    return counts


def extract_corpus(
    src_input: Path, tgt_input: Path, name: str, spec: CorpusSpec, src_out: Path, tgt_out: Path
) -> dict[str, int]:
    """Write corpus `name`'s source and target text, out of the downloaded files holding each side
    (the same archive for both where the config says so), to `src_out`/`tgt_out`."""
    key = f"data.wmt.corpora.{name}"
    inputs, outputs = {"src": Path(src_input), "tgt": Path(tgt_input)}, {"src": Path(src_out), "tgt": Path(tgt_out)}
    tmp = {side: path.with_name(f".{path.name}.tmp") for side, path in outputs.items()}
    try:
        counts = _extract_sides(inputs, spec, tmp, key)
        problems = []
        (src_lines, src_newlines), (tgt_lines, _) = counts["src"], counts["tgt"]
        where = {side: spec.member_of(side) or inputs[side].name for side in SIDES}
        if src_lines != tgt_lines:
            problems.append(f"{where['src']} has {src_lines} lines but {where['tgt']} has {tgt_lines}")
        if spec.lines is not None and spec.lines not in (src_lines, src_newlines):
            problems.append(f"{where['src']} has {src_lines} lines, the published count is {spec.lines} ({key}.lines)")
        if problems:
            paths = sorted({str(inputs[side]) for side in SIDES})
            raise DataError(f"{', '.join(paths)}: " + "; ".join(problems))
    except BaseException:
        for path in tmp.values():
            path.unlink(missing_ok=True)
        raise
    for side in SIDES:
        os.replace(tmp[side], outputs[side])
    return {"src_lines": src_lines, "tgt_lines": tgt_lines}
