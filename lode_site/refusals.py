"""Refusals that depend on what is stored, not on the request's shape.

Both are `ValidationError`s, so a page that shows a form's errors shows these messages
like any other. The API answers them with their own status code instead of the 400 of a
plain `ValidationError` (`lode_site/api.py`), so a client can tell "this request is
malformed" (422, from the schema) from "this request cannot be done now" (409) and "what
it names does not exist" (404):

* `Conflict` — the stored state forbids the change (the last admin leaving, deleting a
  personal space, adding someone who is already a member): 409.
* `NotFound` — the request names something that does not exist here (an unknown username,
  a member id that is not a member, a version that is not one of this note's): 404.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError


class Conflict(ValidationError):
    """A change the current stored state does not allow; answered 409 by the API."""


class NotFound(ValidationError):
    """The request names something that does not exist where it looks; answered 404 by
    the API."""
