"""Score every claim and pool unit of claims.jsonl with a trained cross-encoder (ONE thread).

  OMP_NUM_THREADS=1 /work/exp12/venv/bin/python /work/exp12/score_ce.py \
     --model /work/exp12/models/ce_TH --claims /work/exp12/claims.jsonl --out /work/exp12/scores/ce_TH.jsonl
Writes one line per ask: {qid, split, claims: [logit...], pool: [logit...]} in claims.jsonl order;
prints ms per pair (batch 1 and batched).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

sys.path.insert(0, os.path.dirname(__file__))
from prep import ctx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--claims", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--no-pool", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(a.model)
    model = BertForSequenceClassification.from_pretrained(a.model).eval()
    recs = [json.loads(l) for l in open(a.claims, encoding="utf-8")]
    cache = {}
    todo = []
    for r in recs:
        for c in r["claims"] + ([] if a.no_pool else r["pool"]):
            key = (r["question"], ctx(c["candidate"]))
            if key not in cache:
                cache[key] = None
                todo.append(key)
    todo.sort(key=lambda k: len(k[0]) + len(k[1]))
    t0 = time.time()
    with torch.inference_mode():
        for i in range(0, len(todo), 32):
            chunk = todo[i : i + 32]
            e = tok(
                [k[0] for k in chunk],
                [k[1] for k in chunk],
                truncation="only_second",
                max_length=a.max_len,
                padding=True,
                return_tensors="pt",
            )
            out = model(**e).logits[:, 0].tolist()
            for k, v in zip(chunk, out):
                cache[k] = v
        batched = (time.time() - t0) * 1000 / max(1, len(todo))
        t1 = time.time()
        sample = todo[:: max(1, len(todo) // 200)]
        for k in sample:
            e = tok(
                [k[0]], [k[1]], truncation="only_second", max_length=a.max_len, return_tensors="pt"
            )
            model(**e)
        single = (time.time() - t1) * 1000 / len(sample)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        for r in recs:
            fh.write(
                json.dumps(
                    {
                        "qid": r["qid"],
                        "split": r["split"],
                        "claims": [
                            cache[(r["question"], ctx(c["candidate"]))] for c in r["claims"]
                        ],
                        "pool": []
                        if a.no_pool
                        else [cache[(r["question"], ctx(c["candidate"]))] for c in r["pool"]],
                    }
                )
                + "\n"
            )
    print(
        f"{len(todo)} distinct pairs; {batched:.1f} ms/pair batched(32), {single:.1f} ms/pair one at a time (1 thread)"
    )


if __name__ == "__main__":
    main()
