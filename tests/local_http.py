"""A tiny HTTP server on 127.0.0.1 for the externals tests (no network): routes map a path
to (status, headers, body) or to a callable that returns them."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Trickle:
    """A body sent `chunk` by `chunk`, one every `interval` seconds, `count` times (a slow
    or hostile server); sending stops when the client goes away or the server stops."""

    chunk: bytes = b"x"
    interval: float = 0.1
    count: int = 10_000

    def __len__(self) -> int:
        return len(self.chunk) * self.count


Response = tuple[int, dict[str, str], "bytes | Trickle"]


class LocalServer:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.routes: dict[str, Response | Callable[[], Response]] = {}
        self.hits: list[str] = []
        self.headers: list[dict[str, str]] = []  # each request's headers, in order

    def url(self, path: str) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}{path}"


@contextmanager
def local_server() -> Iterator[LocalServer]:
    holder: dict[str, LocalServer] = {}
    stopping = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state = holder["state"]
            state.hits.append(self.path)
            state.headers.append(dict(self.headers.items()))
            route = state.routes.get(self.path)
            if route is None:
                status, headers, body = 404, {"Content-Type": "text/plain"}, b"not found"
            else:
                status, headers, body = route() if callable(route) else route
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            # The client may stop reading (a size cap, a timeout): expected.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if isinstance(body, Trickle):
                    self._trickle(body)
                else:
                    self.wfile.write(body)

        def _trickle(self, body: Trickle) -> None:
            for _ in range(body.count):
                if stopping.wait(body.interval):
                    return
                self.wfile.write(body.chunk)
                self.wfile.flush()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["state"] = LocalServer(server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["state"]
    finally:
        stopping.set()
        server.shutdown()
        server.server_close()


def slow(seconds: float, response: Response) -> Callable[[], Response]:
    def handler() -> Response:
        time.sleep(seconds)
        return response

    return handler


def trickle(
    content_type: str = "text/plain",
    *,
    interval: float = 0.1,
    chunk: bytes = b"x",
    count: int = 10_000,
) -> Callable[[], Response]:
    """A route that answers 200 at once, then sends its body a few bytes at a time."""
    body = Trickle(chunk=chunk, interval=interval, count=count)

    def handler() -> Response:
        return 200, {"Content-Type": content_type, "Content-Length": str(len(body))}, body

    return handler


def minimal_pdf(pages: list[str]) -> bytes:
    """A valid PDF with one line of Helvetica text per page (pypdf reads it back)."""
    objects: list[bytes] = []
    count = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    font_id = 3 + 2 * count
    for i, text in enumerate(pages):
        content_id = 4 + 2 * i
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1")
        objects.append(
            b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream"
        )
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)
