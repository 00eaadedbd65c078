"""Unicode normal forms for comparing text: `nfc_collapsed` (the gate's verbatim check, and
`nfc_collapsed_with_offsets`, the same form mapped back to the original offsets) and
`nfkc_folded` (verbatim needle matching in fusion, the evidence pack's "same normalised text").
"""

from __future__ import annotations

import unicodedata

from retrieval.text.tokens import WHITESPACE_RE


def nfc_collapsed(text: str) -> str:
    """NFC, whitespace runs collapsed to one space, ends trimmed: the form the gate's step 1
    compares a quoted span and a body in, and the form its entailment step is given. Case is
    kept (a quote is verbatim up to Unicode composition and spacing, nothing more)."""
    return WHITESPACE_RE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def nfc_collapsed_with_offsets(body: str) -> tuple[str, list[int], list[int]]:
    """`body` NFC-normalised with whitespace runs collapsed to one space (ends not trimmed),
    and for each output character the (start, end) offsets in `body` it came from: how the
    answer page finds where a span the gate verified after normalisation sits in the stored
    body. NFC is applied per base character and its combining marks, so every output
    character maps to a whole cluster."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(body)
    while i < n:
        if body[i].isspace():
            j = i
            while j < n and body[j].isspace():
                j += 1
            out.append(" ")
            starts.append(i)
            ends.append(j)
            i = j
            continue
        j = i + 1
        while j < n and unicodedata.combining(body[j]):
            j += 1
        for ch in unicodedata.normalize("NFC", body[i:j]):
            out.append(ch)
            starts.append(i)
            ends.append(j)
        i = j
    return "".join(out), starts, ends


def nfkc_folded(text: str) -> str:
    """NFKC, case-folded, whitespace runs collapsed to one space, ends trimmed: the form in
    which fusion checks a query needle occurs verbatim in a passage, and in which the evidence
    pack calls two passages the "same normalised text"."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())
