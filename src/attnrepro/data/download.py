"""Resumable, verified, atomic HTTP downloads of the published corpora.

Bytes go to `NAME.part` beside the destination. A rerun (or a retry after a dropped
connection or a 5xx) asks for `Range: bytes=<len(.part)>-` and appends, hashing as it goes,
so no byte is fetched twice; a server that ignores the Range (200 instead of 206) is read
from byte 0 again. Only when the size and every known checksum match is `.part` renamed to
the final name, so a file under the final name is always complete and verified.

A body ends where the server said it would (the published size, Content-Length, a 206's
Content-Range, the last chunk of a chunked body) or, in a close-delimited response (no
Content-Length, not chunked), wherever the connection closed, which is also what a cut looks
like. Such an end is confirmed by asking again past it: a Range request answered 416 with
`Content-Range: bytes */SIZE`, or, from a server that ignores Range, a Content-Length (of that
response or of a HEAD). A download whose end nothing confirms fails with a `DownloadError`
unless a published checksum can judge its bytes: it is never renamed, so never pinned
(attnrepro.data.fetch).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from attnrepro.errors import AttnreproError, DataError

BLOCK = 1 << 20  # bytes read per socket read
USER_AGENT = "attnrepro (resumable WMT downloader)"
RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}
MAX_BACKOFF_S = 60.0


class _Incomplete(Exception):
    """The body ended before the file's end, or without saying where that is (retried from the byte reached)."""


class _EndUnknown(Exception):
    """The server states no length in any way we can ask for: a cut cannot be told from the end."""


# Dropped or refused connections, timeouts, truncated bodies: worth another try from the same byte.
RETRYABLE_ERRORS = (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, _Incomplete)


class ChecksumError(DataError):
    """The bytes received do not match the published (or pinned) size or checksum."""


class DownloadError(AttnreproError):
    """The server refused the file, kept failing after every retry, or never confirmed the file's end."""


@dataclass(frozen=True)
class Expected:
    """What the finished file must match; `source` says where each value came from (for errors)."""

    size: int | None = None
    sha256: str | None = None
    md5: str | None = None
    source: str = "config"


class _Hashes:
    def __init__(self) -> None:
        self.sha256 = hashlib.sha256()
        self.md5 = hashlib.md5()
        self.size = 0

    def update(self, block: bytes) -> None:
        self.sha256.update(block)
        self.md5.update(block)
        self.size += len(block)

    @classmethod
    def of_file(cls, path: Path) -> _Hashes:
        hashes = cls()
        with open(path, "rb") as f:
            while block := f.read(BLOCK):
                hashes.update(block)
        return hashes

    def summary(self) -> dict[str, Any]:
        return {"size": self.size, "sha256": self.sha256.hexdigest(), "md5": self.md5.hexdigest()}


class _Part:
    """`dest.part`: the bytes received so far, their hashes and the progress bar that shows them."""

    def __init__(self, dest: Path, total: int | None, progress: bool) -> None:
        self.dest, self.path = dest, dest.with_name(dest.name + ".part")
        self.hashes = _Hashes.of_file(self.path) if self.path.exists() else _Hashes()
        self.bar = tqdm(
            total=total, initial=self.size, unit="B", unit_scale=True, unit_divisor=1024,
            desc=dest.name, disable=not progress, mininterval=1, file=sys.stderr,
        )  # fmt: skip

    @property
    def size(self) -> int:
        return self.hashes.size

    def restart(self, why: str) -> None:
        print(f"{why}; starting again from byte 0", flush=True)
        self.path.unlink(missing_ok=True)
        self.hashes = _Hashes()
        self.bar.reset(total=self.bar.total)

    def append(self, response: http.client.HTTPResponse) -> None:
        with open(self.path, "ab") as f:
            while True:
                try:
                    block = response.read(BLOCK)
                except http.client.IncompleteRead as err:  # a cut chunked body: keep its whole chunks
                    self._write(f, err.partial)
                    raise
                if not block:
                    return
                self._write(f, block)

    def _write(self, f: Any, block: bytes) -> None:
        f.write(block)
        self.hashes.update(block)
        self.bar.update(len(block))

    def sync(self) -> None:
        """Data on disk before a rename makes it visible."""
        with open(self.path, "ab") as f:
            f.flush()
            os.fsync(f.fileno())

    def __enter__(self) -> _Part:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()


