"""A time budget for one request's work, enforced in Python and inside the database.

No request may run unbounded. A query that makes the database grind
(FTS5 `highlight()` over a huge passage, a scan over a big note set) must be stopped with a
clear message instead of holding a worker at full CPU after the client has left.

`time_budget(seconds)` is the one mechanism; `TimeBudgetMiddleware` applies it to requests.

* **In the database**, through the lexical backend of the current vendor
  (`retrieval.index.lexical.backend()`, the one place lode branches on the vendor): SQLite gets a
  progress handler that interrupts the running statement once the deadline has passed;
  PostgreSQL gets `statement_timeout` set to the remaining time (session level, set outside
  any transaction at the start and reset at the end, so a pooled/persistent connection never
  carries one request's limit into the next; if the reset fails the connection is closed).
* **Before every statement** an execute wrapper refuses to start one after the deadline and
  turns the vendor's "interrupted"/"statement timeout" error into `BudgetExceeded`.
* **In Python**, long loops over user data call `check()` (a no-op outside a budget).

Network waits that have their own timeouts (the answer model's HTTP call) run inside
`paused()`: the budget is about the work this server does, not about a remote model, so a
slow but healthy model does not make the trace write after it fail.

`budget_seconds_for` says which requests get which budget; `0` turns a budget off.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

logger = logging.getLogger("lode.budget")

# Requests whose path starts with one of these are never budgeted (see the module docstring).
UNBUDGETED_PREFIXES = ("/admin/",)
# POSTs that search and may call a model: the ask budget (the graph query's discovery runs
# searches; a graph question in words may ask a model twice).
ASK_PATHS = ("/ask", "/api/ask", "/api/graph/query", "/api/graph/ask", "/graph/ask")
# Transaction control always runs, even after the deadline: `atomic()` rolls back to its
# savepoint on the way out of a stopped request, and refusing that would leave the
# transaction half-undone.
TRANSACTION_CONTROL = ("ROLLBACK", "RELEASE", "COMMIT", "SAVEPOINT")


class BudgetExceeded(Exception):
    """The request's time budget ran out (in Python, or the database stopped a statement)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"stopped after its time budget of {seconds:g} s")


class Budget:
    """A deadline on the monotonic clock that can be paused while waiting on the network."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self.clock = clock
        self.deadline = clock() + seconds
        self._paused_since: float | None = None
        self.released = False  # set once the request is answered: nothing is stopped any more

    def remaining(self) -> float:
        """Seconds left (negative once past the deadline); frozen while paused."""
        now = self._paused_since if self._paused_since is not None else self.clock()
        return self.deadline - now

    def expired(self) -> bool:
        return not self.released and self.remaining() <= 0

    def check(self) -> None:
        """Raise `BudgetExceeded` if the deadline has passed."""
        if self.expired():
            raise BudgetExceeded(self.seconds)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside does not count (nested pauses count once)."""
        if self._paused_since is not None:
            yield
            return
        self._paused_since = self.clock()
        try:
            yield
        finally:
            self.deadline += self.clock() - self._paused_since
            self._paused_since = None


_active: contextvars.ContextVar[_Enforcement | None] = contextvars.ContextVar(
    "lode_time_budget", default=None
)


def current() -> Budget | None:
    """The budget of the work running now, if any."""
    enforcement = _active.get()
    return enforcement.budget if enforcement is not None else None


def check() -> None:
    """Raise `BudgetExceeded` when the current budget (if any) has run out. Cheap: call it in
    loops over user data."""
    enforcement = _active.get()
    if enforcement is not None:
        enforcement.budget.check()


@contextmanager
def paused() -> Iterator[None]:
    """Wrap a network wait that has its own timeout: it does not count against the budget."""
    budget = current()
    if budget is None:
        yield
        return
    with budget.paused():
        yield


