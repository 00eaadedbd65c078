"""The space a user is working in, chosen with the header's switcher.

Kept in the session: None means "all my spaces" (the default), which is what search and ask
read when the request names no space. New notes and sources go to the current space when
the user may write there, else to their personal space.
"""

from __future__ import annotations

from django.http import HttpRequest

from retrieval.eligibility import can, member_space_ids
from spaces.models import Role, Space, personal_space

SESSION_KEY = "lode_current_space"


def current_space_id(request: HttpRequest) -> int | None:
    """The chosen space's id, or None for all spaces (also when the user has since lost
    membership of the chosen one)."""
    raw = request.session.get(SESSION_KEY)
    if not isinstance(raw, int) or raw not in member_space_ids(request.user.pk):
        return None
    return raw


def set_current_space(request: HttpRequest, space_id: int | None) -> None:
    """Choose a space (one the user is a member of: the caller checks) or all (None)."""
    if space_id is None:
        request.session.pop(SESSION_KEY, None)
    else:
        request.session[SESSION_KEY] = int(space_id)


def space_for_new_documents(request: HttpRequest) -> Space:
    """Where a note or source created now goes by default: the current space when the user
    is at least an editor there, otherwise their personal space."""
    chosen = current_space_id(request)
    if chosen is not None and can(request.user.pk, chosen, Role.EDITOR):
        return Space.objects.get(pk=chosen)
    return personal_space(request.user)
