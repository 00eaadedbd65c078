"""Folder sources must not reveal the server's disk to non-staff accounts. Answers such as
"No folder exists at …", "… is a file, not a folder" or "The server cannot read the folder …"
given before checking whether the account may mirror that path at all would let any user
probe what exists anywhere on the server, so every reason gets one message for non-staff
accounts — from the page, the service and a
scan alike — while staff still hear exactly what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from externals import folders, pipeline, services
from externals.models import ScanRecord, Source

pytestmark = pytest.mark.django_db


@pytest.fixture
def disk(tmp_path, settings) -> dict[str, Path]:
    """An allowed root holding a good folder, a file, a link and a missing name; and
    folders and files outside it."""
    allowed = tmp_path / "allowed"
    outside = tmp_path / "outside"
    (allowed / "docs").mkdir(parents=True)
    (allowed / "docs" / "a.md").write_text("# A\n\nAardvarks dig.\n")
    (allowed / "file.md").write_text("a file, not a folder")
    (allowed / "private").mkdir()
    (outside / "secret-project").mkdir(parents=True)
    (outside / "passwords.txt").write_text("hunter2")
    (allowed / "link").symlink_to(allowed / "docs", target_is_directory=True)
    settings.LODE_SOURCE_FOLDER_ROOTS = [str(allowed)]
    return {
        "good": allowed / "docs",
        "inside, missing": allowed / "nothing-here",
        "inside, a file": allowed / "file.md",
        "inside, a link": allowed / "link",
        "inside, unreadable": allowed / "private",
        "outside, exists": outside / "secret-project",
        "outside, a file": outside / "passwords.txt",
        "outside, missing": outside / "no-such-thing",
        "system folder": Path("/etc"),
    }


@pytest.fixture
def unreadable(disk, monkeypatch) -> None:
    """`inside, unreadable` cannot be read by the server (tests run as root, where a chmod
    would not stop it, so the permission check itself answers no for that folder)."""
    import os

    real_access = os.access
    private = str(disk["inside, unreadable"])
    monkeypatch.setattr(
        os, "access", lambda path, mode: str(path) != private and real_access(path, mode)
    )


REFUSALS = [
    "inside, missing",
    "inside, a file",
    "inside, a link",
    "inside, unreadable",
    "outside, exists",
    "outside, a file",
    "outside, missing",
    "system folder",
]


def form_post(client, location: Path, name: str):
    data = {
        "folder-name": name,
        "folder-trust_tier": "external",
        "folder-stale_after_days": "30",
        "folder-location": str(location),
    }
    return client.post(reverse("externals:source-add", args=["folder"]), data)


def form_errors(response) -> str:
    """The form's error list, the only part of the page that depends on the location."""
    page = response.content.decode()
    start = page.index('<ul class="errorlist')
    return page[start : page.index("</ul>", start)]


def test_the_page_gives_non_staff_one_message_for_every_refusal(alice_client, disk, unreadable):
    answers = {}
    for n, case in enumerate(REFUSALS):
        response = form_post(alice_client, disk[case], f"m{n}")
        assert response.status_code == 400, case
        answers[case] = form_errors(response)
    assert len(set(answers.values())) == 1, answers
    only = next(iter(answers.values()))
    assert "can be mirrored only from inside" in only
    for word in ("No folder", "is a file", "cannot read", "symbolic", "secret-project", "/etc"):
        assert word not in only
    assert not Source.objects.exists()
    assert form_post(alice_client, disk["good"], "ok").status_code == 302


def test_the_service_gives_non_staff_one_message_for_every_refusal(alice, disk, unreadable):
    messages = set()
    for n, case in enumerate(REFUSALS):
        with pytest.raises(ValidationError) as refused:
            services.source_create(
                owner=alice, name=f"s{n}", kind="folder", location=str(disk[case])
            )
        messages.add(tuple(refused.value.messages))
    assert messages == {(folders.folder_not_allowed_message(),)}


def test_without_roots_nobody_may_mirror_a_folder(alice, disk, settings):
    settings.LODE_SOURCE_FOLDER_ROOTS = []
    alice.is_staff = alice.is_superuser = True
    for case in ("good", "outside, missing", "system folder"):
        assert folders.folder_refusal(alice, str(disk[case])) == (
            "This server mirrors no server folders: its operator has not set any folder "
            "roots (LODE_SOURCE_FOLDER_ROOTS)."
        )


def test_staff_get_precise_reasons_inside_the_roots_and_the_roots_outside(alice, disk, unreadable):
    alice.is_staff = True
    expected = {
        "inside, missing": "No folder exists at",
        "inside, a file": "is a file, not a folder",
        "inside, a link": "is a symbolic link",
        "inside, unreadable": "cannot read the folder",
    }
    for case, words in expected.items():
        assert words in folders.folder_refusal(alice, str(disk[case])), case
    for case in ("outside, exists", "outside, missing", "outside, a file", "system folder"):
        assert folders.folder_refusal(alice, str(disk[case])) == (
            folders.folder_not_allowed_message()
        ), case
    assert folders.folder_refusal(alice, str(disk["good"])) == ""
    assert folders.folder_refusal(alice, "relative/path").startswith("Give an absolute path")


def test_a_scan_of_a_vanished_folder_says_not_allowed_to_non_staff(alice, disk, monkeypatch):
    monkeypatch.setattr(pipeline, "embedding_problem", lambda: "")
    source = services.source_create(
        owner=alice, name="docs", kind="folder", location=str(disk["good"])
    )
    assert pipeline.scan_source(source).status == ScanRecord.Status.OK
    (disk["good"] / "a.md").unlink()
    disk["good"].rmdir()
    record = pipeline.scan_source(source)
    assert record.status == ScanRecord.Status.FAILED
    assert record.error == folders.folder_not_allowed_message()
    assert record.items_pruned == 0
