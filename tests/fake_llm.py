"""A fake OpenAI-compatible chat server for tests: real HTTP on 127.0.0.1 (an ephemeral port),
so the client's timeouts, retries, headers and request bytes are exercised for real, with no
network beyond loopback.

Script it per test with a queue of responses (`reply`, `fail`, `script`): each says the status,
the message content (a raw string, so tests can send fences, raw newlines or cut-off JSON),
the finish_reason, a delay, or a whole raw body. Every request received is recorded
(`requests`: path, headers, exact body bytes, arrival time). `on_request`, if set, runs in the
server thread when a request arrives, before the response — tests use it to check what was
already committed to the database at that moment (the egress row). An unscripted request gets
HTTP 500 "no scripted response", so a test that sends more than it expected fails loudly.

The `fake_llm` fixture (tests/conftest.py) starts one, points `LODE_LLM_BASE_URL` at it and
shrinks the retry backoff.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    """One scripted response. `body` (bytes/str/dict), when given, is sent as is instead of a
    chat completion built from `content` and `finish_reason`."""

    status: int = 200
    content: str | None = None
    finish_reason: str = "stop"
    body: bytes | str | dict | None = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.json["messages"]

    def message(self, role: str) -> str:
        return next(m["content"] for m in self.messages if m["role"] == role)


class FakeLLM:
    """The server and its script. `base_url` ends in /v1, like a real endpoint's."""

    def __init__(self) -> None:
        self.queue: deque[Scripted] = deque()
        self.requests: list[Received] = []
        self.on_request: Callable[[Received], None] | None = None
        self.callback_errors: list[BaseException] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        # A short poll interval: shutdown() waits up to one interval, once per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # --- scripting ---------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}/v1"

    def script(self, *responses: Scripted) -> FakeLLM:
        self.queue.extend(responses)
        return self

    def reply(
        self, content: str | dict, *, finish_reason: str = "stop", delay: float = 0.0
    ) -> FakeLLM:
        """Queue a 200 chat completion whose message content is `content` (a dict is sent as
        its JSON text)."""
        text = content if isinstance(content, str) else json.dumps(content)
        return self.script(Scripted(content=text, finish_reason=finish_reason, delay=delay))

    def fail(self, status: int, body: str = "error", *, headers: dict | None = None) -> FakeLLM:
        return self.script(Scripted(status=status, body=body, headers=headers or {}))

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping out a scripted delay
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- the handler -------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                received = Received(
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    received_at=time.time(),
                )
                with fake._lock:
                    fake.requests.append(received)
                if fake.on_request is not None:
                    try:
                        fake.on_request(received)
                    except BaseException as exc:  # reported by the test, not lost in a thread
                        fake.callback_errors.append(exc)
                    finally:
                        from django.db import connections

                        connections.close_all()  # this thread's connections only
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, b'{"error": "not found"}', {})
                    return
                with fake._lock:
                    scripted = fake.queue.popleft() if fake.queue else None
                if scripted is None:
                    self._send(500, b'{"error": "fake LLM: no scripted response"}', {})
                    return
                if scripted.delay and fake._stop.wait(scripted.delay):
                    return
                self._send(scripted.status, fake._body(scripted, received), scripted.headers)

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler

    def _body(self, scripted: Scripted, received: Received) -> bytes:
        if scripted.body is not None:
            if isinstance(scripted.body, bytes):
                return scripted.body
            if isinstance(scripted.body, dict):
                return json.dumps(scripted.body).encode()
            return scripted.body.encode()
        try:
            model = json.loads(received.body).get("model", "fake-model")
        except ValueError:
            model = "fake-model"
        completion = {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": scripted.content},
                    "finish_reason": scripted.finish_reason,
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return json.dumps(completion).encode()


@contextmanager
def running_fake_llm(settings: Any, monkeypatch: Any) -> Iterator[FakeLLM]:
    """A started FakeLLM wired into settings (base URL, model, no key, 5 s timeout, 2 retries)
    with a near-zero retry backoff; stopped afterwards."""
    from retrieval.answer.llm import ChatClient

    fake = FakeLLM().start()
    settings.LODE_LLM_BASE_URL = fake.base_url
    settings.LODE_LLM_MODEL = "fake-model"
    settings.LODE_LLM_API_KEY = ""
    settings.LODE_LLM_TIMEOUT_SECONDS = 5
    settings.LODE_LLM_MAX_RETRIES = 2
    settings.LODE_LLM_MAX_TOKENS = 256
    monkeypatch.setattr(ChatClient, "backoff_seconds", 0.01)
    try:
        yield fake
    finally:
        fake.stop()
