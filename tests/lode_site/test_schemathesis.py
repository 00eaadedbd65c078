"""Schemathesis against the live `/api/openapi.json`, with every check it has.

The schema is fetched from the Django WSGI app as a signed-in user would fetch it, then:

* every operation is called with generated requests — schema-valid ones, deliberately
  invalid ones (wrong types, out-of-range numbers, missing fields, missing headers) and
  schemathesis's coverage cases — authenticated with a bearer token;
* its stateful phase chains operations through the links schemathesis infers (create a
  space, then read, patch and delete it; create a note, then read its versions …).

Every check is on: no server error; status code, content type, headers and body as
declared; a schema-valid request accepted and a schema-violating one rejected; a missing
required header refused; auth not ignored; unsupported methods answered 405 with `Allow`;
and the stateful checks (a deleted resource stays gone, a created one is available).

Bounded so it stays a test: at most `MAX_EXAMPLES` generated cases per operation and
`STATEFUL_EXAMPLES` scenarios of at most `STATEFUL_STEPS` calls, a fixed seed, no shrinking.
The counts are printed at the end (`-s` shows them):

    python -m pytest tests/lode_site/test_schemathesis.py -q -s
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from django.test import Client
from hypothesis import HealthCheck, settings
from schemathesis.core.failures import FailureGroup
from schemathesis.generation.feedback import FeedbackSources
from schemathesis.pytest._test_builder import build_operation_test
from schemathesis.schemas import BaseSchema

from lode_site.models import ApiToken, token_digest
from notes import services

pytestmark = [pytest.mark.slow, pytest.mark.django_db]  # about a minute: every operation

MAX_EXAMPLES = 15
STATEFUL_EXAMPLES = 25
STATEFUL_STEPS = 8
SEED = 20261201
TOKEN = "lode-schemathesis-token-0123456789abcdefghijklmnopqrstuvwxyz"
HYPOTHESIS = settings(
    deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
)


@pytest.fixture
def api_schema(db, settings) -> Iterator[BaseSchema]:
    """The API's own schema as served at /api/openapi.json, bound to the WSGI app, every
    check enabled, with some data to find: a user with a token, a note with two versions."""
    # No time budget: it stops a request by the clock, so on a busy machine one run of a
    # scenario could get a 503 where its replay gets a 200, and the stateful phase would
    # follow other links (Hypothesis reports that as inconsistent data generation). The
    # 503 stays declared; tests/test_budget.py covers it.
    settings.LODE_REQUEST_BUDGET_SECONDS = 0
    settings.LODE_ASK_BUDGET_SECONDS = 0
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
            "headers": {"Authorization": f"Bearer {TOKEN}"},
            "generation": {
                "mode": "all",  # valid requests and deliberately invalid ones
                "max-examples": MAX_EXAMPLES,
                "no-shrink": True,
                "deterministic": True,
            },
            "checks": {"enabled": True},  # every check schemathesis has
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


class Tally:
    """Counts calls and failures, and keeps one example of each distinct failure (operation,
    status, check) to show."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.examples: dict[tuple[str, ...], str] = {}

    def failed(self, phase: str, case, response, exc: FailureGroup) -> None:
        path = re.sub(r"/\d+", "/N", case.formatted_path)
        self.counts[f"{phase}_failures"] += 1
        for failure in exc.exceptions:
            self.kinds[failure.title] += 1
            key = (phase, case.method, path, str(response.status_code), failure.title)
            self.examples.setdefault(
                key,
                f"{' '.join(key)}\n  sent {case.body!r:.200} query={case.query} "
                f"headers={sorted(case.headers or {})}\n  got {response.text[:200]}",
            )

    def report(self) -> str:
        return "\n".join(self.examples.values())


def test_api_passes_every_check_stateless_and_stateful(api_schema):
    """Every operation, every generated case, then stateful scenarios: all checks pass.
    Runs in this thread (so in this test's database transaction); schemathesis's own
    pytest integration (`from_fixture`) does not run on pytest 9, so each operation's
    Hypothesis test is built the way that integration builds it."""
    tally = Tally()
    operations = [result.ok() for result in api_schema.get_all_operations()]
    # Deletes last, so the other operations also meet the note that exists.
    operations.sort(key=lambda operation: operation.method.upper() == "DELETE")
    assert len(operations) >= 12, [op.label for op in operations]

    def checker():
        @HYPOTHESIS
        def check(case) -> None:
            tally.counts["stateless_calls"] += 1
            response = case.call()
            try:
                case.validate_response(response)
            except FailureGroup as exc:
                tally.failed("stateless", case, response, exc)

        return check

    for operation in operations:
        test = build_operation_test(
            config=api_schema.config,
            operation=operation,
            test_func=checker(),
            given_kwargs={},
            feedback=FeedbackSources(),
        )
        try:
            test()
        except Exception as exc:  # the generator or the transport broke: not a pass
            tally.counts["errors"] += 1
            tally.examples[(operation.label,)] = f"{operation.label}: {type(exc).__name__}: {exc}"

    class Scenarios(api_schema.as_state_machine()):
        """Each scenario runs in a savepoint that is rolled back after it, so every scenario
        starts from the same data: what one created or deleted never changes which links
        another follows (Hypothesis requires a scenario to draw the same way when it is run
        again)."""

        def setup(self) -> None:
            self._scenario = transaction.atomic()
            self._scenario.__enter__()

        def teardown(self) -> None:
            transaction.set_rollback(True)
            self._scenario.__exit__(None, None, None)
            super().teardown()

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            tally.counts["stateful_calls"] += 1
            try:
                super().validate_response(response, case, additional_checks, **kwargs)
            except FailureGroup as exc:
                tally.failed("stateful", case, response, exc)

    Scenarios.run(
        settings=settings(
            HYPOTHESIS, max_examples=STATEFUL_EXAMPLES, stateful_step_count=STATEFUL_STEPS
        )
    )

    counts = tally.counts
    print(
        f"\nschemathesis: {counts['stateless_calls']} calls over {len(operations)} operations "
        f"and {counts['stateful_calls']} stateful calls; "
        f"{counts['stateless_failures'] + counts['stateful_failures']} failing calls "
        f"{dict(tally.kinds)}"
    )
    assert counts["stateless_calls"] >= 10 * len(operations)  # it really sent requests
    assert counts["stateful_calls"] >= STATEFUL_EXAMPLES  # and chained some
    assert counts["errors"] == 0, tally.report()
    assert not tally.kinds, tally.report()