class _Enforcement:
    """One budget installed on one database connection: the execute wrapper plus the
    vendor's own mechanism. `release()` undoes both and is idempotent."""

    def __init__(self, budget: Budget, using: str):
        from retrieval.index import lexical

        self.budget = budget
        self.connection = connections[using]
        self.backend = lexical.backend()
        self.installed_on: Any = None  # the DB-API connection the vendor mechanism is on
        self.enforced: float | None = None  # PostgreSQL: the statement_timeout set, in s
        self.connection.execute_wrappers.append(self)
        self._install()

    def _install(self) -> None:
        try:
            self.connection.ensure_connection()
            self.enforced = self.backend.install_time_budget(self.connection, self.budget)
        except Exception:
            if self.connection.in_atomic_block:
                raise
            # A persistent connection the server dropped: reconnect once and retry.
            logger.warning("could not set the time budget; reconnecting", exc_info=True)
            self.connection.close()
            self.connection.ensure_connection()
            self.enforced = self.backend.install_time_budget(self.connection, self.budget)
        self.installed_on = self.connection.connection

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        """Execute wrapper: no statement starts after the deadline; the vendor's
        interruption becomes `BudgetExceeded`."""
        budget = self.budget
        if budget.released or sql.lstrip()[:9].upper().startswith(TRANSACTION_CONTROL):
            return execute(sql, params, many, context)
        budget.check()
        if self.connection.connection is not self.installed_on:
            self._install()  # reconnected mid-request: the new connection needs it too
        elif self.enforced is not None and budget.remaining() < self.enforced / 2:
            # PostgreSQL's limit is per statement: tighten it as the deadline nears so the
            # statements of one request cannot add up to much more than the budget.
            self.enforced = self.backend.install_time_budget(self.connection, budget)
        try:
            return execute(sql, params, many, context)
        except DatabaseError as exc:
            if budget.expired() or self.backend.is_time_budget_interrupt(exc):
                raise BudgetExceeded(budget.seconds) from exc
            raise

    def release(self) -> None:
        budget = self.budget
        if budget.released:
            return
        budget.released = True
        if self in self.connection.execute_wrappers:
            self.connection.execute_wrappers.remove(self)
        raw = self.connection.connection
        if raw is None or raw is not self.installed_on:
            return  # closed or replaced: the setting went with the old connection
        try:
            self.backend.remove_time_budget(self.connection)
        except Exception:
            # Never hand a connection that may still carry this request's limit to the next
            # request (or to anything else using it): drop it, Django reconnects.
            logger.warning("could not reset the time budget; closing the connection", exc_info=True)
            if not self.connection.in_atomic_block:
                self.connection.close()


@contextmanager
def time_budget(seconds: float, *, using: str = DEFAULT_DB_ALIAS) -> Iterator[Budget]:
    """Run the body with a time budget of `seconds`, enforced in Python (`check()`), before
    each database statement and inside the database (see the module docstring). Raises
    `BudgetExceeded` when it runs out. Budgets do not nest: an inner one is ignored."""
    if _active.get() is not None:
        yield _active.get().budget  # type: ignore[union-attr]
        return
    enforcement = _Enforcement(Budget(seconds), using)
    token = _active.set(enforcement)
    try:
        yield enforcement.budget
    finally:
        _active.reset(token)
        enforcement.release()


def release_current() -> None:
    """Stop enforcing the current budget now (its request is being answered)."""
    enforcement = _active.get()
    if enforcement is not None:
        enforcement.release()


def as_budget_exceeded(exc: BaseException) -> BudgetExceeded | None:
    """`exc` as the budget running out, or None. The execute wrapper converts what it sees,
    but SQLite's progress handler also interrupts while rows are being *fetched* (an ORM
    query reads its rows in chunks after `execute()` returned), which no wrapper sees: such a
    DatabaseError is recognised here, while its budget is still known."""
    if isinstance(exc, BudgetExceeded):
        return exc
    enforcement = _active.get()
    if enforcement is None or not isinstance(exc, DatabaseError):
        return None
    budget = enforcement.budget
    if budget.expired() or enforcement.backend.is_time_budget_interrupt(exc):
        return BudgetExceeded(budget.seconds)
    return None


