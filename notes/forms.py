from __future__ import annotations

from django import forms


class NoteForm(forms.Form):
    title = forms.CharField(max_length=500)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 20}), required=False, strip=False)
    tags = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Comma or space separated. #hashtags in the body are added automatically.",
    )
    # The version this edit started from; a save is refused when the head has moved since.
    base_version = forms.IntegerField(widget=forms.HiddenInput, required=False)
