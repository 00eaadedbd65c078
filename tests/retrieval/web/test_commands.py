"""The data-loading commands and the evaluation command, on small folders and a mini BEIR set."""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from notes import services
from notes.models import Document, Version
from retrieval.index.passages import passages_for_version
from retrieval.models import Passage
from retrieval.search import evaluation
from retrieval.search.pipeline import search
from tests import factories

FIXTURE = Path(__file__).parents[2] / "fixtures" / "beir-mini"
FIXTURE_DOCS = 20
PASSAGE_FIELDS = factories.PASSAGE_FIELDS

pytestmark = pytest.mark.django_db


def run(name: str, *args: str, **options: object) -> tuple[str, str]:
    """call_command with captured stdout/stderr and no progress bar."""
    out, err = StringIO(), StringIO()
    call_command(name, *args, no_progress=True, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def summary_counts(out: str) -> dict[str, int]:
    """created/updated/unchanged/skipped from the summary line."""
    line = [ln for ln in out.splitlines() if ln.startswith("created ")][-1]
    counts = {}
    for part in line.split(" in ")[0].split(", "):
        word, number = part.split(" ")
        counts[word] = int(number)
    return counts


# --- lode_import_markdown --------------------------------------------------------------------


@pytest.fixture
def notes_dir(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "projects" / "deep").mkdir(parents=True)
    (root / "alpha.md").write_text(
        "```sh\n# not a title\n```\n\n# Alpha **plan**\n\nBody of alpha with #ops tag.\n",
        encoding="utf-8",
    )
    (root / "projects" / "beta.md").write_text("No heading here, just beta words.\n")
    (root / "projects" / "deep" / "gamma.MD").write_text("# Gamma\r\n\r\nGamma text.\r\n")
    (root / "projects" / "readme.txt").write_text("# Not markdown\n")
    (root / "latin1.md").write_bytes("# Caf\u00e9\n\nna\u00efve".encode("latin-1"))
    (root / "nul.md").write_bytes(b"# Nul\n\nbefore\x00after\n")
    return root


def test_import_markdown_creates_notes_and_skips_bad_files(notes_dir):
    out, err = run("lode_import_markdown", str(notes_dir), user="alice")

    assert summary_counts(out) == {"created": 3, "updated": 0, "unchanged": 0, "skipped": 2}
    assert "notes/s" in out and "passages written" in out
    assert "skipped latin1.md: not valid UTF-8" in err
    assert "skipped nul.md: contains NUL bytes" in err

    alice = User.objects.get(username="alice")
    notes = {d.external_key: d for d in Document.objects.filter(owner=alice)}
    assert set(notes) == {"alpha.md", "projects/beta.md", "projects/deep/gamma.MD"}
    # Title: the first level-1 heading (markup stripped, code fences ignored), else the stem.
    assert notes["alpha.md"].title == "Alpha plan"
    assert notes["projects/beta.md"].title == "beta"
    assert notes["projects/deep/gamma.MD"].title == "Gamma"
    # Bodies are stored as read, CRLF included, and indexed.
    assert notes["projects/deep/gamma.MD"].head.body == "# Gamma\r\n\r\nGamma text.\r\n"
    assert Passage.objects.filter(document__owner=alice, is_head=True).exists()
    assert [t.name for t in notes["alpha.md"].tags.all()] == ["ops"]
    hits = search(user=alice, query="beta words").hits
    assert hits and hits[0].passage.document == notes["projects/beta.md"]


def test_import_markdown_rerun_is_idempotent_and_a_change_makes_one_version(notes_dir):
    run("lode_import_markdown", str(notes_dir), user="alice")
    versions_before = Version.objects.count()

    out, _ = run("lode_import_markdown", str(notes_dir), user="alice")
    assert summary_counts(out) == {"created": 0, "updated": 0, "unchanged": 3, "skipped": 2}
    assert Version.objects.count() == versions_before
    assert Document.objects.count() == 3

    (notes_dir / "projects" / "beta.md").write_text("Beta rewritten with zeppelin.\n")
    out, _ = run("lode_import_markdown", str(notes_dir), user="alice")
    assert summary_counts(out) == {"created": 0, "updated": 1, "unchanged": 2, "skipped": 2}
    assert Version.objects.count() == versions_before + 1
    beta = Document.objects.get(external_key="projects/beta.md")
    assert beta.head.number == 2
    assert beta.versions.count() == 2
    alice = User.objects.get(username="alice")
    assert search(user=alice, query="zeppelin").hits[0].passage.version == beta.head
    # The old version's passages left the index (only head versions are searchable).
    assert not Passage.objects.filter(document=beta, is_head=True).exclude(version=beta.head)


def test_import_markdown_skips_files_over_the_size_limit(notes_dir, settings):
    settings.LODE_MAX_NOTE_BYTES = 1024
    (notes_dir / "big.md").write_text("# Big\n\n" + "word " * 400)
    out, err = run("lode_import_markdown", str(notes_dir))
    assert summary_counts(out)["created"] == 3
    assert "skipped big.md:" in err and "over the 1,024-byte note limit" in err


def test_import_markdown_default_user_is_eval_with_unusable_password(notes_dir):
    run("lode_import_markdown", str(notes_dir))
    user = User.objects.get(username="eval")
    assert not user.has_usable_password()
    assert Document.objects.filter(owner=user).count() == 3


def test_import_markdown_requires_a_folder(tmp_path):
    with pytest.raises(CommandError, match="not a folder"):
        run("lode_import_markdown", str(tmp_path / "missing"))


# --- lode_load_beir --------------------------------------------------------------------------


def test_load_beir_loads_one_note_per_document(alice):
    out, err = run("lode_load_beir", str(FIXTURE), user="alice")
    assert summary_counts(out) == {
        "created": FIXTURE_DOCS,
        "updated": 0,
        "unchanged": 0,
        "skipped": 0,
    }
    assert "passages/s" in out and err == ""

    docs = {d.external_key: d for d in Document.objects.filter(owner=alice)}
    assert len(docs) == FIXTURE_DOCS
    d01 = docs["beir:d01"]
    assert d01.title == "Vitamin D supplementation and bone fracture risk in elderly women"
    assert d01.head.body.startswith(f"# {d01.title}\n\nA randomized trial")
    assert d01.head.number == 1 and d01.head.created_by == alice
    # An empty title falls back to the _id; the body is then the text alone.
    assert docs["beir:d08"].title == "d08"
    assert docs["beir:d08"].head.body.startswith("Untitled abstract")
    # A long abstract is chunked into several passages.
    assert Passage.objects.filter(document=docs["beir:d20"], is_head=True).count() > 1


def test_load_beir_passages_match_the_note_page_path(alice, bob):
    """The bulk path writes exactly the passages `services.note_create` would."""
    run("lode_load_beir", str(FIXTURE), user="alice")
    for key in ("beir:d01", "beir:d08", "beir:d20"):
        bulk = Document.objects.get(owner=alice, external_key=key)
        page = services.note_create(owner=bob, title=bulk.title, body=bulk.head.body)
        assert page.head.sha256 == bulk.head.sha256
        bulk_rows = list(Passage.objects.filter(version=bulk.head).values_list(*PASSAGE_FIELDS))
        page_rows = list(Passage.objects.filter(version=page.head).values_list(*PASSAGE_FIELDS))
        assert bulk_rows == page_rows
        assert len(bulk_rows) == len(passages_for_version(bulk.head, is_head=True))


def test_load_beir_rerun_is_idempotent_and_a_changed_record_gets_a_version(alice, tmp_path):
    run("lode_load_beir", str(FIXTURE), user="alice")
    versions = Version.objects.count()
    passages = Passage.objects.count()

    out, _ = run("lode_load_beir", str(FIXTURE), user="alice")
    assert summary_counts(out)["unchanged"] == FIXTURE_DOCS
    assert (Version.objects.count(), Passage.objects.count()) == (versions, passages)

    changed = tmp_path / "beir"
    shutil.copytree(FIXTURE, changed)
    lines = (changed / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    row["text"] = "Decaffeinated coffee had no effect on liver cirrhosis."
    lines[1] = json.dumps(row)
    (changed / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    out, _ = run("lode_load_beir", str(changed), user="alice")
    assert summary_counts(out) == {
        "created": 0,
        "updated": 1,
        "unchanged": FIXTURE_DOCS - 1,
        "skipped": 0,
    }
    assert Version.objects.count() == versions + 1
    d02 = Document.objects.get(owner=alice, external_key="beir:d02")
    assert d02.head.number == 2
    assert [h.passage.document_id for h in search(user=alice, query="decaffeinated").hits] == [
        d02.pk
    ]


def test_load_beir_limit_and_bad_lines(alice, tmp_path):
    run("lode_load_beir", str(FIXTURE), user="alice", limit=5)
    assert Document.objects.filter(owner=alice).count() == 5

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "corpus.jsonl").write_text(
        '{"_id": "ok", "title": "Fine", "text": "fine text"}\n'
        "not json\n"
        '{"_id": "nul", "title": "Nul", "text": "a\\u0000b"}\n'
        '{"_id": "ok", "title": "Again", "text": "duplicate id"}\n',
        encoding="utf-8",
    )
    out, err = run("lode_load_beir", str(broken), user="bob")
    assert summary_counts(out) == {"created": 1, "updated": 0, "unchanged": 0, "skipped": 3}
    assert "skipped line 2: not a BEIR corpus record" in err
    assert "skipped beir:nul: Notes cannot contain NUL characters." in err
    assert "skipped beir:ok: duplicate _id in the corpus" in err


def test_load_beir_requires_a_corpus(tmp_path):
    with pytest.raises(CommandError, match=r"corpus\.jsonl does not exist"):
        run("lode_load_beir", str(tmp_path))


# --- lode_eval --------------------------------------------------------------------------------


def eval_args(tmp_path: Path) -> list[str]:
    return [
        "--corpus-dir",
        str(FIXTURE),
        "--queries",
        str(FIXTURE / "queries.jsonl"),
        "--qrels",
        str(FIXTURE / "qrels" / "test.tsv"),
        "--json",
        str(tmp_path / "report.json"),
    ]


def test_lode_eval_end_to_end_writes_the_report(tmp_path):
    out, _ = run("lode_eval", *eval_args(tmp_path), "--mode", "lexical")

    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report) == {"ndcg@10", "recall@100", "mrr@10", "latency_ms", "queries", "mode"}
    assert set(report["latency_ms"]) == {"p50", "p95"}
    assert report["mode"] == "lexical"
    assert report["queries"] == 10  # q99 has no judgements
    assert report["ndcg@10"] > 0.5
    assert 0 < report["mrr@10"] <= 1 and 0 < report["recall@100"] <= 1
    for label in ("nDCG@10", "Recall@100", "MRR@10", "p50", "p95", "10 queries"):
        assert label in out
    # The corpus was loaded for the default user first.
    assert Document.objects.filter(owner__username="eval").count() == FIXTURE_DOCS


def test_lode_eval_does_not_reload_and_honours_limit_queries(tmp_path):
    run("lode_eval", *eval_args(tmp_path))
    versions = Version.objects.count()
    out, _ = run("lode_eval", *eval_args(tmp_path), "--limit-queries", "3")
    assert Version.objects.count() == versions
    assert json.loads((tmp_path / "report.json").read_text())["queries"] == 3
    assert "created" not in out  # no loader summary: nothing was loaded


def test_lode_eval_rejects_an_unknown_mode(tmp_path):
    with pytest.raises(CommandError, match="mode"):
        run("lode_eval", *eval_args(tmp_path), "--mode", "telepathy")
    # call_command keyword options bypass argparse's choices; the command checks itself.
    with pytest.raises(CommandError, match="Unknown mode"):
        run("lode_eval", *eval_args(tmp_path), mode="telepathy")


def test_eval_user_scoping(tmp_path):
    """Documents loaded for one user are invisible to another user's evaluation."""
    run("lode_load_beir", str(FIXTURE), user="xavier")
    xavier = User.objects.get(username="xavier")
    yolanda = User.objects.create_user("yolanda")
    queries = evaluation.load_queries(FIXTURE / "queries.jsonl")
    qrels = evaluation.load_qrels(FIXTURE / "qrels" / "test.tsv")

    own = evaluation.evaluate(xavier, queries, qrels, "lexical")
    other = evaluation.evaluate(yolanda, queries, qrels, "lexical")
    assert own.ndcg_at_10 > 0.5
    assert other.queries == own.queries == 10
    assert other.ndcg_at_10 == other.recall_at_100 == other.mrr_at_10 == 0.0
    assert all(run_ == [] for run_ in other.runs.values())

    # lode_eval for yolanda loads her own copy rather than reading xavier's.
    run("lode_eval", *eval_args(tmp_path), "--user", "yolanda")
    assert Document.objects.filter(owner=yolanda).count() == FIXTURE_DOCS
    assert Document.objects.filter(owner=xavier).count() == FIXTURE_DOCS
    assert json.loads((tmp_path / "report.json").read_text())["ndcg@10"] > 0.5
