from __future__ import annotations

from collections.abc import Sequence

from django import forms

from lode_site.ids import MAX_ID
from spaces.models import Space


def space_choices(spaces: Sequence[Space]) -> list[tuple[int, str]]:
    """A space select's choices: each space the user may write in, the personal one
    labelled as such (every user's is called "Personal")."""
    return [
        (space.pk, f"{space.name} (yours only)" if space.is_personal else space.name)
        for space in spaces
    ]


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
    # Creating only: which space the note goes to. An edit never moves a note.
    # Left out (an older form, a script): the default space (`space_for_new_documents`).
    space = forms.TypedChoiceField(coerce=int, label="Space", required=False, empty_value=None)

    def __init__(self, *args, spaces: Sequence[Space] | None = None, **kwargs) -> None:
        """`spaces`: the spaces the user may write in (the create form's choices); None for
        an edit, which has no space field."""
        super().__init__(*args, **kwargs)
        if spaces is None:
            del self.fields["space"]
        else:
            self.fields["space"].choices = space_choices(spaces)


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
