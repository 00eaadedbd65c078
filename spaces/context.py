"""The header's space switcher on every page (a template context processor)."""

from __future__ import annotations

from django.http import HttpRequest

from retrieval.eligibility import member_spaces
from spaces.current import current_space_id
from spaces.models import Space

# Where `read_member_spaces` keeps the spaces it read for the rest of the request.
_READ_SPACES = "_lode_member_spaces"


def read_member_spaces(request: HttpRequest) -> list[Space]:
    """The signed-in user's spaces (`member_spaces`), read for a view that shows them and
    kept on the request, so the header's switcher (`spaces_context`) does not read them
    again. Only for views that change no membership before they render."""
    spaces = list(member_spaces(request.user.pk))
    setattr(request, _READ_SPACES, spaces)
    return spaces


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
    spaces = getattr(request, _READ_SPACES, None)
    if spaces is None:
        spaces = list(member_spaces(user.pk))
    return {"member_spaces": spaces, "current_space_id": chosen}
