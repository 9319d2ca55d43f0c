"""Resumable, verified, atomic HTTP downloads of the published corpora.

Bytes go to `NAME.part` beside the destination. A rerun (or a retry after a dropped
connection or a 5xx) asks for `Range: bytes=<len(.part)>-` and appends, hashing as it goes,
so no byte is fetched twice; a server that ignores the Range (200 instead of 206) is read
from byte 0 again. Only when the size and every known checksum match is `.part` renamed to
the final name, so a file under the final name is always complete and verified.

Files without a published size or sha256 are pinned on first download in a lock file (the
config's name with `.lock.yaml`, beside it), as pip's `--require-hashes` pins packages:
later downloads must match the pin.
"""

from __future__ import annotations

import fcntl
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

import yaml
from tqdm import tqdm

from attnrepro.config import DownloadFile

BLOCK = 1 << 20  # bytes read per socket read
USER_AGENT = "attnrepro (resumable WMT downloader)"
RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}
MAX_BACKOFF_S = 60.0


class _Incomplete(Exception):
    """The connection ended before the announced length (retried)."""


# Dropped or refused connections, timeouts, truncated bodies: worth another try from the same byte.
RETRYABLE_ERRORS = (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, _Incomplete)


class ChecksumError(ValueError):
    """The bytes received do not match the published (or pinned) size or checksum."""


class DownloadError(RuntimeError):
    """The server refused the file or kept failing after every retry."""


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
    """Fetch `url` to `dest` (resuming `dest.part`), verify it, rename it; returns size, sha256, md5."""
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        return _verify(url, dest, _Hashes.of_file(dest), expected, remove=None)
    hashes = _Hashes.of_file(part) if part.exists() else _Hashes()
    if expected.size is not None and hashes.size > expected.size:
        print(f"{part}: {hashes.size} bytes, more than the expected {expected.size}; starting again", flush=True)
        part.unlink()
        hashes = _Hashes()
    failures = 0
    bar = tqdm(
        total=expected.size, initial=hashes.size, unit="B", unit_scale=True, unit_divisor=1024,
        desc=dest.name, disable=not progress, mininterval=1, file=sys.stderr,
    )  # fmt: skip
    with bar:
        while expected.size is None or hashes.size < expected.size:
            before = hashes.size
            try:
                hashes = _fetch_once(url, part, hashes, expected, timeout_s, bar)
                break
            except urllib.error.HTTPError as err:
                if err.code == 416 and hashes.size > 0:  # nothing left past our offset
                    total = _content_range_total(err.headers.get("Content-Range", ""))
                    if total == hashes.size:
                        break
                    print(f"{url}: HTTP 416 at byte {hashes.size} (server has {total}); starting again", flush=True)
                    part.unlink(missing_ok=True)
                    hashes = _Hashes()
                    bar.reset(total=expected.size)
                    error: Exception = err
                elif err.code in RETRYABLE_STATUS:
                    error = err
                else:
                    raise DownloadError(f"{url}: HTTP {err.code} {err.reason} (downloading to {dest})") from err
            except RETRYABLE_ERRORS as err:
                error = err
            failures = 0 if hashes.size > before else failures + 1  # progress resets the count
            if failures > retries:
                raise DownloadError(
                    f"{url}: gave up after {retries} retries without progress at byte {hashes.size} "
                    f"({error}); rerun to resume from {part}"
                ) from error
            delay = min(backoff_s * 2 ** max(failures - 1, 0), MAX_BACKOFF_S)
            print(f"{url}: {error}; retrying from byte {hashes.size} in {delay:.1f} s", flush=True)
            sleep(delay)
    with open(part, "ab") as f:  # data on disk before the rename makes it visible
        f.flush()
        os.fsync(f.fileno())
    result = _verify(url, part, hashes, expected, remove=part)
    os.replace(part, dest)
    return result


