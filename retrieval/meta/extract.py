"""What a document is, read from its own text: pure functions, no database.

* `front_matter(body)`: the flat `key: value` lines of a leading YAML block (`---` … `---`).
* `date_of(...)`: the date a document is *about*: its front matter's `date:`, else a date in
  its title, else one in its first heading, else one in its file's name, else its first
  version's creation time; with
  where it came from and how precise it is ("March 2024" is a month).
* `kind_of(...)`: meeting, runbook, decision record, design, personal, external or other, by
  the first rule of `KIND_RULES` whose cue appears where the rule looks (a front matter
  `kind:`/`type:` naming a kind wins; a mirrored document is always external).
* `aliases_in(text)`: pairs of names for one thing stated in the text: "Service Level
  Objective (SLO)", "SLO (service level objective)", a glossary line "SLO: service level
  objective, …", "X, also called Y", "X aka Y", "X (also known as Y)". Only forms that say so
  outright: an acronym must spell its long form's initials.
* `top_terms(...)`: a document's most frequent topic words (title and headings count more),
  for the per-space catalog.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime

from retrieval.text.tokens import tokens
from retrieval.words.alias_cues import ALIAS_NAME_BOUNDARY_WORDS
from retrieval.words.stopwords import EXTRACTIVE_STOPWORDS

# --- front matter and headings -----------------------------------------------------------

FRONT_MATTER_MAX_LINES = 60
_FRONT_KEY = re.compile(r"^([A-Za-z][\w-]{0,40})\s*:\s*(.*?)\s*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def front_matter(body: str) -> dict[str, str]:
    """The `key: value` lines of a front matter block opening the body (keys case-folded,
    quotes around a value dropped); {} when the body opens with none. Nested YAML is not
    read: its lines are not `key: value` at the top level and are skipped.

    Lenient on purpose, unlike `notes.front_matter.split_front_matter` (the export's strict
    reader, which refuses a block holding a line it does not understand): a note written
    anywhere still gives its `date:` and `kind:` even when the rest of its YAML is richer."""
    lines = body.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    found: dict[str, str] = {}
    for line in lines[1 : FRONT_MATTER_MAX_LINES + 1]:
        if line.strip() in ("---", "..."):
            return found
        match = _FRONT_KEY.match(line)
        if match and match.group(1).casefold() not in found:
            found[match.group(1).casefold()] = match.group(2).strip().strip("\"'")
    return {}  # never closed: not front matter


def headings(body: str, limit: int = 40) -> list[str]:
    """The ATX headings of a Markdown body in order (not those inside fenced code)."""
    found: list[str] = []
    fenced = False
    for line in body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and (match := _HEADING.match(line)):
            found.append(match.group(2).strip())
            if len(found) >= limit:
                break
    return found


# --- dates -------------------------------------------------------------------------------

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_YEAR = r"((?:19|20)\d{2})"
_ISO = re.compile(rf"(?<![\d-]){_YEAR}[-/.](\d{{1,2}})[-/.](\d{{1,2}})(?![\d])")
_DAY_MONTH_YEAR = re.compile(
    rf"(?<!\w)(\d{{1,2}})(?:st|nd|rd|th)?\.?\s+({_MONTH})\.?,?\s+{_YEAR}(?!\d)", re.IGNORECASE
)
_MONTH_DAY_YEAR = re.compile(
    rf"(?<!\w)({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+{_YEAR}(?!\d)", re.IGNORECASE
)
_MONTH_YEAR = re.compile(rf"(?<!\w)({_MONTH})\.?,?\s+{_YEAR}(?!\d)", re.IGNORECASE)
_YEAR_MONTH = re.compile(rf"(?<![\d-]){_YEAR}-(\d{{2}})(?![\d-])")


class DateSource:
    FRONT_MATTER = "front_matter"
    TITLE = "title"
    HEADING = "heading"
    PATH = "path"
    FIRST_VERSION = "first_version"


class Precision:
    DAY = "day"
    MONTH = "month"


@dataclass(frozen=True)
class Dated:
    """A document's date, where it was read and whether it names a day or only a month
    (then `value` is the month's first day)."""

    value: date | None
    source: str
    precision: str = Precision.DAY


def _make(year: str, month: int, day: int) -> date | None:
    try:
        return date(int(year), month, day)
    except ValueError:
        return None


def date_in(text: str) -> tuple[date, str] | None:
    """The first full date in `text`, else its first month and year: (date, precision)."""
    found: list[tuple[int, date, str]] = []
    for match in _ISO.finditer(text):
        if value := _make(match.group(1), int(match.group(2)), int(match.group(3))):
            found.append((match.start(), value, Precision.DAY))
    for match in _DAY_MONTH_YEAR.finditer(text):
        month = MONTHS[match.group(2).casefold()]
        if value := _make(match.group(3), month, int(match.group(1))):
            found.append((match.start(), value, Precision.DAY))
    for match in _MONTH_DAY_YEAR.finditer(text):
        month = MONTHS[match.group(1).casefold()]
        if value := _make(match.group(3), month, int(match.group(2))):
            found.append((match.start(), value, Precision.DAY))
    if found:
        _, value, precision = min(found, key=lambda item: item[0])
        return value, precision
    months: list[tuple[int, date]] = []
    for match in _MONTH_YEAR.finditer(text):
        months.append(
            (match.start(), date(int(match.group(2)), MONTHS[match.group(1).casefold()], 1))
        )
    for match in _YEAR_MONTH.finditer(text):
        if value := _make(match.group(1), int(match.group(2)), 1):
            months.append((match.start(), value))
    if months:
        return min(months, key=lambda item: item[0])[1], Precision.MONTH
    return None


def date_of(
    *,
    title: str,
    body: str,
    first_version_at: datetime | None,
    path: str = "",
    meta: dict[str, str] | None = None,
) -> Dated:
    """The date a document is about (see the module docstring for the order)."""
    meta = front_matter(body) if meta is None else meta
    for key in ("date", "created", "day"):
        if key in meta and (found := date_in(meta[key])):
            return Dated(found[0], DateSource.FRONT_MATTER, found[1])
    if found := date_in(title):
        return Dated(found[0], DateSource.TITLE, found[1])
    first = headings(body, limit=1)
    if first and (found := date_in(first[0])):
        return Dated(found[0], DateSource.HEADING, found[1])
    # The file's own name ("2026-09-15-ops-sync.md"), not its folders.
    if path and (found := date_in(path.replace("\\", "/").rsplit("/", 1)[-1])):
        return Dated(found[0], DateSource.PATH, found[1])
    if first_version_at is not None:
        return Dated(first_version_at.date(), DateSource.FIRST_VERSION)
    return Dated(None, DateSource.FIRST_VERSION)


# --- kinds -------------------------------------------------------------------------------


class Kind:
    MEETING = "meeting"
    RUNBOOK = "runbook"
    DECISION = "decision"
    DESIGN = "design"
    PERSONAL = "personal"
    EXTERNAL = "external"
    OTHER = "other"


# Plural words for sentences ("3 meeting notes"), in the order catalogs list kinds.
KIND_NAMES: dict[str, tuple[str, str]] = {
    Kind.MEETING: ("meeting note", "meeting notes"),
    Kind.RUNBOOK: ("runbook", "runbooks"),
    Kind.DECISION: ("decision record", "decision records"),
    Kind.DESIGN: ("design document", "design documents"),
    Kind.PERSONAL: ("personal note", "personal notes"),
    Kind.EXTERNAL: ("mirrored page", "mirrored pages"),
    Kind.OTHER: ("other note", "other notes"),
}

# A front matter `kind:` or `type:` value, folded, naming a kind.
KIND_WORDS: dict[str, str] = {
    **{word: Kind.MEETING for word in ("meeting", "minutes", "standup", "retro", "1:1")},
    **{word: Kind.RUNBOOK for word in ("runbook", "playbook", "procedure", "howto", "how-to")},
    **{word: Kind.DECISION for word in ("decision", "adr", "decision record", "decision-record")},
    **{word: Kind.DESIGN for word in ("design", "rfc", "spec", "proposal", "design doc")},
    **{word: Kind.PERSONAL for word in ("personal", "journal", "diary", "log", "daily")},
    **{word: Kind.EXTERNAL for word in ("external", "web", "bookmark", "clipping")},
    **{word: Kind.OTHER for word in ("other", "note")},
}


class KindSource:
    FRONT_MATTER = "front_matter"
    EXTERNAL = "external"
    TITLE = "title"
    PATH = "path"
    HEADINGS = "headings"
    DEFAULT = "default"


@dataclass(frozen=True)
class KindRule:
    """One cue: where it is looked for (`title`, `path` or `headings`) and the pattern."""

    kind: str
    where: str
    pattern: re.Pattern[str]


def _cue(words: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-])(?:{words})(?![\w-])", re.IGNORECASE)


