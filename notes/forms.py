from __future__ import annotations

from django import forms

from lode_site.ids import MAX_ID


class NoteForm(forms.Form):
    title = forms.CharField(max_length=500)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 20}), required=False, strip=False)
    tags = forms.CharField(
        required=False,
        max_length=2000,
        help_text=(
            "Comma or space separated. #hashtags in the body (#channel-name too) are added "
            "automatically; put one in backticks to mention it without tagging."
        ),
    )
    # The version this edit started from; a save is refused when the head has moved since.
    base_version = forms.IntegerField(widget=forms.HiddenInput, required=False)


class RestoreForm(forms.Form):
    """The restore button's form: the head version the page showed, so a restore made from a
    stale page is refused like a stale edit (notes.services.note_restore)."""

    base_version = forms.IntegerField(
        widget=forms.HiddenInput,
        min_value=1,
        max_value=MAX_ID,
        error_messages={
            "required": "the form did not say which version you saw; reload the page.",
            "invalid": "the form's version id is not a number; reload the page.",
        },
    )

    def first_error(self) -> str:
        """The first error message, for a flash message."""
        return next(iter(self.errors.get("base_version", [])), "the form is not valid.")
