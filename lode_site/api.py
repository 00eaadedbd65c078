"""The one NinjaAPI (`/api/`, OpenAPI docs at `/api/docs`).

Every endpoint requires a session (with CSRF on writes) or a bearer token; endpoints call
the same selectors and services as the pages, so permissions are the same.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest
from django.urls import reverse
from ninja import NinjaAPI
from ninja.errors import HttpError
from ninja.openapi.schema import OpenAPISchema
from ninja.security import APIKeyCookie, HttpBearer

from lode_site.api_bodies import MAX_JSON_DEPTH, BoundedJSONParser, JsonBodyRefused
from lode_site.budget import ASK_PATHS
from lode_site.models import ApiToken, token_digest
from lode_site.refusals import Conflict, NotFound


class TokenAuth(HttpBearer):
    """`Authorization: Bearer <token>`; tokens are created with `manage.py lode_token`."""

    def authenticate(self, request: HttpRequest, token: str):
        try:
            row = ApiToken.objects.select_related("user").get(digest=token_digest(token))
        except ApiToken.DoesNotExist:
            return None
        # Revoked, expired or deactivated tokens fail; so do tokens narrowed to some spaces
        # or to reading, which only the MCP server enforces (its tools take their scope).
        if row.refusal() or not row.can_ask or row.spaces.exists():
            return None
        row.mark_used()
        request.user = row.user
        return row.user


class SessionAuth(APIKeyCookie):
    """The signed-in session (Django's session cookie), with Django's CSRF check on unsafe
    methods. The check runs only for a session that is signed in: a request with no
    credentials at all is a 401, as the schema says, and a signed-in session's write
    without the CSRF token is a 403 (declared on every unsafe operation)."""

    param_name = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest) -> str | None:
        if not request.user.is_authenticated:
            return None
        return super()._get_key(request)  # raises the 403 when the CSRF check fails

    def authenticate(self, request: HttpRequest, key: str | None):
        return request.user if request.user.is_authenticated else None


_DETAIL_SCHEMA = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
# Ninja's request-validation answer: one entry per bad field, each saying where and what.
_VALIDATION_SCHEMA = {
    "type": "object",
    "properties": {"detail": {"type": "array", "items": {"type": "object"}}},
    "required": ["detail"],
}
# Answers that come from the API as a whole rather than from one endpoint's code.
_COMMON_RESPONSES = {
    "400": {
        "description": "The request body is not JSON (or not the declared content type), or "
        f"nests arrays and objects deeper than {MAX_JSON_DEPTH} levels.",
    },
    "401": {"description": "Not signed in (no session, or a missing or unknown bearer token)."},
    "403": {
        "description": "A signed-in session's write without the CSRF token (send the "
        "`csrftoken` cookie's value as `X-CSRFToken`; bearer-token calls need none).",
    },
    "404": {
        "description": "No endpoint matches the URL (for instance an id outside 1..2**63-1).",
    },
    "422": {
        "description": "The request does not match this endpoint's parameters or body schema: "
        "`detail` lists each problem with its location.",
    },
    "503": {"description": "The request ran out of its time budget and was stopped."},
}


# What the API offers, in the
# Markdown the docs page (Swagger UI) renders, with links back into the app; `{home}` and
# `{help}` are filled in per request (`reverse`, so a script prefix is honoured).
API_DESCRIPTION = (
    "Your own notes and sources over JSON, as the app shows them: notes and their immutable "
    "versions (create, edit against the version you started from, restore, delete), search "
    "(keyword, semantic or hybrid, with the filters of the search page), verified evidence "
    "for a search hit, cited answers whose every claim passed the faithfulness gate "
    "(`/api/ask`, and stored answers by id), and your external sources (list, refresh, "
    "signed webhook).\n\n"
    "Authenticate with your signed-in session (writes then need the CSRF token) or with "
    "`Authorization: Bearer <token>` (tokens are made with `manage.py lode_token`).\n\n"
    "[\u2190 Back to lode]({home}) \u00b7 [Search syntax]({help})"
)


class LodeNinjaAPI(NinjaAPI):
    """The NinjaAPI whose OpenAPI schema also declares the answers every endpoint can give
    besides its own: 400 (an unparseable body), 401 (authentication), 422 (request
    validation), 404 (path ids that match no URL) and 503 (time budget, on reads and
    asks). Endpoints declare the rest themselves (`response={...}`), so the schema lists
    every status code the API returns (tests/lode_site/test_schemathesis.py checks it). Its
    description (`API_DESCRIPTION`) links back to the app."""

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict | None = None
    ) -> OpenAPISchema:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        schema["info"]["description"] = API_DESCRIPTION.format(
            home=reverse("home"), help=reverse("search-help")
        )
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                _declare_common_responses(path, method.lower(), operation)
        return schema


SAFE_METHODS = frozenset({"get", "head", "options", "trace"})


def _common_codes(path: str, method: str, operation: dict) -> list[tuple[str, dict, bool]]:
    """The API-wide refusals an operation can answer with: (code, body schema, whether an
    endpoint's own declaration of the code is extended rather than kept as it is)."""
    security = operation.get("security") or []
    session_write = method not in SAFE_METHODS and any("SessionAuth" in o for o in security)
    # Reads and asks run under a time budget (lode_site/budget.py, budget_seconds_for).
    budgeted = method == "get" or path.rstrip("/") in ASK_PATHS
    rules = [
        (bool(security), "401", _DETAIL_SCHEMA, False),
        (session_write, "403", _DETAIL_SCHEMA, True),
        (bool(operation.get("requestBody")), "400", _DETAIL_SCHEMA, True),
        (
            bool(operation.get("parameters") or operation.get("requestBody")),
            "422",
            _VALIDATION_SCHEMA,
            False,
        ),
        ("{" in path, "404", _DETAIL_SCHEMA, False),
        (budgeted, "503", _DETAIL_SCHEMA, False),
    ]
    return [(code, body, extend) for applies, code, body, extend in rules if applies]


def _declare_common_responses(path: str, method: str, operation: dict) -> None:
    # Ninja keys responses by int; JSON makes them strings. Use strings, so an endpoint's own
    # declaration of a code (say, evidence's 404 body) is found and kept.
    responses = {str(code): body for code, body in operation.get("responses", {}).items()}
    operation["responses"] = responses
    for code, body, extend in _common_codes(path, method, operation):
        common = _COMMON_RESPONSES[code]["description"]
        if code not in responses:
            responses[code] = {
                **_COMMON_RESPONSES[code],
                "content": {"application/json": {"schema": body}},
            }
        elif extend:
            # An endpoint's own 400 or 403 (a rule, a role) keeps its body, which has the same
            # `detail` shape; its description also names the API-wide cause.
            own = responses[code].get("description", "")
            responses[code]["description"] = f"{own} Also: {common}" if own else common


api = LodeNinjaAPI(
    title="lode API",
    version="1",
    description="",  # API_DESCRIPTION, filled in by get_openapi_schema
    auth=[TokenAuth(), SessionAuth()],
    docs_decorator=login_required,
    urls_namespace="api",
    parser=BoundedJSONParser(),
)


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError):
    # Ninja turns any error of the parser into "Cannot parse request body"; a body the API
    # refused to parse says why (lode_site/api_bodies.py).
    cause = exc.__cause__
    detail = str(cause) if isinstance(cause, JsonBodyRefused) else str(exc)
    return api.create_response(request, {"detail": detail}, status=exc.status_code)


@api.exception_handler(ValidationError)
def validation_error(request: HttpRequest, exc: ValidationError):
    return api.create_response(request, {"detail": " ".join(exc.messages)}, status=400)


@api.exception_handler(Conflict)
def conflict(request: HttpRequest, exc: Conflict):
    return api.create_response(request, {"detail": " ".join(exc.messages)}, status=409)


@api.exception_handler(NotFound)
def not_found(request: HttpRequest, exc: NotFound):
    return api.create_response(request, {"detail": " ".join(exc.messages)}, status=404)


@api.exception_handler(PermissionDenied)
def permission_denied(request: HttpRequest, exc: PermissionDenied):
    return api.create_response(request, {"detail": str(exc) or "Forbidden."}, status=403)


from notes.api import router as notes_router  # noqa: E402
from retrieval.web.search_api import evidence_router  # noqa: E402
from retrieval.web.search_api import router as search_router  # noqa: E402

api.add_router("/notes", notes_router)
api.add_router("/search", search_router)
api.add_router("/evidence", evidence_router)

from retrieval.web.ask_api import router as ask_router  # noqa: E402

api.add_router("/ask", ask_router)

from externals.api import router as sources_router  # noqa: E402

api.add_router("/sources", sources_router)

from spaces.api import router as spaces_router  # noqa: E402

api.add_router("/spaces", spaces_router)
api.add_router("/graph", "retrieval.web.graph_api.router")  # the restricted graph query
api.add_router("/graph/ask", "retrieval.web.graph_words_api.router")  # graph questions in words
