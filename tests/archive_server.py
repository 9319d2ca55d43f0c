"""A real HTTP server on 127.0.0.1 for download tests: serves bytes by path, honours Range
(206 + Content-Range) unless told not to, answers HEAD with the length, and can misbehave on
purpose (fail with a status, cut the connection mid-file, ignore Range, end a body by closing
the connection instead of announcing its length, answer no HEAD). Every request is logged with
what was sent."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Behaviour:
    fail_with: list[int] = field(default_factory=list)  # statuses returned (in order) before serving
    cut_after: list[int] = field(default_factory=list)  # per request: close after this many body bytes
    ignore_range: bool = False
    close_delimited: bool = False  # HTTP/1.0 style: no Content-Length, the body ends when the connection closes
    head: bool = True  # answer HEAD with Content-Length (else 405)
    chunked: bool = False  # Transfer-Encoding: chunked (the terminal chunk marks the end; a cut stops mid-chunk)


@dataclass
class Served:
    path: str
    range: str | None
    status: int
    bytes_sent: int
    method: str = "GET"


class ArchiveServer:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.behaviour: dict[str, Behaviour] = {}
        self.log: list[Served] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                server._serve(self)

            def do_HEAD(self) -> None:
                server._head(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def add(self, path: str, data: bytes, behaviour: Behaviour | None = None) -> str:
        self.files[path] = data
        self.behaviour[path] = behaviour or Behaviour()
        return f"{self.url}{path}"

    def requests(self, path: str) -> list[Served]:
        return [r for r in self.log if r.path == path]

    def __enter__(self) -> ArchiveServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        path, header = handler.path, handler.headers.get("Range")
        if path not in self.files:
            self._status(handler, path, header, 404)
            return
        data, how = self.files[path], self.behaviour[path]
        if how.fail_with:
            self._status(handler, path, header, how.fail_with.pop(0))
            return
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", header or "")
        if how.close_delimited:
            handler.protocol_version = "HTTP/1.0"  # this response only: its body ends at the close
            handler.close_connection = True
        if match and not how.ignore_range:
            start = int(match.group(1))
            if start >= len(data):
                self.log.append(Served(path, header, 416, 0))
                handler.send_response(416)
                handler.send_header("Content-Range", f"bytes */{len(data)}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            handler.send_response(200)
        body = data[start:]
        if how.chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        elif not how.close_delimited:
            handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Content-Type", "application/octet-stream")
        cut = how.cut_after.pop(0) if how.cut_after else None
        if cut is not None:
            handler.close_connection = True
        sent = len(body) if cut is None else cut
        self.log.append(Served(path, header, 206 if start else 200, sent))  # before the client can see it
        handler.end_headers()
        if how.chunked:
            self._write_chunks(handler, body, sent)
        else:
            handler.wfile.write(body[:sent])
        handler.wfile.flush()

    @staticmethod
    def _write_chunks(handler: BaseHTTPRequestHandler, body: bytes, sent: int, size: int = 8192) -> None:
        """`body` in chunks of `size` bytes, stopping inside the chunk that holds byte `sent` when it is cut."""
        for begin in range(0, len(body), size):
            chunk = body[begin : begin + size]
            handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk[: max(sent - begin, 0)])
            if begin + len(chunk) > sent:
                return  # cut: the chunk announced more bytes than follow
            handler.wfile.write(b"\r\n")
        handler.wfile.write(b"0\r\n\r\n")

    def _head(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        status = 404 if path not in self.files else 200 if self.behaviour[path].head else 405
        self.log.append(Served(path, None, status, 0, method="HEAD"))
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(self.files[path])) if status == 200 else "0")
        handler.end_headers()

    def _status(self, handler: BaseHTTPRequestHandler, path: str, header: str | None, status: int) -> None:
        body = f"status {status}\n".encode()
        self.log.append(Served(path, header, status, 0))
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
