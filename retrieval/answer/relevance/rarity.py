"""Word rarity for the relevance features: IDF over the user's own head passages, looked up
through the lexical index (bounded), or over a corpus given as stem sets (the fit's way).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lode_site.budget import as_budget_exceeded
from retrieval.eligibility import Audience
from retrieval.plan.question import QuestionProfile

logger = logging.getLogger("lode.relevance")

# The user's-passages IDF: at most this many question words are looked up (the rarest-looking
# first are not known before the lookup, so simply the first ones in question order), and a
# word's document frequency is counted up to this cap (one lexical search with this limit).
# The fit applies the same cap, so a capped count means the same at fit and at run time.
MAX_IDF_WORDS = 10
DF_CAP = 500


@dataclass(frozen=True)
class IdfTable:
    """Document frequencies of some stems over `passages` passages. A stem not in `df` counts
    as never seen (the rarest). `passages == 0` means no corpus: every word weighs 1."""

    passages: int = 0
    df: Mapping[str, int] = field(default_factory=dict)

    def idf(self, stem: str) -> float:
        if self.passages <= 0:
            return 1.0
        count = min(self.df.get(stem, 0), DF_CAP)
        return math.log((self.passages + 1) / (count + 0.5))


UNIFORM_IDF = IdfTable()


def passage_idf(audience: Audience, profile: QuestionProfile) -> IdfTable:
    """The question's content words' document frequencies over the live head passages of the
    audience's spaces (what the ask may quote),
    through the lexical index (so a word is counted the way search matches it). Bounded: at
    most `MAX_IDF_WORDS` lexical searches of at most `DF_CAP` rows each, plus one count. A
    database error other than the request's time budget gives the uniform table (logged)."""
    from django.db import DatabaseError, transaction

    from retrieval.index.lexical import backend
    from retrieval.models import Passage
    from retrieval.query import QueryError, parse

    words = profile.content[:MAX_IDF_WORDS]
    try:
        with transaction.atomic():  # a savepoint: a failed lookup must not poison the ask
            total = Passage.objects.filter(
                is_head=True,
                document__space_id__in=audience.sorted_space_ids,
                document__deleted_at__isnull=True,
            ).count()
            df: dict[str, int] = {}
            lexical = backend()
            for surface, stem in words:
                try:
                    parsed = parse(surface)
                except QueryError:
                    continue
                df[stem] = len(lexical.search(parsed, audience=audience, limit=DF_CAP))
    except DatabaseError as exc:
        budget = as_budget_exceeded(exc)
        if budget is not None:  # the ask's time is up: stop, do not carry on unweighted
            raise budget from exc
        logger.warning("relevance IDF lookup failed, weighing words equally: %s", exc)
        return UNIFORM_IDF
    return IdfTable(passages=total, df=df)


def corpus_idf(passage_stem_sets: Iterable[frozenset[str]]) -> IdfTable:
    """Document frequencies over a corpus given as each passage's stem set (the fit's way to
    compute what `passage_idf` reads from the lexical index)."""
    df: dict[str, int] = {}
    total = 0
    for passage_stems in passage_stem_sets:
        total += 1
        for stem in passage_stems:
            df[stem] = df.get(stem, 0) + 1
    return IdfTable(passages=total, df=df)