def budget_seconds_for(request: HttpRequest) -> float:
    """The budget for `request` in seconds; 0 means none.

    * reads (GET/HEAD) of every page and API endpoint: `LODE_REQUEST_BUDGET_SECONDS` (10 s);
    * asking (`POST /ask`, `POST /api/ask`): `LODE_ASK_BUDGET_SECONDS` (30 s), larger because an
      ask is a search plus local model work (reranking, entailment) plus writing its trace —
      with model network waits excluded (`paused`);
    * no budget for other writes (saving a note, adding a source, webhooks): stopping those
      half-way would throw away what the user sent, and their cost is bounded by the size
      limits (`LODE_MAX_NOTE_BYTES`, …); nor for `/admin/`, whose index-health check reads the
      whole index by design (staff only);
    * none outside requests: the background worker and management commands never go through
      the middleware, so they never inherit a web budget.
    """
    path = request.path_info
    if path.startswith(UNBUDGETED_PREFIXES):
        return 0.0
    if request.method in ("GET", "HEAD"):
        return float(settings.LODE_REQUEST_BUDGET_SECONDS)
    if request.method == "POST" and path.rstrip("/") in ASK_PATHS:
        return float(settings.LODE_ASK_BUDGET_SECONDS)
    return 0.0


def exceeded_message(request: HttpRequest, exc: BudgetExceeded) -> str:
    """What the user is told, naming what was stopped and what to try instead."""
    path = request.path_info
    limit = f"its time limit of {exc.seconds:g} s"
    if path.startswith(("/search", "/api/search")):
        return (
            f"This search took too long and was stopped ({limit}). Try fewer or more "
            "specific words, a filter such as tag: or path:, or lexical mode."
        )
    if path.rstrip("/") in ASK_PATHS:
        return (
            f"This question took too long to answer and was stopped ({limit}). Try a more "
            "specific question."
        )
    return f"This page took too long and was stopped ({limit}). Please try again later."


def exceeded_response(request: HttpRequest, exc: BudgetExceeded) -> HttpResponse:
    """503 with the message: JSON `{"detail": …}` under /api/, else an HTML page (only the
    message fragment for htmx requests, which swap it into the page)."""
    message = exceeded_message(request, exc)
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": message}, status=503)
    template = "budget_exceeded.html"
    if getattr(request, "htmx", False):
        template += "#message"
    html = render_to_string(template, {"message": message}, request=request)
    return HttpResponse(html, status=503)


class TimeBudgetMiddleware:
    """Every budgeted request (`budget_seconds_for`) runs inside `time_budget`; when it runs
    out the user gets a 503 with a clear message rather than a 500 or a hung worker."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        seconds = budget_seconds_for(request)
        if seconds <= 0:
            return self.get_response(request)
        # Load the session's user before the budget starts: the login check needs it in a
        # middleware's process_view, where a stopped budget could not become the 503 page
        # (only a view's exceptions reach process_exception). It is one indexed lookup.
        user = getattr(request, "user", None)
        if user is not None:
            user.is_authenticated  # noqa: B018 (evaluates the lazy user)
        with time_budget(seconds):
            try:
                return self.get_response(request)
            except Exception as exc:
                # Raised outside the view (a lazily rendered template, a middleware): the
                # same clear answer as from process_exception.
                exceeded = as_budget_exceeded(exc)
                if exceeded is None:
                    raise
                release_current()
                logger.warning("%s %s %s", request.method, request.path_info, exceeded)
                return exceeded_response(request, exceeded)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        exception = as_budget_exceeded(exception)
        if exception is None:
            return None
        # Release first: rendering the answer may query the database, and a PostgreSQL
        # statement_timeout of a few milliseconds must not stop that too.
        release_current()
        logger.warning("%s %s %s", request.method, request.path_info, exception)
        return exceeded_response(request, exception)
