"""The search page and API as a reader meets them: hits grouped by note (the best passage,
then "N more in this note"), `[[links]]` read as their text, a query of filters only listing
the documents it keeps newest first, a hit with no highlighted word saying why it was found,
a no-match page holding its message and what to try, help examples from a team's notes, and
the welcome guide where the first login lands."""

from __future__ import annotations

import re
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.urls import reverse
from django.utils import timezone

from notes import services
from notes.models import Version
from retrieval.index.sync import sync_vectors
from retrieval.search import listing
from retrieval.search.grouping import group_by_document
from retrieval.search.pipeline import search
from spaces.models import Space

pytestmark = pytest.mark.django_db

# A runbook long enough that "backup" is in five of its sections: ungrouped, it filled half
# the page.
RUNBOOK = "\n\n".join(
    f"## Step {n}\n\nCheck the nightly backup of the {place} and write down its size."
    for n, place in enumerate(("database", "wiki", "mail", "chat", "file server"), start=1)
)


def page(client, params: dict[str, str]) -> str:
    response = client.get("/search", params)
    assert response.status_code == 200
    return response.content.decode()


def between(html: str, start: str, end: str) -> list[str]:
    return [part.split(end, 1)[0] for part in html.split(start)[1:]]


@pytest.fixture
def team_notes(alice):
    runbook = services.note_create(owner=alice, title="Backup runbook", body=RUNBOOK)
    rota = services.note_create(
        owner=alice,
        title="On-call rota",
        body="Whoever is on call checks the backup report each Monday.",
        tags="ops",
    )
    offsite = services.note_create(
        owner=alice,
        title="Offsite copies",
        body="The backup tapes go offsite on Fridays; see [[Backup runbook]] and "
        "[[On-call rota|the rota]].",
        tags=["ops", "infra"],
    )
    return runbook, rota, offsite


# --- grouping ---------------------------------------------------------------------------------


def test_group_by_document_keeps_the_ranking_and_folds_later_passages():
    def hit(document_id: int, passage_id: int):
        return SimpleNamespace(passage=SimpleNamespace(document_id=document_id, pk=passage_id))

    hits = [hit(1, 10), hit(1, 11), hit(2, 20), hit(1, 12), hit(3, 30), hit(2, 21)]
    groups = group_by_document(hits)
    assert [g.document_id for g in groups] == [1, 2, 3]
    assert [[h.passage.pk for h in (g.best, *g.more)] for g in groups] == [
        [10, 11, 12],
        [20, 21],
        [30],
    ]
    capped = group_by_document(hits, max_groups=2)
    assert [g.document_id for g in capped] == [1, 2]
    assert [h.passage.pk for h in capped[1].more] == [21]


def test_a_long_note_is_one_result_with_its_other_passages_folded_under_it(
    alice_client, alice, team_notes
):
    runbook, _rota, _offsite = team_notes
    ranked = search(user=alice, query="backup", mode="lexical", rerank="off", limit=40)
    runbook_passages = [h for h in ranked.hits if h.passage.document_id == runbook.pk]
    assert len(runbook_passages) >= 4  # ungrouped, the runbook would fill the page

    html = page(alice_client, {"q": "backup", "mode": "lexical", "rerank": "off"})
    titles = re.findall(r'<a class="hit-title" href="[^"]*">([^<]*)</a>', html)
    # One result per note, in the order of each note's best passage.
    first_seen = list(dict.fromkeys(h.passage.document.title for h in ranked.hits))
    assert titles == first_seen
    assert html.count('<li class="hit">') == 3
    more = f"{len(runbook_passages) - 1} more in this note"
    assert f'<details class="more-in-note"><summary>{more}</summary>' in html
    # The folded passages are there to read (no JavaScript needed), each with its evidence.
    folded = between(html, '<details class="more-in-note">', "</details>")[0]
    assert folded.count('class="more-hit"') == len(runbook_passages) - 1
    assert folded.count('class="evidence-link"') == len(runbook_passages) - 1
    assert "<mark>backup</mark>" in folded
    # A folded passage that opens with its heading is not preceded by it a second time.
    assert 'class="meta heading-path"' not in folded and "Step 2" in folded
    # The calm view names no ranks or scores.
    assert "rank 1" not in html and "bm25" not in html.lower()


def test_a_page_shows_ten_notes_however_long_the_first_one_is(alice_client, alice):
    services.note_create(owner=alice, title="Backup runbook", body=RUNBOOK * 3)
    for n in range(12):
        services.note_create(owner=alice, title=f"Backup note {n}", body=f"Backup drill {n}.")
    html = page(alice_client, {"q": "backup", "mode": "lexical", "rerank": "off"})
    assert html.count('<li class="hit">') == 10


def test_wiki_links_read_as_their_text_in_snippets(alice_client, team_notes):
    html = page(alice_client, {"q": "offsite", "mode": "lexical", "rerank": "off"})
    shown = " ".join(between(html, '<p class="hit-text passage-text">', "</p>"))
    assert "[[" not in shown and "]]" not in shown
    assert "see Backup runbook and the rota." in re.sub(r"</?mark>", "", shown)


