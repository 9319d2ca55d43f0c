"""Europarl release v1 (Koehn 2005), one sentence-aligned file a day: verified fetch, explicit decoding,
splits by date, and the seeded per-bucket samples that are scored.

Release v1 ships each sitting as `it-en/{en,it}/ep-YY-MM-DD.al`: tokenized text, ISO-8859-1, one sentence a
line, line i of a day's English file the translation of line i of its Italian file. The project carries a
manifest of every day file it uses (path, bytes, lines, sha256; `config/europarl_it_en.manifest.tsv`): each
is downloaded from `data.europarl.url` + `/` + path (resumed, verified, renamed: `attnrepro.data.download`) or
copied from `data.europarl.mirror`, a folder laid out the same way, and verified against it.

Splits by date, never by chance: `test` is a window of days (Q4 2000, the corpus's common test set, Koehn,
Och & Marcu 2003), `valid` a window before it, `train` every other day of `first_day` .. `last_day`. Scoring
every Q4 sentence with beam search costs too much on two cores, so `valid` and `test` are samples: in each
`bucket_width`-word bucket of source lengths up to `max_len`, `per_bucket` pairs (both sides non-empty)
drawn without replacement by `numpy.random.default_rng([seed, bucket_lo])`, in (day, line) order. The
drawn ids can be committed (`ids:`): a run then takes exactly those lines, and a changed rule cannot
change the test set unnoticed (tests/test_europarl.py draws again and compares).
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import re
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from attnrepro.config import EuroparlDataConfig, EuroparlSample
from attnrepro.data.download import Expected, copy_verified, download
from attnrepro.errors import ConfigError, DataError

DAY_NAME = re.compile(r"^ep-(\d\d)-(\d\d)-(\d\d)$")
MANIFEST_COLUMNS = ["path", "bytes", "lines", "sha256"]
IDS_COLUMNS = ["day", "line", "src_words"]
SPLITS = ("train", "valid", "test")
FETCH_THREADS = 8  # small files from one host: latency, not bandwidth, is the cost


@dataclass(frozen=True)
class DayFile:
    """One side of one sitting, as the manifest pins it."""

    path: str  # relative to the corpus root (url, mirror, download_dir): it-en/en/ep-00-10-02.al
    size: int
    lines: int
    sha256: str


@dataclass(frozen=True)
class Day:
    name: str  # ep-00-10-02
    date: dt.date
    src: DayFile
    tgt: DayFile


@dataclass(frozen=True)
class Pair:
    day: str
    line: int  # 1-based line of the day's files
    src: str
    tgt: str

    @property
    def src_words(self) -> int:
        return len(self.src.split())


def date_of(name: str) -> dt.date:
    """ep-YY-MM-DD -> the sitting's date (the sittings began in 1996: YY >= 50 is 19YY)."""
    match = DAY_NAME.match(name)
    if match is None:
        raise ValueError(f"{name!r} is not a day name ep-YY-MM-DD")
    yy, mm, dd = (int(g) for g in match.groups())
    return dt.date(1900 + yy if yy >= 50 else 2000 + yy, mm, dd)


def read_manifest(path: Path, src_lang: str, tgt_lang: str) -> list[Day]:
    """Every day of the manifest with both sides, in date order; DataError naming path:line for a bad row
    or a day that has one side only."""
    sides: dict[str, dict[str, DayFile]] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"data.europarl.manifest: {path}: cannot be read ({err.strerror or err})") from None
    rows = csv.reader(text.splitlines(), delimiter="\t")
    if next(rows, None) != MANIFEST_COLUMNS:
        raise DataError(f"{path}:1: the header must be {' '.join(MANIFEST_COLUMNS)} (tab-separated)")
    for lineno, row in enumerate(rows, start=2):
        try:
            rel, size, lines, sha256 = row
            parts = Path(rel).parts
            lang, name = parts[-2], Path(rel).stem
            date_of(name)
            entry = DayFile(rel, int(size), int(lines), sha256.lower())
        except ValueError as err:
            raise DataError(f"{path}:{lineno}: not a row path, bytes, lines, sha256 of a day file: {err}") from None
        if ".." in parts or Path(rel).is_absolute() or not re.fullmatch(r"[0-9a-f]{64}", entry.sha256):
            raise DataError(f"{path}:{lineno}: {rel}: a relative path without '..' and a sha256 of 64 hex digits")
        if lang in (src_lang, tgt_lang):
            if lang in sides.setdefault(name, {}):
                raise DataError(f"{path}:{lineno}: {name} has a second {lang} file ({rel})")
            sides[name][lang] = entry
    days = []
    for name, files in sorted(sides.items(), key=lambda item: date_of(item[0])):
        missing = [lang for lang in (src_lang, tgt_lang) if lang not in files]
        if missing:
            raise DataError(f"{path}: day {name} has no {' or '.join(missing)} file")
        days.append(Day(name, date_of(name), files[src_lang], files[tgt_lang]))
    if not days:
        raise DataError(f"{path}: no day has both a {src_lang} and a {tgt_lang} file")
    return days


