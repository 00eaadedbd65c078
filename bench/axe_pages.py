"""axe-core over every page a user reaches.

Starts lode on a temporary data folder (`bench/_live.py`), creates realistic content (notes
with headings, code, a table and tags; a trashed note; a folder source with two files,
scanned; an ask with its answer), signs in through the login form in Debian's chromium
(headless, 1280 px) and runs axe-core 4.12 (`axe-playwright-python`) on each page. Prints
violations by impact (critical/serious/moderate/minor) per page and in total with the rule
ids, and writes bench/out/axe_pages.json (or `--out`).

A page whose content could not be created, or that answers 404 where a page is expected (an
older commit, e.g. run from an archive of it with PYTHONPATH set to that tree), is skipped
and listed as skipped.

    .venv/bin/python bench/axe_pages.py
    PYTHONPATH=/tmp/before13 .venv/bin/python bench/axe_pages.py --out bench/out/axe_before.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections import Counter
from pathlib import Path

from _live import PASSWORD, USERNAME, LiveServer, build_content, cleanup

CHROMIUM = os.environ.get("LODE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 860}
IMPACTS = ("critical", "serious", "moderate", "minor")
QUESTION = "How do I check the replication lag before a failover?"


def audit(page, axe) -> list[dict]:
    """axe's violations on the page as loaded, each reduced to what a fixer needs."""
    page.wait_for_load_state("load")
    found = axe.run(page).response["violations"]
    return [
        {
            "id": v["id"],
            "impact": v.get("impact") or "minor",
            "help": v["help"],
            "nodes": len(v["nodes"]),
            "targets": [", ".join(map(str, n["target"])) for n in v["nodes"][:5]],
            "html": [n["html"][:200] for n in v["nodes"][:2]],
            "summary": v["nodes"][0].get("failureSummary", "") if v["nodes"] else "",
        }
        for v in found
    ]


