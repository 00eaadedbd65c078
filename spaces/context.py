"""The header's space switcher on every page (a template context processor)."""

from __future__ import annotations

from django.http import HttpRequest

from retrieval.eligibility import member_spaces
from spaces.current import current_space_id


def spaces_context(request: HttpRequest) -> dict[str, object]:
    """`member_spaces` (the signed-in user's spaces, personal first, each with `role`) and
    `current_space_id` (None: all spaces). Empty for an anonymous visitor, such as one
    opening a public link: they belong to no space."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"member_spaces": [], "current_space_id": None}
    # A request built without the session middleware (a test's RequestFactory) has no
    # chosen space: all spaces.
    chosen = current_space_id(request) if hasattr(request, "session") else None
    return {"member_spaces": list(member_spaces(user.pk)), "current_space_id": chosen}
