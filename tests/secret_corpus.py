"""The secret-redaction corpus: secret forms that must be redacted and
look-alikes that must survive unchanged. Used by tests/retrieval/answer/test_redaction.py.

Every value is fake: made up for this file, or a vendor's published example (Stripe's docs
test key, AWS's `…EXAMPLE` keys). They are assembled from pieces so this file does not trip
secret scanners (GitHub push protection, detect-secrets itself on the repository).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class SecretCase:
    """`text` holds `secret`; after redaction `secret` is gone and `[REDACTED:kind]` is there."""

    id: str
    text: str
    secret: str
    kind: str


def _pem(label: str, body: tuple[str, ...], *, fence: str = "-----") -> str:
    space = " " if fence == "----" else ""
    begin = f"{fence}{space}BEGIN {label}{space}{fence}"
    end = f"{fence}{space}END {label}{space}{fence}"
    return "\n".join((begin, *body, end))


_B64_LINES = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
)
_PRIVATE = "PRIVATE" + " KEY"

STRIPE_DOCS_TEST_KEY = "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc"
STRIPE_LIVE = "sk_live_" + "51Hq8ZtQk3XyWm2PLa9cVb7N"
STRIPE_LIVE_LONG = "sk_live_" + "51Mz7eKJ2pQ0xR8vLw3nT6yBc4DfGh9Jk1LmNo5PqRs7TuVw2XyZ0a3Bc5De"
STRIPE_RESTRICTED_LIVE = "rk_live_" + "51Hq8ZtQk3XyWm2PLa9cVb7NrT"
STRIPE_RESTRICTED_TEST = "rk_test_" + "51Hq8ZtQk3XyWm2PLa9cVb7NrT"
STRIPE_WEBHOOK = "whsec_" + "3b8Fq2KzL9mW4xR7tY1pN6cV0dS5hJ8a"
OPENAI_LEGACY = "sk-" + "Ab3dEf6hIj9kLm2nOp5q" + "T3Blbk" + "FJ" + "Rs8tUv1wXy4zAb3dEf6h"
OPENAI_PROJECT = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zQ7rT2uV9"
ANTHROPIC = "sk-" + "ant-api03-" + "Zq4Rt8Yu2Io6Pa0Sd3Fg7Hj1Kl5Zx9Cv2Bn6Mq8Wd-Xx1AAA"
GITHUB_CLASSIC = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITHUB_OAUTH = "gho_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
GITHUB_USER_TO_SERVER = "ghu_" + "m4N5b6V7c8X9z0L1k2J3h4G5f6D7s8A9p0O1"
GITHUB_SERVER_TO_SERVER = "ghs_" + "Qw3Er4Ty5Ui6Op7As8Df9Gh0Jk1Lz2Xc3Vb4N"
GITHUB_REFRESH = "ghr_" + "1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R9s0T1u2V3w4X5y6Z7a8B9c0D"
GITHUB_FINE_GRAINED = "github_pat_" + "11ABCDEFG0" + "abcdefghijklmnopqrstuvwxyz0123_AbCdEf9876"
GITLAB = "glpat-" + "xY7zK2mN9pQ4rS1tU6vW"
SLACK_BOT = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_USER = "xoxp-" + "123456789012-123456789012-1234567890123-0a1b2c3d4e5f6a7b8c9d"
SLACK_APP_LEGACY = "xoxa-" + "2-123456789012-123456789012-0a1b2c3d4e5f"
SLACK_REFRESH = "xoxr-" + "123456789012-0a1b2c3d4e5f6a7b8c9d0e1f"
SLACK_APP_LEVEL = "xapp-" + "1-A01BC2DE3FG-1234567890123-0a1b2c3d4e5f6a7b8c9d0e1f"
SLACK_WEBHOOK = (
    "https://hooks.slack.com/services/" + "T01ABCD2EFG/B01HIJK3LMN/" + "aBcDeFgHiJkLmNoPqRsTuVwX"
)
AWS_ACCESS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SESSION_KEY_ID = "ASIA" + "Y34FZKBOKMUTVV7A"
AWS_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GOOGLE_API = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
GOOGLE_OAUTH = "GOCSPX-" + "1a2B3c4D5e6F7g8H9i0J1k2L3m4N"
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
SENDGRID = "SG." + "ngeVfQFYQlKU0ufo8x5d1A" + ".TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr"
TWILIO_API_KEY = "SK" + "2b1d6b5c8e0f4a7b9c3d1e2f5a6b7c8d"
MAILCHIMP = "0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d" + "-us12"
NPM = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PYPI = (
    "pypi-"
    + "AgEIcHlwaS5vcmc"
    + "CJDk3ZjBlZjQ4LTcxNDUtNGE2NS05YzE5LWRhYzI5YjQ2OWZkOQACKlszLCJmOTNkZjQ1ZS05"
)
HUGGINGFACE = "hf_" + "aB3cD4eF5gH6iJ7kL8mN9oP0qR1sT2uV3w"
DISCORD = "MTA0NTY3ODkwMTIzNDU2Nzg5" + ".GhIjKl." + "mNoPqRsTuVwXyZaBcDeFgHiJkLm"
TELEGRAM = "123456789" + ":AAE" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXvC9"
AZURE_STORAGE = (
    "lX2oQ3pR4sT5uV6wX7yZ8aB9cD0eF1gH2iJ3kL4mN5oP6qR7sT8uV9wX0yZ1aB2cD3eF4gH5iJ6kL7mN8o"
    + "P9qR0s=="
)
SQUARE = "sq0csp-" + "aB3cD4eF5gH6iJ7kL8mN9oP0qR1sT2uV3wX4yZ5aB6c"
DIGITALOCEAN = "dop_v1_" + "0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b"
ARTIFACTORY = "AKC" + "p8jQs4kz7N2bV9xR3tY6uW1mL5cF0gH"
HIGH_ENTROPY_B64 = "Zm9vYmFy" + "YmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpLTE1O"

PEM_RSA = _pem("RSA " + _PRIVATE, _B64_LINES)
PEM_OPENSSH = _pem("OPENSSH " + _PRIVATE, ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB",))
PEM_EC = _pem(
    "EC " + _PRIVATE, ("MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oR7Kw5AUmHHOoAoGCCqGSM49",)
)
PEM_PKCS8 = _pem(_PRIVATE, ("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",))
PEM_ENCRYPTED = _pem(
    "ENCRYPTED " + _PRIVATE, ("MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQIc2Vjcm",)
)
PGP_PRIVATE = _pem(
    "PGP " + _PRIVATE + " BLOCK",
    ("", "lQOYBF9kZ2UBCADGq3c0pTtX2m1yQ8s7", "=Ab3d"),
)
SSH2_PRIVATE = _pem(
    "SSH2 ENCRYPTED " + _PRIVATE,
    ('Comment: "rsa-key-20240501"', "P2/56wAAAi4AAAA3aWYtbW9kbntzaWdue3JzYS1wa2NzMS1zaGExfSxl"),
    fence="----",
)
PUTTY_PRIVATE_BODY = "AAABAQCf3q9kZr7Xh2eLw1pN5tY8uV0bC4dE6fG7hJ9kL2mN3oP5qR7sT9uV1wX3"
PUTTY = (
    "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: deploy\n"
    "Public-Lines: 1\nAAAAB3NzaC1yc2EAAAADAQABAAABAQC7\n"
    f"Private-Lines: 1\n{PUTTY_PRIVATE_BODY}\nPrivate-MAC: 0a1b2c3d4e5f"
)
SERVICE_ACCOUNT_KEY_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"

SECRETS: tuple[SecretCase, ...] = (
    # Stripe, every documented secret form (publishable `pk_` keys are public: look-alikes).
    SecretCase("stripe-docs-test-key", f"Stripe.api_key = {STRIPE_DOCS_TEST_KEY!r}",
               STRIPE_DOCS_TEST_KEY, "stripe-key"),
    SecretCase("stripe-test-key-in-prose", f"use {STRIPE_DOCS_TEST_KEY} for the sandbox",
               STRIPE_DOCS_TEST_KEY, "stripe-key"),
    SecretCase("stripe-live-key", f"live key {STRIPE_LIVE} (rotate quarterly)",
               STRIPE_LIVE, "stripe-key"),
    SecretCase("stripe-live-key-long", f"STRIPE_KEY {STRIPE_LIVE_LONG}",
               STRIPE_LIVE_LONG, "stripe-key"),
    SecretCase("stripe-restricted-live", f"reporting uses {STRIPE_RESTRICTED_LIVE}.",
               STRIPE_RESTRICTED_LIVE, "stripe-key"),
    SecretCase("stripe-restricted-test", f"- restricted: {STRIPE_RESTRICTED_TEST}",
               STRIPE_RESTRICTED_TEST, "stripe-key"),
    SecretCase("stripe-webhook-secret", f"webhook signing {STRIPE_WEBHOOK}",
               STRIPE_WEBHOOK, "stripe-webhook-secret"),
    # LLM providers.
    SecretCase("openai-legacy", f"old key {OPENAI_LEGACY} revoked?", OPENAI_LEGACY, "openai-key"),
    SecretCase("openai-project", f"export OPENAI_API_KEY={OPENAI_PROJECT}",
               OPENAI_PROJECT, "openai-key"),
    SecretCase("anthropic", f"claude: {ANTHROPIC}", ANTHROPIC, "anthropic-key"),
    SecretCase("huggingface", f"HF token {HUGGINGFACE} for the gated model",
               HUGGINGFACE, "huggingface-token"),
    # Source forges.
    SecretCase("github-classic", f"clone with {GITHUB_CLASSIC} please",
               GITHUB_CLASSIC, "github-token"),
    SecretCase("github-oauth", f"oauth {GITHUB_OAUTH}", GITHUB_OAUTH, "github-token"),
    SecretCase("github-user-to-server", f"({GITHUB_USER_TO_SERVER})",
               GITHUB_USER_TO_SERVER, "github-token"),
    SecretCase("github-server-to-server", f"app token: `{GITHUB_SERVER_TO_SERVER}`",
               GITHUB_SERVER_TO_SERVER, "github-token"),
    SecretCase("github-refresh", f"refresh {GITHUB_REFRESH}", GITHUB_REFRESH, "github-token"),
    SecretCase("github-fine-grained", f"fine-grained {GITHUB_FINE_GRAINED} token",
               GITHUB_FINE_GRAINED, "github-token"),
    SecretCase("github-authorization-token", f"Authorization: token {GITHUB_CLASSIC}",
               GITHUB_CLASSIC, "github-token"),
    SecretCase("gitlab", f"CI uses {GITLAB}", GITLAB, "gitlab-token"),
    # Slack.
    SecretCase("slack-bot", f"slack bot {SLACK_BOT} posts alerts", SLACK_BOT, "slack-token"),
    SecretCase("slack-user", f"user token={SLACK_USER}", SLACK_USER, "slack-token"),
    SecretCase("slack-legacy-app", f"{SLACK_APP_LEGACY}", SLACK_APP_LEGACY, "slack-token"),
    SecretCase("slack-refresh", f"refresh with {SLACK_REFRESH}", SLACK_REFRESH, "slack-token"),
    SecretCase("slack-app-level", f"socket mode {SLACK_APP_LEVEL}",
               SLACK_APP_LEVEL, "slack-token"),
    SecretCase("slack-webhook", f"alerts go to {SLACK_WEBHOOK} via curl",
               SLACK_WEBHOOK, "slack-webhook"),
    # Clouds.
    SecretCase("aws-access-key-id", f"aws id {AWS_ACCESS_KEY} in the bucket policy",
               AWS_ACCESS_KEY, "aws-access-key"),
    SecretCase("aws-session-key-id", f"temporary creds {AWS_SESSION_KEY_ID}",
               AWS_SESSION_KEY_ID, "aws-access-key"),
    SecretCase("aws-secret-key-env", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET_KEY}",
               AWS_SECRET_KEY, "aws-secret-key"),
    SecretCase("aws-secret-key-prose", f"the AWS secret for CI {AWS_SECRET_KEY} lives here",
               AWS_SECRET_KEY, "aws-secret-key"),
    SecretCase("aws-secret-key-credentials-file",
               f"[default]\naws_access_key_id = {AWS_ACCESS_KEY}\n"
               f"aws_secret_access_key = {AWS_SECRET_KEY}",
               AWS_SECRET_KEY, "aws-secret-key"),
    SecretCase("google-api-key", f"maps key {GOOGLE_API} restricted",
               GOOGLE_API, "google-api-key"),
    SecretCase("google-oauth-client-secret", f'"client_secret": "{GOOGLE_OAUTH}"',
               GOOGLE_OAUTH, "google-oauth-secret"),
    SecretCase("google-service-account-private-key",
               '{"type": "service_account", "private_key": "-----BEGIN ' + _PRIVATE
               + f'-----\\n{SERVICE_ACCOUNT_KEY_BODY}\\n-----END ' + _PRIVATE + '-----\\n"}',
               SERVICE_ACCOUNT_KEY_BODY, "private-key"),
    SecretCase("azure-storage", "DefaultEndpointsProtocol=https;AccountName=notes;"
               f"AccountKey={AZURE_STORAGE};EndpointSuffix=core.windows.net",
               AZURE_STORAGE, "azure-storage-key"),
    SecretCase("digitalocean", f"doctl auth init -t {DIGITALOCEAN}",
               DIGITALOCEAN, "digitalocean-token"),
    # Other providers, found by detect-secrets' plugins or ours.
    SecretCase("sendgrid", f"mail via {SENDGRID}", SENDGRID, "sendgrid-key"),
    SecretCase("twilio-api-key", f"twilio {TWILIO_API_KEY} for SMS", TWILIO_API_KEY,
               "twilio-key"),
    SecretCase("mailchimp", f"newsletter key {MAILCHIMP}", MAILCHIMP, "mailchimp-key"),
    SecretCase("npm-token", f"//registry.npmjs.org/:_authToken={NPM}", NPM, "npm-token"),
    SecretCase("pypi-token", f"twine upload -p {PYPI} dist/*", PYPI, "pypi-token"),
    SecretCase("discord-bot", f"discord bot {DISCORD} in the channel",
               DISCORD, "discord-token"),
    SecretCase("telegram-bot", f"telegram bot {TELEGRAM} for alerts",
               TELEGRAM, "telegram-token"),
    SecretCase("square-oauth", f"square {SQUARE}", SQUARE, "square-secret"),
    SecretCase("artifactory", f"artifactory api key {ARTIFACTORY} for the mirror",
               ARTIFACTORY, "artifactory-token"),
    SecretCase("high-entropy-quoted-base64", f'"signing": "{HIGH_ENTROPY_B64}"',
               HIGH_ENTROPY_B64, "high-entropy-string"),
    # JSON Web Tokens, bearer tokens, authorization headers.
    SecretCase("jwt", f"session cookie {JWT} expired", JWT, "jwt"),
    SecretCase("jwt-bearer-header", f"Authorization: Bearer {JWT}", JWT, "jwt"),
    SecretCase("bearer-opaque", "curl -H 'Authorization: Bearer 4f9a0c2b7e1d8a6c5b3e' "
               "https://api.example.com", "4f9a0c2b7e1d8a6c5b3e", "bearer-token"),
    SecretCase("basic-authorization", "Authorization: Basic dXNlcjpwYXNzd29yZA==",
               "dXNlcjpwYXNzd29yZA==", "authorization"),
    SecretCase("x-api-key-header", "x-api-key: 7f3b9c2a1e8d4f6b0a5c",
               "7f3b9c2a1e8d4f6b0a5c", "api-key"),
    # Private keys.
    SecretCase("pem-rsa", f"Deploy key:\n\n{PEM_RSA}\n\nRotate it yearly.",
               _B64_LINES[0], "private-key"),
    SecretCase("pem-openssh", PEM_OPENSSH, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUA", "private-key"),
    SecretCase("pem-ec", PEM_EC, "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpY", "private-key"),
    SecretCase("pem-pkcs8", PEM_PKCS8, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "private-key"),
    SecretCase("pem-encrypted-pkcs8", PEM_ENCRYPTED, "MIIFHDBOBgkqhkiG9w0BBQ0w",
               "private-key"),
    SecretCase("pgp-private-block", PGP_PRIVATE, "lQOYBF9kZ2UBCADGq3c0pTtX2m1yQ8s7",
               "private-key"),
    SecretCase("ssh2-encrypted", SSH2_PRIVATE, "P2/56wAAAi4AAAA3aWYtbW9kbntz", "private-key"),
    SecretCase("putty-private-lines", PUTTY, PUTTY_PRIVATE_BODY, "private-key"),
    SecretCase("pem-cut-open", "Key follows.\n" + PEM_RSA.split("\nVTLw7")[0],
               _B64_LINES[0], "private-key"),
    # Credentials in URLs.
    SecretCase("url-postgres", "postgres://app:Sup3rS3cret@db.internal:5432/app",
               "Sup3rS3cret", "url-password"),
    SecretCase("url-https", "https://deploy:gh0stWr1ter@git.example.com/repo.git",
               "gh0stWr1ter", "url-password"),
    SecretCase("url-redis-no-user", "REDIS_URL=redis://:s3cretPw9@cache:6379/0",
               "s3cretPw9", "url-password"),
    SecretCase("url-mongodb-srv", "mongodb+srv://svc:Pa55w0rdX@cluster0.mongodb.net/db",
               "Pa55w0rdX", "url-password"),
    # key/token/secret/password pairs and phrasing.
    SecretCase("pair-password-equals", "db password=hunter2 on the replica",
               "hunter2", "password"),
    SecretCase("pair-env-password", "DB_PASSWORD=correcthorse", "correcthorse", "password"),
    SecretCase("pair-yaml-password", "database:\n  password: letmein\n  port: 5432",
               "letmein", "password"),
    SecretCase("pair-quoted-password", "DB_PASSWORD: 's3cr3t pass phrase'",
               "s3cr3t pass phrase", "password"),
    SecretCase("pair-json-client-secret", '{"client_secret": "abc123def456"}',
               "abc123def456", "secret"),
    SecretCase("pair-token-equals", "token = 4f9a0c2b7e1d8a6c5b3e0d1f", "4f9a0c2b7e1d8a6c5b3e0d1f",
               "token"),
    SecretCase("pair-query-access-token", "https://x.example/cb?access_token=abc123&state=9",
               "abc123", "token"),
    SecretCase("prose-password-colon", "password: hunter2x!Q (until Friday)",
               "hunter2x!Q", "password"),
    SecretCase("prose-api-key-is", "the api key is 9fA2kL0pQ7xZ3mN8, ask Bob",
               "9fA2kL0pQ7xZ3mN8", "api-key"),
    SecretCase("prose-password-was", "The wifi password was Tr0ub4dor&3 last year.",
               "Tr0ub4dor&3", "password"),
    SecretCase("prose-token-is-now", "The deploy token is now Qm9x7Lk2Wp4z!",
               "Qm9x7Lk2Wp4z!", "token"),
    SecretCase("prose-secret-is-quoted", "the shared secret is 'r4nd0m-S3cret' for staging",
               "r4nd0m-S3cret", "secret"),
    SecretCase("netrc-password", "machine api.example.com login alice password S3cr3tPa55",
               "S3cr3tPa55", "password"),
    SecretCase("keyword-suffixed-quoted", 'db_password_prod = "Xk9#mQ2$vL"', "Xk9#mQ2$vL",
               "secret"),
)  # fmt: skip


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


SHA256 = _sha256(b"a note body")
SHA1 = hashlib.sha1(b"a note body").hexdigest()  # a look-alike, not for security

# (id, text): must come back unchanged, with a count of 0.
LOOK_ALIKES: tuple[tuple[str, str], ...] = (
    # Hashes and ids lode and its users print everywhere.
    ("sha256-bare", SHA256),
    ("sha256-labelled", f"version sha256 {SHA256} verified"),
    ("sha256-pair", f"text_sha256={SHA256}"),
    ("sha256-quoted-json", f'{{"sha256": "{SHA256}"}}'),
    ("sha1-bare", SHA1),
    ("git-commit", f"commit {SHA1} on main"),
    ("git-commit-short", "fixed in a1b2c3d, see the PR"),
    ("secret-rotated-in-commit", f"the secret was rotated in commit {SHA1}"),
    ("docker-digest", f"image@sha256:{SHA256}"),
    ("sri-integrity",
     'integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC"'),
    ("uuid", "request 123e4567-e89b-12d3-a456-426614174000 failed"),
    ("uuid-quoted", '{"id": "123e4567-e89b-12d3-a456-426614174000"}'),
    # Versions and dates.
    ("version-v", "upgrade to v1.2.3 first"),
    ("version-bare", "chromadb 1.23.2 is pinned"),
    ("semver-build", "release 1.0.0-alpha.1+build.20240501 is tagged"),
    ("iso-date", "I can't remember; the 2024-05-01 meeting didn't decide."),
    ("iso-datetime", "backups moved to 2024-05-01T03:30:00Z"),
    ("unix-timestamp", "expires_at: 1714537800"),
    # Addresses and numbers.
    ("ipv4-public", "the VPN endpoint is 203.0.113.7:443"),
    ("ipv4-private", "db at 10.0.3.12, replica at 192.168.1.20"),
    ("ipv6", "listen on [2001:db8::8a2e:370:7334]:8443"),
    ("mac-address", "NIC 00:1A:2B:3C:4D:5E on rack 4"),
    ("phone-international", "on-call: +44 20 7946 0958"),
    ("phone-us", "call (415) 555-0132 after 6pm"),
    ("port-mapping", "docker run -p 8080:80 nginx"),
    ("doi", "see doi:10.1038/s41586-020-2649-2"),
    ("orcid", "ORCID 0000-0002-1825-0097"),
    ("css-colours", "color: #1e90ff; background: rgb(255, 136, 0); border: #f80"),
    # Paths, URLs, e-mail.
    ("posix-path", "edit /home/alice/projects/lode/retrieval/answer/redaction.py"),
    ("windows-path", r"logs in C:\Users\alice\AppData\Local\lode"),
    ("url-without-credentials", "https://docs.example.com/api-keys?page=2#rotate"),
    ("url-user-no-password", "postgres://postgres@127.0.0.1:5432/lode"),
    ("github-blob-url", "see https://github.com/healthchecks/healthchecks/blob/master/hc/api/views.py"),
    ("email-and-scp", "mailto:alice@example.com and user@host:path"),
    # Base64 of ordinary short words is under the entropy limit.
    ("base64-short-word", "aGVsbG8gd29ybGQ= is 'hello world'"),
    ("base64-short-word-quoted", 'payload: "aGVsbG8="'),
    # Token-ish configuration that is not a secret.
    ("max-tokens", "max_tokens: 1024 and token_type: bearer in the response"),
    ("num-tokens", "num_tokens=512 tokens per passage"),
    ("token-expiry", "token_expiry: 3600"),
    ("password-min-length", "password_min_length: 12"),
    ("bearer-authentication", "Bearer authentication/authorization is described in RFC 6750."),
    ("sklearn-identifier", "from sk_learn_model import fit; sk_test_helpers.run()"),
    ("sklearn-prose", "Tokens are the unit the embedder counts; sk-learn is a library."),
    ("stripe-publishable-live", "Stripe.js gets pk_live_" + "51Hq8ZtQk3XyWm2PLa9cVb7N"),
    ("stripe-publishable-test-quoted", "Stripe('pk_test_" + "TYooMQauvdEDq54NiTphI7jx')"),
    ("k8s-secret-name", 'secretName: "tls-cert"'),
    ("secretary-quoted", "secretary: 'Alice Smith'"),
    ("env-reference", "password=$DB_PASSWORD"),
    ("template-reference", "password: ${DB_PASSWORD}"),
    ("placeholder-angle", "api_key: <your-api-key>"),
    ("masked-value", "password: ********"),
    ("code-reference-environ", 'password = os.environ["DB_PASSWORD"]'),
    ("code-reference-call", "token = get_token()"),
    ("code-reference-attribute", "api_key = settings.API_KEY"),
    ("pwd-shell", "PWD=/home/alice/projects"),
    # Prose with key, token, secret, password.
    ("prose-password-in-vault", "the password is in the vault"),
    ("prose-token-required", "A token is required for every call."),
    ("prose-secret-see-1password", "secret: see 1Password"),
    ("prose-secret-colon", "The secret: we ship on Fridays."),
    ("prose-key-is", "The key is to start early."),
    ("prose-key-is-number", "the key is 42"),
    ("prose-api-keys-rotated", "API keys are rotated every 90 days."),
    ("prose-password-policy", "The password policy requires twelve characters."),
    ("prose-passwords-colon", "Passwords: are stored hashed with argon2."),
    ("prose-token-colon", "Token: the unit of text an embedder counts."),
    ("prose-token-was-version", "the token was v2.1.0 format"),
    ("prose-password-manager", "password managers like Bitwarden help"),
    ("prose-key-mediator", "The key mediator miR-155 targets SOCS1 in CD4+ T cells."),
    ("prose-key-value-pairs", "Store key: value pairs in Redis; maxmemory-policy allkeys-lru."),
    ("prose-monkey", "monkey: 12 bananas, turnkey solution v2.0"),
    ("prose-rotate", "Rotate the staging certs with certbot before Friday."),
    ("prose-hyphenated", "risk-assessment-framework-for-the-next-quarter"),
    ("public-key-block",
     "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOC\n-----END PUBLIC KEY-----"),
    ("certificate-mention", "the BEGIN CERTIFICATE line starts the PEM file"),
)  # fmt: skip


# --- the rules ported from gitleaks' default configuration (retrieval/answer/redaction.py
# `_GITLEAKS_RULES`, `_CONTEXT_RULES`): one secret and one near miss for each. The values are
# stand-in characters of the rule's alphabet and length, made from a hash of a seed, so no
# real token is written here.

_HEX = "0123456789abcdef"
_UPPER_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ALNUM = _LETTERS + "0123456789"
_URLSAFE = _ALNUM + "_-"
_BASE64 = _ALNUM + "+/"


def _fake(alphabet: str, length: int, seed: str) -> str:
    """`length` characters of `alphabet`, the same on every run: stand-in token characters.
    The first three are a digit, a lowercase and an uppercase letter where the alphabet has
    them, so every stand-in has the classes a real token has."""
    chars: list[str] = [
        next((c for c in alphabet if c in group), "")
        for group in ("0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ]
    chars = [c for c in chars if c]
    counter = 0
    while len(chars) < length:
        digest = hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        chars.extend(alphabet[b % len(alphabet)] for b in digest)
        counter += 1
    return "".join(chars[:length])


def _uuid(seed: str) -> str:
    h = _fake(_HEX, 32, seed)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_TEAMS_WEBHOOK = (
    "https://contoso.webhook.office.com/webhookb2/" + _uuid("teams-1") + "@" + _uuid("teams-2")
    + "/IncomingWebhook/" + _fake(_HEX, 32, "teams-3") + "/" + _uuid("teams-4")
)  # fmt: skip
_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"

# (id, kind, the secret, a text holding it, a near miss that must survive unchanged)
GITLEAKS_CASES: tuple[tuple[str, str, str, str, str], ...] = tuple(
    (case_id, kind, secret, text.format(secret), near)
    for case_id, kind, secret, text, near in (
        ("discord-webhook", "discord-webhook",
         "https://discord.com/api/webhooks/" + "112233445566778899/" + _fake(_URLSAFE, 68, "dw"),
         "Build alerts post to {} from CI.",
         "Paste the https://discord.com/api/webhooks/<id>/<token> URL Discord shows."),
        ("slack-workflow-webhook", "slack-webhook",
         "https://hooks.slack.com/workflows/" + "T016M3G1GHZ/A04J4CKDBZL/442839164813213419/"
         + _fake(_ALNUM, 24, "sw"),
         "The release workflow is triggered by {}",
         "Create one at https://api.slack.com/messaging/webhooks (hooks.slack.com URLs)."),
        ("teams-webhook", "teams-webhook", _TEAMS_WEBHOOK, "Teams channel hook: {}",
         "Teams gives a https://contoso.webhook.office.com/webhookb2/… URL per channel."),
        ("heroku-key-v2", "heroku-key", "HRKU-AA" + _fake(_URLSAFE, 58, "hk"),
         "heroku authorizations:create gave {} today",
         "Heroku keys start HRKU-AA" + _fake(_ALNUM, 20, "hk-near") + " and are longer."),
        ("heroku-key-uuid", "heroku-key", _uuid("heroku"), "HEROKU_API_KEY={}",
         "the heroku release " + _uuid("heroku-release") + " failed to boot"),
        ("1password-secret-key", "1password-secret-key",
         "A3-" + _fake(_UPPER_ALNUM, 6, "op1") + "-" + _fake(_UPPER_ALNUM, 11, "op2") + "-"
         + _fake(_UPPER_ALNUM, 5, "op3") + "-" + _fake(_UPPER_ALNUM, 5, "op4") + "-"
         + _fake(_UPPER_ALNUM, 5, "op5"),
         "Emergency kit secret key: {}",
         "Form A3-" + _fake(_UPPER_ALNUM, 6, "opn") + "-1 is the expense form."),
        ("1password-service-token", "1password-token", "ops_eyJ" + _fake(_BASE64, 300, "ops"),
         "OP_SERVICE_ACCOUNT {}", "The ops_eyJ prefix marks 1Password service tokens."),
        ("adobe-client-secret", "adobe-secret", "p8e-" + _fake(_ALNUM, 32, "adobe"),
         "adobe io secret {}", "p8e-" + _fake(_ALNUM, 12, "adobe-near") + " is too short."),
        ("age-secret-key", "age-secret-key", "AGE-SECRET-KEY-1" + _fake(_BECH32, 58, "age"),
         "backup identity {}",
         "recipient age1" + _fake(_BECH32.lower(), 58, "age-pub") + " is public"),
        ("airtable-token", "airtable-token",
         "pat" + _fake(_ALNUM, 14, "at1") + "." + _fake(_HEX, 64, "at2"),
         "airtable base sync uses {}", "pattern." + _fake(_HEX, 20, "at-near") + " in the log"),
        ("alibaba-access-key", "alibaba-access-key", "LTAI" + _fake(_ALNUM, 20, "ali"),
         "aliyun key id {}", "LTAI" + _fake(_ALNUM, 9, "ali-near") + " looked truncated"),
        ("artifactory-reference-token", "artifactory-token", "cmVmd" + _fake(_ALNUM, 59, "rt"),
         "jfrog reference token {}", "cmVmd" + _fake(_ALNUM, 20, "rt-near") + " is cut off"),
        ("atlassian-token", "atlassian-token", "ATATT3" + _fake(_URLSAFE, 186, "atl"),
         "jira api token {}", "ATATT3 tokens are 192 characters long."),
        ("aws-bedrock-key", "aws-bedrock-key", "ABSK" + _fake(_BASE64, 120, "br"),
         "bedrock key {}", "ABSK" + _fake(_ALNUM, 40, "br-near") + " is half a key"),
        ("azure-client-secret", "azure-client-secret",
         _fake(_ALNUM, 3, "az1") + "8Q~" + _fake(_ALNUM + "_~.-", 34, "az2"),
         "app registration secret {}", "The 8Q~ part of an Azure secret follows three chars."),
        ("clojars-token", "clojars-token", "CLOJARS_" + _fake(_LOWER_ALNUM, 60, "clj"),
         "deploy with {}", "CLOJARS_" + _fake(_LOWER_ALNUM, 20, "clj-near") + " is short"),
        ("cloudflare-origin-ca-key", "cloudflare-origin-ca-key",
         "v1.0-" + _fake(_HEX, 24, "cf1") + "-" + _fake(_HEX, 146, "cf2"),
         "origin ca key {}", "release v1.0-" + _fake(_HEX, 24, "cf-near") + " shipped"),
        ("databricks-token", "databricks-token", "dapi" + _fake(_HEX, 32, "dbx"),
         "databricks host token {}", "dapi" + _fake(_HEX, 16, "dbx-near") + " is partial"),
        ("doppler-token", "doppler-token", "dp.pt." + _fake(_ALNUM, 43, "dp"),
         "doppler personal {}", "dp.pt." + _fake(_ALNUM, 10, "dp-near") + " is not all of it"),
        ("dropbox-token", "dropbox-token", "sl." + _fake(_URLSAFE, 135, "dbox"),
         "dropbox short-lived {}", "sl." + _fake(_ALNUM, 30, "dbox-near") + " only"),
        ("duffel-token", "duffel-token", "duffel_test_" + _fake(_URLSAFE, 43, "duf"),
         "flights sandbox {}", "the duffel_test_helpers module"),
        ("dynatrace-token", "dynatrace-token",
         "dt0c01." + _fake(_UPPER_ALNUM, 24, "dt1") + "." + _fake(_UPPER_ALNUM, 64, "dt2"),
         "dynatrace {}", "token id dt0c01." + _fake(_UPPER_ALNUM, 24, "dt-near") + " (public)"),
        ("easypost-key", "easypost-key", "EZAK" + _fake(_ALNUM, 54, "ez"),
         "easypost production {}", "EZAK" + _fake(_ALNUM, 20, "ez-near") + " was cut"),
        ("facebook-page-token", "facebook-token", "EAAC" + _fake(_ALNUM, 120, "fb"),
         "page token {}", "EAAC" + _fake(_ALNUM, 40, "fb-near") + " is too short"),
        ("flutterwave-secret-key", "flutterwave-key",
         "FLWSECK_TEST-" + _fake("abcdefgh0123456789", 32, "flw") + "-X",
         "flutterwave secret {}",
         "public FLWPUBK_TEST-" + _fake("abcdefgh0123456789", 32, "flw-pub") + "-X is fine"),
        ("flyio-token", "flyio-token", "fo1_" + _fake(_URLSAFE, 43, "fly"),
         "fly deploy token {}", "fo1_" + _fake(_ALNUM, 20, "fly-near") + " is cut"),
        ("frameio-token", "frameio-token", "fio-u-" + _fake(_URLSAFE, 64, "fio"),
         "frame.io {}", "fio-u-" + _fake(_ALNUM, 20, "fio-near") + " is cut"),
        ("gitlab-deploy-token", "gitlab-token", "gldt-" + _fake(_URLSAFE, 20, "gldt"),
         "registry pull with {}", "gldt-" + _fake(_ALNUM, 10, "gldt-near") + " is cut"),
        ("gitlab-pipeline-trigger", "gitlab-token", "glptt-" + _fake(_HEX, 40, "glptt"),
         "trigger token {}", "glptt-" + _fake(_HEX, 20, "glptt-near") + " is cut"),
        ("gitlab-runner-registration", "gitlab-token", "GR1348941" + _fake(_URLSAFE, 20, "gr"),
         "runner registration {}", "GR1348941 prefixes old runner tokens."),
        ("grafana-service-account", "grafana-token",
         "glsa_" + _fake(_ALNUM, 32, "gsa") + "_" + _fake(_HEX, 8, "gsa2"),
         "grafana sa token {}", "glsa_" + _fake(_ALNUM, 32, "gsa-near") + " lacks its suffix"),
        ("grafana-cloud-token", "grafana-token", "glc_" + _fake(_BASE64, 60, "glc"),
         "grafana cloud {}", "glc_" + _fake(_ALNUM, 16, "glc-near") + " is cut"),
        ("harness-key", "harness-key",
         "pat." + _fake(_URLSAFE, 22, "hn1") + "." + _fake(_ALNUM, 24, "hn2") + "."
         + _fake(_ALNUM, 20, "hn3"),
         "harness {}", "pat." + _fake(_ALNUM, 22, "hn-near") + " is only the account part"),
        ("huggingface-org-token", "huggingface-token", "api_org_" + _fake(_LETTERS, 34, "hfo"),
         "hf org {}", "api_org_" + _fake(_LETTERS, 12, "hfo-near") + " is cut"),
        ("huggingface-letters-token", "huggingface-token", "hf_" + _fake(_LETTERS, 34, "hfl"),
         "hf token {}", "hf_" + "abcdefghijklmnopqrstuvwxyzabcdefgh" + " is all lowercase"),
        ("infracost-token", "infracost-token", "ico-" + _fake(_ALNUM, 32, "ico"),
         "infracost {}", "ico-" + "abcdefghijklmnopqrstuvwxyzABCDEF" + " has no digit"),
        ("intra42-secret", "intra42-secret", "s-s4t2ud-" + _fake(_HEX, 64, "i42"),
         "42 intra app {}", "s-s4t2ud-" + _fake(_HEX, 30, "i42-near") + " is cut"),
        ("linear-key", "linear-key", "lin_api_" + _fake(_ALNUM, 40, "lin"),
         "linear {}", "lin_api_" + _fake(_ALNUM, 20, "lin-near") + " is cut"),
        ("maxmind-key", "maxmind-key",
         _fake(_ALNUM, 6, "mm1") + "_" + _fake(_ALNUM, 29, "mm2") + "_mmk",
         "geoip license {}", "the _mmk suffix marks MaxMind license keys"),
        ("newrelic-user-key", "newrelic-key", "NRAK-" + _fake(_UPPER_ALNUM, 27, "nr"),
         "new relic {}", "browser NRJS-" + _fake(_HEX, 19, "nr-near") + " is public"),
        ("notion-token", "notion-token",
         "ntn_" + _fake("0123456789", 11, "ntn1") + _fake(_ALNUM, 35, "ntn2"),
         "notion integration {}", "ntn_" + _fake("0123456789", 11, "ntn-near") + " is cut"),
        ("octopus-key", "octopus-key", "API-" + _fake(_UPPER_ALNUM, 26, "oct"),
         "octopus {}", "See API-" + "KEYROTATIONPOLICYDOCUMENTS" + " for the rules."),
        ("openshift-token", "openshift-token", "sha256~" + _fake(_URLSAFE, 43, "osh"),
         "oc login --token={}", "sha256~" + _fake(_ALNUM, 20, "osh-near") + " is cut"),
        ("perplexity-key", "perplexity-key", "pplx-" + _fake(_ALNUM, 48, "pplx"),
         "perplexity {}", "pplx-" + _fake(_ALNUM, 20, "pplx-near") + " is cut"),
        ("planetscale-token", "planetscale-token", "pscale_tkn_" + _fake(_URLSAFE, 40, "ps"),
         "planetscale {}", "pscale_tkn_" + _fake(_ALNUM, 12, "ps-near") + " is cut"),
        ("postman-key", "postman-key",
         "PMAK-" + _fake(_HEX, 24, "pm1") + "-" + _fake(_HEX, 34, "pm2"),
         "postman {}", "PMAK-" + _fake(_HEX, 24, "pm-near") + " is only the id"),
        ("prefect-key", "prefect-key", "pnu_" + _fake(_ALNUM, 36, "pnu"),
         "prefect cloud {}", "pnu_" + _fake(_ALNUM, 20, "pnu-near") + " is cut"),
        ("pulumi-token", "pulumi-token", "pul-" + _fake(_HEX, 40, "pul"),
         "pulumi login {}", "pul-" + _fake(_HEX, 20, "pul-near") + " is cut"),
        ("readme-key", "readme-key", "rdme_" + _fake(_LOWER_ALNUM, 70, "rdme"),
         "readme.com {}", "rdme_" + _fake(_LOWER_ALNUM, 30, "rdme-near") + " is cut"),
        ("rubygems-key", "rubygems-key", "rubygems_" + _fake(_HEX, 48, "gem"),
         "gem push key {}", "rubygems_" + _fake(_HEX, 20, "gem-near") + " is cut"),
        ("scalingo-token", "scalingo-token", "tk-us-" + _fake(_URLSAFE, 48, "scal"),
         "scalingo {}", "tk-us-" + _fake(_ALNUM, 20, "scal-near") + " is cut"),
        ("brevo-key", "brevo-key",
         "xkeysib-" + _fake(_HEX, 64, "sib1") + "-" + _fake(_ALNUM, 16, "sib2"),
         "sendinblue {}", "xkeysib-" + _fake(_HEX, 64, "sib-near") + " lacks its suffix"),
        ("sentry-user-token", "sentry-token", "sntryu_" + _fake(_HEX, 64, "sen"),
         "sentry-cli auth {}", "sntryu_" + _fake(_HEX, 30, "sen-near") + " is cut"),
        ("settlemint-token", "settlemint-token", "sm_pat_" + _fake(_ALNUM, 16, "sm"),
         "settlemint {}", "call sm_pat_" + "helperfunctions" + "x() first"),
        ("shippo-token", "shippo-token", "shippo_live_" + _fake(_HEX, 40, "shp"),
         "shippo {}", "shippo_live_" + _fake(_HEX, 20, "shp-near") + " is cut"),
        ("shopify-token", "shopify-token", "shpat_" + _fake(_HEX, 32, "shop"),
         "shopify admin {}", "shpat_" + _fake(_HEX, 20, "shop-near") + " is cut"),
        ("sourcegraph-token", "sourcegraph-token",
         "sgp_" + _fake(_HEX, 16, "sg1") + "_" + _fake(_HEX, 40, "sg2"),
         "src login {}", "sgp_" + _fake(_HEX, 20, "sg-near") + " is cut"),
        ("square-access-token", "square-token", "sq0atp-" + _fake(_URLSAFE, 22, "sq"),
         "square {}", "sq0atp-" + _fake(_ALNUM, 10, "sq-near") + " is cut"),
        ("terraform-token", "terraform-token",
         _fake(_ALNUM, 14, "tf1") + ".atlasv1." + _fake(_URLSAFE, 65, "tf2"),
         "TF_TOKEN_app_terraform_io {}", "Terraform tokens hold .atlasv1. in the middle."),
        ("twitter-bearer", "twitter-bearer-token", "A" * 22 + _fake(_ALNUM, 90, "tw"),
         "x.com bearer {}", "A" * 22 + _fake(_ALNUM, 20, "tw-near") + " is cut"),
        ("typeform-token", "typeform-token", "tfp_" + _fake(_URLSAFE, 59, "tfp"),
         "typeform {}", "tfp_" + _fake(_ALNUM, 20, "tfp-near") + " is cut"),
        ("vault-token", "vault-token", "hvs." + _fake(_URLSAFE, 95, "hvs"),
         "VAULT_TOKEN {}", "hvs." + _fake(_ALNUM, 24, "hvs-near") + " is cut"),
        ("mailgun-key", "mailgun-key", "key-" + _fake(_HEX, 32, "mg"), "MAILGUN_API_KEY={}",
         "the cache key-" + _fake(_HEX, 32, "mg-near") + " was evicted"),
        ("discord-client-secret", "discord-key", _fake(_URLSAFE, 32, "dcs"),
         "discord_client_secret: {}", "discord invite: qz7Hk2M (expires Friday)"),
    )
)  # fmt: skip

SECRETS = (
    *SECRETS,
    *(SecretCase(f"gitleaks-{case_id}", text, secret, kind)
      for case_id, kind, secret, text, _ in GITLEAKS_CASES),
)  # fmt: skip
LOOK_ALIKES = (
    *LOOK_ALIKES,
    *((f"gitleaks-near-{case_id}", near) for case_id, _, _, _, near in GITLEAKS_CASES),
)  # fmt: skip