# First match wins, top to bottom: a title says more than a folder, which says more than
# headings; among titles a decision record's number beats "design" in "ADR-7: design of …".
KIND_RULES: tuple[KindRule, ...] = (
    # An incident write-up is none of the kinds, though it has action items like a meeting.
    KindRule(
        Kind.OTHER,
        "title",
        _cue(r"postmortem|post-mortem|incident report|incident \d{4}-\d\d-\d\d"),
    ),
    KindRule(
        Kind.DECISION,
        "title",
        _cue(r"adr[-_ ]?\d+|adr|decision|decisions|decision record|decision log|decided"),
    ),
    KindRule(
        Kind.MEETING,
        "title",
        _cue(
            r"meeting|meetings|minutes|stand-?up|retro|retrospective|1:1|one-on-one|huddle|"
            r"team sync|sync-up|catch-up|check-in|weekly|kick-?off|all-hands|agenda|"
            r"(?:architecture|design|ops|weekly|monthly|quarterly|team) review"
        ),
    ),
    # A dated session: "Ops sync, 2026-09-29", "INSET day notes, 2 September 2026".
    KindRule(Kind.MEETING, "dated_title", _cue(r"sync|notes|planning|review|session|call")),
    # A title that is an instruction: "Restart the billing API", "Handling a complaint".
    KindRule(
        Kind.RUNBOOK,
        "title",
        re.compile(
            r"^(?:how to|restart|drain|flush|renew|replay|clear|rotate|restore|rebuild|promote|"
            r"fail over|deploy|upgrade|reset|using|handling|preparing|closing|applying for|"
            r"taking|admitting|rotating|renewing|restoring|deploying|when the)\b",
            re.IGNORECASE,
        ),
    ),
    KindRule(
        Kind.RUNBOOK,
        "title",
        _cue(r"runbook|playbook|how to|how-to|howto|procedure|on-?call|checklist|what to do"),
    ),
    KindRule(
        Kind.DESIGN,
        "title",
        _cue(r"design|rfc|proposal|plan|architecture|spec|specification|design doc"),
    ),
    KindRule(
        Kind.PERSONAL,
        "title",
        _cue(
            r"journal(?! club)|diary|daily log|personal|dear diary|my day|notes to self|"
            r"reading list|book list|gift ideas|gift list|recipe|travel|running log|cycling log|"
            r"home|house|family"
        ),
    ),
    KindRule(Kind.DECISION, "path", _cue(r"adr|adrs|decisions?")),
    KindRule(Kind.MEETING, "path", _cue(r"meetings?|minutes|standups?")),
    KindRule(Kind.RUNBOOK, "path", _cue(r"runbooks?|playbooks?|procedures?|protocols?|howtos?")),
    KindRule(Kind.DESIGN, "path", _cue(r"designs?|rfcs?|specs?|architecture")),
    KindRule(Kind.PERSONAL, "path", _cue(r"journal|diary|personal|daily|recipes?")),
    KindRule(Kind.DECISION, "headings", _cue(r"decision outcome|considered options")),
    KindRule(Kind.MEETING, "headings", _cue(r"attendees|participants|action items")),
    KindRule(Kind.RUNBOOK, "headings", _cue(r"rollback|roll back|escalation|troubleshooting")),
    KindRule(Kind.DESIGN, "headings", _cue(r"non-goals|alternatives considered|design")),
)
# A decision record's shape: these three headings together (Nygard's template).
_ADR_HEADINGS = ("context", "decision", "consequences")


