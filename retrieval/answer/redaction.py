"""Secret redaction at egress (DESIGN.md invariant 8): every secret lode recognises, in this
one module, so there is exactly one place to read, test and extend.

`redact(text)` replaces each secret *value* with a visible marker `[REDACTED:kind]` and counts
the replacements; the text around it (a pair's key name, the rest of the line) stays, so a
reader still sees *what* was there. It runs over everything that leaves the machine — evidence
blocks, document titles, the question, a judge's premise — once, where that content is decided:
the egress plan (`retrieval.answer.egress.plan_egress`) for the question and evidence, the LLM
judge (`retrieval.answer.entailment.LLMJudge`) for the premise it builds from verified spans.

Two detectors run: A, our patterns (private key blocks, credentials in URLs, provider tokens by
their documented prefixes and the rules ported from gitleaks' default configuration —
gitleaks is MIT-licensed, © Zachary Rice —, AWS secret keys, `Bearer` tokens, secret-named
`key = value` pairs, secrets stated in prose), then B, Yelp's
detect-secrets plugins over what A left, called through `analyze_string` only so nothing
touches the network. Values must "look like a secret" (`looks_like_secret`) wherever a pattern
alone would catch ordinary words. Long lines are scanned in overlapping windows so no pattern
runs in quadratic time. docs/redaction.md lists every pattern, what is deliberately left out
(hex hashes, publishable keys, UUIDs, personal data) and why.

`redact` is deterministic and idempotent — markers never match any pattern, and it repeats its
passes until one finds nothing — so a second call (the chat client redacts again as a
backstop) finds nothing and the count is not doubled.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

MARKER_PREFIX = "[REDACTED:"

# detect-secrets is scanned in windows of this many characters on a longer line, each sharing
# this many with the next (see the module docstring).
WINDOW_CHARS = 1024
WINDOW_OVERLAP_CHARS = 256

# `redact` repeats its passes until one finds nothing; two rounds are the norm (the second
# finds nothing), the cap keeps a pathological text bounded.
_MAX_ROUNDS = 4


def marker(kind: str) -> str:
    """The visible replacement for one secret of `kind`."""
    return f"{MARKER_PREFIX}{kind}]"


_MARKER = re.compile(r"\[REDACTED:[a-z0-9\-]+\]")

# A token boundary: the secret must not be glued to more token characters on its left/right.
_LEFT = r"(?<![A-Za-z0-9_\-])"
_RIGHT = r"(?![A-Za-z0-9_\-])"


# --- "looks like a secret": the entropy check for values in prose ---------------------------

_TRAILING_PUNCTUATION = ".,;:!?)]}"
# Shapes that carry digits or symbols but are not secrets.
_NOT_A_SECRET_SHAPE = re.compile(
    r"""
    v?\d+(?:[.\-]\d+)+(?:[-+][0-9A-Za-z.\-]+)*   # version 1.2.3, v1.2.3-rc.1+build.5, date
    | \d+(?:[.,]\d+)?%?                          # a number
    | [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}  # a UUID
    | (?:[A-Za-z][A-Za-z0-9+.\-]*://|www\.)\S+   # a URL
    | ~?/[^\s]*                                  # an absolute path
    | [A-Za-z]:\\\S*                             # a Windows path
    | [^\s@]+@[^\s@]+\.[A-Za-z]{2,}              # an e-mail address
    """,
    re.VERBOSE | re.IGNORECASE,
)


def _is_placeholder(value: str) -> bool:
    """A template or a reference standing in for a secret: `<token>`, `{x}`, `${VAR}`,
    `$VAR`, `%(x)s`, `***`, `xxxx`, `...` — what a document writes instead of the secret."""
    if not value:
        return True
    if (value[0], value[-1]) in {("<", ">"), ("{", "}"), ("[", "]"), ("(", ")")}:
        return True
    if value[0] == "$" or value.startswith("%("):
        return True
    if not any(c.isalnum() for c in value):
        return True  # `****`, `...`
    return len(set(value.lower())) == 1  # `xxxxxxxx`


def shannon_entropy(value: str) -> float:
    """Bits per character of `value`'s character distribution."""
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    length = len(value)
    return -sum(n / length * math.log2(n / length) for n in counts.values())


_MIN_SECRET_CHARS = 6
_MIN_MIXED_ENTROPY = 2.0  # bits/char for a value of two character classes (`hunter2` is 2.8)
_MIN_LETTERS_ONLY_CHARS = 16
_MIN_LETTERS_ONLY_ENTROPY = 3.5


def looks_like_secret(value: str) -> bool:
    """Whether a value stated in prose is plausibly a secret (see the module docstring): the
    entropy check that lets "the password is in the vault" survive."""
    core = value.strip("\"'`").rstrip(_TRAILING_PUNCTUATION)
    if len(core) < _MIN_SECRET_CHARS or MARKER_PREFIX in core or _is_placeholder(core):
        return False
    if _NOT_A_SECRET_SHAPE.fullmatch(core):
        return False
    has_letter = any(c.isalpha() for c in core)
    has_digit = any(c.isdigit() for c in core)
    # Spaces do not count: "Alice Smith" is a name, not a two-class secret.
    has_symbol = any(not c.isalnum() and c not in "_-. " for c in core)
    entropy = shannon_entropy(core)
    if has_letter + has_digit + has_symbol >= 2:
        return entropy >= _MIN_MIXED_ENTROPY
    mixed_case = any(c.isupper() for c in core[1:]) and any(c.islower() for c in core)
    return (
        mixed_case and len(core) >= _MIN_LETTERS_ONLY_CHARS and entropy >= _MIN_LETTERS_ONLY_ENTROPY
    )


# --- pass A1: private key blocks --------------------------------------------------------------

_KEY_LABEL = r"[A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?"
_KEY_FENCE = re.compile(
    r"(?P<begin>-{4,5} ?BEGIN " + _KEY_LABEL + r" ?-{4,5})"
    r"|(?P<end>-{4,5} ?END " + _KEY_LABEL + r" ?-{4,5})"
)
# A base64 body line of a key block (its END line follows; its BEGIN lies outside this text).
_KEY_BODY_LINE = re.compile(r"[ \t]*[A-Za-z0-9+/=]{16,}[ \t]*\r?")
_PUTTY_PRIVATE_LINES = re.compile(r"^Private-Lines:[ \t]*(?P<n>\d{1,4})[ \t]*\r?\n", re.MULTILINE)


def _tail_start(text: str, end_fence: int, floor: int) -> int:
    """Where the base64 lines right before the END fence at `end_fence` begin (not before
    `floor`): the cut-off half of a key block whose BEGIN is in another passage. Walks back
    line by line, each character at most once per fence."""
    line_start = max(text.rfind("\n", floor, end_fence) + 1, floor)
    if text[line_start:end_fence].strip():
        return end_fence  # the END line has other text before it: redact the fence only
    start = line_start
    while start > floor:
        previous = max(text.rfind("\n", floor, start - 1) + 1, floor)
        if not _KEY_BODY_LINE.fullmatch(text, previous, start - 1):
            break
        start = previous
    return start


def _private_key_spans(text: str) -> list[tuple[int, int]]:
    """Spans of private key material: paired BEGIN…END blocks, a BEGIN left open, the tail of a
    block whose BEGIN is elsewhere, and PuTTY private lines. One pass over the fences."""
    spans: list[tuple[int, int]] = []
    open_at: int | None = None
    floor = 0
    for fence in _KEY_FENCE.finditer(text):
        if fence.group("begin"):
            if open_at is None:
                open_at = fence.start()
        elif open_at is not None:
            spans.append((open_at, fence.end()))
            open_at, floor = None, fence.end()
        else:
            spans.append((_tail_start(text, fence.start(), floor), fence.end()))
            floor = fence.end()
    if open_at is not None:
        spans.append((open_at, len(text)))
    for header in _PUTTY_PRIVATE_LINES.finditer(text):
        start = end = header.end()
        for _ in range(int(header.group("n"))):
            if end >= len(text):
                break
            newline = text.find("\n", end)
            end = len(text) if newline < 0 else newline + 1
        # Keep the line break after the body so the next line stays a line.
        end = end - 1 if end > start and text[end - 1] == "\n" else end
        if end > start and MARKER_PREFIX not in text[start:end]:
            spans.append((start, end))
    return spans


# --- passes A2–A7: linear patterns ----------------------------------------------------------

_URL_PASSWORD = re.compile(
    r"(?P<prefix>\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@]{0,256}:)"
    r"(?P<value>[^\s/@]{1,256})(?P<suffix>@)"
)


def _token(body: str, *, right: bool = True) -> re.Pattern[str]:
    return re.compile(_LEFT + body + (_RIGHT if right else ""))


# (kind, pattern): whole-match tokens, the more specific before the more general. AWS access
# key ids and SendGrid keys are not here: detect-secrets' AWS and SendGrid plugins (pass B) match
# the same shapes and, widened over the token, replace the same text with the same kind.
_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("stripe-key", _token(r"[sr]k_(?:live|test|prod)_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{16,}")),
    ("stripe-webhook-secret", _token(r"whsec_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{24,}")),
    ("anthropic-key", _token(r"sk-ant-(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}")),
    ("openai-key", _token(r"sk-(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}")),
    ("github-token", _token(r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{22,})", right=False)),
    ("gitlab-token", _token(r"glpat-[A-Za-z0-9_\-]{20,}")),
    ("slack-token", _token(r"(?:xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{10,})")),
    (
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/\w+"),
    ),
    ("google-api-key", _token(r"AIza[0-9A-Za-z_\-]{35}")),
    ("google-oauth-secret", _token(r"GOCSPX-[A-Za-z0-9_\-]{24,}")),
    ("huggingface-token", _token(r"hf_(?=[A-Za-z]*\d)[A-Za-z0-9]{30,}")),
    ("npm-token", _token(r"npm_(?=[A-Za-z]*\d)[A-Za-z0-9]{36}")),
    # npm's legacy hex tokens in `.npmrc`; the detect-secrets npm plugin's `//.+/:_authToken=`
    # backtracks over the whole line at every `//`, so its form is matched here instead.
    ("npm-token", re.compile(r"(?<=/:_authToken=)[ \t]{0,16}[A-Fa-f0-9\-]{36}(?![A-Fa-f0-9\-])")),
    ("pypi-token", _token(r"pypi-AgE[A-Za-z0-9_\-]{50,}")),
    ("digitalocean-token", _token(r"do[por]_v1_[a-f0-9]{64}")),
    ("jwt", _token(r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*", right=False)),
)

# Provider tokens ported from gitleaks' default rules (github.com/gitleaks/gitleaks,
# config/gitleaks.toml at commit b58d3f1, for gitleaks >= 8.25; MIT licence, © Zachary
# Rice): those with a prefix or shape distinctive enough to match on their own, for text a
# person keeps in notes. Left out: its generic entropy rule, rules for publishable keys, and
# rules whose value is only a length of letters and digits after a keyword (`_CONTEXT_RULES`
# takes the few whose value has a shape of its own). Where a gitleaks prefix is also an
# ordinary identifier (`sm_pat_`, `API-`, `EAAA`), the value needs a digit. They run as one
# alternation: one pass over a 2 MB note costs ~0.4 s, where a pass per rule cost ~5 s.
_GITLEAKS_RULES: tuple[tuple[str, str], ...] = (
    ("discord-webhook",  # Discord's documented webhook URL (not a gitleaks rule)
     r"https://(?:(?:canary|ptb)\.)?discord(?:app)?\.com/api/(?:v\d{1,2}/)?webhooks/"
     r"\d{17,20}/[A-Za-z0-9_\-]{60,68}"),
    ("slack-webhook",
     r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,120}"),
    ("teams-webhook",
     r"https://[a-z0-9]+\.webhook\.office\.com/webhookb2/[a-z0-9]{8}-(?:[a-z0-9]{4}-){3}"
     r"[a-z0-9]{12}@[a-z0-9]{8}-(?:[a-z0-9]{4}-){3}[a-z0-9]{12}/IncomingWebhook/[a-z0-9]{32}/"
     r"[a-z0-9]{8}-(?:[a-z0-9]{4}-){3}[a-z0-9]{12}"),
    ("heroku-key", r"HRKU-AA[0-9a-zA-Z_\-]{58}"),
    ("1password-secret-key",
     r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"),
    ("1password-token", r"ops_eyJ[a-zA-Z0-9+/]{250,}={0,3}"),
    ("adobe-secret", r"p8e-[A-Za-z0-9]{32}"),
    ("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("airtable-token", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),
    ("alibaba-access-key", r"LTAI[A-Za-z0-9]{20}"),
    ("artifactory-token", r"cmVmd[A-Za-z0-9]{59}"),
    ("atlassian-token", r"ATATT3[A-Za-z0-9_\-=]{186}"),
    ("aws-bedrock-key", r"ABSK[A-Za-z0-9+/]{109,269}={0,2}"),
    ("azure-client-secret", r"[a-zA-Z0-9_~.]{3}\dQ~[a-zA-Z0-9_~.\-]{31,34}"),
    ("clojars-token", r"(?i:CLOJARS_[a-z0-9]{60})"),
    ("cloudflare-origin-ca-key", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    ("databricks-token", r"dapi[a-f0-9]{32}(?:-\d)?"),
    ("doppler-token", r"dp\.pt\.[A-Za-z0-9]{43}"),
    ("dropbox-token", r"sl\.[A-Za-z0-9\-=_]{135}"),
    ("duffel-token", r"duffel_(?:test|live)_[A-Za-z0-9_\-=]{43}"),
    ("dynatrace-token", r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    ("easypost-key", r"EZ[AT]K[A-Za-z0-9]{54}"),
    ("facebook-token", r"EAA[MC][A-Za-z0-9]{100,}"),
    ("flutterwave-key", r"FLWSECK_TEST-[a-hA-H0-9]{12}(?:[a-hA-H0-9]{20}-X)?"),
    ("flyio-token",
     r"(?:fo1_[\w\-]{43}|fm1[ar]_[a-zA-Z0-9+/]{100,}={0,3}|fm2_[a-zA-Z0-9+/]{100,}={0,3})"),
    ("frameio-token", r"fio-u-[A-Za-z0-9\-_=]{64}"),
    ("gitlab-token",
     r"(?:gl(?:dt|ffct|ft|soat|rt)-[0-9a-zA-Z_\-]{20,}|glcbt-[0-9a-zA-Z]{1,5}_[0-9a-zA-Z_\-]{20}"
     r"|glimt-[0-9a-zA-Z_\-]{25}|glagent-[0-9a-zA-Z_\-]{50}|gloas-[0-9a-zA-Z_\-]{64}"
     r"|glptt-[0-9a-f]{40}|GR1348941[\w\-]{20})"),
    ("grafana-token",
     r"(?:eyJrIjoi[A-Za-z0-9]{70,400}={0,3}|glc_[A-Za-z0-9+/]{32,400}={0,3}"
     r"|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})"),
    ("harness-key", r"(?:pat|sat)\.[a-zA-Z0-9_\-]{22}\.[a-zA-Z0-9]{24}\.[a-zA-Z0-9]{20}"),
    ("huggingface-token",
     r"(?:api_org_|hf_(?=[A-Za-z]{0,33}[A-Z])(?=[A-Za-z]{0,33}[a-z]))[A-Za-z]{34}"),
    ("infracost-token", r"ico-(?=[a-zA-Z]*\d)[a-zA-Z0-9]{32}"),
    ("intra42-secret", r"s-s4t2(?:ud|af)-[a-f0-9]{64}"),
    ("linear-key", r"lin_api_[A-Za-z0-9]{40}"),
    ("maxmind-key", r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk"),
    ("newrelic-key", r"(?:NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9\-]{32})"),
    ("notion-token", r"ntn_[0-9]{11}[A-Za-z0-9]{35}"),
    ("octopus-key", r"API-(?=[A-Z]*\d)[A-Z0-9]{26}"),
    ("openshift-token", r"sha256~[\w\-]{43}"),
    ("perplexity-key", r"pplx-[a-zA-Z0-9]{48}"),
    ("planetscale-token", r"pscale_(?:tkn|oauth|pw)_[\w=.\-]{32,64}"),
    ("postman-key", r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    ("prefect-key", r"pnu_[a-zA-Z0-9]{36}"),
    ("pulumi-token", r"pul-[a-f0-9]{40}"),
    ("readme-key", r"rdme_[a-z0-9]{70}"),
    ("rubygems-key", r"rubygems_[a-f0-9]{48}"),
    ("scalingo-token", r"tk-us-[\w\-]{48}"),
    ("brevo-key", r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    ("sentry-token",
     r"(?:sntryu_[a-f0-9]{64}|sntrys_eyJpYXQiO[a-zA-Z0-9+/]{10,200}"
     r"(?:LCJyZWdpb25fdXJs|InJlZ2lvbl91cmwi|cmVnaW9uX3VybCI6)[a-zA-Z0-9+/]{10,200}={0,2}"
     r"_[a-zA-Z0-9+/]{43})"),
    ("settlemint-token", r"sm_(?:aat|pat|sat)_(?=[a-zA-Z]*\d)[a-zA-Z0-9]{16}"),
    ("shippo-token", r"shippo_(?:live|test)_[a-fA-F0-9]{40}"),
    ("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("sourcegraph-token", r"sgp_(?:(?:[a-fA-F0-9]{16}|local)_)?[a-fA-F0-9]{40}"),
    ("square-token", r"(?:sq0atp-[\w\-]{22,60}|EAAA(?=[\w\-]*\d)[\w\-]{22,60})"),
    ("terraform-token", r"[a-zA-Z0-9]{14}\.atlasv1\.[a-zA-Z0-9\-_=]{60,70}"),
    ("twitter-bearer-token", r"A{22}[a-zA-Z0-9%]{80,100}"),
    ("typeform-token", r"tfp_[A-Za-z0-9\-_.=]{59}"),
    ("vault-token", r"(?:hvs\.[\w\-]{90,120}|hvb\.[\w\-]{138,300})"),
)  # fmt: skip
# Non-capturing: named groups to tell the rule made the search ~5x slower; the rule of a
# match (rare) is found by matching it against each rule in turn.
_GITLEAKS = re.compile(
    _LEFT + "(?:" + "|".join(f"(?:{body})" for _, body in _GITLEAKS_RULES) + ")" + _RIGHT
)
_GITLEAKS_EACH = tuple((kind, re.compile(body)) for kind, body in _GITLEAKS_RULES)


def _gitleaks_kind(found: str) -> str:
    """The kind of the first ported rule that matches all of `found`."""
    return next(kind for kind, rule in _GITLEAKS_EACH if rule.fullmatch(found))


# gitleaks rules whose value is only recognisable after its provider's name in a pair
# (`HEROKU_API_KEY=<uuid>`, `mailgun_key: key-…`): (kind, provider word, value). The shape of
# gitleaks' keyword rules, bounded: the word, up to 20 more name characters, a separator,
# then the value; only the value is replaced.
_CONTEXT_RULES: tuple[tuple[str, str, str], ...] = (
    ("heroku-key", "heroku",
     r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    ("mailgun-key", "mailgun",
     r"(?:key-[a-f0-9]{32}|[a-h0-9]{32}-[a-h0-9]{8}-[a-h0-9]{8})"),
    ("discord-key", "discord", r"(?:[a-f0-9]{64}|(?=[A-Za-z=_\-]*\d)[A-Za-z0-9=_\-]{32})"),
)  # fmt: skip
_CONTEXT_PATTERNS = tuple(
    (
        kind,
        word,
        re.compile(
            r"(?P<lead>(?i:" + word + r")[ \t\w.\-]{0,20}[\s'\"]{0,3}"
            r"(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[`'\"\s=]{0,5})"
            r"(?P<value>" + value + r")" + _RIGHT
        ),
    )
    for kind, word, value in _CONTEXT_RULES
)

_AWS_SECRET = re.compile(
    r"(?i:aws|secret)[^\n]{0,40}?(?<![A-Za-z0-9/+])"
    r"(?P<value>(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])[A-Za-z0-9/+]{40})"
    r"(?![A-Za-z0-9/+=])"
)

_BEARER = re.compile(
    r"(?P<prefix>\bBearer\s{1,16})(?P<value>(?=[A-Za-z0-9._~+/=\-]*\d)[A-Za-z0-9._~+/=\-]{16,})",
    re.IGNORECASE,
)

# The key ends with one of these names (case-insensitive); any identifier prefix is allowed.
_SECRET_KEY_NAMES = (
    "password", "passwd", "passphrase", "secret", "token", "authorization",
    *(f"{word}{joint}key" for word in ("api", "access", "secret", "private") for joint in "_-"),
    "apikey", "accesskey", "secretkey", "privatekey",
)  # fmt: skip
# The key is a whole identifier run (letters, digits, `_ - .`), taken possessively and checked
# to end with a name by look-behinds: no backtracking, so a 2 MB run costs linear time (a lazy
# `[…]*?(?:names)` retried every name at every position of the run).
_PAIR = re.compile(
    r"(?P<key>(?<![A-Za-z0-9_.\-])[\"']?[A-Za-z0-9_.\-]{1,256}+"
    r"(?:" + "|".join(f"(?<={name})" for name in _SECRET_KEY_NAMES) + r")[\"']?)"
    r"(?P<sep>[ \t]{0,16}[:=][ \t]{0,16})"
    r"(?P<value>\"[^\"\n]{1,512}\"|'[^'\n]{1,512}'|"
    r"(?:(?:Bearer|Basic|Token)[ \t]+)?[^\s\"'<>,;&]{1,512})",
    re.IGNORECASE,
)
# An unquoted pair value shorter than this is prose ("the secret: we …"), not a secret.
_MIN_UNQUOTED_VALUE = 3
# An unquoted value that names where the secret is rather than being it: a call or subscript
# (`get_token()`, `os.environ["X"]` — the value stops at the quote) or a dotted attribute path.
_REFERENCE = re.compile(r"[A-Za-z_][\w.]*[(\[].*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_LINE_END = re.compile(r"[ \t\r]*(?:\n|\Z)")
# A plain-word key: written like prose unless the rest of the pair says it is config.
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]*")

_PROSE = re.compile(
    r"(?<![A-Za-z0-9_])(?P<lead>(?P<noun>"
    r"(?:(?:api|access|secret|private|auth|ssh|signing|encryption|master|license|deploy)"
    r"[ _\-]?)?"
    r"(?:key|token|secret|password|passphrase|passcode|passwd)s?)"
    r"(?:\s{1,8}(?:is|was|are|were)"
    r"(?:\s{1,8}(?:now|still|currently|set\s{1,8}to|changed\s{1,8}to))?"
    # No verb for a password (`.netrc`: `login alice password S3cr3tPa55`) — not for "key":
    # "key miR-155 target" is ordinary biomedical prose.
    r"|(?<=password)|(?<=passwd))"
    r"\s{1,8}[\"'`]?)"
    r"(?P<value>[^\s\"'`]{1,512})",
    re.IGNORECASE,
)


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


def _sub(
    pattern: re.Pattern[str], text: str, replace: Callable[[re.Match[str]], str | None]
) -> tuple[str, int]:
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


def _pair_is_config(match: re.Match[str], value: str, text: str) -> bool:
    """Whether a pair is written like code or config (redact whatever the value) rather than
    like prose (redact only a value that looks like a secret)."""
    key, sep = match.group("key"), match.group("sep")
    if value[0] in "\"'" or "=" in sep or sep == ":":
        return True
    if not _PLAIN_WORD.fullmatch(key):
        return True  # DB_PASSWORD, client-secret, "token", GitHubToken
    # `password: letmein` alone on its line, as in YAML (looked at without slicing the rest of
    # the line, which on a 2 MB single line would cost quadratic time over many pairs).
    return _LINE_END.match(text, match.end()) is not None


def _replace_pair(match: re.Match[str]) -> str | None:
    value = match.group("value")
    if MARKER_PREFIX in value:
        return None  # already redacted by an earlier pass (a token or a key block)
    quote = value[0] if value[0] in "\"'" else ""
    inner = value[1:-1] if quote else value
    if not quote and len(inner) < _MIN_UNQUOTED_VALUE:
        return None
    if _is_placeholder(inner.strip()) or (not quote and _REFERENCE.fullmatch(inner)):
        return None  # `${DB_PASSWORD}`, `****`, `os.environ[…`, `settings.API_KEY`
    if not _pair_is_config(match, value, match.string) and not looks_like_secret(inner):
        return None
    kind = _pair_kind(match.group("key"))
    return f"{match.group('key')}{match.group('sep')}{quote}{marker(kind)}{quote}"


def _replace_url_password(match: re.Match[str]) -> str | None:
    if MARKER_PREFIX in match.group("value"):
        return None
    return f"{match.group('prefix')}{marker('url-password')}{match.group('suffix')}"


def _replace_prose(match: re.Match[str]) -> str | None:
    value = match.group("value")
    core = value.rstrip(_TRAILING_PUNCTUATION)
    if not looks_like_secret(core):
        return None
    noun = match.group("noun").lower()
    if "pass" in noun:
        kind = "password"
    elif "token" in noun:
        kind = "token"
    elif noun.rstrip("s").endswith("key"):
        kind = "private-key" if noun.startswith(("private", "ssh")) else "api-key"
    else:
        kind = "secret"
    return f"{match.group('lead')}{marker(kind)}{value[len(core) :]}"


# --- pass B: detect-secrets ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Detector:
    """One detect-secrets plugin as this module uses it."""

    kind: str
    plugin: Any  # a detect_secrets BasePlugin; typed loosely, the library has no stubs
    # Necessary conditions of the plugin's patterns (what every match contains, read from
    # detect-secrets 1.5.0's source): a window where one of them finds nothing is not given to
    # the plugin. Pure speed — tests check they never hide a finding; () runs it everywhere.
    triggers: tuple[re.Pattern[str], ...]
    # The found value is widened over adjacent token characters (it is a token, and a longer
    # token around it is the same secret) — not for quoted or delimited values.
    widen: bool = True
    # Patterns that also match ordinary words: the value needs a digit and a lowercase letter.
    needs_digit_and_lower: bool = False
    # Values found by a keyword heuristic must also look like a secret.
    check_value: bool = False
    # Text the plugin includes before the value (Azure's `AccountKey=`), kept visible.
    strip_prefix: str = ""


def _trigger(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(pattern) for pattern in patterns)


@cache
def _detectors() -> tuple[_Detector, ...]:
    """The detect-secrets plugins in use, built once (importing the library takes ~0.2 s, so
    not at module import). Plugin objects are only read afterwards: `analyze_string` of these
    plugins keeps no state, so sharing them between threads is safe."""
    from detect_secrets.plugins.artifactory import ArtifactoryDetector
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.cloudant import CloudantDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
    from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
    from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.softlayer import SoftlayerDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    # Assignment-style plugins (IBM, SoftLayer) need one of these keywords, case-insensitive,
    # and a value of their fixed length.
    assignment = r"(?i:key|pwd|pw|pass|token|softlayer)"
    return (
        _Detector(
            "aws-access-key",
            AWSKeyDetector(),
            _trigger(r"A3T|ABIA|ACCA|AKIA|ASIA|[0-9a-zA-Z/+]{40}"),
        ),
        _Detector(
            "artifactory-token",
            ArtifactoryDetector(),
            _trigger(r"AKC|AP"),
            needs_digit_and_lower=True,
        ),
        _Detector(
            "azure-storage-key",
            AzureStorageKeyDetector(),
            _trigger(r"AccountKey="),
            widen=False,
            strip_prefix="AccountKey=",
        ),
        _Detector("url-password", BasicAuthDetector(), _trigger(r"://"), widen=False),
        _Detector("cloudant-key", CloudantDetector(), _trigger(r"(?i:cl)", r"(?i:[a-z]{24})")),
        _Detector("discord-token", DiscordBotTokenDetector(), _trigger(r"\.")),
        _Detector("github-token", GitHubTokenDetector(), _trigger(r"gh[pousr]_")),
        _Detector("gitlab-token", GitLabTokenDetector(), _trigger(r"gl[a-z]{2,6}-|GR1348941")),
        _Detector(
            "ibm-cloud-key", IbmCloudIamDetector(), _trigger(assignment, r"[a-zA-Z0-9_\-]{44}")
        ),
        _Detector("ibm-cos-key", IbmCosHmacDetector(), _trigger(r"(?i:secret)", r"[a-f0-9]{48}")),
        _Detector("jwt", JwtTokenDetector(), _trigger(r"eyJ")),
        _Detector("mailchimp-key", MailchimpDetector(), _trigger(r"-us\d")),
        _Detector("openai-key", OpenAIDetector(), _trigger(r"T3BlbkFJ")),
        _Detector("pypi-token", PypiTokenDetector(), _trigger(r"pypi-AgE")),
        _Detector("sendgrid-key", SendGridDetector(), _trigger(r"SG\.")),
        _Detector("slack-token", SlackDetector(), _trigger(r"(?i:xox|hooks\.slack\.com)")),
        _Detector("softlayer-key", SoftlayerDetector(), _trigger(assignment, r"(?i:[a-z0-9]{64})")),
        _Detector("square-secret", SquareOAuthDetector(), _trigger(r"sq0csp-")),
        _Detector("stripe-key", StripeDetector(), _trigger(r"k_live_")),
        _Detector("telegram-token", TelegramBotTokenDetector(), _trigger(r"\d:")),
        _Detector(
            "twilio-key", TwilioKeyDetector(), _trigger(r"AC|SK"), needs_digit_and_lower=True
        ),
        _Detector(
            "high-entropy-string", Base64HighEntropyString(), _trigger(r"['\"]"), widen=False
        ),
    )


@cache
def _keyword() -> tuple[_Detector, re.Pattern[str], dict[re.Pattern[str], int]]:
    """detect-secrets' keyword plugin, the bounded pattern that finds its candidates, and the
    rule set it is run with.

    Its patterns take an unbounded `\\w*` after the keyword and try it at every keyword
    occurrence — minutes on a 2 MB run of `secretsecret…`. So one linear scan finds bounded
    candidates first (a keyword, at most 64 more word characters, at most 50 separator
    characters, a quoted value of at most 512; or a quoted value compared with `==` to a
    keyword), and the plugin decides on each candidate alone. The rules are its
    quotes-required set: the unquoted config rules take the rest of the line as the value
    ("Passwords: are stored hashed" would lose the sentence)."""
    from detect_secrets.plugins.keyword import (
        DENYLIST,
        QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
        KeywordDetector,
    )

    keywords = "|".join(DENYLIST)
    quoted = r"['\"`][^'\"`\n]{1,512}+['\"`]"
    candidates = re.compile(
        rf"(?:{keywords})\w{{0,64}}+(?!\w)[^\n'\"`]{{0,50}}+{quoted};?"
        rf"|{quoted}[ \t]{{0,16}}[!=]{{2,3}}[ \t]{{0,16}}\w{{0,64}}?(?:{keywords})",
        re.IGNORECASE,
    )
    detector = _Detector("secret", KeywordDetector(), (), widen=False, check_value=True)
    return detector, candidates, QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP


_LEADING_WORD = re.compile(r"\w{0,70}")


@cache
def _keyword_names() -> re.Pattern[str]:
    from detect_secrets.plugins.keyword import DENYLIST

    return re.compile("|".join(DENYLIST), re.IGNORECASE)


# Characters a token-like plugin value is widened over, and how far at most (bounded, so a
# 2 MB run of token characters costs linear time).
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_MAX_WIDEN = 256
# Delimiters some plugin patterns include around the value (Artifactory's `(?:\s|=|:|"|^)`).
_VALUE_DELIMITERS = " \t\"'=:"
# Subresource-integrity hashes and Stripe publishable keys are high-entropy but public.
_PUBLIC_HIGH_ENTROPY = re.compile(r"sha(?:1|256|384|512)-|pk_(?:live|test)_", re.IGNORECASE)


def _raw_values(detector: _Detector, window: str) -> Iterator[str]:
    """What one plugin reports in `window`, through `analyze_string` only (no settings, no
    verification, no network)."""
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin

    plugin = detector.plugin
    if isinstance(plugin, HighEntropyStringsPlugin):
        # `analyze_line` applies the entropy limit; `analyze_string` does not.
        for value in plugin.analyze_string(window):
            if plugin.calculate_shannon_entropy(value) > plugin.entropy_limit:
                yield value
    else:
        yield from plugin.analyze_string(window)


def _accepted(detector: _Detector, raw: str) -> str | None:
    """The secret value of one plugin report, or None when it is a known false positive."""
    from detect_secrets.filters.heuristic import (
        is_potential_uuid,
        is_sequential_string,
        is_templated_secret,
    )

    value = raw
    if detector.strip_prefix and value.startswith(detector.strip_prefix):
        value = value[len(detector.strip_prefix) :]
    if detector.widen:
        # A token: the first whitespace-separated piece, without the delimiters some patterns
        # match around it (Artifactory's `(?:\s|=|:|"|^)AKC…(?:\s|"|$)`).
        pieces = value.strip(_VALUE_DELIMITERS).split()
        value = pieces[0].strip(_VALUE_DELIMITERS) if pieces else ""
    if len(value.strip()) < _MIN_SECRET_CHARS or MARKER_PREFIX in value:
        return None
    if is_templated_secret(value) or is_potential_uuid(value) or is_sequential_string(value):
        return None
    if detector.needs_digit_and_lower and not (
        any(c.isdigit() for c in value) and any(c.islower() for c in value)
    ):
        return None
    if detector.check_value and not looks_like_secret(value):
        return None
    if detector.kind == "high-entropy-string" and (
        _PUBLIC_HIGH_ENTROPY.match(value)
        or not (
            any(c.isdigit() for c in value)
            and any(c.islower() for c in value)
            and any(c.isupper() for c in value)
        )
    ):
        return None
    return value


def _windows(text: str) -> Iterator[tuple[int, str]]:
    """(offset, text) of each line, a long line cut into overlapping windows."""
    step = WINDOW_CHARS - WINDOW_OVERLAP_CHARS
    for line in re.finditer(r"[^\n]+", text):
        start, end = line.span()
        if end - start <= WINDOW_CHARS:
            yield start, line.group(0)
            continue
        for offset in range(start, end, step):
            yield offset, text[offset : min(offset + WINDOW_CHARS, end)]
            if offset + WINDOW_CHARS >= end:
                break


def _widen(window: str, start: int, end: int) -> tuple[int, int]:
    floor, ceiling = max(0, start - _MAX_WIDEN), min(len(window), end + _MAX_WIDEN)
    while start > floor and window[start - 1] in _TOKEN_CHARS:
        start -= 1
    while end < ceiling and window[end] in _TOKEN_CHARS:
        end += 1
    return start, end


def _spans_in(
    detector: _Detector, values: Iterator[str], piece: str, offset: int
) -> Iterator[tuple[int, int, str]]:
    """Spans (in the whole text) of every accepted value's occurrences in `piece`, which
    starts at `offset`; occurrences overlapping a marker are skipped."""
    markers: list[tuple[int, int]] | None = None
    for raw in dict.fromkeys(values):  # a value reported twice is located once
        value = _accepted(detector, raw)
        if value is None:
            continue
        if markers is None:
            markers = [m.span() for m in _MARKER.finditer(piece)]
        # Every occurrence in the piece: a secret mentioned twice leaks twice. The search goes
        # on after the last span, so a run of repeats is widened once, not once per repeat.
        at = piece.find(value)
        while at >= 0:
            start, end = at, at + len(value)
            if detector.widen:
                start, end = _widen(piece, start, end)
            if not any(s < end and start < e for s, e in markers):
                yield offset + start, offset + end, detector.kind
            at = piece.find(value, end)


def _detect_secrets_spans(text: str) -> list[tuple[int, int, str]]:
    """Spans (start, end, kind) of what the detect-secrets plugins find, markers excluded."""
    spans: list[tuple[int, int, str]] = []
    for offset, window in _windows(text):
        for detector in _detectors():
            if not all(trigger.search(window) for trigger in detector.triggers):
                continue
            spans.extend(_spans_in(detector, _raw_values(detector, window), window, offset))
    keyword, candidates, rules = _keyword()
    keywords = _keyword_names()
    for candidate in candidates.finditer(text):
        piece, start = candidate.group(0), candidate.start()
        if MARKER_PREFIX in piece:
            continue  # our pair pass redacted this value already
        # Start at the last keyword of the leading word (`secretsecret…secret = "x"`): every
        # keyword in it leads to the same value, and the plugin would try each one.
        leading = _LEADING_WORD.match(piece)
        starts = [m.start() for m in keywords.finditer(piece, 0, leading.end() if leading else 0)]
        if starts and starts[-1] > 0:
            piece, start = piece[starts[-1] :], start + starts[-1]
        values = keyword.plugin.analyze_string(piece, denylist_regex_to_group=rules)
        spans.extend(_spans_in(keyword, values, piece, start))
    return spans


def _apply_spans(text: str, spans: Sequence[tuple[int, int, str]]) -> tuple[str, int]:
    """`text` with each span replaced by its marker (overlapping spans merged, the kind of the
    earliest-starting one kept), and how many markers were written."""
    if not spans:
        return text, 0
    merged: list[list[Any]] = []
    for start, end, kind in sorted(spans, key=lambda span: (span[0], -span[1])):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, kind])
    pieces: list[str] = []
    cursor = 0
    for start, end, kind in merged:
        pieces.append(text[cursor:start])
        pieces.append(marker(kind))
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces), len(merged)


def _redact_once(text: str) -> tuple[str, int]:
    """One run of every pass, in the order the module docstring lists them."""
    text, total = _apply_spans(text, [(s, e, "private-key") for s, e in _private_key_spans(text)])
    text, n = _sub(_URL_PASSWORD, text, _replace_url_password)
    total += n
    for kind, pattern in _TOKEN_PATTERNS:
        text, n = _sub(pattern, text, lambda m, kind=kind: marker(kind))
        total += n
    text, n = _sub(_GITLEAKS, text, lambda m: marker(_gitleaks_kind(m.group(0))))
    total += n
    lowered = text.lower()
    for kind, word, pattern in _CONTEXT_PATTERNS:
        if word in lowered:
            text, n = _sub(pattern, text, lambda m, kind=kind: m.group("lead") + marker(kind))
            total += n
    text, n = _sub(
        _AWS_SECRET,
        text,
        lambda m: m.group(0)[: m.start("value") - m.start()] + marker("aws-secret-key"),
    )
    total += n
    text, n = _sub(_BEARER, text, lambda m: f"{m.group('prefix')}{marker('bearer-token')}")
    total += n
    text, n = _sub(_PAIR, text, _replace_pair)
    total += n
    text, n = _sub(_PROSE, text, _replace_prose)
    total += n
    text, n = _apply_spans(text, _detect_secrets_spans(text))
    return text, total + n


def redact(text: str) -> tuple[str, int]:
    """`text` with every recognised secret value replaced by `[REDACTED:kind]`, and how many
    were replaced. Deterministic and idempotent: `redact(redact(t)[0])` replaces nothing."""
    total = 0
    for _ in range(_MAX_ROUNDS):
        text, count = _redact_once(text)
        total += count
        if count == 0:
            break
    return text, total
