"""lode's own middleware: login required everywhere, the headers every page gets, and
the login pages' message when the login throttle refuses an attempt."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.forms.forms import NON_FIELD_ERRORS
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control

from lode_site import throttle


class LodeLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Login required for every page; `/api/` authenticates itself (session or token) and
    answers 401 rather than redirecting to a login form."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


def permissions_policy_header(policy: dict[str, list[str]]) -> str:
    """`{"camera": []}` → `camera=()`; `{"fullscreen": ["self"]}` → `fullscreen=(self)`."""
    return ", ".join(f"{feature}=({' '.join(allow)})" for feature, allow in policy.items())


class SecurityHeadersMiddleware:
    """`Permissions-Policy` on every response, and `Cache-Control: private, no-store` on
    every response to a signed-in user (session or bearer token), so no shared cache or
    browser history keeps a copy of someone's notes. Static files are left alone: they are
    the same for everyone and WhiteNoise gives them long cache lifetimes."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        self.permissions_policy = permissions_policy_header(settings.LODE_PERMISSIONS_POLICY)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path_info.startswith("/" + settings.STATIC_URL.lstrip("/")):
            return response
        if self.permissions_policy:
            response.headers.setdefault("Permissions-Policy", self.permissions_policy)
        user = getattr(request, "user", None)  # the API's bearer auth sets it in the view
        if user is not None and user.is_authenticated:
            patch_cache_control(response, private=True, no_store=True)
        return response


class LoginLockoutMessageMiddleware:
    """When the login throttle refused an attempt (lode_site/throttle.py), the login page
    says why — "Too many failed attempts; try again in N minutes" — instead of "wrong
    password", with status 429. Works for every form login (`/accounts/login/` and
    `/admin/login/`), which render a TemplateResponse with the form."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_template_response(self, request: HttpRequest, response):
        lockout = getattr(request, throttle.REQUEST_ATTRIBUTE, None)
        if lockout is None:
            return response
        form = (response.context_data or {}).get("form")
        if form is not None and form.is_bound:
            form.errors[NON_FIELD_ERRORS] = form.error_class([lockout.message], "nonfield")
        response.status_code = 429
        response.headers["Retry-After"] = str(int(lockout.seconds) + 1)
        return response
