"""Folder sources read only inside the roots the operator configures, and never lode's own
folders: its data folder, the uploads in it, the project's code and its Python environment,
even when a configured root holds them. Checked on the resolved path (`..`, symbolic links)
by the form, the service, every scan, "Scan now", the API's refresh and `lode_sources
reconcile`; and `LODE_SOURCE_FOLDER_ROOTS` itself is checked at start-up."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from externals import folders, pipeline, services
from externals.models import ScanRecord, Source, SourceItem
from lode_site import env
from lode_site.models import ApiToken, token_digest
from tests.factories import staff_client

pytestmark = pytest.mark.django_db

RAW_TOKEN = "lode-folder-roots-token-0123456789abcdefghijklmnop"


@pytest.fixture(autouse=True)
def _no_embedding_note(monkeypatch) -> None:
    """Scans here are about which folders may be read, not about embedding."""
    monkeypatch.setattr(pipeline, "embedding_problem", lambda: "")


@pytest.fixture
def data_dir(settings) -> Path:
    return Path(settings.DATA_DIR)


@pytest.fixture
def roots(tmp_path, settings) -> dict[str, Path]:
    """The one allowed root with a good folder in it, and a folder outside it."""
    allowed = tmp_path / "allowed"
    (allowed / "docs").mkdir(parents=True)
    (allowed / "docs" / "a.md").write_text("# A\n\nAardvarks dig.\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.md").write_text("# B\n\nBadgers dig.\n")
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(allowed)]
    return {"allowed": allowed, "docs": allowed / "docs", "outside": outside}


def allow_the_folder_holding_data(settings, roots: dict[str, Path]) -> None:
    """Add a root that holds lode's data folder (the test settings' temporary directory,
    which also holds `outside`)."""
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(roots["allowed"]), str(Path(settings.DATA_DIR).parent)]


def add(owner, location: Path | str, name: str = "s") -> Source:
    return services.source_create(owner=owner, name=name, kind="folder", location=str(location))


def form_post(client: Client, location: Path | str, name: str = "f"):
    data = {
        "folder-name": name,
        "folder-trust_tier": "external",
        "folder-stale_after_days": "30",
        "folder-location": str(location),
    }
    return client.post(reverse("externals:source-add", args=["folder"]), data)


@pytest.fixture
def bobs_upload(bob) -> Iterator[Source]:
    """An upload of bob's, stored in lode's uploads folder (removed afterwards: the data
    folder is shared by the whole test run)."""
    source = services.upload_create(
        owner=bob, name="bob's file", filename="plans.md", data=b"# Plans\n\nOkapi zebra.\n"
    )
    yield source
    shutil.rmtree(pipeline.upload_folder(source), ignore_errors=True)


def superuser(user):
    user.is_staff = user.is_superuser = True
    user.save()
    return user


# --- lode's own folders, even inside a configured root -------------------------------------


def test_the_data_folder_is_refused_though_a_root_holds_it(alice, roots, data_dir, settings):
    superuser(alice)
    allow_the_folder_holding_data(settings, roots)
    assert folders.inside_allowed_roots(str(data_dir))  # the root holds it …
    with pytest.raises(ValidationError, match="is lode's data folder"):
        add(alice, data_dir)  # … and still no one may mirror it
    with pytest.raises(ValidationError, match="holds lode's data folder"):
        add(alice, data_dir.parent)
    assert not Source.objects.exists()


def test_the_uploads_folder_and_an_upload_in_it_are_refused(
    alice, bobs_upload, roots, data_dir, settings
):
    superuser(alice)
    allow_the_folder_holding_data(settings, roots)
    stored = pipeline.upload_folder(bobs_upload)
    assert (stored / "plans.md").is_file()
    with pytest.raises(ValidationError, match="is lode's uploads folder"):
        add(alice, data_dir / "uploads")
    with pytest.raises(ValidationError, match="is inside lode's uploads folder"):
        add(alice, stored)


def test_the_project_and_its_python_environment_are_refused(alice, settings):
    superuser(alice)
    project = Path(settings.BASE_DIR)
    settings.LODE_SOURCE_FOLDER_ROOTS = ["/"]
    with pytest.raises(ValidationError, match="is lode's code"):
        add(alice, project)
    with pytest.raises(ValidationError, match="is inside lode's code"):
        add(alice, project / "externals")
    with pytest.raises(ValidationError, match="holds lode's code"):
        add(alice, project.parent)
    with pytest.raises(ValidationError, match=r"lode's (Python environment|code)"):
        add(alice, sys.prefix)


def test_a_symbolic_link_inside_a_root_cannot_reach_lode_or_leave_the_root(
    alice, roots, data_dir, settings
):
    superuser(alice)
    (roots["allowed"] / "to-data").symlink_to(data_dir, target_is_directory=True)
    (roots["allowed"] / "to-outside").symlink_to(roots["outside"], target_is_directory=True)
    (roots["outside"] / "sub").mkdir()
    for through_link in (roots["allowed"] / "to-outside" / "sub", roots["allowed"] / "to-data"):
        with pytest.raises(ValidationError, match="only from inside"):
            add(alice, through_link)
    allow_the_folder_holding_data(settings, roots)
    with pytest.raises(ValidationError, match="is lode's uploads folder"):
        add(alice, roots["allowed"] / "to-data" / "uploads")


def test_dot_dot_cannot_climb_out_of_a_root_or_into_lode(alice, roots, data_dir, settings):
    superuser(alice)
    climb_out = roots["docs"] / ".." / ".." / "outside"
    with pytest.raises(ValidationError, match="only from inside"):
        add(alice, climb_out)
    allow_the_folder_holding_data(settings, roots)
    # Through the root that holds the data folder: `..` resolves to the data folder itself.
    into_data = data_dir / "uploads" / ".."
    with pytest.raises(ValidationError, match="is lode's data folder"):
        add(alice, into_data)
    assert add(alice, roots["docs"] / "." / ".." / "docs", name="ok").location == str(roots["docs"])


# --- who is told what ---------------------------------------------------------------------


def test_a_staff_member_who_is_not_superuser_gets_a_form_error_naming_the_roots(
    alice, roots, data_dir, settings
):
    client = staff_client(alice, superuser=False)
    for n, location in enumerate([roots["outside"], "/etc"]):
        response = form_post(client, location, name=f"f{n}")
        assert response.status_code == 400
        page = response.content.decode()
        assert "can be mirrored only from inside" in page
        assert str(roots["allowed"]) in page
    allow_the_folder_holding_data(settings, roots)
    response = form_post(client, data_dir, name="data")
    assert response.status_code == 400
    assert "lode never mirrors its own data or code" in response.content.decode()
    assert not Source.objects.exists()
    assert form_post(client, roots["docs"], name="ok").status_code == 302


def test_an_ordinary_account_hears_one_message_for_lode_folders_too(
    alice, roots, data_dir, settings
):
    allow_the_folder_holding_data(settings, roots)
    for location in (data_dir, "/etc", roots["allowed"] / "missing"):
        with pytest.raises(ValidationError) as refused:
            add(alice, location)
        assert refused.value.messages == [folders.folder_not_allowed_message()]
    assert str(data_dir) not in folders.folder_not_allowed_message()


def test_the_add_form_names_the_allowed_roots(alice_client, roots):
    page = alice_client.get(reverse("externals:sources")).content.decode()
    assert f"An absolute path inside {roots['allowed']}" in page


# --- a source whose folder stops being allowed ----------------------------------------------


@pytest.fixture
def docs_source(alice, roots) -> Source:
    source = add(alice, roots["docs"], name="docs")
    assert pipeline.scan_source(source).status == ScanRecord.Status.OK
    return source


def test_a_root_removed_later_stops_scans_and_the_page_says_why(
    alice_client, docs_source, roots, settings
):
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(roots["outside"])]
    record = pipeline.scan_source(docs_source)
    assert record.status == ScanRecord.Status.FAILED
    assert record.error == folders.folder_not_allowed_message()
    assert str(roots["outside"]) in record.error
    assert record.items_pruned == 0
    assert SourceItem.objects.filter(source=docs_source, document__deleted_at=None).count() == 1

    page = alice_client.get(reverse("externals:source", args=[docs_source.pk])).content.decode()
    assert "scan-refusal" in page and "Stopped: This folder cannot be mirrored" in page

    scans = docs_source.scans.count()
    response = alice_client.post(reverse("externals:scan-now", args=[docs_source.pk]))
    assert response.status_code == 302
    docs_source.refresh_from_db()
    assert docs_source.scans.count() == scans and docs_source.refresh_queued_at is None
    followed = alice_client.get(response["Location"]).content.decode()
    assert "cannot be scanned now" in followed


def test_the_api_refresh_refuses_a_folder_no_longer_allowed(alice, docs_source, roots, settings):
    ApiToken.objects.create(user=alice, name="t", digest=token_digest(RAW_TOKEN))
    headers = {"Authorization": f"Bearer {RAW_TOKEN}"}
    url = f"/api/sources/{docs_source.pk}/refresh"
    settings.LODE_SOURCE_FOLDER_ROOTS = []
    response = Client().post(url, headers=headers)
    assert response.status_code == 409
    assert "mirrors no server folders" in response.json()["detail"]
    docs_source.refresh_from_db()
    assert docs_source.refresh_queued_at is None
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(roots["allowed"])]
    assert Client().post(url, headers=headers).status_code == 202


def test_reconcile_reports_the_refused_scan(docs_source, settings):
    settings.LODE_SOURCE_FOLDER_ROOTS = []
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError):
        call_command("lode_sources", "reconcile", stdout=out, stderr=err)
    assert f"{docs_source.pk} docs: failed" in out.getvalue()
    assert "mirrors no server folders" in out.getvalue()


def test_a_source_on_the_data_folder_from_before_the_rule_never_scans_it(
    alice, bobs_upload, roots, data_dir, settings
):
    """A row made before the rule (or by hand) on lode's data folder or a folder holding
    it: the scan refuses, so neither the uploads of a space alice is not in nor anything
    else in the data folder becomes hers."""
    superuser(alice)
    allow_the_folder_holding_data(settings, roots)
    for n, location in enumerate([data_dir / "uploads", data_dir, data_dir.parent]):
        source = Source.objects.create(
            owner=alice, name=f"old{n}", kind=Source.Kind.FOLDER, location=str(location)
        )
        record = pipeline.scan_source(source)
        assert record.status == ScanRecord.Status.FAILED, location
        assert "lode never mirrors its own data or code" in record.error
        assert record.items_seen == 0
        assert not SourceItem.objects.filter(source=source).exists()


# --- the setting, at start-up --------------------------------------------------------------


def test_folder_roots_setting_is_checked_at_start_up(monkeypatch, tmp_path):
    data, project = tmp_path / "data", tmp_path / "code"
    own = {"the data folder": data, "the project folder": project}
    monkeypatch.delenv("LODE_SOURCE_FOLDER_ROOTS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert env.folder_roots("LODE_SOURCE_FOLDER_ROOTS", "~/lode-imports", lode_folders=own) == [
        str(tmp_path / "home" / "lode-imports")
    ]
    assert not (tmp_path / "home").exists()  # the default root is named, not created
    monkeypatch.setenv("LODE_SOURCE_FOLDER_ROOTS", "")
    assert env.folder_roots("LODE_SOURCE_FOLDER_ROOTS", "~/x", lode_folders=own) == []
    monkeypatch.setenv("LODE_SOURCE_FOLDER_ROOTS", f"{tmp_path / 'a'}, {tmp_path / 'b'}/")
    assert env.folder_roots("LODE_SOURCE_FOLDER_ROOTS", "~/x", lode_folders=own) == [
        str(tmp_path / "a"),
        str(tmp_path / "b"),
    ]
    for bad, words in [
        ("docs", "is not an absolute path"),
        (str(data / "uploads"), "is inside the data folder"),
        (str(project), "is inside the project folder"),
        (f"{tmp_path / 'a'}/../code/x", "is inside the project folder"),
    ]:
        monkeypatch.setenv("LODE_SOURCE_FOLDER_ROOTS", bad)
        with pytest.raises(ImproperlyConfigured, match=words):
            env.folder_roots("LODE_SOURCE_FOLDER_ROOTS", "~/x", lode_folders=own)
