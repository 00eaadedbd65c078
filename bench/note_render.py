"""Note page time and weight for hostile note bodies.

    .venv/bin/python bench/note_render.py [--db sqlite|postgres] [--before] [--bodies A,B]

In a fresh database (see `_common.fresh_environment`; PostgreSQL uses the scratch database
`lode_bench_render`) each body below is saved as a note, then its page `GET /notes/<id>` is
requested through Django's test client three times: **cold** (empty cache: the parts are
cut and the first is rendered), **cached** (the same request again: nothing is rendered)
and **part 2** as htmx's "Show more" asks for it (cold). For each: the body's size, the
number of parts, the milliseconds and the bytes of HTML of each request.

Bodies (all accepted: `LODE_MAX_NOTE_BYTES` is 2,000,000):

* `normal`: a 2 KB note (headings, a list, a link, code) — the control;
* `table 320 KB`: a Markdown table with a link in every row;
* `table line`: `"|x" * 900000`, one 1.8 MB line;
* `wide table`: a 200,000-column table (header, delimiter row, one row);
* `prose 2 MB`: paragraphs of sentences with a URL in each;
* `single word`: one 2,000,000-character word;
* `bare domains`: `"a.co " * 400000` (every 5 characters a link: the densest markup);
* `table bomb`: 13 tables of a 181-column header and 362 one-character rows, 18,888
  characters (markdown-it fills each row with empty cells: 851,786 `<td>` as one part);
* `wide header`: a 3,000-column header and 3,000 one-character rows (18,004 characters);
* `tiny tables`: `"|a|b|\n|-|-|\n\n" * 150000` (the most tables the cut must track).

Each row also gives `cells`: the `<td>`/`<th>` of the first part's page.

`--before` also times the renderer at the last commit (`git show HEAD:notes/rendering.py`,
bleach) on the whole body, as the page did before — minutes for some bodies. Writes
bench/out/note_render.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, fresh_environment, renderer_at

OUT = ROOT / "bench" / "out"


def bodies() -> dict[str, str]:
    """The bodies, by name."""
    rows = ["| name | link | notes |", "|---|---|---|"]
    size = 0
    while size < 320_000:
        row = f"| cell {len(rows)} | https://example.com/{len(rows)} | more text here |"
        rows.append(row)
        size += len(row) + 1
    paragraph = "The quick brown fox jumps over the lazy dog, see https://example.org/fox.\n\n"
    normal = (
        "# Deploy runbook\n\nRotate the staging certs with `certbot renew` before Friday.\n\n"
        '## Steps\n\n- drain the node\n- run `psql -c "SELECT 1"`\n- see https://example.com\n\n'
        "```sh\nkubectl rollout restart deploy/web\n```\n\n"
    ) * 12
    return {
        "normal": normal,
        "table 320 KB": "\n".join(rows) + "\n",
        "table line": "|x" * 900_000,
        "wide table": "|x" * 200_000 + "\n" + "|-" * 200_000 + "\n" + "|y" * 200_000 + "\n",
        "prose 2 MB": (paragraph * (2_000_000 // len(paragraph) + 1))[:2_000_000],
        "single word": "x" * 2_000_000,
        "bare domains": "a.co " * 400_000,
        "table bomb": "\n".join(["|a" * 181 + "|\n" + "|-" * 181 + "|\n" + "a\n" * 362] * 13),
        "wide header": "|a" * 3_000 + "|\n" + "|-" * 3_000 + "|\n" + "a\n" * 3_000,
        "tiny tables": "|a|b|\n|-|-|\n\n" * 150_000,
    }


def timed_get(client, url: str, **kwargs) -> tuple[float, int, int, int]:
    """Milliseconds, bytes, status and table cells (`<td>`/`<th>`) of one GET."""
    started = time.perf_counter()
    response = client.get(url, **kwargs)
    elapsed = (time.perf_counter() - started) * 1000
    cells = response.content.count(b"<td>") + response.content.count(b"<th>")
    return elapsed, len(response.content), response.status_code, cells


def run(before: bool, names: list[str]) -> list[dict]:
    """Runs inside the fresh environment (DATABASE_URL / LODE_DATA_DIR already set)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.cache import cache, caches
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from notes import services
    from notes.rendering import split_parts

    call_command("migrate", verbosity=0)
    user = User.objects.create_user("bench", password="bench")
    client = Client()
    client.force_login(user)
    render_before = renderer_at("HEAD").render_markdown if before else None
    # Warm up (templates, URL resolver, the markdown parser) so "cold" is the note's cost.
    warm = services.note_create(owner=user, title="warm-up", body="*warm* up", tags="")
    client.get(reverse("notes:detail", args=[warm.pk]))
    results = []
    for name, body in bodies().items():
        if names and name not in names:
            continue
        note = services.note_create(owner=user, title=name, body=body, tags="")
        url = reverse("notes:detail", args=[note.pk])
        cache.clear()
        caches["renders"].clear()
        cold_ms, cold_bytes, cold_status, cells = timed_get(client, url)
        cached_ms, cached_bytes, _, _ = timed_get(client, url)
        started = time.perf_counter()
        parts = len(split_parts(body))
        split_ms = (time.perf_counter() - started) * 1000
        row = {
            "body": name,
            "body_chars": len(body),
            "parts": parts,
            "split_ms": round(split_ms, 1),
            "cold_ms": round(cold_ms, 1),
            "cold_html_bytes": cold_bytes,
            "cells": cells,
            "status": cold_status,
            "cached_ms": round(cached_ms, 1),
            "cached_html_bytes": cached_bytes,
        }
        if row["parts"] > 1:
            ms, size, _, _ = timed_get(
                client, url, data={"part": 2}, headers={"HX-Request": "true"}
            )
            row.update(part2_ms=round(ms, 1), part2_html_bytes=size)
        if render_before is not None:
            started = time.perf_counter()
            html = render_before(body)
            row.update(
                before_render_ms=round((time.perf_counter() - started) * 1000, 1),
                before_html_bytes=len(html.encode()),
            )
        results.append(row)
        print(format_row(row), flush=True)
    return results


