"""Time budgets: every search, ask and page read runs under a budget that
the database enforces too (SQLite progress handler, PostgreSQL statement_timeout) and that
ends in a clear 503, never a hung worker or a 500; the connection stays usable afterwards.

No test asserts a duration. The budgets are either far below anything a request can take
(1 ns) or far above the setup before the statement they must stop (0.5 s against a
statement that would run for minutes).

Tests that let the database stop a statement use `transaction=True`: on PostgreSQL a
cancelled statement aborts the enclosing transaction, and in production there is none
around a read request (autocommit).
"""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError, connection, transaction
from django.http import HttpResponse
from django.test import Client

from lode_site import budget
from lode_site.budget import Budget, BudgetExceeded, time_budget
from notes import services
from notes.models import Document
from retrieval.index import lexical

TINY = 1e-9  # seconds: no request can do anything in time


def long_statement() -> str:
    """SQL that would run for minutes on the current database."""
    if connection.vendor == "postgresql":
        return "SELECT pg_sleep(600)"
    return (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT count(*) FROM (SELECT x FROM c LIMIT 5000000000)"
    )


def statement_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        return cursor.fetchone()[0]


def timeout_ms() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT setting FROM pg_settings WHERE name = 'statement_timeout'")
        return int(cursor.fetchone()[0])


def notes_about_otters(owner, count: int = 40) -> None:
    for i in range(count):
        services.note_create(
            owner=owner,
            title=f"Otter log {i}",
            body=f"# Otters {i}\n\nThe otters of pond {i} ate fish and slept on rocks.\n",
        )


# --- the budget itself ------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_budget_expires_at_its_deadline_and_a_pause_does_not_count() -> None:
    clock = FakeClock()
    b = Budget(5.0, clock=clock)
    clock.now += 4.0
    b.check()  # 1 s left
    with b.paused():
        clock.now += 60.0  # a slow model answering
        assert not b.expired()
    assert b.remaining() == pytest.approx(1.0)
    clock.now += 1.0
    with pytest.raises(BudgetExceeded, match="5 s"):
        b.check()
    b.released = True  # the request has been answered: nothing more is stopped
    b.check()


def test_check_and_pause_do_nothing_outside_a_budget() -> None:
    assert budget.current() is None
    budget.check()
    with budget.paused():
        pass


@pytest.mark.django_db(transaction=True)
def test_the_database_stops_a_long_statement_and_the_connection_stays_usable() -> None:
    with (
        pytest.raises(BudgetExceeded) as caught,
        time_budget(0.5) as b,
        connection.cursor() as cursor,
    ):
        cursor.execute(long_statement())
    # Stopped by the database itself (not the check before the statement): the cause is the
    # vendor's own "interrupted" / "canceling statement due to statement timeout".
    cause = caught.value.__cause__
    assert isinstance(cause, DatabaseError)
    assert lexical.backend().is_time_budget_interrupt(cause)
    assert b.released
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    if connection.vendor == "postgresql":
        assert statement_timeout() == "0"
    assert budget.current() is None
    assert not connection.execute_wrappers
    # Nothing of the budget is left on the connection: were its progress handler still
    # installed, this expired budget would stop the next statement.
    b.released = False
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000) "
            "SELECT count(*) FROM c"
        )
        assert cursor.fetchone() == (200000,)


@pytest.mark.django_db(transaction=True)
def test_a_budget_that_runs_out_while_rows_are_fetched_is_a_503(rf, alice, settings) -> None:
    """SQLite's progress handler also stops a statement while its rows are being fetched,
    after `execute()` returned (an ORM query reads rows in chunks): that error never passes
    the execute wrapper, and must still be the 503, not a 500."""
    settings.LODE_REQUEST_BUDGET_SECONDS = 1
    streaming = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT x FROM c LIMIT 5000000000"
    )

    def view(request):
        with connection.cursor() as cursor:
            cursor.execute(streaming)
            cursor.fetchall()
        return HttpResponse("finished")

    request = rf.get("/search", {"q": "otters"})
    request.user = alice
    response = budget.TimeBudgetMiddleware(view)(request)
    assert response.status_code == 503
    assert "took too long and was stopped" in response.content.decode()
    with connection.cursor() as cursor:  # and the connection is usable afterwards
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


@pytest.mark.django_db(transaction=True)
def test_a_stopped_statement_rolls_its_transaction_back(alice) -> None:
    with pytest.raises(BudgetExceeded), time_budget(0.5), transaction.atomic():
        services.note_create(owner=alice, title="Half done", body="Written, then stopped.")
        with transaction.atomic(), connection.cursor() as cursor:  # a savepoint, as in views
            cursor.execute(long_statement())
    assert not connection.in_atomic_block
    assert not Document.objects.filter(title="Half done").exists()
    services.note_create(owner=alice, title="Next", body="The connection still works.")
    assert Document.objects.filter(title="Next").exists()


@pytest.mark.django_db(transaction=True)
def test_no_statement_starts_after_the_deadline() -> None:
    with pytest.raises(BudgetExceeded) as caught, time_budget(TINY), connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert caught.value.__cause__ is None  # refused before it reached the database


