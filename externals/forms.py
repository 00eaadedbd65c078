"""Forms for adding a source: a server folder, a URL, or an uploaded file.

They validate what a person can fix on the spot (the folder exists and is readable, the
URL is http(s), the upload is under the size cap, the name is free); fetching, extracting
and the address policy (private/loopback refused) belong to the scan, which reports its own
failures on the source page.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from django import forms
from django.contrib.auth.models import AbstractBaseUser

from externals.extract import READABLE_EXTENSIONS
from externals.folders import allowed_roots, folder_refusal
from externals.models import DEFAULT_STALE_AFTER_DAYS, Source
from externals.services import MAX_STALE_AFTER_DAYS, MIN_STALE_AFTER_DAYS, SOURCE_TIER_VALUES
from externals.uploads import AS_NOTES, AS_SOURCE
from notes.forms import space_choices
from notes.models import TrustTier
from spaces.models import Space

# Tiers a source may carry (the rule lives in `externals.services`).
SOURCE_TIERS = [(value, TrustTier(value).label) for value in SOURCE_TIER_VALUES]


class SourceBaseForm(forms.Form):
    """Fields every kind of source has. `owner` is needed to keep names unique per user;
    `spaces` (the spaces the user may add sources to) fills the space select of the add
    forms, and is None for the edit form, which has none (a source changes space by being
    moved: `SourceMoveForm`)."""

    kind: str = ""

    # Which space the source (and so its externals) belongs to.
    # Left out (an older form, a script): the default space (`space_for_new_documents`).
    space = forms.TypedChoiceField(
        coerce=int,
        required=False,
        empty_value=None,
        label="Space",
        help_text="Its documents are read by the members of this space.",
    )
    name = forms.CharField(max_length=200)
    trust_tier = forms.ChoiceField(choices=SOURCE_TIERS, initial=TrustTier.EXTERNAL_CURRENT)
    no_egress = forms.BooleanField(
        required=False,
        label="No egress",
        help_text="Never send this source's content off the machine.",
    )
    stale_after_days = forms.IntegerField(
        min_value=MIN_STALE_AFTER_DAYS,
        max_value=MAX_STALE_AFTER_DAYS,
        initial=DEFAULT_STALE_AFTER_DAYS,
        label="Stale after (days)",
    )

    def __init__(
        self,
        *args,
        owner: AbstractBaseUser,
        spaces: Sequence[Space] | None = None,
        **kwargs,
    ) -> None:
        kwargs.setdefault("prefix", self.kind)
        super().__init__(*args, **kwargs)
        self.owner = owner
        if spaces is None:
            del self.fields["space"]
        else:
            self.fields["space"].choices = space_choices(spaces)

    # The source being edited (None when adding): its own name is not "taken".
    instance: Source | None = None

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("A source needs a name.")
        taken = Source.objects.filter(owner_id=self.owner.pk, name=name)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(f"You already have a source named “{name}”.")
        return name


class SourceEditForm(SourceBaseForm):
    """A source's settings after it is created (its kind and location stay as they are:
    changing them would make every existing external a different document)."""

    kind = "edit"

    enabled = forms.BooleanField(
        required=False,
        label="Enabled",
        help_text="A disabled source is not scanned (reconcile, webhooks, “Scan now”); its "
        "externals stay searchable.",
    )

    def __init__(self, *args, owner: AbstractBaseUser, instance: Source, **kwargs) -> None:
        self.instance = instance
        kwargs.setdefault(
            "initial",
            {
                "name": instance.name,
                "trust_tier": instance.trust_tier,
                "no_egress": instance.no_egress,
                "stale_after_days": instance.stale_after_days,
                "enabled": instance.enabled,
            },
        )
        super().__init__(*args, owner=owner, **kwargs)


class FolderSourceForm(SourceBaseForm):
    kind = Source.Kind.FOLDER

    location = forms.CharField(
        max_length=2000,
        label="Folder path on the server",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Names the folders the operator allows (LODE_SOURCE_FOLDER_ROOTS), as the errors do.
        roots = allowed_roots()
        self.fields["location"].help_text = (
            f"An absolute path inside {', '.join(roots)}: the folders this server's operator "
            "allows."
            if roots
            else "This server's operator allows no server folders."
        )

    def clean_location(self) -> str:
        raw = self.cleaned_data["location"].strip()
        # Staff hear exactly what is wrong; other accounts one "not allowed" message for
        # every reason, so the form cannot be used to probe the server's disk.
        refusal = folder_refusal(self.owner, raw)
        if refusal:
            raise forms.ValidationError(refusal)
        return str(Path(raw))


class UrlSourceForm(SourceBaseForm):
    kind = Source.Kind.URL

    location = forms.URLField(
        max_length=2000,
        label="Page URL",
        assume_scheme="https",
        help_text="An http or https address; it is fetched with a GET when scanned.",
    )

    def clean_location(self) -> str:
        url = self.cleaned_data["location"]
        if not url.lower().startswith(("http://", "https://")):
            raise forms.ValidationError("Only http and https URLs can be mirrored.")
        return url


# One upload request's bounds: at most this many files (Django's own
# DATA_UPLOAD_MAX_NUMBER_FILES, 100, is the hard stop above it) and this many bytes in all.
# Each file is also held to LODE_SOURCE_MAX_FILE_BYTES. A request whose Content-Length
# already says it is over the total is refused before any file is read, stored or scanned
# (`externals.views._upload`); the allowance covers the multipart headers and form fields.
MAX_UPLOAD_FILES = 20
MAX_UPLOAD_TOTAL_BYTES = 20_000_000
UPLOAD_REQUEST_OVERHEAD_BYTES = 256 * 1024


class MultipleFileInput(forms.FileInput):
    """`<input type="file" multiple>`: several files without JavaScript."""

    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A list of uploaded files. Each file's own checks (empty, size, type, decoding) are
    made per file by `externals.uploads`, so one bad file refuses only itself;
    this field checks only that something was sent."""

    # The picker offers the types lode reads; a file of another type (dropped, or picked
    # under "all files") is still sent and refused with its reason.
    widget = MultipleFileInput(attrs={"accept": ",".join(sorted(READABLE_EXTENSIONS))})

    def clean(self, data, initial=None) -> list:
        files = [item for item in (data if isinstance(data, list | tuple) else [data]) if item]
        if not files:
            return [super().clean(None, initial)]  # raises "This field is required."
        return [super(MultipleFileField, self).clean(item, initial) for item in files]


