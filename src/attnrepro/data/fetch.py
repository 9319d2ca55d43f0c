"""One file of data.wmt.files on disk: copied from data.wmt.mirror when the mirror holds it, else
downloaded (attnrepro.data.download), and held to the config's size and checksums.

Files without a published size or sha256 are pinned on first download in a lock file (the
config's name with `.lock.yaml`, beside it), as pip's `--require-hashes` pins packages:
later downloads must match the pin. Only a file whose end was confirmed is ever pinned: a
download that cannot tell a cut from the end fails before it gets here.

The mirror is a folder of copies under the published names (a cluster's shared dataset folder
for compute nodes without internet): a copy there is verified like a download, and one that
does not match is an error naming both paths, never a reason to download over it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import yaml

from attnrepro.config import DownloadFile
from attnrepro.data.download import ChecksumError, DownloadError, Expected, copy_verified, download
from attnrepro.errors import ConfigError, DataError


def mirrored(mirror: Path | None, name: str) -> Path | None:
    """`mirror/name` when a mirror is configured and holds that file; the mirror itself must exist."""
    if mirror is None:
        return None
    if not Path(mirror).is_dir():
        raise ConfigError(f"data.wmt.mirror: {mirror} is not a folder")
    copy = Path(mirror) / name
    return copy if copy.is_file() else None


# ---- pinning files without a published checksum (the lock file) -------------------------------


def read_lock(path: Path) -> dict[str, dict[str, Any]]:
    if not Path(path).exists():
        return {}
    try:
        pins = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not a readable lock file ({err}); fix it or remove it to pin again") from err
    if not isinstance(pins, dict) or not all(isinstance(entry, dict) for entry in pins.values()):
        raise DataError(f"{path}: expected a mapping of file name -> {{url, size, sha256}}")
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
    key: str,
    spec: DownloadFile,
    dest: Path,
    lock: Path,
    retries: int = 8,
    timeout_s: float = 60.0,
    mirror: Path | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """data.wmt.files[key] to `dest`: copied from the mirror when it holds the file, else downloaded;
    verified against the config, else its pin in `lock`, then pinned."""
    pin = read_lock(lock).get(key, {})
    size = spec.size if spec.size is not None else pin.get("size")
    sha256 = spec.sha256 if spec.sha256 is not None else pin.get("sha256")
    source = "config" if (spec.size, spec.sha256) == (size, sha256) else f"config + pin in {lock}"
    expected = Expected(size=size, sha256=sha256, md5=spec.md5, source=source)
    copy = mirrored(mirror, spec.name)
    try:
        if copy is not None and not Path(dest).exists():
            result = copy_verified(copy, dest, expected)
            print(f"{dest}: copied from {copy}", flush=True)
        else:
            result = download(spec.url, dest, expected, retries=retries, timeout_s=timeout_s, **kwargs)
    except (ChecksumError, DownloadError) as err:
        raise type(err)(f"{err} (data.wmt.files.{key})") from err
    pinned = (pin.get("size"), pin.get("sha256")) == (result["size"], result["sha256"])
    if (spec.size is None or spec.sha256 is None) and not pinned:
        _pin(lock, key, {"url": spec.url, "size": result["size"], "sha256": result["sha256"]})
        print(f"{lock}: pinned {key}: {result['size']} bytes, sha256 {result['sha256']}", flush=True)
    return result