# --- filters alone ----------------------------------------------------------------------------


def test_parse_lists_filters_alone_only_when_asked():
    from retrieval.query import QueryError, parse

    with pytest.raises(QueryError, match="Add at least one search word"):
        parse("tag:ops")
    parsed = parse("tag:ops", filters_alone=True)
    assert parsed.filters_only and [str(f) for f in parsed.filters] == ["tag:ops"]
    assert not parse("backup tag:ops", filters_alone=True).filters_only
    # Exclusions still need a word to exclude from.
    with pytest.raises(QueryError, match="Add at least one search word"):
        parse("tag:ops -staging", filters_alone=True)
    assert listing.filters_only_query("tag:ops -staging") is None
    assert listing.filters_only_query("type:pdf") is None  # search reports the bad value


def _age(document, days: int) -> None:
    """Move `document`'s current text `days` into the past (the listing's order)."""
    Version.objects.filter(pk=document.head_id).update(
        created_at=timezone.now() - timedelta(days=days)
    )


def test_a_filter_alone_lists_what_it_keeps_newest_first(alice_client, alice, bob, team_notes):
    _runbook, rota, offsite = team_notes
    _age(rota, 3)
    _age(offsite, 1)
    services.note_create(owner=bob, title="Bob's ops diary", body="Private.", tags="ops")
    binned = services.note_create(owner=alice, title="Old ops plan", body="Gone.", tags="ops")
    services.note_delete(document=binned, user=alice)

    html = page(alice_client, {"q": "tag:ops"})
    assert 'class="error"' not in html and "Add at least one search word" not in html
    titles = re.findall(r'<a class="hit-title" href="([^"]*)">([^<]*)</a>', html)
    assert titles == [
        (reverse("notes:detail", args=[offsite.pk]), "Offsite copies"),
        (reverse("notes:detail", args=[rota.pk]), "On-call rota"),
    ]
    assert "2 documents</span> with <code>tag:ops</code>, newest first" in html
    assert "Bob" not in html  # only what alice may see
    assert "Old ops plan" not in html  # nor what is in the trash
    # Each row: its tags and the start of its text, links read as text.
    assert '<span class="tag">#infra</span> <span class="tag">#ops</span>' in html
    assert "see Backup runbook and the rota." in html

    # Other filters alone list too: a space by name, a type.
    team = Space.objects.create(name="Team docs")
    team.memberships.create(user=alice, role="admin")
    services.note_create(owner=alice, title="Team handbook", body="Welcome.", space=team)
    spaced = page(alice_client, {"q": 'space:"Team docs"'})
    assert re.findall(r'class="hit-title" href="[^"]*">([^<]*)<', spaced) == ["Team handbook"]
    assert "Team handbook" not in page(alice_client, {"q": 'space:"Team docs" -type:note'})


def test_a_long_listing_comes_a_page_at_a_time(alice_client, alice):
    notes = [
        services.note_create(owner=alice, title=f"Ops log {n:02d}", body="Shift.", tags="ops")
        for n in range(listing.DEFAULT_PAGE_SIZE + 3)
    ]
    for age, note in enumerate(notes):
        _age(note, age)  # note 00 is the newest
    first = page(alice_client, {"q": "tag:ops"})
    assert first.count('class="listed"') == listing.DEFAULT_PAGE_SIZE
    assert "Ops log 00" in first and "Ops log 20" not in first
    older = re.search(r'<a class="older" rel="next" href="([^"]+)"', first)
    assert older is not None and "newer" not in first.split('class="pager"')[1].split("</nav>")[0]
    second = alice_client.get(older.group(1).replace("&amp;", "&")).content.decode()
    assert re.findall(r'class="hit-title" href="[^"]*">([^<]*)<', second) == [
        "Ops log 20",
        "Ops log 21",
        "Ops log 22",
    ]
    assert "21–23" in second and 'class="newer"' in second
    # A page past the end, or not a number, is clamped, never an error.
    assert page(alice_client, {"q": "tag:ops", "page": "999999999"}).count('class="listed"') == 0
    assert page(alice_client, {"q": "tag:ops", "page": "x"}).count('class="listed"') == 20


def test_the_api_lists_filters_alone_a_page_at_a_time(alice_client, alice, bob, team_notes):
    _runbook, rota, offsite = team_notes
    _age(rota, 3)
    services.note_create(owner=bob, title="Bob's ops diary", body="Private.", tags="ops")
    data = alice_client.get("/api/search/", {"q": "tag:ops", "limit": 1}).json()
    assert data["error"] == "" and data["hits"] == []
    got = data["listing"]
    assert (got["page"], got["page_size"], got["total"], got["has_more"]) == (1, 1, 2, True)
    assert [d["document_title"] for d in got["documents"]] == ["Offsite copies"]
    assert got["documents"][0]["tags"] == ["infra", "ops"]
    assert got["documents"][0]["url"] == reverse("notes:detail", args=[offsite.pk])
    second = alice_client.get("/api/search/", {"q": "tag:ops", "limit": 1, "page": 2}).json()
    assert [d["document_title"] for d in second["listing"]["documents"]] == ["On-call rota"]
    assert second["listing"]["has_more"] is False
    # A query with words is a search, as before.
    assert alice_client.get("/api/search/", {"q": "backup tag:ops"}).json()["listing"] is None


