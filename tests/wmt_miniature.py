"""Miniature WMT'14 archives with the real file names and internal layouts, filled with real text.

LAYOUTS lists, per archive, members as the published archives hold them (statmt.org packs as
unpacked by fairseq's prepare-wmt14en2fr.sh / prepare-wmt14en2de.sh, tensor2tensor and sockeye's
autopilot; the test sets as sacreBLEU's "wmt14/full" names them; Schwenk's bitexts.tgz as the
blocks-examples and PaddlePaddle WMT'14 scripts unpack it). The tests check that every member the
shipped configs name is one of these, so the configs are held to the real layouts.

A member whose real file is in ../shared/data/real/ (the newstest2012-2014 SGML and plain test sets,
the first 3000 lines of Europarl v7 fr-en; its README says where each comes from) holds that file's
bytes, whole or cut to its first lines / whole documents; a test gives other members real lines of
its choosing; the members no test reads hold three filler lines. The real SGML has no XML entities
(`&` and `"` appear raw), and neither has the SGML written here.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path

import pytest

REAL_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "real"
REAL_FOLDERS = ("newstest2014", "dev", "europarl_sample")  # where a member's real file is looked for, by name
PAIRS = {"fr-en": "fr", "de-en": "de", "cs-en": "cs", "es-en": "es", "ru-en": "ru"}


def _pairs(prefix: str, pairs: list[str]) -> list[str]:
    return [f"{prefix}.{p}.{lang}" for p in pairs for lang in (PAIRS[p], "en")]


SELECTED = ["ep7_pc45", "nc9", "dev08_11", "crawl", "ccb2_pc30", "un2000_pc34"]
LAYOUTS: dict[str, list[str]] = {
    "training-parallel-europarl-v7.tgz": _pairs("training/europarl-v7", ["cs-en", "de-en", "es-en", "fr-en"]),
    "training-parallel-commoncrawl.tgz": _pairs("commoncrawl", ["cs-en", "de-en", "es-en", "fr-en", "ru-en"])
    + ["commoncrawl.fr-en.annotation", "commoncrawl.de-en.annotation"],
    "training-parallel-un.tgz": _pairs("un/undoc.2000", ["es-en", "fr-en"]),
    "training-parallel-nc-v9.tgz": _pairs("training/news-commentary-v9", ["cs-en", "de-en", "fr-en", "ru-en"]),
    "training-giga-fren.tar": ["giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz"],
    "dev.tgz": [
        f"dev/newstest{year}-{kind}.{lang}.sgm"
        for year in (2012, 2013)
        for kind in ("src", "ref")
        for lang in ("en", "fr", "de", "cs", "es", "ru")
    ]
    + ["dev/newstest2012.en", "dev/newstest2012.fr", "dev/newstest2013.en", "dev/newstest2013.fr"],
    "test-full.tgz": [
        f"test-full/newstest2014-{pair}-{kind}.{lang}.sgm"
        for pair, other in (("fren", "fr"), ("deen", "de"), ("csen", "cs"))
        for kind in ("src", "ref")
        for lang in (other, "en")
    ],
    "bitexts.tgz": [f"bitexts.selected/{name}.{lang}.gz" for name in SELECTED for lang in ("en", "fr")],
}


def real_data() -> Path:
    """../shared/data/real/; the test is skipped where it is absent, and fails when ATTNREPRO_REQUIRE_REAL_DATA=1."""
    if (REAL_DATA / "MD5SUMS").is_file():
        return REAL_DATA
    reason = f"real MT text not found at {REAL_DATA} (public files the tests read; see tests/wmt_miniature.py)"
    if os.environ.get("ATTNREPRO_REQUIRE_REAL_DATA") == "1":
        pytest.fail(f"ATTNREPRO_REQUIRE_REAL_DATA=1: {reason}")
    pytest.skip(reason)


def real_file(relative: str) -> Path:
    """A file of the real-data folder, checked against its MD5SUMS line (a changed file fails loudly)."""
    root = real_data()
    sums = {name: md5 for md5, name in (line.split() for line in (root / "MD5SUMS").read_text().splitlines())}
    path = root / relative
    assert hashlib.md5(path.read_bytes()).hexdigest() == sums[f"./{relative}"], f"{path} differs from MD5SUMS"
    return path


def real_relative(member: str) -> str | None:
    """The real file an archive member is a copy of (same file name), relative to the real-data folder."""
    name = Path(member).name
    for folder in REAL_FOLDERS:
        if (REAL_DATA / folder / name).is_file():
            return f"{folder}/{name}"
    return None


def first_documents(sgml: str, segments: int) -> str:
    """The SGML header, whole <doc>s until they hold at least `segments` segments, and the closing tag."""
    lines = sgml.splitlines(keepends=True)
    kept, n = [], 0
    for line in lines:
        kept.append(line)
        n += line.startswith("<seg ")
        if line.startswith("</doc>") and n >= segments:
            return "".join(kept) + lines[-1]
    return sgml


def real_member(member: str, limit: int | None = None) -> bytes | None:
    """The real bytes of `member` (SGML: whole documents of >= `limit` segments; text: the first `limit`
    lines), None when no real file has its name."""
    relative = real_relative(member)
    if relative is None:
        return None
    data = real_file(relative).read_bytes()
    if limit is None:
        return data
    text = data.decode("utf-8")
    if member.endswith(".sgm"):
        return first_documents(text, limit).encode("utf-8")
    return "".join(text.splitlines(keepends=True)[:limit]).encode("utf-8")


def sgm(lines: list[str], setid: str, lang: str) -> str:
    """A WMT fake-SGML file: one document of <seg> lines, the text as it is (no XML escapes, as in the real sets)."""
    out = [f'<srcset setid="{setid}" srclang="any">', f'<doc sysid="ref" docid="doc-1" genre="news" origlang="{lang}">']
    out += ["<p>"] + [f'<seg id="{i}">{line}</seg>' for i, line in enumerate(lines, 1)] + ["</p>"]
    return "\n".join(out + ["</doc>", "</srcset>"]) + "\n"


def member_bytes(name: str, lines: list[str]) -> bytes:
    base = name[:-3] if name.endswith(".gz") else name
    if base.endswith(".sgm"):
        text = sgm(lines, Path(base).name.split("-")[0], base.split(".")[-2]).encode()
    else:
        text = "".join(line + "\n" for line in lines).encode()
    return gzip.compress(text, mtime=0) if name.endswith(".gz") else text


def build_archives(
    out_dir: Path, texts: dict[str, list[str]] | None = None, limit: int | None = None, only: Iterable[str] = LAYOUTS
) -> dict[str, Path]:
    """The archives `only` of LAYOUTS under out_dir. A member's lines come from texts[member], else its
    real file (see real_member: `limit` cuts it), else three filler lines."""
    texts = texts or {}
    unknown = set(texts) - {m for members in LAYOUTS.values() for m in members}
    if unknown:
        raise ValueError(f"members not in any real layout: {sorted(unknown)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for archive in only:
        path = out_dir / archive
        mode = "w:gz" if archive.endswith(".tgz") else "w"
        with tarfile.open(path, mode) as tar:
            for member in LAYOUTS[archive]:
                data = member_bytes(member, texts[member]) if member in texts else real_member(member, limit)
                if data is None:
                    data = member_bytes(member, [f"filler {i} of {member}" for i in range(3)])
                info = tarfile.TarInfo(member)
                info.size, info.mtime = len(data), 0
                tar.addfile(info, io.BytesIO(data))
        paths[archive] = path
    return paths
