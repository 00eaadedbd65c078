"""Secret redaction at egress (retrieval/answer/redaction.py): each pattern redacts what it should,
keeps the key name of a pair, counts once, is idempotent, and leaves ordinary notes alone —
prose, URLs, and the 64-hex SHA-256 digests lode prints everywhere.

The fake secrets are assembled from pieces so this file itself does not trip secret scanners.
"""

from __future__ import annotations

import hashlib

import pytest

from retrieval.answer.redaction import MARKER_PREFIX, redact

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