def download(
    url: str,
    dest: Path,
    expected: Expected,
    retries: int = 8,
    timeout_s: float = 60.0,
    backoff_s: float = 1.0,
    progress: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Fetch `url` to `dest` (resuming `dest.part`) up to its confirmed end, verify it, rename it;
    returns size, sha256, md5."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        hashes = _Hashes.of_file(dest)
        _raise_on_mismatch(f"{url}: {dest}", hashes, expected, "")
        return hashes.summary()
    with _Part(dest, expected.size, progress) as part:
        if expected.size is not None and part.size > expected.size:
            part.restart(f"{part.path}: {part.size} bytes, more than the expected {expected.size}")
        if expected.size is None or part.size < expected.size:
            _receive(url, part, expected, timeout_s, _Backoff(retries, backoff_s, sleep))
        part.sync()
        removed = f"; removed {part.path}, rerun to fetch it again"
        _raise_on_mismatch(f"{url}: {part.path}", part.hashes, expected, removed, remove=part.path)
    os.replace(part.path, dest)
    return part.hashes.summary()


@dataclass
class _Backoff:
    retries: int
    backoff_s: float
    sleep: Callable[[float], None]
    failures: int = 0

    def wait(self, url: str, part: _Part, before: int, error: Exception) -> None:
        """Sleep before the next try; progress resets the count, `retries` tries without progress give up."""
        self.failures = 0 if part.size > before else self.failures + 1
        if self.failures > self.retries:
            raise DownloadError(
                f"{url}: gave up after {self.retries} retries without progress at byte {part.size} "
                f"({error}); rerun to resume from {part.path}"
            ) from error
        delay = min(self.backoff_s * 2 ** max(self.failures - 1, 0), MAX_BACKOFF_S)
        print(f"{url}: {error}; retrying from byte {part.size} in {delay:.1f} s", flush=True)
        self.sleep(delay)


def _receive(url: str, part: _Part, expected: Expected, timeout_s: float, backoff: _Backoff) -> None:
    """Request from byte `part.size` until the file's end is reached and confirmed (or, where the
    server cannot confirm it, a published checksum is there to judge the bytes)."""
    while True:
        before = part.size
        try:
            _fetch_once(url, part, expected, timeout_s)
            return
        except _EndUnknown as err:
            if expected.sha256 is not None or expected.md5 is not None:
                print(f"{url}: {err}; the published (or pinned) checksum decides", flush=True)
                return
            raise DownloadError(
                f"{url}: cannot tell whether the {part.size} bytes received are the whole file or a cut: {err}. "
                f"Nothing was pinned and {part.path} is kept; give the file's size or sha256 in the config, "
                "or put a copy in data.wmt.mirror"
            ) from None
        except urllib.error.HTTPError as err:
            if err.code not in RETRYABLE_STATUS:
                raise DownloadError(f"{url}: HTTP {err.code} {err.reason} (downloading to {part.dest})") from err
            error: Exception = err
        except RETRYABLE_ERRORS as err:
            error = err
        backoff.wait(url, part, before, error)


def _fetch_once(url: str, part: _Part, expected: Expected, timeout_s: float) -> None:
    """One GET from byte `part.size`, appended to `part`. Returns only at the file's confirmed end;
    raises _Incomplete where the body stopped before it or without stating it."""
    offset = part.size
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s)
    except urllib.error.HTTPError as err:
        if err.code != 416 or not offset:
            raise
        with err:  # nothing past our offset: is our offset the end?
            stated = _content_range_total(err.headers.get("Content-Range", ""))
        _confirm_end(url, part, stated, "HTTP 416 without Content-Range", timeout_s)
        return
    with response:
        if response.status == 206:
            start = _content_range_start(response.headers.get("Content-Range", ""))
            if start != offset:
                raise DownloadError(f"{url}: asked for byte {offset} onwards, the server sent from byte {start}")
        end = _stated_end(response, offset if response.status == 206 else 0)
        ignored = offset > 0 and response.status == 200
        if ignored:  # the server ignored Range: this body starts at byte 0
            end = end if end is not None else _head_length(url, timeout_s)
            if end == offset:
                return  # and states the length we already have
            part.restart(f"{url}: the server ignored Range: bytes={offset}-")
        if end is not None and expected.size is not None and end != expected.size:
            raise ChecksumError(
                f"{url}: the server announces {end} bytes, but {expected.source} expects {expected.size}"
            )
        part.append(response)
        if end is None and response.headers.get("Transfer-Encoding", "").lower() == "chunked":
            end = part.size  # http.client raised IncompleteRead unless the terminal chunk arrived
    end = end if end is not None else expected.size
    if end is None and ignored:  # read again to its close: the freshest bytes for a checksum to judge
        raise _EndUnknown(
            "the response has no Content-Length, the server ignores Range (no 416 past the end), "
            "and HEAD states no Content-Length"
        )
    if end is None:
        raise _Incomplete(f"the body ended at byte {part.size} without a stated length; asking past it")
    if part.size < end:
        raise _Incomplete(f"connection closed at byte {part.size} of {end}")