# --- grouping in the API ----------------------------------------------------------------------


def test_the_api_groups_by_note_on_request_and_counts_more_in_note_always(alice_client, team_notes):
    runbook, _rota, _offsite = team_notes
    params = {"q": "backup", "mode": "lexical", "rerank": "off"}
    flat = alice_client.get("/api/search/", params).json()
    assert flat["group_by"] == "passage"
    runbook_hits = [h for h in flat["hits"] if h["document_id"] == runbook.pk]
    assert len(runbook_hits) >= 4
    # Each passage counts the later passages of its note in this response.
    assert [h["more_in_note"] for h in runbook_hits] == list(range(len(runbook_hits)))[::-1]
    assert all(h["more_in_note_passage_ids"] == [] for h in flat["hits"])

    grouped = alice_client.get("/api/search/", {**params, "group_by": "note"}).json()
    assert grouped["group_by"] == "note"
    documents = [h["document_id"] for h in grouped["hits"]]
    assert documents == list(dict.fromkeys(h["document_id"] for h in flat["hits"]))
    best = grouped["hits"][documents.index(runbook.pk)]
    assert best["passage_id"] == runbook_hits[0]["passage_id"]
    assert best["more_in_note"] == len(runbook_hits) - 1
    assert best["more_in_note_passage_ids"] == [h["passage_id"] for h in runbook_hits[1:]]
    one = alice_client.get("/api/search/", {**params, "group_by": "note", "limit": 1}).json()
    assert len(one["hits"]) == 1
    assert alice_client.get("/api/search/", {**params, "group_by": "x"}).status_code == 422


# --- why a hit was found; nothing matches -----------------------------------------------------


@pytest.mark.usefixtures("private_vectors")
def test_a_hit_with_no_highlighted_word_says_it_matched_by_meaning(alice_client, alice):
    services.note_create(
        owner=alice, title="Road trip", body="The automobile would not start in the cold."
    )
    services.note_create(owner=alice, title="Car engine", body="Car engine oil: change it yearly.")
    sync_vectors()
    html = page(alice_client, {"q": "car engine failure winter", "mode": "hybrid"})
    blocks = html.split('<li class="hit">')[1:]
    by_title = {re.search(r'class="hit-title"[^>]*>([^<]*)<', b).group(1): b for b in blocks}
    assert "Matched by meaning" in by_title["Road trip"]
    assert "<mark>" not in by_title["Road trip"].split('class="hit-actions')[0]
    assert "Matched by meaning" not in by_title["Car engine"]


def test_the_no_match_page_is_its_message_and_what_to_try(alice_client, team_notes):
    html = page(alice_client, {"q": '"tape library" tag:ops', "mode": "lexical"})
    results = html.split('id="results"', 1)[1]
    assert "Nothing in your notes matches “&quot;tape library&quot; tag:ops”." in results
    assert "What to try" in results
    assert "Take the quotes away" in results
    unfiltered = re.search(r'<a class="without-filters" href="([^"]+)"', results)
    assert unfiltered is not None and "tag%3Aops" not in unfiltered.group(1)
    for gone in ("share-url", "share-audience", "weaker match", "Ask this as a question"):
        assert gone not in results, gone


# --- help and the first login -----------------------------------------------------------------


def test_help_examples_come_from_a_team_s_notes(alice_client):
    html = alice_client.get(reverse("search-help")).content.decode()
    for test_data in ("scifact", "vitamin", "certbot"):
        assert test_data not in html.lower()
    for example in ("backup tag:ops", "failover source:Runbooks", '"nightly backups" restore'):
        assert example in html
    assert "lists every document it keeps, newest first" in html
    assert "more in this note" in html and "by meaning" in html


def test_the_first_login_lands_on_the_welcome_guide(client, dave):
    dave.set_password("pw-for-dave-1")
    dave.save()
    response = client.post(
        reverse("login"), {"username": dave.username, "password": "pw-for-dave-1"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("notes:list")
    html = response.content.decode()
    assert "Your library is empty" in html
    for step in ("notes:create", "externals:sources", "ask"):
        assert f'href="{reverse(step)}"' in html
    home = client.get("/", follow=True).content.decode()
    assert "Your library is empty" in home
    # Once there is a note the list is the list.
    services.note_create(owner=dave, title="First", body="Hello.")
    assert "Your library is empty" not in client.get(reverse("notes:list")).content.decode()