@pytest.mark.django_db(transaction=True)
def test_postgresql_statement_timeout_is_set_during_the_budget_and_reset_after() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("statement_timeout is PostgreSQL's")
    assert statement_timeout() == "0"
    with time_budget(10) as b:
        assert 9_000 <= timeout_ms() <= 10_000
        # statement_timeout is per statement: as the deadline nears it is tightened, so the
        # statements of one request cannot add up to much more than its budget.
        b.deadline -= 9  # about 1 s left
        assert timeout_ms() <= 1_000
    assert statement_timeout() == "0"


# --- requests ---------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_search_past_its_budget_is_a_503_with_a_message_then_the_next_one_works(
    alice, alice_client: Client, settings
) -> None:
    notes_about_otters(alice)
    settings.LODE_REQUEST_BUDGET_SECONDS = TINY

    page = alice_client.get("/search", {"q": "otters", "mode": "lexical"})
    assert page.status_code == 503
    assert "This search took too long and was stopped" in page.text
    assert "<html" in page.text  # the whole page, with the site's navigation

    partial = alice_client.get(
        "/search", {"q": "otters", "mode": "lexical"}, headers={"HX-Request": "true"}
    )
    assert partial.status_code == 503
    assert "This search took too long and was stopped" in partial.text
    assert "<html" not in partial.text  # the fragment htmx swaps into the results

    api = alice_client.get("/api/search/", {"q": "otters", "mode": "lexical"})
    assert api.status_code == 503
    assert api["Content-Type"].startswith("application/json")
    assert api.json()["detail"].startswith("This search took too long and was stopped")

    # The same client and database connection, the normal budget: everything works.
    settings.LODE_REQUEST_BUDGET_SECONDS = 10
    assert budget.current() is None
    if connection.vendor == "postgresql":
        assert statement_timeout() == "0"
    found = alice_client.get("/api/search/", {"q": "otters", "mode": "lexical"})
    assert found.status_code == 200
    assert len(found.json()["hits"]) == 20
    assert alice_client.get("/search", {"q": "otters", "mode": "lexical"}).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_note_page_past_its_budget_is_a_503(alice, alice_client: Client, settings) -> None:
    note = services.note_create(owner=alice, title="Otters", body="Otters hold hands.\n")
    settings.LODE_REQUEST_BUDGET_SECONDS = TINY
    page = alice_client.get(f"/notes/{note.pk}")
    assert page.status_code == 503
    assert "This page took too long and was stopped" in page.text
    settings.LODE_REQUEST_BUDGET_SECONDS = 10
    assert alice_client.get(f"/notes/{note.pk}").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_zero_turns_the_budget_off(alice, alice_client: Client, settings) -> None:
    notes_about_otters(alice, count=3)
    settings.LODE_REQUEST_BUDGET_SECONDS = 0
    assert alice_client.get("/api/search/", {"q": "otters"}).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_saving_a_note_is_not_budgeted(alice, alice_client: Client, settings) -> None:
    """Stopping a write half-way would throw away what the user sent: writes run unbudgeted
    (bounded by the size limits instead)."""
    settings.LODE_REQUEST_BUDGET_SECONDS = TINY
    settings.LODE_ASK_BUDGET_SECONDS = TINY
    created = alice_client.post(
        "/api/notes/",
        json.dumps({"title": "Otters", "body": "Otters hold hands.", "tags": []}),
        content_type="application/json",
    )
    assert created.status_code == 201, created.text


@pytest.mark.django_db(transaction=True)
def test_an_ask_past_its_budget_is_a_503(alice, alice_client: Client, settings) -> None:
    notes_about_otters(alice, count=3)
    settings.LODE_ASK_BUDGET_SECONDS = TINY
    answer = alice_client.post(
        "/api/ask",
        json.dumps({"question": "What do the otters eat?"}),
        content_type="application/json",
    )
    assert answer.status_code == 503
    assert answer.json()["detail"].startswith("This question took too long to answer")
    page = alice_client.post("/ask", {"question": "What do the otters eat?"})
    assert page.status_code == 503
    assert "This question took too long to answer" in page.text


@pytest.mark.django_db(transaction=True)
def test_waiting_on_the_answer_model_does_not_count(
    alice, alice_client: Client, settings, fake_llm
) -> None:
    """The model's HTTP wait runs paused: a model slower than the whole ask budget still
    gives an answer (its own timeout bounds it), and the trace is written after it."""
    document = services.note_create(
        owner=alice, title="Otters", body="# Otters\n\nThe otters of the pond eat fish.\n"
    )
    version_id = document.head_id
    fake_llm.reply(
        {
            "claims": [
                {
                    "text": "The otters eat fish.",
                    "support": [
                        {"version_id": version_id, "quoted_span": "otters of the pond eat fish"}
                    ],
                }
            ]
        },
        delay=3.0,
    )
    settings.LODE_ASK_BUDGET_SECONDS = 2
    answer = alice_client.post(
        "/api/ask",
        json.dumps({"question": "What do the otters of the pond eat?"}),
        content_type="application/json",
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["trace_id"] is not None
    assert len(fake_llm.requests) == 1
