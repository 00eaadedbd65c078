"""Secret redaction at egress (issue 5 item 6; DESIGN.md invariant 8): every secret pattern lode
knows, in this one module, so there is exactly one place to read, test and extend.

`redact(text)` replaces each secret with a visible marker `[REDACTED:kind]` and counts the
replacements. It runs over everything that leaves the machine — evidence blocks, document
titles, the question, a judge's premise — once, where that content is decided: the egress
plan (`retrieval.answer.egress.plan_egress`) for the question and evidence, the LLM judge
(`retrieval.answer.entailment.LLMJudge`) for the premise it builds from verified spans.

What is recognised, in the order the passes run (a later pass never re-redacts an earlier
marker):

1. PEM private key blocks, `-----BEGIN … PRIVATE KEY-----` to the matching `END` line. A block
   cut off by a passage boundary is still caught: `BEGIN` without `END` is redacted to the end
   of the text, and the base64 lines ending in an `END` line without its `BEGIN` are redacted
   too.
2. Credentials in URLs (`scheme://user:password@host`): the password only.
3. Provider tokens by their documented prefixes: OpenAI/Anthropic-style `sk-…`, GitHub
   `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_`/`github_pat_…`, AWS access key ids `AKIA…`/`ASIA…`, Slack
   `xox?-…`, Google API keys `AIza…`, JSON Web Tokens `eyJ….eyJ….…`.
4. `Bearer <token>` (the token must contain a digit, so prose like "Bearer authentication"
   survives).
5. `key = value` / `key: value` pairs whose key *ends* with a secret-ish name (`password`,
   `passwd`, `passphrase`, `secret`, `token`, `api_key`/`apikey`, `access_key`, `secret_key`,
   `private_key`, `authorization`, with any prefix: `DB_PASSWORD`, `aws_secret_access_key`,
   `GITHUB_TOKEN`, `"client_secret"`). The key name is kept, only the value is replaced, so a
   reader still sees *what* was there. "Ends with" is deliberate: `max_tokens: 1024` or
   `token_type: bearer` are not secrets.

Deliberately *not* recognised: bare high-entropy strings. A 64-hex SHA-256 (lode prints them
for every version) or a git commit id looks exactly like a random token, and redacting them
would destroy ordinary notes; a hex token is caught when it sits in a `token=…` pair or behind
`Bearer`. Over-redaction is the safe direction for egress, but it has a cost the gate makes
visible: a model that quotes a marker quotes text that is not in the stored version, and the
claim is dropped.

`redact` is idempotent — markers never match any pattern — so a second pass (the chat client
redacts again as a backstop) finds nothing and the count is not doubled.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MARKER_PREFIX = "[REDACTED:"


def marker(kind: str) -> str:
    """The visible replacement for one secret of `kind`."""
    return f"{MARKER_PREFIX}{kind}]"


# A token boundary: the secret must not be glued to more token characters on its left.
_LEFT = r"(?<![A-Za-z0-9_\-])"
_RIGHT = r"(?![A-Za-z0-9_\-])"

_PEM_FULL = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]*?)PRIVATE KEY-----.*?-----END (?P=label)PRIVATE KEY-----",
    re.DOTALL,
)
# BEGIN with no END after it (the block was cut by a passage or block boundary).
_PEM_OPEN = re.compile(r"-----BEGIN [A-Z0-9 ]*?PRIVATE KEY-----.*\Z", re.DOTALL)
# Base64 body lines that end in an END line whose BEGIN lies outside this text.
_PEM_TAIL = re.compile(
    r"(?:^[ \t]*[A-Za-z0-9+/=]{16,}[ \t]*\r?\n)*[ \t]*-----END [A-Z0-9 ]*?PRIVATE KEY-----",
    re.MULTILINE,
)

_URL_PASSWORD = re.compile(
    r"(?P<prefix>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]+:)(?P<value>[^\s/@]+)(?P<suffix>@)"
)

# (kind, pattern): whole-match tokens.
_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("openai-key", re.compile(_LEFT + r"sk-(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}" + _RIGHT)),
    ("github-token", re.compile(_LEFT + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{22,})")),
    ("aws-access-key", re.compile(_LEFT + r"(?:AKIA|ASIA)[0-9A-Z]{16}" + _RIGHT)),
    ("slack-token", re.compile(_LEFT + r"xox[abposre]-[A-Za-z0-9\-]{10,}")),
    ("google-api-key", re.compile(_LEFT + r"AIza[0-9A-Za-z_\-]{35}" + _RIGHT)),
    ("jwt", re.compile(_LEFT + r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*")),
)

_BEARER = re.compile(
    r"(?P<prefix>\bBearer\s+)(?P<value>(?=[A-Za-z0-9._~+/=\-]*\d)[A-Za-z0-9._~+/=\-]{16,})",
    re.IGNORECASE,
)

# The key ends with one of these names (case-insensitive); any identifier prefix is allowed.
_SECRET_KEY_NAMES = (
    r"password|passwd|passphrase|secret|token|api[_\-]?key|apikey|access[_\-]?key"
    r"|secret[_\-]?key|private[_\-]?key|authorization"
)
_PAIR = re.compile(
    r"(?P<key>(?<![A-Za-z0-9_])[\"']?[A-Za-z0-9_.\-]*?(?:" + _SECRET_KEY_NAMES + r")[\"']?)"
    r"(?P<sep>[ \t]*[:=][ \t]*)"
    r"(?P<value>\"[^\"\n]+\"|'[^'\n]+'|(?:(?:Bearer|Basic|Token)[ \t]+)?[^\s\"'<>,;&]+)",
    re.IGNORECASE,
)
# An unquoted pair value shorter than this is prose ("the secret: we …"), not a secret.
_MIN_UNQUOTED_VALUE = 3


def _pair_kind(key: str) -> str:
    lowered = key.lower()
    if "pass" in lowered:
        return "password"
    if "private" in lowered:
        return "private-key"
    if "authorization" in lowered:
        return "authorization"
    if "token" in lowered:
        return "token"
    if "secret" in lowered:
        return "secret"
    if "key" in lowered:
        return "api-key"
    return "secret"


def _sub(pattern: re.Pattern[str], text: str, replace: Callable[[re.Match[str]], str | None]):
    """`pattern.sub` where `replace` may return None to keep a match unchanged; returns the
    new text and how many matches were replaced."""
    count = 0

    def one(match: re.Match[str]) -> str:
        nonlocal count
        replacement = replace(match)
        if replacement is None:
            return match.group(0)
        count += 1
        return replacement

    return pattern.sub(one, text), count


def _replace_pair(match: re.Match[str]) -> str | None:
    value = match.group("value")
    if MARKER_PREFIX in value:
        return None  # already redacted by an earlier pass (a token or a PEM block)
    quote = value[0] if value[0] in "\"'" else ""
    inner = value[1:-1] if quote else value
    if not quote and len(inner) < _MIN_UNQUOTED_VALUE:
        return None
    kind = _pair_kind(match.group("key"))
    return f"{match.group('key')}{match.group('sep')}{quote}{marker(kind)}{quote}"


def _replace_url_password(match: re.Match[str]) -> str | None:
    if MARKER_PREFIX in match.group("value"):
        return None
    return f"{match.group('prefix')}{marker('url-password')}{match.group('suffix')}"


def redact(text: str) -> tuple[str, int]:
    """`text` with every recognised secret replaced by `[REDACTED:kind]`, and how many were
    replaced. Idempotent: `redact(redact(t)[0])` replaces nothing."""
    total = 0
    text, n = _sub(_PEM_FULL, text, lambda m: marker("private-key"))
    total += n
    text, n = _sub(_PEM_OPEN, text, lambda m: marker("private-key"))
    total += n
    text, n = _sub(_PEM_TAIL, text, lambda m: marker("private-key"))
    total += n
    text, n = _sub(_URL_PASSWORD, text, _replace_url_password)
    total += n
    for kind, pattern in _TOKEN_PATTERNS:
        text, n = _sub(pattern, text, lambda m, kind=kind: marker(kind))
        total += n
    text, n = _sub(_BEARER, text, lambda m: f"{m.group('prefix')}{marker('bearer-token')}")
    total += n
    text, n = _sub(_PAIR, text, _replace_pair)
    total += n
    return text, total
