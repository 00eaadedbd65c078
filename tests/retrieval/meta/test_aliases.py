"""Query expansion by the aliases the reader's notes state: visible documents only, bounded,
named in the search's notes."""

from __future__ import annotations

import pytest

from notes.services import note_delete
from retrieval.eligibility import audience_for
from retrieval.meta.aliases import (
    MAX_EXPANSION_TOKENS,
    MAX_EXPANSIONS,
    alias_expansions,
    expand_query_terms,
    query_keys,
)
from retrieval.search.pipeline import search
from tests.factories import note

pytestmark = pytest.mark.django_db

GLOSSARY = "We promise a Service Level Objective (SLO) of 99.9% for the API."


def test_query_keys_are_ngrams_longest_first() -> None:
    assert query_keys(["service", "level", "objective"]) == [
        "service level objective",
        "service level",
        "level objective",
        "service",
        "level",
        "objective",
    ]


def test_both_directions(alice) -> None:
    note(alice, "Glossary", GLOSSARY)
    audience = audience_for(alice.pk)
    assert expand_query_terms(audience, ["slo", "breach"]) == ["service level objective"]
    assert expand_query_terms(audience, ["service", "level", "objective"]) == ["slo"]
    # Both sides already typed: nothing to add.
    assert expand_query_terms(audience, ["slo", "service", "level", "objective"]) == []


def test_an_alias_only_another_space_states_is_not_used(alice, bob) -> None:
    note(bob, "Bob's glossary", GLOSSARY)
    assert expand_query_terms(audience_for(alice.pk), ["slo"]) == []
    assert expand_query_terms(audience_for(bob.pk), ["slo"]) == ["service level objective"]


def test_a_deleted_note_states_nothing(alice) -> None:
    document = note(alice, "Glossary", GLOSSARY)
    note_delete(document=document, user=alice)
    assert expand_query_terms(audience_for(alice.pk), ["slo"]) == []


def test_bounded_and_best_supported_first(alice) -> None:
    names = ("charlie", "carrot", "cobalt", "copper", "crane")
    note(alice, "Many", " ".join(f"The Xray {name.title()} (XC) is one." for name in names))
    note(alice, "Again", "The Xray Crane (XC) twice.")
    found = alias_expansions(audience_for(alice.pk), ["xc"])
    assert len(found) == MAX_EXPANSIONS
    assert (found[0].phrase, found[0].documents) == ("xray crane", 2)


def test_bounded_in_words(alice) -> None:
    names = ("charlie", "carrot", "cobalt")
    note(alice, "Long", " ".join(f"Alpha Bravo {n.title()} Delta (ABCD) is one." for n in names))
    found = alias_expansions(audience_for(alice.pk), ["abcd"])
    assert sum(len(item.words) for item in found) <= MAX_EXPANSION_TOKENS
    assert len(found) == 2


def test_search_finds_the_passage_that_uses_only_the_long_form(alice) -> None:
    note(alice, "Glossary", GLOSSARY)
    target = note(alice, "Targets", "The service level objective for checkout is 99.5%.")
    result = search(user=alice, query="SLO checkout", mode="lexical", rerank="off")
    assert result.alias_terms == ["service level objective"]
    assert any("also searched as “service level objective”" in n for n in result.notes)
    assert target.pk in {hit.passage.document_id for hit in result.hits}


def test_search_without_a_visible_alias_is_unchanged(alice, bob) -> None:
    note(bob, "Bob's glossary", GLOSSARY)
    target = note(alice, "Targets", "The service level objective for checkout is 99.5%.")
    result = search(user=alice, query="SLO", mode="lexical", rerank="off")
    assert result.alias_terms == []
    assert target.pk not in {hit.passage.document_id for hit in result.hits}
