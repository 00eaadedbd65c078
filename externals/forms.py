"""Forms for adding a source: a server folder, a URL, or an uploaded file.

They validate what a person can fix on the spot (the folder exists and is readable, the
URL is http(s), the upload is under the size cap, the name is free); fetching, extracting
and the address policy (private/loopback refused) belong to the scan, which reports its own
failures on the source page.
"""

from __future__ import annotations

from pathlib import Path

from django import forms
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from externals.models import DEFAULT_STALE_AFTER_DAYS, Source
from externals.pipeline import folder_refusal
from externals.services import MAX_STALE_AFTER_DAYS, MIN_STALE_AFTER_DAYS, SOURCE_TIER_VALUES
from notes.models import TrustTier

# Tiers a source may carry (the rule lives in `externals.services`).
SOURCE_TIERS = [(value, TrustTier(value).label) for value in SOURCE_TIER_VALUES]


def max_upload_bytes() -> int:
    return int(getattr(settings, "LODE_SOURCE_MAX_FILE_BYTES", 2_000_000))


class SourceBaseForm(forms.Form):
    """Fields every kind of source has. `owner` is needed to keep names unique per user."""

    kind: str = ""

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

    def __init__(self, *args, owner: AbstractBaseUser, **kwargs) -> None:
        kwargs.setdefault("prefix", self.kind)
        super().__init__(*args, **kwargs)
        self.owner = owner

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
        help_text="An absolute path the server can read, e.g. /srv/docs (staff: any folder; "
        "others: inside the folders the operator allows with LODE_SOURCE_FOLDER_ROOTS).",
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


class UploadSourceForm(SourceBaseForm):
    kind = Source.Kind.UPLOAD

    file = forms.FileField(
        label="File", help_text="Markdown, plain text, HTML or PDF.", allow_empty_file=False
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        limit = max_upload_bytes()
        if upload.size > limit:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; the limit is {limit:,} bytes."
            )
        return upload


SOURCE_FORMS: dict[str, type[SourceBaseForm]] = {
    Source.Kind.FOLDER: FolderSourceForm,
    Source.Kind.URL: UrlSourceForm,
    Source.Kind.UPLOAD: UploadSourceForm,
}