def _fetch_once(url: str, part: Path, hashes: _Hashes, expected: Expected, timeout_s: float, bar: tqdm) -> _Hashes:
    """One HTTP request from byte `hashes.size`, appending to `part`; returns the updated hashes."""
    offset = hashes.size
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        if offset and response.status == 200:
            print(f"{url}: the server ignored Range: bytes={offset}-; reading from byte 0 again", flush=True)
            hashes, offset = _Hashes(), 0
            part.unlink(missing_ok=True)
            bar.reset(total=expected.size)
        elif response.status == 206:
            start = _content_range_start(response.headers.get("Content-Range", ""))
            if start != offset:
                raise DownloadError(f"{url}: asked for byte {offset} onwards, the server sent from byte {start}")
        length = response.headers.get("Content-Length")
        announced = offset + int(length) if length is not None else None
        if announced is not None and expected.size is not None and announced != expected.size:
            raise ChecksumError(
                f"{url}: the server announces {announced} bytes, but {expected.source} expects {expected.size}"
            )
        with open(part, "ab" if offset else "wb") as f:
            while block := response.read(BLOCK):
                f.write(block)
                hashes.update(block)
                bar.update(len(block))
        if announced is not None and hashes.size < announced:
            raise _Incomplete(f"connection closed at byte {hashes.size} of {announced}")
    return hashes


def _verify(url: str, path: Path, hashes: _Hashes, expected: Expected, remove: Path | None) -> dict[str, Any]:
    """Size, then sha256, then md5; on a mismatch `remove` is deleted and the error names both values."""
    actual = {"size": hashes.size, "sha256": hashes.sha256.hexdigest(), "md5": hashes.md5.hexdigest()}
    for key in ("size", "sha256", "md5"):
        want = getattr(expected, key)
        if want is not None and want != actual[key]:
            if remove is not None:
                remove.unlink(missing_ok=True)
            what = "bytes" if key == "size" else key
            raise ChecksumError(
                f"{url}: {path}: {what} mismatch: expected {want} ({expected.source}), got {actual[key]}"
                + (f"; removed {remove}, rerun to fetch it again" if remove is not None else "")
            )
    return actual


def _content_range_start(value: str) -> int | None:
    match = re.match(r"bytes (\d+)-\d+/(\d+|\*)", value)
    return int(match.group(1)) if match else None


def _content_range_total(value: str) -> int | None:
    match = re.match(r"bytes (?:\*|\d+-\d+)/(\d+)", value)
    return int(match.group(1)) if match else None


# ---- pinning files without a published checksum (the lock file) -------------------------------


def read_lock(path: Path) -> dict[str, dict[str, Any]]:
    if not Path(path).exists():
        return {}
    pins = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(pins, dict):
        raise ValueError(f"{path}: expected a mapping of file name -> {{url, size, sha256}}")
    return pins


def _pin(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Add `key` to the lock file under an exclusive lock (parallel download jobs share it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    guard = os.open(path.parent, os.O_RDONLY)  # the folder, so that no extra file appears beside the config
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        pins = read_lock(path)
        pins[key] = entry
        header = (
            "# Sizes and sha256 of downloads that publish none, pinned by `attnrepro download` on first\n"
            "# download (as pip pins hashes). Commit this file: later downloads must match it.\n"
        )
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(header + yaml.safe_dump(pins, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        os.close(guard)  # releases the lock


def fetch(
    key: str, spec: DownloadFile, dest: Path, lock: Path, retries: int = 8, timeout_s: float = 60.0, **kwargs: Any
) -> dict[str, Any]:
    """Download data.wmt.files[key]: verified against the config, else its pin in `lock`, then pinned."""
    pin = read_lock(lock).get(key, {})
    size = spec.size if spec.size is not None else pin.get("size")
    sha256 = spec.sha256 if spec.sha256 is not None else pin.get("sha256")
    source = "config" if (spec.size, spec.sha256) == (size, sha256) else f"config + pin in {lock}"
    expected = Expected(size=size, sha256=sha256, md5=spec.md5, source=source)
    result = download(spec.url, dest, expected, retries=retries, timeout_s=timeout_s, **kwargs)
    pinned = (pin.get("size"), pin.get("sha256")) == (result["size"], result["sha256"])
    if (spec.size is None or spec.sha256 is None) and not pinned:
        _pin(lock, key, {"url": spec.url, "size": result["size"], "sha256": result["sha256"]})
        print(f"{lock}: pinned {key}: {result['size']} bytes, sha256 {result['sha256']}", flush=True)
    return result
