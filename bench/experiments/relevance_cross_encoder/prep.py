"""Build (question, passage-text, label) pairs for training the cross-encoder.

  python3 /work/exp12/prep.py --claims /work/exp12/claims.jsonl --splits tune,holdout \
      --out /work/exp12/data/train_TH.jsonl [--scifact]

Notes pairs: every faithful claim and every answerer-pool unit of the asks of --splits
(deduplicated per question), label = overlaps the row's answer (fit_relevance_asks' rule).
SciFact pairs (--scifact; SciFact is CC BY-NC): scifact_answerable questions (tune+holdout)
x their abstract's sentences (rationale = 1, up to 5 others = 0), and scifact_unanswerable
questions x up to 5 sentences of their near abstract (word-overlap top) = 0.
fresh2 is refused.
"""

import argparse
import json
import random
import re
from pathlib import Path

Q = Path("/work/main/bench/data/questions")
CORPUS = Path("/work/shared/data/scifact-claims/corpus.jsonl")


def ctx(c):
    head = " > ".join(x for x in (c.get("title", ""), c.get("heading_path", "")) if x)
    return f"{head}: {c['text']}" if head else c["text"]


def words(s):
    return set(re.findall(r"[a-z0-9]+", s.lower()))


NOTES = Path("/work/main/bench/data/notes_corpus")


def heading_path(text, at):
    stack = []
    in_fence = False
    for line in text[:at].splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m and not in_fence:
            lvl = len(m.group(1))
            while stack and stack[-1][0] >= lvl:
                stack.pop()
            stack.append((lvl, m.group(2)))
    return " > ".join(h for lvl, h in stack if lvl > 1)


def gold_pairs(splits):
    files = {
        "tune": ["notes_answerable"],
        "holdout": ["notes_answerable"],
        "fresh": ["notes_fresh_answerable"],
    }
    out = []
    for name in sorted({f for s in splits for f in files[s]}):
        for line in open(Q / f"{name}.jsonl", encoding="utf-8"):
            r = json.loads(line)
            if r["split"] not in splits:
                continue
            path = NOTES / r["file"]
            text = path.read_text(encoding="utf-8")
            title = next(
                (l[2:].strip() for l in text.splitlines() if l.startswith("# ")),
                path.stem.replace("-", " ").replace("_", " "),
            )
            at = text.find(r["answer"])
            c = {
                "text": " ".join(r["answer"].split()),
                "title": title,
                "heading_path": heading_path(text, at),
            }
            out.append(
                {
                    "q": r["question"],
                    "b": ctx(c),
                    "y": 1,
                    "g": r["id"],
                    "src": "gold",
                    "file": r["file"],
                    "ans": c["text"],
                }
            )
    return out


def swap_pairs(gold, n):
    """Near-topic negatives: a question paired with the answer of another question on the same
    file (same vocabulary, a different fact). Skipped when one answer contains the other."""
    rng = random.Random(1)
    by_file = {}
    for p in gold:
        by_file.setdefault(p["file"], []).append(p)
    out = []
    for p in gold:
        others = [
            o
            for o in by_file[p["file"]]
            if o["g"] != p["g"] and o["ans"] not in p["ans"] and p["ans"] not in o["ans"]
        ]
        rng.shuffle(others)
        for o in others[:n]:
            out.append({"q": p["q"], "b": o["b"], "y": 0, "g": p["g"], "src": "swap"})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--claims", required=True)
    ap.add_argument("--splits", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scifact", action="store_true")
    ap.add_argument(
        "--gold",
        action="store_true",
        help="add each answerable row's own answer text as a positive",
    )
    ap.add_argument(
        "--swap",
        type=int,
        default=0,
        help="per answerable row, up to N gold answers of other rows of the same file as negatives",
    )
    a = ap.parse_args()
    splits = set(a.splits.split(","))
    assert "fresh2" not in splits, "fresh2 is the test set"
    pairs = []
    for line in open(a.claims, encoding="utf-8"):
        r = json.loads(line)
        if r["split"] not in splits:
            continue
        seen = {}
        for c in r["claims"] + r["pool"]:
            b = ctx(c["candidate"])
            seen[b] = max(seen.get(b, 0), c["label"])
        for b, y in seen.items():
            pairs.append({"q": r["question"], "b": b, "y": y, "g": r["qid"], "src": "notes"})
    if a.gold or a.swap:
        gold = gold_pairs(splits)
        if a.gold:
            pairs += gold
        if a.swap:
            pairs += swap_pairs(gold, a.swap)
    if a.scifact:
        rng = random.Random(0)
        docs = {}
        for line in open(CORPUS, encoding="utf-8"):
            d = json.loads(line)
            docs[int(d["doc_id"])] = d
        for line in open(Q / "scifact_answerable.jsonl", encoding="utf-8"):
            r = json.loads(line)
            d = docs[r["doc_id"]]
            sents = d["abstract"]
            others = [i for i in range(len(sents)) if i not in r["sentences"]]
            qw = words(r["question"])
            others.sort(key=lambda i: -len(qw & words(sents[i])))
            for i in r["sentences"]:
                pairs.append(
                    {
                        "q": r["question"],
                        "b": f"{d['title']}: {sents[i]}",
                        "y": 1,
                        "g": r["id"],
                        "src": "scifact",
                    }
                )
            for i in others[:5]:
                pairs.append(
                    {
                        "q": r["question"],
                        "b": f"{d['title']}: {sents[i]}",
                        "y": 0,
                        "g": r["id"],
                        "src": "scifact",
                    }
                )
        for line in open(Q / "scifact_unanswerable.jsonl", encoding="utf-8"):
            r = json.loads(line)
            d = docs[r["near_doc_id"]]
            qw = words(r["question"])
            idx = sorted(
                range(len(d["abstract"])), key=lambda i: -len(qw & words(d["abstract"][i]))
            )
            for i in idx[:5]:
                pairs.append(
                    {
                        "q": r["question"],
                        "b": f"{d['title']}: {d['abstract'][i]}",
                        "y": 0,
                        "g": r["id"],
                        "src": "scifact",
                    }
                )
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as fh:
        for p in pairs:
            p.pop("file", None)
            p.pop("ans", None)
            fh.write(json.dumps(p, ensure_ascii=False) + "\n")
    pos = sum(p["y"] for p in pairs)
    print(
        f"{a.out}: {len(pairs)} pairs, {pos} positive, "
        f"notes {sum(p['src'] == 'notes' for p in pairs)}, scifact {sum(p['src'] == 'scifact' for p in pairs)}"
    )


if __name__ == "__main__":
    main()
