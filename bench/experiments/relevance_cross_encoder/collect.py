"""Dump every faithful claim (and the extractive answerer's candidate pool) of whole asks over
the notes sets, all four splits, with fit_relevance_asks' labelling and the current scorer's
score. Run under lode's venv:

  cd /work/main && LODE_RELEVANCE_THRESHOLD=0.000001 LODE_DATA_DIR=/work/notes-data \
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
    .venv/bin/python /work/exp12/collect.py --data /work/notes-data --out /work/exp12/claims.jsonl

A claim is right when one of its quotes overlaps the row's `answer` in its file (notes_rows'
rule); every claim of an unanswerable question is wrong. Pool units are labelled the same way
by their sentence range. `shape_ok` = the claim passed the relevance step at the ~0 threshold
(i.e. no answer-shape problem); `section` = the section rule held.
"""

import argparse
import json
import sys
import time

sys.path.insert(0, "/work/main")
from retrieval.answer.training import fit_relevance_asks as fra

p = argparse.ArgumentParser()
p.add_argument("--data", required=True)
p.add_argument("--out", required=True)
p.add_argument("--splits", default="tune,holdout,fresh,fresh2")
args = p.parse_args()
fra.setup_django(args.data)

from django.conf import settings
from notes.models import Document, Version
from retrieval.answer import answerers
from retrieval.answer import ask as ask_module
from retrieval.answer.answer_shape import shape_problem
from retrieval.answer.answerers import ExtractiveAnswerer
from retrieval.answer.relevance import (
    cosine_pairs,
    embedding_cosines,
    features,
    load_model,
    passage_idf,
    question_profile,
    section_answers,
)

assert (settings.LODE_RELEVANCE_THRESHOLD or 1.0) < 1e-3, "set LODE_RELEVANCE_THRESHOLD=0.000001"

Q = fra.QUESTIONS


def fresh_rows(user, split):
    """fresh / fresh2 rows, labelled exactly as fra.notes_rows labels tune/holdout."""
    docs = {}
    for d in Document.objects.filter(owner=user, external_key__startswith="notes:"):
        docs[d.external_key.removeprefix("notes:")] = d
    tag = "fresh" if split == "fresh" else "fresh2"
    rows = []
    for row in fra.read_jsonl(Q / f"notes_{tag}_answerable.jsonl"):
        assert row["split"] == split
        doc = Document.objects.select_related("head").get(pk=docs[row["file"]].pk)
        at = doc.head.body.find(row["answer"])
        answer = (at, at + len(row["answer"])) if at >= 0 else None

        def right(quotes, doc_id=doc.pk, answer=answer):
            return answer is not None and any(
                d == doc_id and s < answer[1] and answer[0] < e for d, s, e in quotes
            )

        r = fra.Row(row["id"], "notes_answerable", split, row["question"], right)
        r.answer = (doc.pk, answer)
        rows.append(r)
    for row in fra.read_jsonl(Q / f"notes_{tag}_unanswerable.jsonl"):
        r = fra.Row(row["id"], "notes_unanswerable", split, row["question"], fra._never)
        r.answer = None
        rows.append(r)
    return rows


def answer_of(row, user):
    if row.set_name != "notes_answerable":
        return None
    src = {r["id"]: r for r in fra.read_jsonl(Q / "notes_answerable.jsonl")}[row.qid]
    doc = Document.objects.select_related("head").get(
        owner=user, external_key=f"notes:{src['file']}"
    )
    at = doc.head.body.find(src["answer"])
    return (doc.pk, (at, at + len(src["answer"])) if at >= 0 else None)


captured, pool_cap = [], []
orig_step = ask_module.relevance_step
orig_rank = answerers.rank_by_relevance
model = load_model()