def kind_of(
    *,
    title: str,
    body: str,
    path: str = "",
    external: bool = False,
    meta: dict[str, str] | None = None,
) -> tuple[str, str]:
    """(kind, where it was read): `KindSource.*`."""
    meta = front_matter(body) if meta is None else meta
    for key in ("kind", "type", "category"):
        if (named := KIND_WORDS.get(meta.get(key, "").casefold())) is not None:
            return named, KindSource.FRONT_MATTER
    if external:
        return Kind.EXTERNAL, KindSource.EXTERNAL
    found = headings(body)
    folded = {heading.casefold().strip(": ") for heading in found}
    dated = date_in(title)
    places = {
        "title": title,
        "dated_title": title if dated and dated[1] == Precision.DAY else "",
        "path": path.replace("_", " "),
        "headings": "\n".join(found),
    }
    for rule in KIND_RULES:
        if rule.where == "headings" and all(word in folded for word in _ADR_HEADINGS):
            return Kind.DECISION, KindSource.HEADINGS
        if rule.pattern.search(places[rule.where]):
            return rule.kind, KindSource.TITLE if rule.where == "dated_title" else rule.where
    return Kind.OTHER, KindSource.DEFAULT


# --- aliases -----------------------------------------------------------------------------

ALIAS_MAX_WORDS = 5
ALIAS_MAX_CHARS = 80
# An acronym: 2-10 characters, a capital first, mostly capitals ("SLO", "K8s", "PgBouncer"
# is not one: too few capitals).
_ACRONYM = re.compile(r"^[A-Z][A-Za-z0-9&]{1,9}$")
# Each cue is found first and the name before it read from a bounded window behind it, so
# the cost stays linear in the text (a pattern reaching back from every position is not).
_PAREN = re.compile(r"\(([^()\n]{1,120})\)")
# "aka" only in lower case or capitals: "Aka" is also a name ("Aka will compare the two").
_AKA = r"(?-i:aka|AKA|a\.k\.a\.)"
_CALLED = re.compile(
    rf"(?:,\s{{0,5}}|\s{{1,5}})(?:\((?:also\s+)?(?:called|known\s+as|{_AKA})\s+([^()\n]{{1,120}})\)"
    rf"|(?:also\s+called|also\s+known\s+as|{_AKA})\s+([^.,;:!?()\n]{{1,120}}))",
    re.IGNORECASE,
)
# A glossary line: "- **RPO**: recovery point objective, how much data we may lose."
_GLOSSARY = re.compile(
    r"^[ \t]{0,3}(?:[-*+][ \t]+)?(?:\*\*|__)?([A-Z][A-Za-z0-9&]{1,9})(?:\*\*|__)?"
    r"[ \t]*(?::|—|–| - |=)[ \t]*([^\n]{1,300})",
    re.MULTILINE,
)
BEFORE_CHARS = 200


