"""Benchmark: the kind and date rules (`retrieval.meta.extract`) on the bench corpora.

    .venv/bin/python bench/meta_kinds.py [--with-path]

The corpora's folders name what their files are (`meetings/`, `runbooks/`, `procedures/`,
`protocols/`, `decisions/`, `design/`, `personal/`); every other folder holds kinds the
rules have no name for (admin, glossary, incidents …), expected as *other*. Each file's kind
is read from its title (first `# ` heading, else its file name) and body, without its path
unless `--with-path` (a folder import gives the rules the path too, and then the folder's name
decides). Prints, per corpus, how many files got their folder's kind, how many got another
named kind (wrong), how many were left *other*, and where the dates came from. No database.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
EXPECTED = {
    "meetings": "meeting",
    "runbooks": "runbook",
    "procedures": "runbook",
    "protocols": "runbook",
    "decisions": "decision",
    "design": "design",
    "personal": "personal",
}


def title_of(path: Path, text: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("-", " ").replace("_", " ")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--with-path", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lode_site.settings")
    import django

    django.setup()
    from retrieval.meta.extract import Kind, date_of, kind_of

    print(f"{'corpus':<16}{'files':>6}{'right':>7}{'wrong':>7}{'other':>7}  dates from")
    for corpus in sorted(DATA.glob("*_corpus")):
        counts: Counter[str] = Counter()
        sources: Counter[str] = Counter()
        for path in sorted(corpus.rglob("*")):
            if path.suffix not in (".md", ".txt"):
                continue
            rel = path.relative_to(corpus)
            text = path.read_text(encoding="utf-8")
            title = title_of(path, text)
            where = rel.as_posix() if args.with_path else ""
            kind, _ = kind_of(title=title, body=text, path=where)
            # ADRs live under design/ in one corpus: a decision record is right there.
            expected = EXPECTED.get(rel.parts[0], Kind.OTHER) if len(rel.parts) > 1 else "other"
            if kind == expected or (expected == Kind.DESIGN and kind == Kind.DECISION):
                counts["right"] += 1
            elif kind == Kind.OTHER:
                counts["other"] += 1
            else:
                counts["wrong"] += 1
            sources[date_of(title=title, body=text, first_version_at=None, path=where).source] += 1
        files = sum(counts.values())
        dated = ", ".join(f"{name} {n}" for name, n in sources.most_common())
        print(
            f"{corpus.name:<16}{files:>6}{counts['right']:>7}{counts['wrong']:>7}"
            f"{counts['other']:>7}  {dated}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