def _confirm_end(url: str, part: _Part, stated: int | None, unstated: str, timeout_s: float) -> None:
    """Return when the server's length (`stated`, else HEAD's) is the size of `part`; otherwise restart
    (the server holds another file) or raise _EndUnknown (it states none)."""
    stated = stated if stated is not None else _head_length(url, timeout_s)
    if stated is None:
        raise _EndUnknown(f"{unstated}, and HEAD states no Content-Length")
    if stated != part.size:
        part.restart(f"{url}: the server has {stated} bytes, {part.path} {part.size}")
        raise _Incomplete(f"the server's file is {stated} bytes")


def _stated_end(response: http.client.HTTPResponse, offset: int) -> int | None:
    """Where the server says this body's file ends: offset + Content-Length, else a 206's Content-Range
    total; None for a close-delimited (or chunked) body."""
    length = _digits(response.headers.get("Content-Length"))
    if length is not None:
        return offset + length
    if response.status == 206:
        return _content_range_total(response.headers.get("Content-Range", ""))
    return None


def _head_length(url: str, timeout_s: float) -> int | None:
    """The Content-Length a HEAD request states, None when it states none (or HEAD is refused)."""
    request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return _digits(response.headers.get("Content-Length"))
    except urllib.error.HTTPError as err:
        err.close()
        return None


def _mismatch(hashes: _Hashes, expected: Expected) -> str | None:
    """Size, then sha256, then md5: the first that differs from `expected`, both values named."""
    actual = hashes.summary()
    for key in ("size", "sha256", "md5"):
        want = getattr(expected, key)
        if want is not None and want != actual[key]:
            what = "bytes" if key == "size" else key
            return f"{what} mismatch: expected {want} ({expected.source}), got {actual[key]}"
    return None


def _raise_on_mismatch(label: str, hashes: _Hashes, expected: Expected, hint: str, remove: Path | None = None) -> None:
    problem = _mismatch(hashes, expected)
    if problem is not None:
        if remove is not None:
            remove.unlink(missing_ok=True)
        raise ChecksumError(f"{label}: {problem}{hint}")


def _digits(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def _content_range_start(value: str) -> int | None:
    match = re.match(r"bytes (\d+)-\d+/(\d+|\*)", value)
    return int(match.group(1)) if match else None


def _content_range_total(value: str) -> int | None:
    match = re.match(r"bytes (?:\*|\d+-\d+)/(\d+)", value)
    return int(match.group(1)) if match else None


# ---- a copy from a mirror (data.wmt.mirror) --------------------------------------------------


def copy_verified(source: Path, dest: Path, expected: Expected) -> dict[str, Any]:
    """Copy a mirror's `source` to `dest` through a temporary file, verified like a download, then renamed."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.mirror")
    hashes = _Hashes()
    with open(source, "rb") as f, open(tmp, "wb") as out:
        while block := f.read(BLOCK):
            out.write(block)
            hashes.update(block)
        out.flush()
        os.fsync(out.fileno())
    hint = f"; nothing copied to {dest}: replace or remove the mirror's copy (data.wmt.mirror)"
    _raise_on_mismatch(f"{source}", hashes, expected, hint, remove=tmp)
    os.replace(tmp, dest)
    return hashes.summary()
