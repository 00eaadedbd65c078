"""The one NinjaAPI (`/api/`, OpenAPI docs at `/api/docs`).

Every endpoint requires a session (with CSRF on writes) or a bearer token; endpoints call
the same selectors and services as the pages, so permissions are the same.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest
from django.utils import timezone
from ninja import NinjaAPI
from ninja.security import HttpBearer, django_auth

from lode_site.models import ApiToken, token_digest


class TokenAuth(HttpBearer):
    """`Authorization: Bearer <token>`; tokens are created with `manage.py lode_token`."""

    def authenticate(self, request: HttpRequest, token: str):
        try:
            row = ApiToken.objects.select_related("user").get(digest=token_digest(token))
        except ApiToken.DoesNotExist:
            return None
        if not row.user.is_active:
            return None
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
        request.user = row.user
        return row.user


api = NinjaAPI(
    title="lode API",
    version="1",
    description="Search, notes and (later) cited answers over your own notes.",
    auth=[TokenAuth(), django_auth],
    docs_decorator=login_required,
    urls_namespace="api",
)


@api.exception_handler(ValidationError)
def validation_error(request: HttpRequest, exc: ValidationError):
    return api.create_response(request, {"detail": " ".join(exc.messages)}, status=400)


@api.exception_handler(PermissionDenied)
def permission_denied(request: HttpRequest, exc: PermissionDenied):
    return api.create_response(request, {"detail": str(exc) or "Forbidden."}, status=403)


from notes.api import router as notes_router  # noqa: E402
from retrieval.api import evidence_router  # noqa: E402
from retrieval.api import router as search_router  # noqa: E402

api.add_router("/notes", notes_router)
api.add_router("/search", search_router)
api.add_router("/evidence", evidence_router)

from retrieval.ask_api import router as ask_router  # noqa: E402

api.add_router("/ask", ask_router)

from externals.api import router as sources_router  # noqa: E402

api.add_router("/sources", sources_router)