def format_row(row: dict) -> str:
    text = (
        f"{row['body']:<13} {row['body_chars']:>9} chars {row['parts']:>4} parts "
        f"(cut {row['split_ms']:>5.0f} ms) | "
        f"cold {row['cold_ms']:>7.1f} ms {row['cold_html_bytes']:>8} B {row['cells']:>6} cells | "
        f"cached {row['cached_ms']:>6.1f} ms"
    )
    if "part2_ms" in row:
        text += f" | part 2 {row['part2_ms']:>6.1f} ms {row['part2_html_bytes']:>7} B"
    if "before_render_ms" in row:
        text += f" | before {row['before_render_ms']:>9.1f} ms {row['before_html_bytes']:>9} B"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--before", action="store_true", help="also time the last commit's renderer"
    )
    parser.add_argument(
        "--bodies", default="", help="comma-separated names of the bodies to run (default all)"
    )
    args = parser.parse_args()
    names = [name.strip() for name in args.bodies.split(",") if name.strip()]
    unknown = set(names) - set(bodies())
    if unknown:
        parser.error(f"unknown bodies {sorted(unknown)}; choose from {sorted(bodies())}")
    with fresh_environment(args.db, "lode_bench_render") as env:
        os.environ.pop("DATABASE_URL", None)
        os.environ.update(env)
        # The test client's host; no embedding work queued by the saves.
        os.environ["ALLOWED_HOSTS"] = "testserver"
        os.environ["LODE_TASKS_BACKEND"] = "django.tasks.backends.dummy.DummyBackend"
        results = run(args.before, names)
    OUT.mkdir(exist_ok=True)
    (OUT / "note_render.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"wrote {OUT / 'note_render.json'}")


if __name__ == "__main__":
    main()