class UploadSourceForm(SourceBaseForm):
    """Files brought in either as editable notes or as one mirrored source
    (`externals.uploads`); the name, trust tier, no-egress and stale age are the source's."""

    kind = Source.Kind.UPLOAD

    brought_in_as = forms.ChoiceField(
        choices=[
            (AS_NOTES, "As editable notes"),
            (AS_SOURCE, "As a mirrored source"),
        ],
        # Left out (an older form, a script): a mirrored source, as uploads always were.
        required=False,
        initial=AS_SOURCE,
        widget=forms.RadioSelect,
        label="Bring the files in",
        help_text="Notes: each Markdown or text file becomes a note you can edit. Source: "
        "all the files become one source whose snapshots you annotate; any type lode reads.",
    )
    name = forms.CharField(
        max_length=200,
        required=False,
        label="Source name",
        help_text="For a mirrored source. Blank: named after its file, or “Uploads” and the "
        "date for several files.",
    )
    file = MultipleFileField(
        label="Files",
        help_text="Markdown, plain text, HTML, PDF, Word (.docx), PowerPoint (.pptx), Excel "
        f"(.xlsx) or CSV; up to {MAX_UPLOAD_FILES} files at once.",
        allow_empty_file=True,
    )

    field_order = ["brought_in_as", "file", "space", "name"]

    def clean_brought_in_as(self) -> str:
        return self.cleaned_data["brought_in_as"] or AS_SOURCE

    def clean_name(self) -> str:
        # A taken name is refused by `externals.uploads.upload_as_source`, for sources only.
        return self.cleaned_data["name"].strip()

    def clean_file(self) -> list:
        files = self.cleaned_data["file"]
        if len(files) > MAX_UPLOAD_FILES:
            raise forms.ValidationError(
                f"{len(files)} files sent; at most {MAX_UPLOAD_FILES} can be uploaded at once."
            )
        total = sum(upload.size for upload in files)
        if total > MAX_UPLOAD_TOTAL_BYTES:
            raise forms.ValidationError(
                f"The files add up to {total:,} bytes; one upload may carry at most "
                f"{MAX_UPLOAD_TOTAL_BYTES:,} bytes."
            )
        return files


class SourceMoveForm(forms.Form):
    """The space a source moves to. The page offers the spaces the user edits; whether the
    user may move it there is the move service's to decide (`spaces.services.source_move`),
    so a posted id of any other space is refused in its words."""

    to_space = forms.IntegerField(min_value=1, max_value=2**63 - 1, label="Move to space")


SOURCE_FORMS: dict[str, type[SourceBaseForm]] = {
    Source.Kind.FOLDER: FolderSourceForm,
    Source.Kind.URL: UrlSourceForm,
    Source.Kind.UPLOAD: UploadSourceForm,
}