def days_of_splits(cfg: EuroparlDataConfig, days: list[Day]) -> dict[str, list[Day]]:
    """train / valid / test: the days of first_day .. last_day by date; train is every day in neither window."""
    chosen = [d for d in days if cfg.first_day <= d.date <= cfg.last_day]
    splits: dict[str, list[Day]] = {"train": [], "valid": [], "test": []}
    for day in chosen:
        if cfg.test.first_day <= day.date <= cfg.test.last_day:
            splits["test"].append(day)
        elif cfg.valid.first_day <= day.date <= cfg.valid.last_day:
            splits["valid"].append(day)
        else:
            splits["train"].append(day)
    for split, members in splits.items():
        if not members:
            raise ConfigError(
                f"data.europarl: no day of the manifest falls in the {split} split "
                f"({cfg.first_day} .. {cfg.last_day}, test {cfg.test.first_day} .. {cfg.test.last_day}, "
                f"valid {cfg.valid.first_day} .. {cfg.valid.last_day})"
            )
    return splits


def selected_days(cfg: EuroparlDataConfig) -> dict[str, list[Day]]:
    return days_of_splits(cfg, read_manifest(Path(cfg.manifest), cfg.src_lang, cfg.tgt_lang))


# ---- fetch ---------------------------------------------------------------------------------------


def fetch_days(cfg: EuroparlDataConfig, days: list[Day], out_dir: Path, progress: bool = True) -> int:
    """Every side of `days` into out_dir/PATH: copied from the mirror when one is configured, else downloaded
    (resumed, retried); each verified against the manifest before it gets its name. Returns the bytes in place."""
    files = [f for day in days for f in (day.src, day.tgt)]
    mirror = Path(cfg.mirror) if cfg.mirror is not None else None
    if mirror is not None and not mirror.is_dir():
        raise ConfigError(f"data.europarl.mirror: {mirror} is not a folder")

    def fetch(f: DayFile) -> int:
        expected = Expected(size=f.size, sha256=f.sha256, source=f"{cfg.manifest}")
        dest = out_dir / f.path
        if mirror is not None:
            if not (mirror / f.path).is_file():
                raise DataError(f"data.europarl.mirror: {mirror / f.path}: no such file (the manifest lists it)")
            return copy_verified(mirror / f.path, dest, expected)["size"]
        url = f"{cfg.url.rstrip('/')}/{f.path}"
        return download(url, dest, expected, cfg.retries, cfg.timeout_s, progress=False)["size"]

    total = 0
    bar = tqdm(total=len(files), unit="file", desc="europarl", disable=not progress, mininterval=1, file=sys.stderr)
    with bar, ThreadPoolExecutor(FETCH_THREADS) as pool:
        for size in pool.map(fetch, files):
            total += size
            bar.update(1)
    return total


# ---- read, split, sample -------------------------------------------------------------------------


def read_side(path: Path, encoding: str, day: DayFile) -> list[str]:
    """A day file's lines, decoded as `encoding` (never guessed); split at "\\n" only, each line without it."""
    data = path.read_bytes()
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        lineno = data.count(b"\n", 0, err.start) + 1
        raise DataError(f"{path}:{lineno}: not {encoding} (byte {err.start} of the file)") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    if len(lines) != day.lines:
        raise DataError(f"{path}: {len(lines)} lines, the manifest says {day.lines}")
    return lines


def day_pairs(day: Day, root: Path, encoding: str) -> Iterator[Pair]:
    """A sitting's sentence pairs; DataError naming the day when its two sides differ in line count."""
    src = read_side(root / day.src.path, encoding, day.src)
    tgt = read_side(root / day.tgt.path, encoding, day.tgt)
    if len(src) != len(tgt):
        raise DataError(
            f"day {day.name}: {root / day.src.path} has {len(src)} lines, {root / day.tgt.path} {len(tgt)}: "
            "its sentences are not aligned line by line"
        )
    for i, (s, t) in enumerate(zip(src, tgt), start=1):
        yield Pair(day.name, i, s, t)


