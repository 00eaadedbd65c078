"""What a question's own words narrow it to (pure): a named note ("in the backup runbook",
"the March meeting", a quoted title), a tag ("#ops", "tagged ops"), a space ("in the Family
space"), a source ("from the wiki source") and a date or period ("in May 2024", "on
2024-05-03", "last week", "yesterday", "in March").

Only cues are read here; `retrieval.plan.catalog` resolves them against what the asker may
see (a cue that names nothing narrows nothing). Relative periods are read against the `today`
passed in, never the clock, so a stored plan re-plans to the same period.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Self

from retrieval.meta.catalog import MONTH_NAMES
from retrieval.meta.extract import KIND_NAMES, Kind

_MONTH_NUMBER = {name.casefold(): i for i, name in enumerate(MONTH_NAMES, start=1)}
_MONTH_NUMBER.update({name.casefold()[:3]: i for i, name in enumerate(MONTH_NAMES, start=1)})
_MONTH_NUMBER["sept"] = 9
# Any case with a year or a day beside it ("may 2024" is a date); capitalised when alone, so
# "may I …" and "march on" are not months.
_ANY_MONTH = (
    r"(?i:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_CAPITAL_MONTH = "(?:" + "|".join(MONTH_NAMES) + "|Sept)"
_ORD = r"(?:st|nd|rd|th)?"

ISO_DAY_RE = re.compile(r"\b((?:19|20)\d{2})-(\d{1,2})-(\d{1,2})\b")
MONTH_DAY_YEAR_RE = re.compile(
    rf"\b({_ANY_MONTH})\.?\s+(\d{{1,2}}){_ORD},?\s+((?:19|20)\d{{2}})\b"
    rf"|\b(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_ANY_MONTH})\.?,?\s+((?:19|20)\d{{2}})\b"
)
MONTH_YEAR_RE = re.compile(
    rf"\b({_ANY_MONTH})\.?,?\s+(?:of\s+)?((?:19|20)\d{{2}})\b|\b((?:19|20)\d{{2}})-(\d{{1,2}})\b(?!-)"
)
RELATIVE_RE = re.compile(
    r"\b(yesterday|today|this\s+morning|(?:this|last|past|previous)\s+(?:week|month|year)|"
    r"(?:the\s+)?(?:last|past)\s+(\d{1,3})\s+(days?|weeks?))\b",
    re.IGNORECASE,
)
YEAR_RE = re.compile(
    r"\b(?i:in|during|of|for|from|throughout)\s+(?:the\s+year\s+)?((?:19|20)\d{2})\b"
)
MONTH_ALONE_RE = re.compile(
    rf"\b(?i:(in|during|of|on|the|last|this|early|late|mid))[\s-]+({_CAPITAL_MONTH})\b(?!\s*\d)"
)

# The kinds of note a question names ("in the backup *runbook*", "the March *meeting*").
NOTE_NOUNS = (
    "note notes runbook runbooks page doc docs document checklist handbook policy minutes "
    "meeting meetings plan log journal diary guide manual sheet list letter report record "
    "records file summary agenda"
)
_NOTE_NOUN = "(?:" + "|".join(NOTE_NOUNS.split()) + ")"
NOTE_RE = re.compile(
    rf"\b(?i:the|my|our|his|her|their)\s+((?:[\w'’-]+\s+){{0,5}}?)(?i:({_NOTE_NOUN}))\b"
)
# The note kinds a named note's kind word stands for (`retrieval.meta.extract.Kind`), when no
# title matches it: "the March meeting" is a meeting note of March.
KIND_OF_NOUN = {
    "meeting": Kind.MEETING,
    "meetings": Kind.MEETING,
    "minutes": Kind.MEETING,
    "agenda": Kind.MEETING,
    "runbook": Kind.RUNBOOK,
    "runbooks": Kind.RUNBOOK,
    "checklist": Kind.RUNBOOK,
    "journal": Kind.PERSONAL,
    "diary": Kind.PERSONAL,
}
QUOTED_RE = re.compile(r"[“\"]([^”\"\n]{2,80})[”\"]")
TAG_RE = re.compile(
    r"(?<![\w&#/])#([A-Za-z][\w-]{0,99})|\b(?i:tagged)\s+(?:(?i:with)\s+)?#?([\w-]{1,100})"
)
SPACE_RE = re.compile(
    r"\b(?i:in|from)\s+(?i:the\s+|my\s+|our\s+)?((?:[\w'’-]+\s+){0,4}?[\w'’-]+)\s+(?i:space)\b"
)
SOURCE_RE = re.compile(
    r"\b(?i:in|from)\s+(?i:the\s+|my\s+|our\s+)?((?:[\w.'’-]+\s+){0,4}?[\w.'’-]+)\s+(?i:source)\b"
)
# Words a name phrase never starts with: the article-like words the patterns skip.
_LEADING = frozenset({"the", "my", "our", "a", "an", "this", "that", "last", "next"})


@dataclass(frozen=True)
class Period:
    """A span of days, `start` inclusive and `end` exclusive, and the words that named it."""

    start: date
    end: date
    words: str

    @property
    def label(self) -> str:
        last = self.end - timedelta(days=1)
        if last == self.start:
            return self.start.isoformat()
        return f"{self.start.isoformat()} to {last.isoformat()}"

    def as_dict(self) -> dict[str, str]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "words": self.words}

    @classmethod
    def from_dict(cls, data: Any) -> Self | None:
        if not isinstance(data, dict):
            return None
        try:
            start, end = date.fromisoformat(data["start"]), date.fromisoformat(data["end"])
        except (KeyError, TypeError, ValueError):
            return None
        if end <= start:
            return None
        return cls(start=start, end=end, words=str(data.get("words", "")))


@dataclass(frozen=True)
class Cues:
    """The narrowing cues a question holds: candidate note titles (each a phrase to match a
    title exactly, longest reading first), tags, space names, source names and a period."""

    notes: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    spaces: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    period: Period | None = None
    # Note kinds the named note's kind word stands for, used when no title matches.
    kinds: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.notes or self.tags or self.spaces or self.sources or self.period or self.kinds
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "notes": list(self.notes),
            "tags": list(self.tags),
            "spaces": list(self.spaces),
            "sources": list(self.sources),
            "period": self.period.as_dict() if self.period else None,
            "kinds": list(self.kinds),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        data = data if isinstance(data, dict) else {}

        def strings(key: str) -> tuple[str, ...]:
            return tuple(str(v) for v in data.get(key) or () if isinstance(v, str))

        return cls(
            notes=strings("notes"),
            tags=strings("tags"),
            spaces=strings("spaces"),
            sources=strings("sources"),
            period=Period.from_dict(data.get("period")),
            kinds=strings("kinds"),
        )


def _month_start(year: int, month: int) -> date:
    return date(year, month, 1)


def _next_month(day: date) -> date:
    return date(day.year + (day.month == 12), day.month % 12 + 1, 1)


def _month(name: str) -> int | None:
    return _MONTH_NUMBER.get(name.casefold().rstrip("."))


def _day(year: int, month: int, day: int, words: str) -> Period | None:
    try:
        start = date(year, month, day)
    except ValueError:
        return None
    return Period(start, start + timedelta(days=1), words)


def _month_period(year: int, month: int | None, words: str) -> Period | None:
    if month is None or not 1 <= month <= 12:
        return None
    start = _month_start(year, month)
    return Period(start, _next_month(start), words)


def _relative(match: re.Match[str], today: date) -> Period | None:
    words = " ".join(match.group(0).casefold().split())
    if words in ("today", "this morning"):
        return Period(today, today + timedelta(days=1), words)
    if words == "yesterday":
        return Period(today - timedelta(days=1), today, words)
    if match.group(2):
        count = int(match.group(2))
        days = count * (7 if match.group(3).casefold().startswith("week") else 1)
        return Period(today - timedelta(days=days), today + timedelta(days=1), words)
    which, unit = words.split()
    monday = today - timedelta(days=today.weekday())
    if unit == "week":
        start = monday if which == "this" else monday - timedelta(days=7)
        return Period(start, start + timedelta(days=7), words)
    if unit == "month":
        this = _month_start(today.year, today.month)
        if which == "this":
            return Period(this, _next_month(this), words)
        previous = _month_start(today.year - (today.month == 1), (today.month - 2) % 12 + 1)
        return Period(previous, this, words)
    year = today.year if which == "this" else today.year - 1
    return Period(date(year, 1, 1), date(year + 1, 1, 1), words)


def period_in(question: str, today: date) -> Period | None:
    """The first date or period `question` names, most specific reading first: a day, a month
    of a year, a relative period (against `today`), a year after "in"/"during", a month name
    alone (its latest occurrence not after `today`). None when it names none."""
    for match in ISO_DAY_RE.finditer(question):
        found = _day(int(match[1]), int(match[2]), int(match[3]), match[0])
        if found:
            return found
    for match in MONTH_DAY_YEAR_RE.finditer(question):
        if match[1]:
            found = _day(int(match[3]), _month(match[1]) or 0, int(match[2]), match[0])
        else:
            found = _day(int(match[6]), _month(match[5]) or 0, int(match[4]), match[0])
        if found:
            return found
    for match in MONTH_YEAR_RE.finditer(question):
        if match[1]:
            found = _month_period(int(match[2]), _month(match[1]), match[0])
        else:
            found = _month_period(int(match[3]), int(match[4]), match[0])
        if found:
            return found
    match = RELATIVE_RE.search(question)
    if match:
        return _relative(match, today)
    match = YEAR_RE.search(question)
    if match:
        year = int(match[1])
        return Period(date(year, 1, 1), date(year + 1, 1, 1), match[0])
    match = MONTH_ALONE_RE.search(question)
    if match:
        month = _month(match[2]) or 1
        # "last March" is the latest March before this month; "in March" may be this one.
        latest = month < today.month if match[1].casefold() == "last" else month <= today.month
        year = today.year if latest else today.year - 1
        return _month_period(year, month, match[0])
    return None


# A name phrase starts after the last "in the" / "from our" inside it ("the Family space *from
# the* wiki source": the source is "wiki").
_INNER_CUE = re.compile(r"^.*\b(?:in|from)\s+(?:(?:the|my|our)\s+)?", re.IGNORECASE)


def _phrase(words: str) -> str:
    parts = _INNER_CUE.sub("", words).split()
    while parts and parts[0].casefold() in _LEADING:
        parts = parts[1:]
    return " ".join(parts)


def note_phrases(question: str) -> tuple[str, ...]:
    """Candidate titles of notes `question` names: "the X runbook" gives "X runbook" and "X";
    a quoted phrase gives itself. In the order found, without repeats."""
    found: list[str] = []
    for match in QUOTED_RE.finditer(question):
        found.append(match[1].strip())
    for match in NOTE_RE.finditer(question):
        name = _phrase(match[1])
        if name:
            found.append(f"{name} {match[2]}")
            found.append(name)
        else:
            found.append(match[2])
    return tuple(dict.fromkeys(p for p in found if p))


def note_kinds(question: str) -> tuple[str, ...]:
    """The note kinds the kind words of `question`'s named notes stand for ("the March
    meeting": meeting notes), in the order found."""
    kinds = [KIND_OF_NOUN.get(m[2].casefold()) for m in NOTE_RE.finditer(question)]
    return tuple(dict.fromkeys(kind for kind in kinds if kind))


