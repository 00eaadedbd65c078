"""Forms of the space pages: each validates only the shape of what was posted; the rules
(names, roles, the last admin) live in `spaces.services`, which the views call."""

from __future__ import annotations

from django import forms

from spaces.models import Role
from spaces.services import DESCRIPTION_MAX_CHARS, NAME_MAX_CHARS

ROLE_HELP = (
    "Viewer: search, open and ask. Editor: also write notes, add sources, annotate and move "
    "documents. Admin: also manage members and this space's settings."
)


class SpaceCreateForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX_CHARS)
    description = forms.CharField(
        max_length=DESCRIPTION_MAX_CHARS, required=False, widget=forms.TextInput
    )


class SpaceSettingsForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX_CHARS)
    description = forms.CharField(
        max_length=DESCRIPTION_MAX_CHARS, required=False, widget=forms.TextInput
    )
    no_egress = forms.BooleanField(
        required=False,
        label="No egress",
        help_text="Never send this space's documents off this machine (to a cloud answerer or "
        "judge), whatever each document's or source's own setting says.",
    )
    public_links_enabled = forms.BooleanField(
        required=False,
        label="Public links",
        help_text="Let members create read-only links to one note version or one stored "
        "answer that anyone holding the link can open without an account. Off: no link "
        "can be made, and links made earlier open nothing.",
    )


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER, help_text=ROLE_HELP)


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class MoveForm(forms.Form):
    to_space = forms.IntegerField(min_value=1, max_value=2**63 - 1)