def edit_conflict(page, content, note_url: str) -> None:
    """Open the edit form, change the note behind its back, then Save: the conflict page."""
    from notes import services
    from notes.models import Document

    page.goto(f"{note_url}/edit")
    document = Document.objects.get(pk=content.note_id)
    services.note_update(
        document=document,
        user=content.user,
        base_version_id=document.head_id,
        title=document.title,
        body=document.head.body + "\nChanged in another tab.\n",
    )
    page.locator("form button[type=submit]", has_text="Save").first.click()
    page.wait_for_load_state("load")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "out" / "axe_pages.json"))
    parser.add_argument(
        "--color-scheme",
        choices=("light", "dark"),
        default="light",
        help="the system setting the browser reports (dark mode follows it)",
    )
    args = parser.parse_args()

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's loop merely exists here
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import sync_playwright

    content = build_content()
    server = LiveServer()
    axe = Axe()
    results: dict[str, dict] = {}
    skipped: dict[str, str] = {name: "content not created" for name in content.skipped}

    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            context = browser.new_context(
                base_url=server.url, viewport=VIEWPORT, color_scheme=args.color_scheme
            )
            context.set_default_timeout(60_000)  # the first hybrid search loads the model
            page = context.new_page()

            def visit(name: str, url: str | None, *, expect_status: int = 200) -> None:
                if url is None:
                    skipped[name] = "its content could not be created on this commit"
                    return
                try:
                    response = page.goto(url)
                except Exception as error:  # an empty error response, e.g. 405
                    skipped[name] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
                    return
                status = response.status if response is not None else 0
                if status != expect_status:
                    skipped[name] = f"HTTP {status} (page missing on this commit?)"
                    return
                results[name] = {"url": url, "violations": audit(page, axe)}

            def visit_current(name: str) -> None:
                results[name] = {"url": page.url, "violations": audit(page, axe)}

            visit("login", "/accounts/login/")
            page.fill("input[name=username]", USERNAME)
            page.fill("input[name=password]", PASSWORD)
            page.locator("form button[type=submit], form input[type=submit]").first.click()
            page.wait_for_load_state("load")

            note, first = content.note_id, content.first_version
            note_url = f"/notes/{note}" if note else None
            visit("search-empty", "/search")
            visit("search-results", "/search?q=failover+replica")
            visit("search-advanced", "/search?q=failover+replica&adv=1")
            visit("search-nothing", "/search?q=kubernetes+helm+chart")
            evidence = page.locator("a.evidence-link")
            page.goto("/search?q=failover+replica&mode=lexical")
            evidence_url = evidence.first.get_attribute("href") if evidence.count() else None
            visit("evidence", evidence_url)
            visit("search-help", "/search/help")

            visit("ask-empty", "/ask")
            page.goto("/ask")
            box = page.locator("form.ask input[name=question], form textarea[name=question]")
            if box.count():
                box.first.fill(QUESTION)
                box.first.press("Enter")
                try:
                    page.wait_for_url(re.compile(r"/ask/\d+$"), timeout=120_000)
                    page.wait_for_load_state("load")
                    visit_current("ask-answer")
                    # An ask with an answer, not a refusal: say which one was audited.
                    results["ask-answer"]["answer_shown"] = bool(
                        page.locator("section.answer").count()
                    )
                    visit("stored-answer", page.url.removeprefix(server.url))
                except Exception as error:  # no permalink on this commit
                    skipped["ask-answer"] = f"no answer page: {type(error).__name__}"
            else:
                skipped["ask-answer"] = "no question box"

            visit("note-list", "/notes/")
            visit("note-new", "/notes/new")
            visit("note-detail", note_url)
            visit("note-edit", note_url and f"{note_url}/edit")
            visit("note-history", note_url and f"{note_url}/history")
            visit("note-version", note_url and first and f"{note_url}/versions/{first}")
            visit("note-compare", note_url and f"{note_url}/compare?a=1&b=2")
            visit("note-delete", note_url and f"{note_url}/delete")
            visit("note-trash", "/notes/trash")
            if note_url:
                edit_conflict(page, content, note_url)
                if page.locator("section.conflict").count():
                    visit_current("note-edit-conflict")
                else:
                    skipped["note-edit-conflict"] = "no conflict section after a stale save"

            source = content.source_id
            visit("sources", "/sources/")
            visit("source-detail", source and f"/sources/{source}/")
            visit("source-edit", source and f"/sources/{source}/edit/")
            visit("source-delete", source and f"/sources/{source}/delete/")
            visit("external-detail", content.external_id and f"/externals/{content.external_id}/")
            visit("not-found", "/notes/999999999", expect_status=404)
            browser.close()
    finally:
        server.stop()
        cleanup()

    report(results, skipped, args.out)


def report(results: dict[str, dict], skipped: dict[str, str], out: str) -> None:
    total: Counter[str] = Counter()
    rules: dict[str, dict] = {}
    print(f"{'page':<20} " + " ".join(f"{i:>8}" for i in IMPACTS) + "  rules")
    for name, result in results.items():
        counts = Counter(v["impact"] for v in result["violations"])
        total.update(counts)
        ids = ", ".join(f"{v['id']}({v['impact'][:3]})" for v in result["violations"])
        print(f"{name:<20} " + " ".join(f"{counts[i]:>8}" for i in IMPACTS) + f"  {ids}")
        for v in result["violations"]:
            rule = rules.setdefault(
                v["id"], {"impact": v["impact"], "help": v["help"], "pages": []}
            )
            rule["pages"].append(name)
    print(f"{'TOTAL':<20} " + " ".join(f"{total[i]:>8}" for i in IMPACTS))
    print(f"\n{len(results)} pages audited; counts are violated rules per page (not nodes)")
    for rule_id, rule in sorted(rules.items(), key=lambda kv: IMPACTS.index(kv[1]["impact"])):
        print(f"  {rule['impact']:<9} {rule_id}: {rule['help']} — {', '.join(rule['pages'])}")
    for name, why in skipped.items():
        print(f"  skipped {name}: {why}")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(
        json.dumps(
            {"pages": results, "total": dict(total), "rules": rules, "skipped": skipped}, indent=2
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
