"""Fallback baseline: frozen all-MiniLM-L6-v2 sentence embeddings (fp32 PyTorch weights, mean
pooled, L2-normalised) of question q and passage text c; features [q*c, |q-c|, cos] into an
L2 logistic regression trained on the same pairs as the cross-encoder. ONE thread.

  OMP_NUM_THREADS=1 /work/exp12/venv/bin/python /work/exp12/frozen_head.py \
     --train /work/exp12/data/train_TH.jsonl --claims /work/exp12/claims.jsonl \
     --out /work/exp12/scores/frozen_TH.jsonl
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

sys.path.insert(0, os.path.dirname(__file__))
from prep import ctx
from train_ce import BASE


def embedder():
    tok = AutoTokenizer.from_pretrained(BASE)
    m = AutoModel.from_pretrained(BASE).eval()
    cache = {}

    def embed(texts):
        todo = sorted({t for t in texts if t not in cache}, key=len)
        with torch.inference_mode():
            for i in range(0, len(todo), 64):
                ch = todo[i : i + 64]
                e = tok(ch, truncation=True, max_length=256, padding=True, return_tensors="pt")
                h = m(**e).last_hidden_state
                msk = e["attention_mask"].unsqueeze(-1).float()
                v = (h * msk).sum(1) / msk.sum(1)
                v = torch.nn.functional.normalize(v, dim=-1)
                for t, x in zip(ch, v.numpy()):
                    cache[t] = x
        return np.stack([cache[t] for t in texts])

    return embed


def feats(embed, qs, bs):
    q, c = embed(qs), embed(bs)
    return np.hstack([q * c, np.abs(q - c), (q * c).sum(1, keepdims=True)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--claims", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--l2", type=float, default=10.0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    embed = embedder()
    pairs = [json.loads(l) for l in open(a.train, encoding="utf-8")]
    t0 = time.time()
    X = feats(embed, [p["q"] for p in pairs], [p["b"] for p in pairs])
    y = np.array([p["y"] for p in pairs], float)
    mu, sd = X.mean(0), X.std(0) + 1e-6
    Z = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
    wpos = min(4.0, (1 - y).sum() / max(y.sum(), 1))
    sw = np.where(y == 1, wpos, 1.0)
    w = np.zeros(Z.shape[1])
    reg = np.r_[np.full(Z.shape[1] - 1, a.l2), 0]
    for _ in range(30):
        p = 1 / (1 + np.exp(-Z @ w))
        g = Z.T @ (sw * (p - y)) + reg * w
        H = (Z * (sw * p * (1 - p))[:, None]).T @ Z + np.diag(reg)
        w -= np.linalg.solve(H, g)
    print(f"fitted on {len(y)} pairs in {time.time() - t0:.0f}s")
    recs = [json.loads(l) for l in open(a.claims, encoding="utf-8")]
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        for r in recs:
            row = {"qid": r["qid"], "split": r["split"]}
            for k in ("claims", "pool"):
                if r[k]:
                    F = feats(
                        embed, [r["question"]] * len(r[k]), [ctx(c["candidate"]) for c in r[k]]
                    )
                    row[k] = (np.hstack([(F - mu) / sd, np.ones((len(F), 1))]) @ w).tolist()
                else:
                    row[k] = []
            fh.write(json.dumps(row) + "\n")
    print(f"wrote {a.out} ({time.time() - t0:.0f}s)")


if __name__ == "__main__":
    main()