def capturing(verdicts, *, question, pack, sent_versions, audience, **kw):
    out = orig_step(
        verdicts, question=question, pack=pack, sent_versions=sent_versions, audience=audience, **kw
    )
    idx = [i for i, v in enumerate(verdicts) if v.passed]
    if idx:
        prof = question_profile(question)
        cands = [ask_module.claim_candidate(verdicts[i].claim, pack, sent_versions) for i in idx]
        idf = passage_idf(audience, prof)
        cos = cosine_pairs(cands, lambda texts: embedding_cosines(question, texts))
        x = features(prof, cands, idf, cos)
        scores = model.full.probabilities(x)
        doc_of = dict(
            Version.objects.filter(
                pk__in={s.version_id for i in idx for s in verdicts[i].claim.support}
            ).values_list("pk", "document_id")
        )
        for i, c, xr, sc in zip(idx, cands, x, scores):
            quotes = []
            for s in verdicts[i].claim.support:
                at = sent_versions.get(s.version_id, "").find(s.quoted_span)
                quotes.append((doc_of.get(s.version_id), at, at + len(s.quoted_span)))
            captured.append(
                {
                    "candidate": c.__dict__,
                    "x": xr.tolist(),
                    "score": float(sc),
                    "recorded_score": out[i].relevance_score,
                    "section": bool(section_answers(prof, c)),
                    "shape": shape_problem(question, c, prof),
                    "shape_ok": bool(out[i].passed),
                    "quotes": quotes,
                }
            )
    return out


def ranking(question, pool, *, audience):
    ranked = orig_rank(question, pool, audience=audience)
    from retrieval.answer.relevance import candidate_for

    prof = question_profile(question)
    for p in ranked:
        c = candidate_for(" ".join(p.sentence.text.split()), p.item)
        pool_cap.append(
            {
                "candidate": c.__dict__,
                "score": float(p.relevance),
                "version_id": p.version_id,
                "start": p.sentence.start,
                "end": p.sentence.end,
                "section": bool(section_answers(prof, c)),
                "shape": shape_problem(question, c, prof),
            }
        )
    return ranked


ask_module.relevance_step = capturing
answerers.rank_by_relevance = ranking

from django.core.management import call_command
from retrieval.eligibility import member_space_ids
from retrieval.index.vectors import pending_count

call_command("migrate", verbosity=0)
user = fra.ensure_user("notes")
fra.notes_rows(user, "tune")  # loads the corpus if absent (it is, from the bench run)
if pending_count(member_space_ids(user.pk)):
    call_command("lode_embed_pending", verbosity=0)
with open(args.out, "w", encoding="utf-8") as fh:
    for split in args.splits.split(","):
        rows = (
            fra.notes_rows(user, split) if split in ("tune", "holdout") else fresh_rows(user, split)
        )
        t0 = time.time()
        for row in rows:
            captured.clear()
            pool_cap.clear()
            outcome = ask_module.ask(
                user=user, question=row.question, answerer=ExtractiveAnswerer()
            )
            ans = (
                getattr(row, "answer", None)
                if split not in ("tune", "holdout")
                else answer_of(row, user)
            )
            vdoc = dict(
                Version.objects.filter(pk__in={p["version_id"] for p in pool_cap}).values_list(
                    "pk", "document_id"
                )
            )
            for p in pool_cap:
                d = vdoc.get(p["version_id"])
                p["label"] = int(
                    bool(
                        ans
                        and ans[1]
                        and d == ans[0]
                        and p["start"] < ans[1][1]
                        and ans[1][0] < p["end"]
                    )
                )
            claims = [
                {**c, "label": int(row.right([tuple(q) for q in c["quotes"]]))} for c in captured
            ]
            rec = {
                "qid": row.qid,
                "set": row.set_name,
                "split": split,
                "question": row.question,
                "decision": str(outcome.decision),
                "n_shown": len(outcome.claims),
                "claims": claims,
                "pool": list(pool_cap),
            }
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        print(f"{split}: {len(rows)} asks in {time.time() - t0:.0f}s", file=sys.stderr)
