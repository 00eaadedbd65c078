"""Page weight and server time of the search, answer and note pages.

Same temporary lode and content as `bench/axe_pages.py` (`bench/_live.py`). Each page is
requested `--loads` times (default 50) through Django's test Client, signed in, after one
unmeasured warm-up load (the first hybrid search loads the embedding model). "Server time"
is the wall time of the whole request inside the process: middleware, views, queries,
template rendering; no network and no browser. Size is the bytes of the HTML body, raw and
gzipped (what a compressing proxy would send). The stylesheets and scripts the pages link to
are counted once, from the static files Django finds, raw and gzipped.

    .venv/bin/python bench/page_weight.py [--loads 50]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import time
from pathlib import Path

from _live import build_content, cleanup

QUESTION = "How do I check the replication lag before a failover?"
ASSET = re.compile(r'<(?:link[^>]+href|script[^>]+src)="([^"]+\.(?:css|js))"')


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(client, method: str, url: str, loads: int, data: dict | None = None) -> dict:
    call = client.post if method == "POST" else client.get
    warm = call(url, data or {})  # warm-up, not counted
    if warm.status_code not in (200, 302, 303):
        raise SystemExit(f"{method} {url} answered {warm.status_code}; nothing to measure")
    times: list[float] = []
    size = gz = status = 0
    for _ in range(loads):
        started = time.perf_counter()
        response = call(url, data or {})
        times.append((time.perf_counter() - started) * 1000)
        status = response.status_code
        body = response.content
        size, gz = len(body), len(gzip.compress(body))
    return {
        "method": method,
        "url": url,
        "status": status,
        "p50_ms": statistics.median(times),
        "p95_ms": percentile(times, 0.95),
        "html_bytes": size,
        "html_gzip_bytes": gz,
    }


def static_assets(html: str) -> dict[str, tuple[int, int]]:
    """Bytes (raw, gzipped) of each stylesheet and script the page links to."""
    from django.conf import settings
    from django.contrib.staticfiles import finders

    assets: dict[str, tuple[int, int]] = {}
    prefix = "/" + settings.STATIC_URL.lstrip("/")
    for href in ASSET.findall(html):
        name = href.split("?")[0].removeprefix(prefix)
        found = finders.find(name)
        if found:
            data = Path(found).read_bytes()
            assets[name] = (len(data), len(gzip.compress(data)))
    return assets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=50)
    parser.add_argument("--out", default=str(Path(__file__).parent / "out" / "page_weight.json"))
    args = parser.parse_args()

    from django.test import Client

    try:
        content = build_content()
        client = Client()
        client.force_login(content.user)
        asked = client.post("/ask", {"question": QUESTION})
        answer_url = asked.headers.get("Location", "")
        pages = [
            ("search (hybrid)", "GET", "/search?q=failover+replica", None),
            ("search (lexical)", "GET", "/search?q=failover+replica&mode=lexical", None),
            ("search (advanced)", "GET", "/search?q=failover+replica&adv=1", None),
            ("ask (new answer)", "POST", "/ask", {"question": QUESTION}),
            ("stored answer", "GET", answer_url, None),
            ("note detail", "GET", f"/notes/{content.note_id}", None),
        ]
        rows = {name: measure(client, m, url, args.loads, data) for name, m, url, data in pages}
        assets: dict[str, tuple[int, int]] = {}
        for name in ("search (hybrid)", "stored answer", "note detail"):
            html = client.get(rows[name]["url"]).content.decode()
            assets.update(static_assets(html))
    finally:
        cleanup()

    print(f"{args.loads} loads each, signed in, Django test Client (in-process)\n")
    print(f"{'page':<19} {'status':>6} {'p50 ms':>8} {'p95 ms':>8} {'HTML B':>8} {'gzip B':>8}")
    for name, row in rows.items():
        print(
            f"{name:<19} {row['status']:>6} {row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f} "
            f"{row['html_bytes']:>8} {row['html_gzip_bytes']:>8}"
        )
    print("\nstatic assets linked (counted once):")
    for name, (raw, gz) in sorted(assets.items()):
        print(f"  {name:<40} {raw:>8} B  {gz:>7} B gzip")
    total_raw = sum(raw for raw, _ in assets.values())
    total_gz = sum(gz for _, gz in assets.values())
    print(f"  {'total':<40} {total_raw:>8} B  {total_gz:>7} B gzip")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({"loads": args.loads, "pages": rows, "assets": assets}, indent=2)
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
