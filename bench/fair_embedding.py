"""How long another space's new note waits for meaning search while one user imports a lot.

    .venv/bin/python bench/fair_embedding.py                        # this checkout
    .venv/bin/python bench/fair_embedding.py --root /tmp/wt-old     # an older checkout

Everything runs as it does for a user, in processes of its own against a fresh SQLite data
folder: migrate, two accounts (alice, bob), a real `manage.py db_worker`. alice then saves
`--notes` large notes (`--passages` passages in all, each note queueing its embedding task
as a save from the notes page does); every `--spacing` seconds after that bob saves a
one-paragraph note in his own space, `--probes` times. For each of bob's notes the script
reads the SQLite file until the note's passage has its vector record (written right after the
Chroma upsert: from then on the dense leg finds it) and prints how long that took after its
save; then how long the whole backlog took to embed, and the throughput. A final check
searches by meaning as bob and must find his last note.

`--root` runs the worker and every step from another checkout of lode (for instance an
older commit in `git worktree add /tmp/wt-old <commit>`), with this venv, to compare.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lode_site.bootstrap import ASSEMBLE_MODEL  # noqa: E402  (standard library only)

PYTHON = sys.executable
WORDS = (  # noqa: SIM905  (a list of words, written as prose)
    "invoice ledger shipment warehouse pallet customs carrier freight tariff clearance "
    "broker manifest container harbour crane berth vessel draft ballast pilot "
    "tug mooring quay lashing reefer chassis depot yard gate seal "
    "weight audit"
).split()

SETUP = """
from django.contrib.auth import get_user_model
User = get_user_model()
for name in ("alice", "bob"):
    User.objects.create_user(name, password="bench-" + name)
"""

IMPORT = """
import time
from django.contrib.auth import get_user_model
from notes import services
alice = get_user_model().objects.get(username="alice")
words = {words!r}
per_note = {per_note}
for n in range({notes}):
    parts = []
    for i in range(per_note):
        picked = " ".join(words[(i * 7 + k * 3 + n) % len(words)] for k in range(24))
        parts.append(f"## Entry {{n}}.{{i}}\\n\\nEntry {{i}} of batch {{n}}: {{picked}}.")
    services.note_create(owner=alice, title=f"Import {{n}}", body="\\n\\n".join(parts))
print("IMPORTED", time.time())
"""

PROBE = """
import time
from django.contrib.auth import get_user_model
from notes import services
bob = get_user_model().objects.get(username="bob")
note = services.note_create(
    owner=bob,
    title="Sourdough {n}",
    body="Bake the sourdough loaf number {n} at 220 degrees for forty minutes, then cool it.",
)
print("SAVED", note.pk, time.time())
"""

FIND = """
from django.contrib.auth import get_user_model
from retrieval.search.pipeline import search
bob = get_user_model().objects.get(username="bob")
result = search(user=bob, query="baking bread in a hot oven", mode="semantic", rerank="off")
print("FOUND", [hit.passage.document_id for hit in result.hits])
"""


def manage(root: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [PYTHON, "manage.py", *args], cwd=root, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"manage.py {' '.join(args[:2])} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def shell(root: Path, env: dict[str, str], code: str) -> str:
    return manage(root, env, "shell", "--no-imports", "-c", code)


def pending(db: sqlite3.Connection, document_id: int | None = None) -> int:
    """Live head passages (of one document, if given) without a vector record."""
    sql = (
        "SELECT count(*) FROM retrieval_passage p JOIN notes_document d ON d.id = p.document_id "
        "WHERE p.is_head AND d.deleted_at IS NULL AND NOT EXISTS "
        "(SELECT 1 FROM retrieval_passagevector v WHERE v.passage_id = p.id)"
    )
    if document_id is None:
        return db.execute(sql).fetchone()[0]
    return db.execute(sql + " AND p.document_id = ?", (document_id,)).fetchone()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the lode checkout to run")
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--notes", type=int, default=4)
    parser.add_argument("--probes", type=int, default=3)
    parser.add_argument("--spacing", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=1800.0)
    args = parser.parse_args()
    root = args.root.resolve()

    data = Path(tempfile.mkdtemp(prefix="lode-fair-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DEBUG")}
    env.update(
        LODE_DATA_DIR=str(data),
        OPENBLAS_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        DJANGO_SETTINGS_MODULE="lode_site.settings",
    )
    worker = None
    try:
        manage(root, env, "migrate", "--noinput", "-v", "0")
        shell(root, env, ASSEMBLE_MODEL)
        shell(root, env, SETUP)
        log = (data / "worker.log").open("wb")
        worker = subprocess.Popen(
            [PYTHON, "manage.py", "db_worker", "--no-reload"],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        per_note = args.passages // args.notes
        out = shell(root, env, IMPORT.format(words=WORDS, per_note=per_note, notes=args.notes))
        imported = float(out.split("IMPORTED")[1].split()[0])
        db = sqlite3.connect(data / "lode.sqlite3", timeout=30)
        backlog = pending(db)
        print(f"checkout {root}: {backlog} passages pending after the import")

        probes: dict[int, float] = {}
        found: dict[int, float] = {}
        next_probe = imported + args.spacing
        drained = None
        while time.time() - imported < args.timeout:
            if len(probes) < args.probes and time.time() >= next_probe:
                out = shell(root, env, PROBE.format(n=len(probes) + 1))
                pk, saved = out.split("SAVED")[1].split()[:2]
                probes[int(pk)] = float(saved)
                next_probe = time.time() + args.spacing
            for pk, saved in probes.items():
                if pk not in found and pending(db, pk) == 0:
                    found[pk] = time.time()
                    waited = found[pk] - saved
                    print(f"bob's note {pk}: findable by meaning {waited:.1f} s after its save")
            if drained is None and pending(db) == 0:
                drained = time.time()
            if len(found) == args.probes and drained is not None:
                break
            time.sleep(0.2)
        waits = [found[pk] - saved for pk, saved in probes.items() if pk in found]
        missing = len(probes) - len(waits)
        if waits:
            unfound = f" ({missing} not found in {args.timeout:.0f} s)" if missing else ""
            print(f"worst wait of {len(waits)} notes: {max(waits):.1f} s{unfound}")
        if drained is not None:
            seconds = drained - imported
            total = backlog + len(probes)
            print(f"whole backlog embedded in {seconds:.0f} s ({total / seconds:.1f} passages/s)")
        if probes:
            last = max(probes)
            hits = shell(root, env, FIND)
            found_ids = hits.split("FOUND")[1]
            print(f"semantic search as bob finds his last note: {str(last) in found_ids}")
    finally:
        if worker is not None:
            worker.terminate()
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
