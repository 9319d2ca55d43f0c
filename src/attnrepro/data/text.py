"""Reading plain-text corpora as every command reads them: UTF-8, one sentence per line.

A line ends at "\\n". A "\\r" that ends a line (Windows line ends) and a byte-order mark that
starts the file are dropped, so a file written on Windows reads exactly as its Unix twin.
Everything else inside a line is kept, including a lone "\\r", U+0085 and U+2028
(`str.splitlines` and universal newlines would split there and shift every later line against
its translation). A line that is not UTF-8, or that holds a NUL byte (UTF-16 text is valid UTF-8
full of NULs), raises `DataError` naming file, line and column. A parallel text whose two files
differ in length raises naming both files and the first line that has no counterpart.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path

from attnrepro.errors import DataError

BOM = b"\xef\xbb\xbf"  # U+FEFF in UTF-8, which Windows editors write first


def strip_line_end(raw: bytes) -> bytes:
    """`raw` without its "\\n" or "\\r\\n"."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    return raw[:-1] if raw.endswith(b"\r") else raw


def decode_line(raw: bytes, path: Path, lineno: int) -> str:
    """The text of line `lineno` of `path` (`raw` without its line end), or a DataError naming it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        column = len(raw[: err.start].decode("utf-8")) + 1  # in characters, as an editor counts
        raise DataError(f"{path}:{lineno}: not UTF-8 (byte 0x{raw[err.start]:02x} at column {column})") from None
    if "\0" in text:
        column = text.index("\0") + 1
        raise DataError(f"{path}:{lineno}: NUL byte at column {column} (UTF-16 text? convert the file to UTF-8)")
    return text


def raw_lines(path: Path) -> Iterator[bytes]:
    """The lines of `path` as bytes, without their line ends (decoded later, maybe in another process)."""
    with open(path, "rb") as f:
        first = f.readline()
        if first:
            yield strip_line_end(first.removeprefix(BOM))
        for raw in f:
            yield strip_line_end(raw)


def iter_lines(path: Path) -> Iterator[str]:
    """The lines of `path`, streamed."""
    for lineno, raw in enumerate(raw_lines(path), start=1):
        yield decode_line(raw, path, lineno)


def read_lines(path: Path) -> list[str]:
    """Every line of `path` (a test set, hypotheses, references)."""
    return list(iter_lines(path))


def raw_pairs(src: Path, tgt: Path) -> Iterator[tuple[bytes, bytes]]:
    """Line i of `src` with line i of `tgt`, as bytes; files of different lengths raise naming both."""
    n = 0
    for src_line, tgt_line in zip_longest(raw_lines(src), raw_lines(tgt)):
        if src_line is None or tgt_line is None:
            raise unpaired(src, tgt, n, src_line is None)
        n += 1
        yield src_line, tgt_line


def count_lines(path: Path) -> int:
    """Lines as `raw_lines` counts them (a last line without "\\n" counts), read in 1 MiB blocks."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(2**20):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def check_parallel(src: Path, tgt: Path) -> int:
    """The number of pairs of a parallel text, or a DataError when its files differ in length."""
    n_src, n_tgt = count_lines(src), count_lines(tgt)
    if n_src != n_tgt:
        raise unpaired(src, tgt, min(n_src, n_tgt), n_src < n_tgt)
    return n_src


def unpaired(src: Path, tgt: Path, n: int, src_is_shorter: bool) -> DataError:
    """The error for a parallel text whose shorter file has `n` lines."""
    shorter, longer = (src, tgt) if src_is_shorter else (tgt, src)
    lines = "1 line" if n == 1 else f"{n} lines"
    return DataError(f"{longer}:{n + 1}: line {n + 1} has no counterpart: {shorter} has only {lines}")
