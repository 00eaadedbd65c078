"""The input of an ask, validated once for the answer page and the API (`POST /api/ask`).

A question is stripped, must not be empty and may not exceed `LODE_MAX_QUERY_CHARS` (the
same bound as a search query: every ask starts with a search). A pinned document must be one
the asking user may pin (`retrieval.answer.ask.pinnable_documents`, the one rule); checking
it here (ask() checks it again) turns a wrong id into a clean form error or a 404 instead of
an exception deep in the pipeline, and an id of someone else's document is reported exactly
like a missing one, so ids leak nothing.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from lode_site.ids import parse_id
from retrieval.answer.ask import pinnable_documents
from retrieval.answer.tools import question_urls
from retrieval.eligibility import NoAccess, audience_for
from retrieval.search.pipeline import DEFAULT_MODE, MODES

NO_SUCH_DOCUMENT = "No such note."
NO_SUCH_SPACE = "You are not a member of that space."


class AskForm(forms.Form):
    question = forms.CharField(strip=True, required=False)
    pinned_document_id = forms.IntegerField(required=False, min_value=1)
    # A re-run names the stored answer it repeats, so the new page links back to it.
    previous = forms.IntegerField(required=False, min_value=1)
    mode = forms.ChoiceField(choices=[(m, m) for m in MODES], required=False)
    # Ask in one space (its members may open the answer; only its documents are evidence);
    # "" or "all": across all the user's spaces (the answer stays private to them).
    space = forms.CharField(required=False)
    # "Fetch this page and answer from it": a web address that appears in the question.
    fetch_url = forms.CharField(required=False, strip=True, max_length=2000)

    def __init__(self, *args: Any, user: AbstractBaseUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_fetch_url(self) -> str:
        """A web address to fetch must be one written in the question (cleaned first)."""
        url: str = self.cleaned_data.get("fetch_url") or ""
        if url and url not in question_urls(self.cleaned_data.get("question") or ""):
            raise forms.ValidationError(
                "Only a web address written in the question is fetched.", code="not_in_question"
            )
        return url

    def clean_question(self) -> str:
        question: str = self.cleaned_data.get("question") or ""
        if not question:
            raise forms.ValidationError("Type a question.", code="empty")
        limit = settings.LODE_MAX_QUERY_CHARS
        if len(question) > limit:
            raise forms.ValidationError(
                f"Questions are limited to {limit} characters (this one has {len(question)}).",
                code="too_long",
            )
        return question

    def clean_space(self) -> int | None:
        raw = (self.cleaned_data.get("space") or "").strip()
        if raw in ("", "all"):
            return None
        space_id = parse_id(raw)
        try:
            if space_id is None:
                raise NoAccess(raw)
            audience_for(self.user.pk, space_id=space_id)
        except NoAccess:
            raise forms.ValidationError(NO_SUCH_SPACE, code="no_such_space") from None
        return space_id

    def clean(self) -> dict[str, Any]:
        """The pinned document must be pinnable in the space asked in (checked once the
        space is known; every field's own cleaning runs first)."""
        data = super().clean()
        document_id = data.get("pinned_document_id")
        if document_id is not None and "space" not in self.errors:
            audience = audience_for(self.user.pk, space_id=data.get("space"))
            if not pinnable_documents(audience).filter(pk=document_id).exists():
                self.add_error(
                    "pinned_document_id",
                    forms.ValidationError(NO_SUCH_DOCUMENT, code="no_such_document"),
                )
        return data

    def clean_mode(self) -> str:
        return self.cleaned_data.get("mode") or DEFAULT_MODE

    def first_error(self) -> str:
        """All errors in one sentence, for the API's `detail`."""
        return " ".join(str(e) for errors in self.errors.values() for e in errors)
