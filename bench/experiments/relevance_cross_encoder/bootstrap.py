"""Paired bootstrap (over fresh2 asks) of the claim-level AUC difference vs the current scorer.
venv/bin/python bootstrap.py NAME=scores.jsonl ...   (measurement only)"""

import sys

import numpy as np

sys.path.insert(0, "/work/exp12")
from analyze import auc, load

ce = dict(a.split("=", 1) for a in sys.argv[1:])
recs = [r for r in load("/work/exp12/claims.jsonl", ce) if r["split"] == "fresh2"]
rng = np.random.default_rng(0)


def A(rs, n):
    cl = [c for r in rs for c in r["claims"]]
    return auc([c["s"][n] for c in cl if c["label"]], [c["s"][n] for c in cl if not c["label"]])


for name in ce:
    d = []
    for _ in range(2000):
        rs = [recs[i] for i in rng.integers(0, len(recs), len(recs))]
        d.append(A(rs, name) - A(rs, "current"))
    d = np.array(d)
    print(
        f"{name}: AUC {A(recs, name):.3f} vs current {A(recs, 'current'):.3f}; diff 95% CI [{np.quantile(d, 0.025):+.3f}, {np.quantile(d, 0.975):+.3f}]"
    )
