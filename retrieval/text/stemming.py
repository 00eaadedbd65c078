"""A token's index form (`fold`: NFKC, diacritics removed, case folded, Snowball-stemmed) and
the functions that read text through it, so text compares with the index's stems.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Any

from retrieval.text.tokens import TOKEN_RE


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    # The Snowball English stemmer (PostgreSQL's english_stem; close to FTS5's porter),
    # shipped with fastembed. Without it terms still match word for word.
    try:
        from py_rust_stemmers import SnowballStemmer
    except ImportError:  # pragma: no cover - fastembed is a dependency
        return None
    return SnowballStemmer("english")


@lru_cache(maxsize=1 << 16)
def fold(token: str) -> str:
    """A token's index form: NFKC, diacritics removed (like remove_diacritics 2), case folded,
    stemmed. Applied alike to passage tokens and query tokens, so they compare equal
    exactly when the index would match them (up to the stemmer's small differences).
    Used by Python highlighting, the extractive answerer, evidence-pack dedup and the
    answerability decision."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", token))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    stemmer = _stemmer()
    return stemmer.stem_word(plain) if stemmer is not None else plain


def folded_tokens(text: str) -> list[str]:
    """Every `TOKEN_RE` token of `text` in its index form (`fold`), in order: the stems the
    lexical index sees. Evidence-pack dedup, the extractive answerer and the answerability
    decision compare text through this."""
    return [fold(m.group(0)) for m in TOKEN_RE.finditer(text)]


def surface_stems(text: str) -> list[tuple[str, str]]:
    """(surface, index stem) for every token of `text`, in order; the surface case-folded after
    NFKC (how a question's words are compared with an answer's, and with the index's `fold`)."""
    nfkc = unicodedata.normalize("NFKC", text)
    return [(m.group(0).casefold(), fold(m.group(0))) for m in TOKEN_RE.finditer(nfkc)]
