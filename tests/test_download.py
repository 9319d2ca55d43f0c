"""Downloads against a real HTTP server on 127.0.0.1: resume by Range, retries, verification."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
import yaml
from archive_server import ArchiveServer, Behaviour

from attnrepro.config import DownloadFile
from attnrepro.data.download import ChecksumError, DownloadError, Expected, download
from attnrepro.data.fetch import fetch, read_lock
from attnrepro.errors import AttnreproError, ConfigError, DataError

NO_WAIT = {"backoff_s": 0.0, "progress": False}


def archive(n_lines: int = 20_000) -> bytes:
    """A real .tgz with one text member (≈ 0.5 MB), like the WMT training packs."""
    text = "".join(f"line {i} of a parallel corpus\n" for i in range(n_lines)).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("training/corpus.en")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    return buffer.getvalue()


def expected(data: bytes) -> Expected:
    return Expected(size=len(data), sha256=hashlib.sha256(data).hexdigest(), md5=hashlib.md5(data).hexdigest())


@pytest.fixture
def server():
    with ArchiveServer() as s:
        yield s


def test_a_connection_cut_mid_file_resumes_from_the_byte_where_it_stopped(server, tmp_path):
    data = archive()
    half = len(data) // 2
    url = server.add("/training-parallel-test.tgz", data, Behaviour(cut_after=[half]))
    dest = tmp_path / "training-parallel-test.tgz"
    result = download(url, dest, expected(data), **NO_WAIT)
    assert dest.read_bytes() == data and result["sha256"] == hashlib.sha256(data).hexdigest()
    first, second = server.requests("/training-parallel-test.tgz")
    assert (first.range, first.status, first.bytes_sent) == (None, 200, half)
    assert (second.range, second.status) == (f"bytes={half}-", 206)
    assert first.bytes_sent + second.bytes_sent == len(data)  # no byte fetched twice
    assert not dest.with_name(dest.name + ".part").exists()


def test_a_killed_run_resumes_from_its_part_file(server, tmp_path):
    data = archive()
    url = server.add("/dev.tgz", data)
    dest = tmp_path / "dev.tgz"
    dest.with_name("dev.tgz.part").write_bytes(data[:1000])  # what a killed job left behind
    download(url, dest, expected(data), **NO_WAIT)
    assert dest.read_bytes() == data
    (request,) = server.requests("/dev.tgz")
    assert (request.range, request.bytes_sent) == ("bytes=1000-", len(data) - 1000)


def test_a_corrupted_byte_gives_a_checksum_error_naming_url_file_and_both_checksums(server, tmp_path):
    data = archive()
    corrupted = bytearray(data)
    corrupted[len(data) // 3] ^= 0xFF
    url = server.add("/test-full.tgz", bytes(corrupted))
    dest = tmp_path / "test-full.tgz"
    want = expected(data)
    with pytest.raises(ChecksumError) as info:
        download(url, dest, want, **NO_WAIT)
    message = str(info.value)
    assert url in message and str(dest) in message
    assert want.sha256 in message and hashlib.sha256(bytes(corrupted)).hexdigest() in message
    assert not dest.exists() and not dest.with_name("test-full.tgz.part").exists()  # nothing under either name


def test_md5_alone_is_checked_when_that_is_all_that_is_published(server, tmp_path):
    data = archive()
    url = server.add("/test-full.tgz", data)
    with pytest.raises(ChecksumError, match="md5 mismatch: expected 0{32}"):
        download(url, tmp_path / "test-full.tgz", Expected(md5="0" * 32), **NO_WAIT)
    download(url, tmp_path / "test-full.tgz", Expected(md5=hashlib.md5(data).hexdigest()), **NO_WAIT)


def test_a_503_then_a_200_succeeds_after_backing_off(server, tmp_path):
    data = archive()
    url = server.add("/un.tgz", data, Behaviour(fail_with=[503, 503]))
    waits: list[float] = []
    download(url, tmp_path / "un.tgz", expected(data), backoff_s=0.5, progress=False, sleep=waits.append)
    assert (tmp_path / "un.tgz").read_bytes() == data
    assert [r.status for r in server.requests("/un.tgz")] == [503, 503, 200]
    assert waits == [0.5, 1.0]  # exponential backoff


def test_retries_give_up_with_an_error_naming_the_url(server, tmp_path):
    url = server.add("/giga.tar", archive(100), Behaviour(fail_with=[503] * 10))
    with pytest.raises(DownloadError, match=r"giga\.tar: gave up after 2 retries"):
        download(url, tmp_path / "giga.tar", Expected(), retries=2, **NO_WAIT)
    assert len(server.requests("/giga.tar")) == 3


def test_a_404_fails_at_once(server, tmp_path):
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(f"{server.url}/missing.tgz", tmp_path / "missing.tgz", Expected(), **NO_WAIT)
    assert len(server.requests("/missing.tgz")) == 1


def test_a_server_that_ignores_range_is_read_again_from_zero_and_still_verified(server, tmp_path):
    data = archive()
    url = server.add("/nc.tgz", data, Behaviour(ignore_range=True))
    dest = tmp_path / "nc.tgz"
    dest.with_name("nc.tgz.part").write_bytes(b"\0" * 5000)  # stale bytes that must not survive
    download(url, dest, expected(data), **NO_WAIT)
    assert dest.read_bytes() == data
    (request,) = server.requests("/nc.tgz")
    assert (request.range, request.status, request.bytes_sent) == ("bytes=5000-", 200, len(data))


def test_a_file_without_published_checksums_is_pinned_then_held_to_the_pin(server, tmp_path):
    data = archive()
    spec = DownloadFile(url=server.add("/bitexts.tgz", data), name="bitexts.tgz")
    lock = tmp_path / "config" / "wmt.lock.yaml"
    fetch("bitexts", spec, tmp_path / "a" / "bitexts.tgz", lock, **NO_WAIT)
    assert read_lock(lock) == {
        "bitexts": {"url": spec.url, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    }
    assert yaml.safe_load(lock.read_text())["bitexts"]["size"] == len(data)
    assert [p.name for p in lock.parent.iterdir()] == ["wmt.lock.yaml"]  # nothing else beside the config
    server.files["/bitexts.tgz"] = archive(19_999)  # the server now serves something else
    with pytest.raises(ChecksumError) as info:
        fetch("bitexts", spec, tmp_path / "b" / "bitexts.tgz", lock, **NO_WAIT)
    assert str(lock) in str(info.value)
    assert not (tmp_path / "b" / "bitexts.tgz").exists()


def test_a_finished_file_is_verified_and_not_fetched_again(server, tmp_path):
    data = archive()
    url = server.add("/europarl.tgz", data)
    dest: Path = tmp_path / "europarl.tgz"
    download(url, dest, expected(data), **NO_WAIT)
    download(url, dest, expected(data), **NO_WAIT)
    assert len(server.requests("/europarl.tgz")) == 1


def test_parallel_download_jobs_pin_into_one_lock_file_without_losing_entries(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from attnrepro.data.fetch import _pin

    lock = tmp_path / "wmt.lock.yaml"
    entries = {f"file{i}": {"url": f"http://x/{i}", "size": i, "sha256": f"{i:064x}"} for i in range(16)}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: _pin(lock, key, entries[key]), entries))
    assert read_lock(lock) == entries


# ---- a body that ends by closing the connection (no Content-Length): a cut looks like an end -------


def test_a_close_delimited_download_cut_at_40_percent_is_resumed_and_only_the_whole_file_pinned(server, tmp_path):
    data = archive()
    cut = len(data) * 4 // 10
    url = server.add("/dev.tgz", data, Behaviour(cut_after=[cut], close_delimited=True))
    lock = tmp_path / "wmt.lock.yaml"
    dest = tmp_path / "dl" / "dev.tgz"
    fetch("dev", DownloadFile(url=url, name="dev.tgz"), dest, lock, **NO_WAIT)
    assert dest.read_bytes() == data
    assert read_lock(lock)["dev"] == {"url": url, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    first, second = server.requests("/dev.tgz")
    assert (first.status, first.bytes_sent) == (200, cut)
    assert (second.range, second.status, second.bytes_sent) == (f"bytes={cut}-", 206, len(data) - cut)


def test_a_whole_close_delimited_body_is_confirmed_by_a_range_request_past_its_end(server, tmp_path):
    data = archive()
    url = server.add("/test-full.tgz", data, Behaviour(close_delimited=True))
    lock = tmp_path / "wmt.lock.yaml"
    fetch("test_full", DownloadFile(url=url, name="test-full.tgz"), tmp_path / "test-full.tgz", lock, **NO_WAIT)
    assert read_lock(lock)["test_full"]["size"] == len(data)
    assert [(r.method, r.range, r.status) for r in server.requests("/test-full.tgz")] == [
        ("GET", None, 200),
        ("GET", f"bytes={len(data)}-", 416),  # Content-Range: bytes */SIZE: nothing after our last byte
    ]


def test_a_server_ignoring_range_is_asked_for_the_length_with_head(server, tmp_path):
    data = archive()
    cut = len(data) * 4 // 10
    url = server.add("/nc.tgz", data, Behaviour(cut_after=[cut], close_delimited=True, ignore_range=True))
    lock = tmp_path / "wmt.lock.yaml"
    dest = tmp_path / "nc.tgz"
    fetch("nc", DownloadFile(url=url, name="nc.tgz"), dest, lock, **NO_WAIT)
    assert dest.read_bytes() == data and read_lock(lock)["nc"]["size"] == len(data)
    assert [(r.method, r.status, r.bytes_sent) for r in server.requests("/nc.tgz")] == [
        ("GET", 200, cut),
        ("GET", 200, len(data)),  # Range ignored: read again from byte 0 ...
        ("HEAD", 200, 0),  # ... to the length HEAD states
    ]


def test_an_end_that_nothing_confirms_fails_naming_the_url_and_pins_nothing(server, tmp_path):
    data = archive()
    cut = len(data) * 4 // 10
    how = Behaviour(cut_after=[cut], close_delimited=True, ignore_range=True, head=False)
    url = server.add("/bitexts.tgz", data, how)
    lock = tmp_path / "wmt.lock.yaml"
    dest = tmp_path / "bitexts.tgz"
    with pytest.raises(DownloadError) as info:
        fetch("bitexts", DownloadFile(url=url, name="bitexts.tgz"), dest, lock, **NO_WAIT)
    message = str(info.value)
    assert url in message and "Content-Length" in message and "416" in message and "HEAD" in message
    assert "data.wmt.files.bitexts" in message  # what the user can add: a published size or sha256
    assert not lock.exists() and not dest.exists()
    assert isinstance(info.value, AttnreproError)


def test_an_unconfirmed_end_is_judged_by_a_published_checksum(server, tmp_path):
    data = archive()
    how = Behaviour(cut_after=[len(data) // 3], close_delimited=True, ignore_range=True, head=False)
    url = server.add("/dev.tgz", data, how)
    spec = DownloadFile(url=url, name="dev.tgz", md5=hashlib.md5(data).hexdigest())
    fetch("dev", spec, tmp_path / "dev.tgz", tmp_path / "wmt.lock.yaml", **NO_WAIT)
    assert (tmp_path / "dev.tgz").read_bytes() == data
    assert [(r.method, r.status, r.bytes_sent) for r in server.requests("/dev.tgz")] == [
        ("GET", 200, len(data) // 3),
        ("GET", 200, len(data)),  # Range ignored, no length: read to the close for the md5 to judge
        ("HEAD", 405, 0),
    ]
    assert read_lock(tmp_path / "wmt.lock.yaml")["dev"]["size"] == len(data)
    server.add("/dev.tgz", data, Behaviour(cut_after=[len(data) // 3] * 2, close_delimited=True, ignore_range=True))
    server.behaviour["/dev.tgz"].head = False
    with pytest.raises(ChecksumError, match="md5 mismatch"):  # both reads cut: the md5 rejects the third
        fetch("dev", spec, tmp_path / "again" / "dev.tgz", tmp_path / "again.lock.yaml", **NO_WAIT)
    assert not (tmp_path / "again.lock.yaml").exists() and list((tmp_path / "again").iterdir()) == []


def test_a_chunked_body_ends_at_its_last_chunk_and_a_cut_one_is_resumed(server, tmp_path):
    data = archive()
    url = server.add("/un.tgz", data, Behaviour(chunked=True))
    lock = tmp_path / "wmt.lock.yaml"
    fetch("un", DownloadFile(url=url, name="un.tgz"), tmp_path / "un.tgz", lock, **NO_WAIT)
    assert [(r.status, r.bytes_sent) for r in server.requests("/un.tgz")] == [(200, len(data))]  # no probe
    cut = 20_000  # inside the third 8 KiB chunk
    url = server.add("/giga.tar", data, Behaviour(chunked=True, cut_after=[cut]))
    fetch("giga", DownloadFile(url=url, name="giga.tar"), tmp_path / "giga.tar", lock, **NO_WAIT)
    assert (tmp_path / "giga.tar").read_bytes() == data and read_lock(lock)["giga"]["size"] == len(data)
    first, second = server.requests("/giga.tar")
    assert second.range == f"bytes={first.bytes_sent // 8192 * 8192}-"  # the whole chunks received


# ---- data.wmt.mirror: a folder of copies under the published names, looked in first ----------------


def test_a_matching_copy_in_the_mirror_is_copied_and_no_request_reaches_the_server(server, tmp_path):
    data = archive()
    url = server.add("/training-parallel-nc-v9.tgz", data)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "training-parallel-nc-v9.tgz").write_bytes(data)
    spec = DownloadFile(url=url, name="training-parallel-nc-v9.tgz", size=len(data), sha256=expected(data).sha256)
    dest = tmp_path / "dl" / "training-parallel-nc-v9.tgz"
    result = fetch("nc", spec, dest, tmp_path / "wmt.lock.yaml", mirror=mirror, **NO_WAIT)
    assert dest.read_bytes() == data and result["md5"] == hashlib.md5(data).hexdigest()
    assert server.log == []
    assert sorted(p.name for p in dest.parent.iterdir()) == ["training-parallel-nc-v9.tgz"]  # no temporary left
    assert not (tmp_path / "wmt.lock.yaml").exists()  # size and sha256 published: nothing to pin


def test_a_mismatching_copy_in_the_mirror_is_an_error_naming_both_paths_and_nothing_is_downloaded(server, tmp_path):
    data = archive()
    url = server.add("/dev.tgz", data)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    corrupted = bytearray(data)
    corrupted[len(data) // 2] ^= 0xFF
    (mirror / "dev.tgz").write_bytes(bytes(corrupted))
    dest = tmp_path / "dl" / "dev.tgz"
    with pytest.raises(ChecksumError) as info:
        fetch(
            "dev",
            DownloadFile(url=url, name="dev.tgz", md5=expected(data).md5),
            dest,
            tmp_path / "l.yaml",
            mirror=mirror,
        )
    message = str(info.value)
    assert str(mirror / "dev.tgz") in message and str(dest) in message and "data.wmt.mirror" in message
    assert "md5 mismatch" in message and "data.wmt.files.dev" in message
    assert server.log == [] and list(dest.parent.iterdir()) == []


def test_a_file_missing_from_the_mirror_is_downloaded_and_a_copy_without_checksums_pinned(server, tmp_path):
    data = archive()
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    lock = tmp_path / "wmt.lock.yaml"
    url = server.add("/un.tgz", data)
    fetch("un", DownloadFile(url=url, name="un.tgz"), tmp_path / "dl" / "un.tgz", lock, mirror=mirror, **NO_WAIT)
    assert (tmp_path / "dl" / "un.tgz").read_bytes() == data and len(server.requests("/un.tgz")) == 1
    (mirror / "bitexts.tgz").write_bytes(data)
    spec = DownloadFile(url=f"{server.url}/bitexts.tgz", name="bitexts.tgz")  # nothing published, not served
    fetch("bitexts", spec, tmp_path / "dl" / "bitexts.tgz", lock, mirror=mirror, **NO_WAIT)
    assert read_lock(lock)["bitexts"] == {"url": spec.url, "size": len(data), "sha256": expected(data).sha256}
    assert server.requests("/bitexts.tgz") == []


def test_a_mirror_that_is_not_a_folder_names_the_config_key(server, tmp_path):
    spec = DownloadFile(url=server.add("/dev.tgz", archive()), name="dev.tgz")
    with pytest.raises(ConfigError, match=r"data\.wmt\.mirror: .*/nowhere is not a folder"):
        fetch("dev", spec, tmp_path / "dev.tgz", tmp_path / "l.yaml", mirror=tmp_path / "nowhere", **NO_WAIT)
    assert server.log == []


@pytest.mark.parametrize(
    ("text", "problem"), [("bitexts: [1, 2\n", "not a readable lock file"), ("- a\n- b\n", "expected a mapping")]
)
def test_a_broken_lock_file_is_named(tmp_path, text, problem):
    lock = tmp_path / "wmt.lock.yaml"
    lock.write_text(text)
    with pytest.raises(DataError, match=f"{lock}: {problem}"):
        read_lock(lock)
