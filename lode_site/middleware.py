from __future__ import annotations

from django.contrib.auth.middleware import LoginRequiredMiddleware


class LodeLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Login required for every page; `/api/` authenticates itself (session or token) and
    answers 401 rather than redirecting to a login form."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
