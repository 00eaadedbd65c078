"""Compare and trash, server side: the bounded word diff
(notes.services.word_diff), the compare page between any two versions and the diffs on the
edit-conflict page (user text always escaped), and the trash with restore (owner only,
versions kept, searchable again).

The browser side (picking two versions, restoring from the trash, 1280 and 360 px) is in
tests/browser/test_compare_and_trash_browser.py."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse

from notes import selectors, services
from notes.models import Document
from retrieval.models import Passage
from retrieval.search.pipeline import search
from tests.factories import note

pytestmark = pytest.mark.django_db

LEXICAL = "lexical"
HOSTILE = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'


def edit(document: Document, user, body: str, *, title: str | None = None):
    document.refresh_from_db()
    return services.note_update(
        document=document,
        user=user,
        base_version_id=document.head_id,
        title=document.title if title is None else title,
        body=body,
    )


def found(user, query: str) -> set[int]:
    result = search(user=user, query=query, mode=LEXICAL)
    assert result.error == "", result.error
    return {hit.passage.document_id for hit in result.hits}


def page(response) -> str:
    return response.content.decode()


# --------------------------------------------------------------------------
# The word diff
# --------------------------------------------------------------------------


def unspaced(text: str) -> str:
    return "".join(text.split())


def sides(diff: services.WordDiff) -> tuple[str, str]:
    """The old and the new text from the segments; the old one only up to spacing, since
    text both share is shown as the new one has it."""
    old = "".join(s.text for s in diff.segments if s.op != "insert")
    new = "".join(s.text for s in diff.segments if s.op != "delete")
    return old, new


def test_word_diff_marks_changed_words_and_rebuilds_both_texts():
    old = "Rotate the staging certs with certbot.\nSecond line stays.\n"
    new = "Rotate the production certs with certbot today.\nSecond line stays.\n"
    diff = services.word_diff(old, new)
    rebuilt_old, rebuilt_new = sides(diff)
    assert rebuilt_new == new and unspaced(rebuilt_old) == unspaced(old)
    changed = [(s.op, s.text) for s in diff.segments if s.op != "equal"]
    # Punctuation is its own token: "certbot." became "certbot today." by one word.
    assert changed == [("delete", "staging "), ("insert", "production "), ("insert", "today")]
    assert diff.inserted_words == 2 and diff.deleted_words == 1
    assert not diff.refused and not diff.same


def test_word_diff_ignores_rewrapping():
    old = "Check the replication\nlag first; it must be\nunder one second.\n"
    new = "Check the replication lag\nfirst; it must be under\none second.\n"
    diff = services.word_diff(old, new)
    assert diff.inserted_words == diff.deleted_words == 0
    assert "".join(s.text for s in diff.segments) == new


def test_crlf_line_ends_are_not_changes():
    """A browser posts CRLF: a long note edited in one word still diffs as one word, not as
    one changed run too long to align."""
    old = "".join(f"Line {i} of the runbook.\n" for i in range(services.MAX_WORD_ALIGN))
    new = old.replace("Line 7 of", "Line 7 in").replace("\n", "\r\n")
    diff = services.word_diff(old, new)
    assert diff.whole_blocks == 0
    assert [(s.op, s.text) for s in diff.segments if s.op != "equal"] == [
        ("delete", "of "),
        ("insert", "in "),
    ]


def test_word_diff_of_equal_texts_is_same():
    assert services.word_diff("a b\nc", "a b\nc").same


def test_word_diff_refuses_texts_over_the_word_cap_and_says_so():
    big = "word " * (services.MAX_DIFF_WORDS + 1)
    diff = services.word_diff("word", big)
    assert diff.segments == ()
    assert "Too large to compare" in diff.refused
    assert f"{services.MAX_DIFF_WORDS:,} words a side" in diff.refused
    # At the cap it is still compared.
    assert not services.word_diff("word", "word " * services.MAX_DIFF_WORDS).refused


def test_a_changed_run_too_long_to_align_shows_whole():
    """Repetitive text is difflib's worst case; a changed run over MAX_WORD_ALIGN words is
    shown removed and added whole instead of aligned word by word."""
    n = services.MAX_WORD_ALIGN + 1
    old = " ".join(f"w{i % 7}" for i in range(n)) + "\nsame\n"
    new = " ".join(f"w{i % 5}" for i in range(n)) + "\nsame\n"
    diff = services.word_diff(old, new)
    assert diff.whole_blocks == 1
    assert sides(diff) == (old, new)
    assert [s.op for s in diff.segments] == ["delete", "insert", "equal"]


def test_alignment_work_is_bounded_across_many_runs():
    """Each run is small enough, but together they exceed MAX_ALIGN_WORK: the later ones are
    shown whole, so the total work stays bounded."""
    run = services.MAX_WORD_ALIGN
    per_run = run * run
    runs = services.MAX_ALIGN_WORK // per_run + 3
    old = "".join(" ".join(f"w{i % 7}" for i in range(run)) + f"\nkeep {k}\n" for k in range(runs))
    new = "".join(" ".join(f"w{i % 5}" for i in range(run)) + f"\nkeep {k}\n" for k in range(runs))
    diff = services.word_diff(old, new)
    rebuilt_old, rebuilt_new = sides(diff)
    assert rebuilt_new == new and unspaced(rebuilt_old) == unspaced(old)
    assert diff.whole_blocks == runs - services.MAX_ALIGN_WORK // per_run


# --------------------------------------------------------------------------
# The compare page
# --------------------------------------------------------------------------


@pytest.fixture
def versioned(alice) -> Document:
    document = note(alice, "Plan", "First draft: buy milk.\n")
    edit(document, alice, f"Second draft: buy oat milk. {HOSTILE}\n")
    edit(document, alice, "Third draft: buy bread.\n", title="Plan <b>v3</b>")
    document.refresh_from_db()
    return document


def compare_url(document: Document, **params: object) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return reverse("notes:compare", args=[document.pk]) + (f"?{query}" if query else "")


def test_compare_two_versions_by_their_numbers(alice_client, versioned):
    response = alice_client.get(compare_url(versioned, a=1, b=3))
    assert response.status_code == 200
    html = page(response)
    assert "Version 1 → version 3" in html
    assert "<del>First </del>" in html and "<ins>Third </ins>" in html
    assert "<del>milk</del><ins>bread</ins>.\n" in html


def test_compare_escapes_hostile_text(alice_client, versioned):
    html = page(alice_client.get(compare_url(versioned, a=1, b=2)))
    assert "<script>" not in html.split('<pre class="diff"')[1].split("</pre>")[0]
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<img src=x" not in html
    # The title too.
    html = page(alice_client.get(compare_url(versioned, a=2, b=3)))
    assert "<ins>Plan &lt;b&gt;v3&lt;/b&gt;</ins>" in html


def test_compare_defaults_to_the_previous_and_current_versions(alice_client, versioned):
    html = page(alice_client.get(compare_url(versioned)))
    assert "Version 2 → version 3" in html


def test_compare_refuses_bad_numbers_and_missing_versions(alice_client, versioned):
    for bad in ("x", "-1", "0", "1.5", "9" * 12):
        assert alice_client.get(compare_url(versioned, a=bad, b=1)).status_code == 400
    assert alice_client.get(compare_url(versioned, a=1, b=4)).status_code == 404


def test_compare_of_someone_elses_note_is_404(bob_client, versioned):
    response = bob_client.get(compare_url(versioned, a=1, b=2))
    assert response.status_code == 404
    assert "draft" not in page(response)


def test_compare_says_when_the_notes_are_too_large(alice, alice_client):
    big = "word " * (services.MAX_DIFF_WORDS + 1)
    document = note(alice, "Big", "small")
    edit(document, alice, big)
    response = alice_client.get(compare_url(document, a=1, b=2))
    assert response.status_code == 200
    html = page(response)
    assert "Too large to compare word by word" in html
    assert "<ins>" not in html.split("</h1>")[1]


def test_history_offers_the_compare_form(alice_client, versioned):
    html = page(alice_client.get(reverse("notes:history", args=[versioned.pk])))
    assert f'action="{reverse("notes:compare", args=[versioned.pk])}"' in html
    assert html.count('name="a"') == 3 and html.count('name="b"') == 3


def test_conflict_page_shows_both_word_diffs_escaped(alice, alice_client):
    document = note(alice, "Shared", "The meeting is on Monday.\n")
    base = document.head
    edit(document, alice, "The meeting is on Tuesday.\n")
    response = alice_client.post(
        reverse("notes:edit", args=[document.pk]),
        {
            "title": "Shared",
            "body": f"The meeting is on Friday. {HOSTILE}\n",
            "tags": "",
            "base_version": base.pk,
        },
    )
    assert response.status_code == 409
    html = page(response)
    # What changed under the user: version 1 → version 2.
    assert "<del>Monday</del><ins>Tuesday</ins>.\n" in html
    # Their unsaved text against the head.
    assert "<del>Tuesday</del><ins>Friday</ins>. <ins>&lt;" in html
    assert "&lt;script&gt;" in html and "<script>alert" not in html


# --------------------------------------------------------------------------
# The trash
# --------------------------------------------------------------------------


def test_undelete_brings_the_note_back_with_versions_and_search(alice, alice_note):
    edit(alice_note, alice, alice_note.head.body + "\nAlso pelicans.\n")
    head_passages = set(
        Passage.objects.filter(document=alice_note, is_head=True).values_list("pk", flat=True)
    )
    assert found(alice, "certbot") == {alice_note.pk}
    services.note_delete(document=alice_note, user=alice)
    assert found(alice, "certbot") == set()
    services.note_undelete(document=alice_note, user=alice)
    alice_note.refresh_from_db()
    assert not alice_note.is_deleted
    assert alice_note.versions.count() == 2
    assert found(alice, "certbot") == {alice_note.pk}
    assert found(alice, "pelicans") == {alice_note.pk}
    # The same passage rows are the head again (evidence links made before still current).
    after = set(
        Passage.objects.filter(document=alice_note, is_head=True).values_list("pk", flat=True)
    )
    assert after == head_passages


def test_undelete_rechunks_when_the_bounds_changed(alice, settings):
    words = " ".join(f"word{i}" for i in range(400))
    document = note(alice, "Long", f"{words} zebracorn\n")
    before = Passage.objects.filter(document=document, is_head=True).count()
    services.note_delete(document=document, user=alice)
    settings.LODE_CHUNK_MAX_WORDS = 50
    services.note_undelete(document=document, user=alice)
    heads = Passage.objects.filter(document=document, is_head=True)
    assert heads.count() > before
    assert found(alice, "zebracorn") == {document.pk}


def test_only_the_owner_can_undelete(alice, bob, alice_note):
    services.note_delete(document=alice_note, user=alice)
    with pytest.raises(PermissionDenied):
        services.note_undelete(document=alice_note, user=bob)
    alice_note.refresh_from_db()
    assert alice_note.is_deleted


def test_undelete_of_a_live_note_is_refused(alice, alice_note):
    with pytest.raises(ValidationError):
        services.note_undelete(document=alice_note, user=alice)


def test_trash_page_lists_deleted_notes_newest_first(alice, bob, alice_client):
    first = note(alice, "First gone", "one")
    second = note(alice, "Second gone", "two")
    note(alice, "Still here", "three")
    bobs = note(bob, "Bob's secret", "four")
    services.note_delete(document=first, user=alice)
    services.note_delete(document=second, user=alice)
    services.note_delete(document=bobs, user=bob)
    response = alice_client.get(reverse("notes:trash"))
    assert response.status_code == 200
    html = page(response)
    assert html.index("Second gone") < html.index("First gone")
    assert "Still here" not in html and "Bob&#x27;s secret" not in html
    assert "versions are kept" in html.lower() or "Their versions are kept" in html
    assert 'name="csrfmiddlewaretoken"' in html


def test_restore_from_the_trash(alice, alice_client, alice_note):
    services.note_delete(document=alice_note, user=alice)
    response = alice_client.post(reverse("notes:undelete", args=[alice_note.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("notes:detail", args=[alice_note.pk])
    assert selectors.note_get(alice, alice_note.pk)
    assert found(alice, "certbot") == {alice_note.pk}
    assert "The trash is empty." in page(alice_client.get(reverse("notes:trash")))


def test_a_second_restore_of_the_same_note_is_no_error(alice, alice_client, alice_note):
    """Two tabs on the trash page: the second Restore finds the note already live."""
    services.note_delete(document=alice_note, user=alice)
    trashed = selectors.trashed_note_get(alice, alice_note.pk)
    services.note_undelete(document=alice_note, user=alice)
    with pytest.raises(ValidationError):
        services.note_undelete(document=trashed, user=alice)
    # Through the page the note is no longer in the trash, so there is nothing to restore.
    response = alice_client.post(reverse("notes:undelete", args=[alice_note.pk]))
    assert response.status_code == 404


def test_restoring_someone_elses_trashed_note_is_404(alice, bob_client, alice_note):
    services.note_delete(document=alice_note, user=alice)
    response = bob_client.post(reverse("notes:undelete", args=[alice_note.pk]))
    assert response.status_code == 404
    assert "Deploy runbook" not in page(response)
    alice_note.refresh_from_db()
    assert alice_note.is_deleted


def test_restoring_a_live_note_is_404(alice_client, alice_note):
    assert alice_client.post(reverse("notes:undelete", args=[alice_note.pk])).status_code == 404


def test_restore_needs_post_and_csrf(alice, alice_note):
    services.note_delete(document=alice_note, user=alice)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    url = reverse("notes:undelete", args=[alice_note.pk])
    assert client.get(url).status_code == 405
    assert client.post(url).status_code == 403
    alice_note.refresh_from_db()
    assert alice_note.is_deleted


def test_trash_needs_login(client):
    response = client.get(reverse("notes:trash"))
    assert response.status_code == 302
    assert "login" in response["Location"]
