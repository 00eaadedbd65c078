"""Assemble out-of-fold cross-encoder scores: each seen split scored by the model trained
without it; fresh2 by the mean logit of the three models (none saw fresh2).

  python3 crossfit.py --out scores/ce_cf.jsonl tune=scores/ce_HF.jsonl holdout=scores/ce_TF.jsonl \
      fresh=scores/ce_TH.jsonl
"""

import argparse
import json

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("parts", nargs="+")
ap.add_argument(
    "--standardize",
    action="store_true",
    help="z-score each model's logits by its mean/sd over the claims of the seen splits (no labels)",
)
a = ap.parse_args()
files = {k: [json.loads(l) for l in open(v)] for k, v in (p.split("=", 1) for p in a.parts)}
if a.standardize:
    import statistics

    for k, f in files.items():
        vals = [v for r in f if r["split"] != "fresh2" for v in r["claims"]]
        mu, sd = statistics.fmean(vals), statistics.pstdev(vals)
        print(f"{k}: model mean {mu:.3f} sd {sd:.3f}")
        for r in f:
            r["claims"] = [(v - mu) / sd for v in r["claims"]]
            r["pool"] = [(v - mu) / sd for v in r["pool"]]
n = len(next(iter(files.values())))
with open(a.out, "w") as fh:
    for i in range(n):
        rows = {k: f[i] for k, f in files.items()}
        split = next(iter(rows.values()))["split"]
        if split in rows:
            r = rows[split]
        else:
            assert split == "fresh2"
            any_ = next(iter(rows.values()))
            r = {
                **any_,
                "claims": [sum(v) / len(v) for v in zip(*[x["claims"] for x in rows.values()])],
                "pool": [sum(v) / len(v) for v in zip(*[x["pool"] for x in rows.values()])],
            }
        fh.write(json.dumps(r) + "\n")
print("wrote", a.out)
