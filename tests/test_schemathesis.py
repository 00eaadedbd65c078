"""Schemathesis against the live `/api/openapi.json` (issue 10, item 6).

The schema is fetched from the Django WSGI app as a signed-in user would fetch it, then
every operation is called with generated requests — valid ones and deliberately invalid
ones (wrong types, out-of-range numbers, missing fields) — authenticated with a bearer
token. Each response must be no server error and conform to the schema: a declared status
code, a declared content type, a body that matches the declared schema.

Bounded so it stays a test: at most `MAX_EXAMPLES` generated cases per operation (plus
schemathesis's coverage cases), a fixed seed, no shrinking. The count of calls, server
errors and conformance failures is printed at the end (`-s` shows it):

    python -m pytest tests/test_schemathesis.py -q -s
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, settings
from schemathesis.core.failures import FailureGroup
from schemathesis.generation.feedback import FeedbackSources
from schemathesis.pytest._test_builder import build_operation_test
from schemathesis.schemas import BaseSchema

from lode_site.models import ApiToken, token_digest
from notes import services

pytestmark = [pytest.mark.slow, pytest.mark.django_db]  # ~1 min: every operation, fuzzed

MAX_EXAMPLES = 15
SEED = 20261201
TOKEN = "lode-schemathesis-token-0123456789abcdefghijklmnopqrstuvwxyz"
# The checks that define "conforms": nothing else (for example "an invalid request must be
# rejected" heuristics) decides whether lode's API is correct.
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
]


@pytest.fixture
def api_schema(db) -> Iterator[BaseSchema]:
    """The API's own schema as served at /api/openapi.json, bound to the WSGI app, with
    some data to find: a user with a token, a note with two versions."""
    alice = User.objects.create_user("alice", "alice@example.com", "pw")
    ApiToken.objects.create(user=alice, name="schemathesis", digest=token_digest(TOKEN))
    note = services.note_create(owner=alice, title="Runbook", body="Rotate certs. #ops\n")
    services.note_update(
        document=note, user=alice, base_version_id=note.head_id, title="Runbook", body="v2\n"
    )
    browser = Client()
    browser.force_login(alice)
    response = browser.get("/api/openapi.json")  # the docs need a signed-in session
    assert response.status_code == 200
    config = schemathesis.config.SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "generation": {
                "mode": "all",  # valid requests and deliberately invalid ones
                "max-examples": MAX_EXAMPLES,
                "no-shrink": True,
                "deterministic": True,
            },
            "phases": {"stateful": {"enabled": False}},
            "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        }
    )
    loaded = schemathesis.openapi.from_dict(response.json(), config=config)
    loaded.app = get_wsgi_application()  # requests go through Django's WSGI handler
    # Django closes the database connection around each WSGI request; here that connection
    # holds this test's transaction, so keep it open, as Django's test client does (which
    # is why this comes after the client's request above: it reconnects them).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield loaded
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_api_conforms_to_its_schema(api_schema):
    """Every operation, every generated case: no 5xx, declared status, content type and
    body. Runs in this thread (so in this test's database transaction); schemathesis's own
    pytest integration (`from_fixture`) does not run on pytest 9, so each operation's
    Hypothesis test is built the way that integration builds it."""
    tally: Counter[str] = Counter()
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    # Deletes last, so the other operations also meet the note that exists.
    operations.sort(key=lambda operation: operation.method.upper() == "DELETE")
    assert len(operations) >= 12, [op.label for op in operations]

    def checker(operation):
        @settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def check(case) -> None:
            tally["cases"] += 1
            response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
            if response.status_code >= 500:
                tally["server_errors"] += 1
            try:
                case.validate_response(response)
            except FailureGroup as exc:
                tally["failures"] += 1
                if len(failures) < 20:
                    failures.append(
                        f"{operation.label}: {case.method} {case.formatted_path} "
                        f"-> {response.status_code}: {exc}"[:1500]
                    )

        return check

    for operation in operations:
        test = build_operation_test(
            config=api_schema.config,
            operation=operation,
            test_func=checker(operation),
            given_kwargs={},
            feedback=FeedbackSources(),
        )
        try:
            test()
        except FailureGroup:
            pass  # conformance failures, counted and kept above; go on with the others
        except Exception as exc:  # the generator or the transport broke: not a pass
            tally["errors"] += 1
            failures.append(f"{operation.label}: {type(exc).__name__}: {exc}"[:1500])
        tally["operations"] += 1

    print(
        f"\nschemathesis: {tally['cases']} cases over {tally['operations']} operations, "
        f"{tally['server_errors']} server errors, {tally['failures']} conformance failures"
    )
    assert tally["cases"] >= 10 * len(operations)  # it really generated and sent requests
    assert tally["errors"] == 0, failures
    assert tally["server_errors"] == 0, failures
    assert tally["failures"] == 0, "\n\n".join(failures)