def _before(text: str, at: int, stops: str) -> str:
    """The text just before `at`, back to the nearest of `stops` (at most `BEFORE_CHARS`)."""
    window = text[max(0, at - BEFORE_CHARS) : at]
    return window[max(window.rfind(ch) for ch in stops) + 1 :]


_PHRASE_WORD = re.compile(r"[\w][\w'’./+-]*")


@dataclass(frozen=True)
class AliasPair:
    """Two names of one thing; `short` is the acronym or the alias, as written."""

    short: str
    long: str
    pattern: str  # "acronym_after", "acronym_before", "glossary", "also_called"


def _is_acronym(text: str) -> bool:
    capitals = sum(ch.isupper() for ch in text)
    return bool(_ACRONYM.match(text)) and capitals >= max(2, (len(text) + 1) // 2)


def _spells(acronym: str, words: list[str]) -> bool:
    """Whether the acronym's letters are the initials of `words`, in order: each part of a
    hyphenated word gives its own ("point-in-time recovery" spells PITR), small connecting
    words may give none, and digits in the acronym are skipped."""
    letters = [ch.casefold() for ch in acronym if ch.isalpha()]
    words = [part for word in words for part in re.split(r"[-‐–]", word) if part]
    initials = [word[0].casefold() for word in words]
    if not letters or not initials or initials[0] != letters[0]:
        return False
    # Every word except small connecting ones must give one letter, in order.
    i = 0
    for word, initial in zip(words, initials, strict=True):
        if i < len(letters) and initial == letters[i]:
            i += 1
        elif word.casefold() not in ("of", "and", "for", "the", "to", "in", "on", "&"):
            return False
    return i == len(letters)


def _tail_words(text: str, limit: int) -> list[str]:
    return _PHRASE_WORD.findall(text)[-limit:]


def _long_before(acronym: str, before: str) -> str | None:
    """The fewest words ending `before` whose initials spell `acronym`."""
    words = _tail_words(before, len(acronym) + 3)
    for count in range(1, len(words) + 1):
        candidate = words[-count:]
        if _spells(acronym, candidate) and count >= 2:
            return " ".join(candidate)
    return None


def _long_prefix(acronym: str, text: str) -> str | None:
    """The fewest words opening `text` (up to its first comma or full stop) whose initials
    spell `acronym`: a glossary definition's long form."""
    words = _PHRASE_WORD.findall(re.split(r"[,.;:(]", text, maxsplit=1)[0])[: len(acronym) + 3]
    for count in range(2, len(words) + 1):
        if _spells(acronym, words[:count]):
            return " ".join(words[:count])
    return None


def _name_before(text: str) -> str | None:
    """The name a cue follows: words read backwards up to a boundary word or punctuation."""
    words: list[str] = []
    for word in reversed(_PHRASE_WORD.findall(text)):
        if word.casefold() in ALIAS_NAME_BOUNDARY_WORDS or len(words) >= ALIAS_MAX_WORDS:
            break
        words.append(word)
    return " ".join(reversed(words)) or None


def _name_after(text: str) -> str | None:
    words: list[str] = []
    for word in _PHRASE_WORD.findall(text):
        if word.casefold() in ALIAS_NAME_BOUNDARY_WORDS and words:
            break
        if word.casefold() in ("the", "a", "an") and not words:
            continue
        words.append(word)
        if len(words) > ALIAS_MAX_WORDS:
            return None
    return " ".join(words) or None


def _usable(name: str | None) -> bool:
    return bool(name) and len(name or "") <= ALIAS_MAX_CHARS and bool(tokens(name or ""))


def aliases_in(text: str) -> list[AliasPair]:
    """Every alias pair the text states outright, in order, without repeats."""
    found: list[AliasPair] = []
    seen: set[tuple[str, str]] = set()

    def add(short: str | None, long: str | None, pattern: str) -> None:
        if not (_usable(short) and _usable(long)):
            return
        key = (alias_key(short or ""), alias_key(long or ""))
        if key[0] == key[1] or key in seen or (key[1], key[0]) in seen:
            return
        seen.add(key)
        found.append(AliasPair(short=short or "", long=long or "", pattern=pattern))

    for match in _PAREN.finditer(text):
        before, inside = _before(text, match.start(), "()\n"), match.group(1).strip()
        inner_words = _PHRASE_WORD.findall(inside)
        if _is_acronym(inside):
            add(inside, _long_before(inside, before), "acronym_after")
            continue
        tail = _PHRASE_WORD.findall(before)
        if (
            tail
            and _is_acronym(tail[-1])
            and 2 <= len(inner_words) <= ALIAS_MAX_WORDS + 2
            and _spells(tail[-1], inner_words)
        ):
            add(tail[-1], " ".join(inner_words), "acronym_before")
    for match in _GLOSSARY.finditer(text):
        if _is_acronym(match.group(1)):
            add(match.group(1), _long_prefix(match.group(1), match.group(2)), "glossary")
    for match in _CALLED.finditer(text):
        first = _name_before(_before(text, match.start(), ".;:!?()\n"))
        second = _name_after(match.group(1) or match.group(2) or "")
        add(second, first, "also_called")
    return found


def alias_key(name: str) -> str:
    """How an alias is matched against a query: its folded tokens, one space apart."""
    return " ".join(tokens(name))[:200]


# --- top terms ---------------------------------------------------------------------------

TOP_TERMS = 12
_TITLE_WEIGHT = 3


def _topic_words(text: str) -> Iterable[str]:
    for token in tokens(text):
        if len(token) >= 3 and not token.isdigit() and token not in EXTRACTIVE_STOPWORDS:
            yield token[:64]


def top_terms(*, title: str, body: str, limit: int = TOP_TERMS) -> list[tuple[str, int]]:
    """The document's most frequent topic words with their weighted counts, most first
    (ties by word, so the result is stable)."""
    counts: Counter[str] = Counter()
    for word in _topic_words(" ".join([title, *headings(body)])):
        counts[word] += _TITLE_WEIGHT
    counts.update(_topic_words(body))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:limit]