def kind_words(kind: str) -> str:
    """A kind as the page says it, plural ("meeting notes")."""
    return KIND_NAMES.get(kind, (kind, kind))[1]


def cues_in(question: str, today: date) -> Cues:
    """Every narrowing cue `question` holds (pure; `today` anchors relative periods)."""
    tags = [(m[1] or m[2]).casefold() for m in TAG_RE.finditer(question)]
    spaces = [_phrase(m[1]) for m in SPACE_RE.finditer(question)]
    sources = [_phrase(m[1]) for m in SOURCE_RE.finditer(question)]
    return Cues(
        notes=note_phrases(question),
        tags=tuple(dict.fromkeys(tags)),
        spaces=tuple(dict.fromkeys(s for s in spaces if s)),
        sources=tuple(dict.fromkeys(s for s in sources if s)),
        period=period_in(question, today),
        kinds=note_kinds(question),
    )


@dataclass
class Narrowing:
    """The cues resolved against what the asker may see: for each kind, the names found
    (what the page shows), and whether narrowing was applied to the candidates or fell back.
    `document_ids` (not stored: replay resolves again) is the documents kept, None when
    nothing narrows."""

    cues: Cues = field(default_factory=Cues)
    notes: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    spaces: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    period: Period | None = None
    period_documents: int = 0
    documents: int = 0
    applied: bool = False
    fallback: str = ""
    document_ids: frozenset[int] | None = None

    @property
    def active(self) -> bool:
        return self.document_ids is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "cues": self.cues.as_dict(),
            "notes": list(self.notes),
            "tags": list(self.tags),
            "spaces": list(self.spaces),
            "sources": list(self.sources),
            "kinds": list(self.kinds),
            "period": self.period.as_dict() if self.period else None,
            "period_documents": self.period_documents,
            "documents": self.documents,
            "applied": self.applied,
            "fallback": self.fallback,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        data = data if isinstance(data, dict) else {}
        return cls(
            cues=Cues.from_dict(data.get("cues")),
            notes=[str(v) for v in data.get("notes") or []],
            tags=[str(v) for v in data.get("tags") or []],
            spaces=[str(v) for v in data.get("spaces") or []],
            sources=[str(v) for v in data.get("sources") or []],
            kinds=[str(v) for v in data.get("kinds") or []],
            period=Period.from_dict(data.get("period")),
            period_documents=int(data.get("period_documents") or 0),
            documents=int(data.get("documents") or 0),
            applied=bool(data.get("applied")),
            fallback=str(data.get("fallback") or ""),
        )


def without_narrowing_words(question: str, narrowing: Narrowing) -> str:
    """`question` without the words an applied narrowing consumed (its period's words, its
    tags' cues): the narrowed documents already satisfy them, so a check that every content
    word is in the evidence must not ask for "May" or "2024" again."""
    if not narrowing.applied:
        return question
    out = question
    if narrowing.period is not None and narrowing.period_documents and narrowing.period.words:
        out = re.sub(re.escape(narrowing.period.words), " ", out, flags=re.IGNORECASE)
    if narrowing.tags:
        out = TAG_RE.sub(
            lambda m: " " if (m[1] or m[2]).casefold() in narrowing.tags else m[0], out
        )
    return " ".join(out.split()) or question
