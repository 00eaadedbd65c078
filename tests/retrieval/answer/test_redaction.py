"""Secret redaction at egress (retrieval/answer/redaction.py): each pattern redacts what it should,
keeps the key name of a pair, counts once, is idempotent, and leaves ordinary notes alone —
prose, URLs, and the 64-hex SHA-256 digests lode prints everywhere.

The corpus in tests/secret_corpus.py (at least 50 secret forms, each redacted
with a marker of its kind, and 50 look-alikes that survive unchanged); detect-secrets' plugins
never touch the network; the speed-only triggers never hide a finding; a 2 MB single-line text
is redacted in work linear in its length.

The fake secrets are assembled from pieces so this file itself does not trip secret scanners.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.answer import redaction
from retrieval.answer.redaction import MARKER_PREFIX, looks_like_secret, redact
from tests.secret_corpus import LOOK_ALIKES, SECRETS, TWILIO_API_KEY, SecretCase

OPENAI = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0" + "abcdefghijklmnopqrstuvwxyz0123"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA " + "PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA " + "PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (f"export OPENAI_API_KEY={OPENAI}", OPENAI, "openai-key"),
        (f"the key is {OPENAI} for staging", OPENAI, "openai-key"),
        (f"clone with {GITHUB} please", GITHUB, "github-token"),
        (f"fine-grained {GITHUB_PAT} token", GITHUB_PAT, "github-token"),
        (f"aws id {AWS} in the bucket policy", AWS, "aws-access-key"),
        (f"slack bot {SLACK} posts alerts", SLACK, "slack-token"),
        (f"maps key {GOOGLE} restricted", GOOGLE, "google-api-key"),
        (f"session cookie {JWT} expired", JWT, "jwt"),
        (
            "curl -H 'Authorization: Bearer 4f9a0c2b7e1d8a6c5b3e' https://api.example.com",
            "4f9a0c2b7e1d8a6c5b3e",
            "bearer-token",
        ),
        ("db password=hunter2 on the replica", "hunter2", "password"),
        ("DB_PASSWORD: 's3cr3t pass phrase'", "s3cr3t pass phrase", "password"),
        ('{"client_secret": "abc123def456"}', "abc123def456", "secret"),
        ("api_key = 0123456789abcdef", "0123456789abcdef", "api-key"),
        ("GITHUB_TOKEN: plainvalue99", "plainvalue99", "token"),
        ("passwd:letmein", "letmein", "password"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI/K7MDENG", "secret"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", "authorization"),
        (
            "postgres://app:Sup3rS3cret@db.internal:5432/app",
            "Sup3rS3cret",
            "url-password",
        ),
        ("https://x.example/cb?access_token=abc123&state=9", "abc123", "token"),
    ],
)
def test_secret_is_redacted_with_its_kind(text: str, secret: str, kind: str) -> None:
    redacted, count = redact(text)
    assert secret not in redacted
    assert f"[REDACTED:{kind}]" in redacted
    assert count == 1


def test_pair_keeps_its_key_name_and_the_rest_of_the_text() -> None:
    redacted, count = redact("host=db1 password=hunter2 port=5432")
    assert redacted == "host=db1 password=[REDACTED:password] port=5432"
    assert count == 1


def test_pem_private_key_block_is_redacted_whole() -> None:
    text = f"Deploy key:\n\n{PEM}\n\nRotate it yearly."
    redacted, count = redact(text)
    assert redacted == "Deploy key:\n\n[REDACTED:private-key]\n\nRotate it yearly."
    assert count == 1


def test_pem_block_cut_by_a_passage_boundary_is_still_redacted() -> None:
    head, tail = PEM.split("VTLw7")
    opened, n_open = redact("Key follows.\n" + head)
    assert "MIIEow" not in opened and n_open == 1
    assert opened.startswith("Key follows.\n[REDACTED:private-key]")
    closed, n_close = redact("VTLw7" + tail + "\nafter the key")
    assert "bMY2Zkp18" not in closed and n_close == 1
    assert closed.endswith("\nafter the key")


def test_public_key_and_certificate_blocks_are_not_secrets() -> None:
    text = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOC\n-----END PUBLIC KEY-----"
    assert redact(text) == (text, 0)


def test_several_secrets_are_counted_once_each() -> None:
    text = f"token: {GITHUB}\nkey {AWS}\npassword = hunter22\n{PEM}"
    redacted, count = redact(text)
    assert count == 4
    for secret in (GITHUB, AWS, "hunter22", "MIIEow"):
        assert secret not in redacted
    # A token inside a pair is redacted once, by its specific pattern, and the pair left be.
    assert "token: [REDACTED:github-token]" in redacted


def test_redaction_is_idempotent() -> None:
    text = (
        f"api_key={OPENAI} Authorization: Bearer 4f9a0c2b7e1d8a6c5b3e "
        f"postgres://u:pw12345@h/db password: 'x y z' {PEM}"
    )
    once, count = redact(text)
    assert count == 5
    assert redact(once) == (once, 0)


# --- what must survive -----------------------------------------------------------------------


def test_sha256_digests_are_not_secrets() -> None:
    digest = hashlib.sha256(b"a note body").hexdigest()
    for text in (
        digest,
        f"version sha256 {digest} verified",
        f"sha256: {digest}",
        f"text_sha256={digest}",
        f"commit {digest[:40]} on main",
    ):
        assert redact(text) == (text, 0), text


@pytest.mark.parametrize(
    "text",
    [
        "Rotate the staging certs with certbot before Friday.",
        "Set maxmemory-policy allkeys-lru on the cache.",
        "The password policy requires twelve characters.",
        "Passwords: are stored hashed with argon2.",
        "The secret: we ship on Fridays.",
        "Bearer authentication/authorization is described in RFC 6750.",
        "max_tokens: 1024 and token_type: bearer in the response",
        "num_tokens=512 tokens per passage",
        "Tokens are the unit the embedder counts; sk-learn is a library.",
        "risk-assessment-framework-for-the-next-quarter",
        "see https://github.com/healthchecks/healthchecks/blob/master/hc/api/views.py",
        "https://docs.example.com/api-keys?page=2#rotate",
        "postgres://postgres@127.0.0.1:5432/lode",
        "mailto:alice@example.com and user@host:path",
        "I can't remember; the 2024-05-01 meeting didn't decide.",
        "PWD=/home/alice/projects",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == (text, 0)


def test_marker_prefix_is_visible() -> None:
    redacted, _ = redact("password=hunter2")
    assert MARKER_PREFIX in redacted


# --- corpus -----------------------------------------------------------------------


def test_the_corpus_has_at_least_fifty_of_each() -> None:
    assert len(SECRETS) >= 50
    assert len(LOOK_ALIKES) >= 50
    ids = [case.id for case in SECRETS] + [case_id for case_id, _ in LOOK_ALIKES]
    assert len(ids) == len(set(ids)), "corpus ids must be unique"


@pytest.mark.parametrize("case", SECRETS, ids=[case.id for case in SECRETS])
def test_corpus_secret_is_redacted(case: SecretCase) -> None:
    assert case.secret in case.text  # the case itself is well-formed
    redacted, count = redact(case.text)
    assert case.secret not in redacted
    assert f"[REDACTED:{case.kind}]" in redacted
    assert count >= 1
    assert redact(redacted) == (redacted, 0), "a second pass must find nothing"


@pytest.mark.parametrize(
    "text", [text for _, text in LOOK_ALIKES], ids=[case_id for case_id, _ in LOOK_ALIKES]
)
def test_corpus_look_alike_survives(text: str) -> None:
    assert redact(text) == (text, 0)


def test_redaction_keeps_the_text_around_the_value() -> None:
    redacted, count = redact("the api key is 9fA2kL0pQ7xZ3mN8, ask Bob")
    assert (redacted, count) == ("the api key is [REDACTED:api-key], ask Bob", 1)
    redacted, _ = redact("machine api.example.com login alice password S3cr3tPa55")
    assert redacted == "machine api.example.com login alice password [REDACTED:password]"


# The cut-off PEM case redacts to the end of the text by design; mixed texts leave it out.
_MIXABLE_SECRETS = [case for case in SECRETS if case.id != "pem-cut-open"]


@settings(max_examples=40, deadline=None)
@given(
    picks=st.lists(
        st.one_of(
            st.sampled_from(_MIXABLE_SECRETS),
            st.sampled_from([text for _, text in LOOK_ALIKES]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_mixed_notes_are_redacted_deterministically_and_idempotently(
    picks: list[SecretCase | str],
) -> None:
    """Any note made of corpus paragraphs: every secret goes, every look-alike paragraph
    stays word for word, the result does not depend on the call, and a second pass finds
    nothing."""
    text = "\n\n".join(p.text if isinstance(p, SecretCase) else p for p in picks)
    redacted, count = redact(text)
    assert redact(text) == (redacted, count)
    assert redact(redacted) == (redacted, 0)
    for pick in picks:
        if isinstance(pick, SecretCase):
            assert pick.secret not in redacted
            assert f"[REDACTED:{pick.kind}]" in redacted
        else:
            assert pick in redacted
    assert count >= sum(isinstance(p, SecretCase) for p in picks)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("hunter2", True),
        ("hunter2x!Q", True),
        ("9fA2kL0pQ7xZ3mN8", True),
        ("Tr0ub4dor&3", True),
        ("KxZpQwErTyUiOpAsDf", True),  # letters only, but random: mixed case at high entropy
        ("required", False),
        ("vault", False),
        ("1Pass", False),  # too short
        ("v2.1.0", False),
        ("2024-05-01", False),
        ("1024", False),
        ("/etc/secrets/db", False),
        ("https://vault.example.com", False),
        ("${DB_PASSWORD}", False),
        ("<your-token>", False),
        ("********", False),
        ("xxxxxxxx", False),
        ("aaaaaa11", False),  # two classes, but too little entropy
        ("Alice Smith", False),
        ("TypeScript", False),
    ],
)
def test_looks_like_secret_is_an_entropy_check(value: str, expected: bool) -> None:
    assert looks_like_secret(value) is expected


# --- detect-secrets: offline, triggers sound, bounded work --------------------------------------


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every way out (sockets, requests) recorded and refused."""
    import requests

    attempts: list[str] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(repr(args[:2]))
        raise OSError("redaction must not touch the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(requests.Session, "request", refuse)
    yield attempts


def test_detect_secrets_plugins_never_touch_the_network(no_network: list[str]) -> None:
    """Several plugins have a `verify` that calls the provider; redaction only ever calls
    `analyze_string`, so not one connection is attempted over the whole corpus."""
    for case in SECRETS:
        redact(case.text)
    for _, text in LOOK_ALIKES:
        redact(text)
    assert no_network == []


def test_the_detect_secrets_plugins_are_in_use() -> None:
    """The maintained detector runs: these kinds come only from its plugins."""
    kinds = {detector.kind for detector in redaction._detectors()}
    assert {"twilio-key", "telegram-token", "discord-token", "mailchimp-key"} <= kinds
    assert {"square-secret", "azure-storage-key", "high-entropy-string"} <= kinds
    ours = {kind for kind, _ in redaction._TOKEN_PATTERNS}
    for case in SECRETS:
        if case.kind in {"twilio-key", "telegram-token", "discord-token", "mailchimp-key"}:
            assert case.kind not in ours
            assert f"[REDACTED:{case.kind}]" in redact(case.text)[0]


def test_triggers_never_hide_a_plugin_finding() -> None:
    """A trigger only skips windows where the plugin would find nothing: on every corpus text,
    any window a plugin reports from matches all of that plugin's triggers."""
    texts = [case.text for case in SECRETS] + [text for _, text in LOOK_ALIKES]
    checked = 0
    for detector in redaction._detectors():
        for text in texts:
            for _, window in redaction._windows(text):
                if any(True for _ in redaction._raw_values(detector, window)):
                    checked += 1
                    for trigger in detector.triggers:
                        assert trigger.search(window), (detector.kind, window)
    assert checked >= 20  # the check saw real findings, not an empty corpus


def test_a_secret_across_a_window_edge_is_still_found() -> None:
    """Long lines are scanned in overlapping windows; a secret straddling an edge is whole in
    the next window. Twilio keys are found by detect-secrets alone."""
    step = redaction.WINDOW_CHARS - redaction.WINDOW_OVERLAP_CHARS
    for cut in (10, len(TWILIO_API_KEY) // 2, len(TWILIO_API_KEY) - 3):
        prefix = "lorem ipsum " * ((step - cut) // 12)
        prefix += "x" * (step - cut - len(prefix) - 1) + " "
        text = prefix + TWILIO_API_KEY + " and more words" * 200
        assert len(text) > redaction.WINDOW_CHARS
        redacted, count = redact(text)
        assert TWILIO_API_KEY not in redacted
        assert count == 1


@pytest.mark.slow
def test_a_two_megabyte_single_line_is_redacted_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many candidates on one 2 MB line (detect-secrets scans per line): the characters handed
    to the plugins stay proportional to the length — windows of bounded size, keyword
    candidates of bounded size — and every secret is redacted exactly once."""
    unit = (
        f"token={TWILIO_API_KEY} note 'Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpLTE1O' "
        'db_password_prod = "Xk9#mQ2$vL"; secretsecretsecret key: value password: see below '
        "sha256 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f eyJhbGci //a:b "
    )
    repeats = 2_000_000 // len(unit)
    text = unit * repeats
    assert "\n" not in text and len(text) > 1_900_000

    scanned = {"windows": 0, "window_chars": 0, "keyword_chars": 0}
    raw_values = redaction._raw_values

    def counting_raw_values(detector: redaction._Detector, window: str) -> Iterator[str]:
        scanned["windows"] += 1
        scanned["window_chars"] += len(window)
        assert len(window) <= redaction.WINDOW_CHARS
        return raw_values(detector, window)

    keyword_plugin = redaction._keyword()[0].plugin
    analyze = keyword_plugin.analyze_string

    def counting_analyze(string: str, **kwargs: object) -> Iterator[str]:
        # A bounded candidate: keyword, ≤ 64 word characters, ≤ 50 separator characters, a
        # quoted value of ≤ 512 — never the whole line.
        assert len(string) <= 700
        scanned["keyword_chars"] += len(string)
        return analyze(string, **kwargs)

    monkeypatch.setattr(redaction, "_raw_values", counting_raw_values)
    monkeypatch.setattr(keyword_plugin, "analyze_string", counting_analyze)

    redacted, count = redact(text)

    # Three secrets per unit: the token pair (Twilio key), the quoted base64, the keyword pair.
    assert count == 3 * repeats
    assert TWILIO_API_KEY not in redacted and "Xk9#mQ2$vL" not in redacted
    rounds = 2  # the second finds nothing
    overlap_factor = redaction.WINDOW_CHARS / (
        redaction.WINDOW_CHARS - redaction.WINDOW_OVERLAP_CHARS
    )
    plugins = len(redaction._detectors())
    assert scanned["window_chars"] <= rounds * plugins * overlap_factor * len(text) + 10_000
    assert scanned["keyword_chars"] <= rounds * len(text)
