"""Miniature WMT'14 archives with the real file names and internal layouts, a few lines per member.

LAYOUTS lists, per archive, members as the published archives hold them (statmt.org packs as
unpacked by fairseq's prepare-wmt14en2fr.sh / prepare-wmt14en2de.sh, tensor2tensor and sockeye's
autopilot; the test sets as sacreBLEU's "wmt14/full" names them; Schwenk's bitexts.tgz as the
blocks-examples and PaddlePaddle WMT'14 scripts unpack it). The tests check that every member the
shipped configs name is one of these, so the configs are held to the real layouts.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path
from xml.sax.saxutils import escape

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


def sgm(lines: list[str], setid: str, lang: str) -> str:
    """A WMT fake-SGML file: documents of <seg> lines (text XML-escaped as in the real test sets)."""
    out = [f'<srcset setid="{setid}" srclang="any">', f'<doc sysid="ref" docid="doc-1" genre="news" origlang="{lang}">']
    out += ["<p>"] + [f'<seg id="{i}">{escape(line)}</seg>' for i, line in enumerate(lines, 1)] + ["</p>"]
    return "\n".join(out + ["</doc>", "</srcset>"]) + "\n"


def member_bytes(name: str, lines: list[str]) -> bytes:
    base = name[:-3] if name.endswith(".gz") else name
    if base.endswith(".sgm"):
        text = sgm(lines, Path(base).name.split("-")[0], base.split(".")[-2]).encode()
    else:
        text = "".join(line + "\n" for line in lines).encode()
    return gzip.compress(text, mtime=0) if name.endswith(".gz") else text


def build_archives(out_dir: Path, texts: dict[str, list[str]]) -> dict[str, Path]:
    """Every archive of LAYOUTS under out_dir; a member's lines come from texts[member] (else 3 filler lines)."""
    unknown = set(texts) - {m for members in LAYOUTS.values() for m in members}
    if unknown:
        raise ValueError(f"members not in any real layout: {sorted(unknown)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for archive, members in LAYOUTS.items():
        path = out_dir / archive
        mode = "w:gz" if archive.endswith(".tgz") else "w"
        with tarfile.open(path, mode) as tar:
            for member in members:
                data = member_bytes(member, texts.get(member, [f"filler {i} of {member}" for i in range(3)]))
                info = tarfile.TarInfo(member)
                info.size, info.mtime = len(data), 0
                tar.addfile(info, io.BytesIO(data))
        paths[archive] = path
    return paths