def bucket_lo(words: int, width: int) -> int:
    """The first length of the `width`-word bucket holding `words` (1..10 -> 1 for width 10)."""
    return (words - 1) // width * width + 1


def draw_sample(pairs: list[Pair], spec: EuroparlSample) -> list[Pair]:
    """Up to `per_bucket` pairs of each bucket of source lengths 1 .. max_len (both sides non-empty), drawn
    without replacement by default_rng([seed, bucket_lo]), returned in (day, line) order."""
    buckets: dict[int, list[Pair]] = {}
    for pair in pairs:
        words = pair.src_words
        if 1 <= words <= spec.max_len and pair.tgt.split():
            buckets.setdefault(bucket_lo(words, spec.bucket_width), []).append(pair)
    chosen = []
    for lo, members in sorted(buckets.items()):
        rng = np.random.default_rng([spec.seed, lo])
        picked = rng.choice(len(members), size=min(spec.per_bucket, len(members)), replace=False)
        chosen += [members[i] for i in sorted(picked)]
    order = {pair.day: i for i, pair in enumerate(pairs)}  # pairs come in day order
    return sorted(chosen, key=lambda p: (order[p.day], p.line))


def read_ids(path: Path) -> list[tuple[str, int]]:
    """A committed sample: (day, line) rows of a TSV with IDS_COLUMNS; DataError naming path:line."""
    try:
        rows = list(csv.reader(Path(path).read_text(encoding="utf-8").splitlines(), delimiter="\t"))
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None
    if not rows or rows[0] != IDS_COLUMNS:
        raise DataError(f"{path}:1: the header must be {' '.join(IDS_COLUMNS)} (tab-separated)")
    ids = []
    for lineno, row in enumerate(rows[1:], start=2):
        try:
            day, line, _ = row
            date_of(day)
            ids.append((day, int(line)))
        except ValueError:
            raise DataError(f"{path}:{lineno}: not a row day, line, src_words: {row}") from None
    return ids


def take_ids(pairs: list[Pair], ids: list[tuple[str, int]], path: Path, spec: EuroparlSample) -> list[Pair]:
    """The pairs a committed sample names, each checked to be in the split's days and inside the sample's rule."""
    by_id = {(p.day, p.line): p for p in pairs}
    taken = []
    for lineno, key in enumerate(ids, start=2):
        pair = by_id.get(key)
        if pair is None:
            raise DataError(f"{path}:{lineno}: {key[0]} line {key[1]} is not a line of this split's days")
        if not (1 <= pair.src_words <= spec.max_len and pair.tgt.split()):
            raise DataError(
                f"{path}:{lineno}: {key[0]} line {key[1]} has {pair.src_words} source words or an empty target: "
                f"outside the sample's rule (1 .. {spec.max_len} words, both sides)"
            )
        taken.append(pair)
    return taken


def write_ids(pairs: list[Pair], path: Path) -> None:
    _atomic_text(path, "".join(f"{p.day}\t{p.line}\t{p.src_words}\n" for p in pairs), "\t".join(IDS_COLUMNS) + "\n")


def split_pairs(cfg: EuroparlDataConfig, split: str, days: list[Day], root: Path) -> list[Pair]:
    """The pairs of `split`: every line of its days for train, the sample (committed or drawn) for valid/test."""
    pairs = [pair for day in days for pair in day_pairs(day, root, cfg.encoding)]
    if split == "train":
        return pairs
    spec = cfg.valid if split == "valid" else cfg.test
    if spec.ids is not None:
        return take_ids(pairs, read_ids(Path(spec.ids)), Path(spec.ids), spec)
    return draw_sample(pairs, spec)


def write_split(pairs: list[Pair], src_out: Path, tgt_out: Path, ids_out: Path) -> dict[str, int]:
    """The split's two sides as UTF-8 text (one line each, "\\n") and its ids; each file appears atomically."""
    _atomic_text(src_out, "".join(p.src + "\n" for p in pairs))
    _atomic_text(tgt_out, "".join(p.tgt + "\n" for p in pairs))
    write_ids(pairs, ids_out)
    return {"pairs": len(pairs), "days": len({p.day for p in pairs})}


def _atomic_text(path: Path, text: str, header: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(header + text)
    os.replace(tmp, path)
