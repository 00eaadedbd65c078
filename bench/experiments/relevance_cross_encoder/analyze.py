"""Figures: per-split AUC (right vs wrong faithful claims) and whole-ask trade-offs.

  /work/exp12/venv/bin/python /work/exp12/analyze.py --claims /work/exp12/claims.jsonl \
      --ce ce_TH=/work/exp12/scores/ce_TH.jsonl --select fresh [--json out.json]

An ask answers when any of its faithful claims passes: shape_ok and (score >= t or section rule).
Thresholds for a new scorer are chosen on --select splits only (never fresh2), two rules:
  net  : max right - 3 x false (the repo's cost rule)
  fa1  : the lowest threshold whose false-answer rate on the selection splits is <= 1%
"""

import argparse
import json
import math

import numpy as np

SPLITS = ("tune", "holdout", "fresh", "fresh2")


def auc(pos, neg):
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    if not len(pos) or not len(neg):
        return float("nan")
    allv = np.concatenate([pos, neg])
    order = allv.argsort(kind="mergesort")
    ranks = np.empty(len(allv))
    ranks[order] = np.arange(1, len(allv) + 1)
    for v in np.unique(allv):  # average ties
        m = allv == v
        ranks[m] = ranks[m].mean()
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def logit(p):
    p = min(max(p, 1e-7), 1 - 1e-7)
    return math.log(p / (1 - p))


def load(claims_path, ce_paths):
    recs = [json.loads(l) for l in open(claims_path, encoding="utf-8")]
    for name, path in ce_paths.items():
        sc = [json.loads(l) for l in open(path)]
        assert [s["qid"] for s in sc] == [r["qid"] for r in recs]
        for r, s in zip(recs, sc):
            for c, v in zip(r["claims"], s["claims"]):
                c.setdefault("s", {})[name] = v
            for c, v in zip(r["pool"], s["pool"]):
                c.setdefault("s", {})[name] = v
    for r in recs:
        for c in r["claims"] + r["pool"]:
            c.setdefault("s", {})["current"] = logit(c["score"])
    return recs


def asks(recs, split, scorer, t, use_section=True):
    """(n_ans, answered, right, n_un, false) for asks of split with score function scorer."""
    na = ans = right = nu = false = 0
    for r in recs:
        if r["split"] != split:
            continue
        passing = [
            c
            for c in r["claims"]
            if c["shape_ok"] and (scorer(c) >= t or (use_section and c["section"]))
        ]
        if r["set"] == "notes_answerable":
            na += 1
            ans += bool(passing)
            right += any(c["label"] for c in passing)
        else:
            nu += 1
            false += bool(passing)
    return na, ans, right, nu, false


def asks_rerank(recs, split, scorer, t):
    """As `asks`, but the answerer's pool re-ranked by `scorer` (shape misfits last, section
    steps first, as rank_by_relevance does) and its top 3 taken as the claims."""
    na = ans = right = nu = false = 0
    for r in recs:
        if r["split"] != split:
            continue
        top = sorted(r["pool"], key=lambda c: (bool(c["shape"]), not c["section"], -scorer(c)))[:3]
        passing = [c for c in top if not c["shape"] and (scorer(c) >= t or c["section"])]
        if r["set"] == "notes_answerable":
            na += 1
            ans += bool(passing)
            right += any(c["label"] for c in passing)
        else:
            nu += 1
            false += bool(passing)
    return na, ans, right, nu, false


def choose(recs, splits, scorer, grid, fn=None):
    rows = []
    for t in grid:
        tot = np.zeros(5)
        for s in splits:
            tot += (fn or asks)(recs, s, scorer, t)
        na, ans, right, nu, false = tot
        rows.append((t, right, false, nu))
    net = max(rows, key=lambda r: (r[1] - 3 * r[2], -r[0]))[0]
    ok = [r for r in rows if r[2] <= 0.01 * r[3]]
    fa1 = min(ok, key=lambda r: r[0])[0] if ok else max(grid)
    return {"net": net, "fa1": fa1}


def curve(recs, scorer, split="fresh2"):
    """{k: max right answers over thresholds with false answers <= k} on split."""
    vals = sorted({scorer(c) for r in recs if r["split"] == split for c in r["claims"]})
    best = {}
    for t in vals + [float("inf")]:
        na, ans, right, nu, false = asks(recs, split, scorer, t)
        for k in (0, 1, 2, 3, 5, 8, 12, 17):
            if false <= k:
                best[k] = max(best.get(k, 0), right)
    return best


def fmt_ask(x):
    na, ans, right, nu, false = x
    return f"false {false}/{nu} ({false / max(nu, 1):.1%}) | answered {ans}/{na}, right {right}/{na} ({right / max(na, 1):.1%})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--claims", required=True)
    ap.add_argument("--ce", action="append", default=[], help="NAME=scores.jsonl (logits)")
    ap.add_argument("--select", default="fresh", help="splits thresholds are chosen on")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    ce = dict(x.split("=", 1) for x in a.ce)
    recs = load(a.claims, ce)
    sel = a.select.split(",")
    assert "fresh2" not in sel
    out = {"auc": {}, "asks": {}}
    names = ["current"] + list(ce)
    print("== AUC, right vs wrong faithful claims (n right / n wrong)")
    for name in names:
        line = []
        for s in SPLITS:
            cl = [c for r in recs if r["split"] == s for c in r["claims"]]
            pos = [c["s"][name] for c in cl if c["label"]]
            neg = [c["s"][name] for c in cl if not c["label"]]
            # near-topic only: right claims vs claims of unanswerable asks
            negu = [
                c["s"][name]
                for r in recs
                if r["split"] == s and r["set"] != "notes_answerable"
                for c in r["claims"]
            ]
            out["auc"].setdefault(name, {})[s] = {
                "all": auc(pos, neg),
                "vs_unanswerable": auc(pos, negu),
                "n_pos": len(pos),
                "n_neg": len(neg),
            }
            line.append(f"{s} {auc(pos, neg):.3f}/{auc(pos, negu):.3f} ({len(pos)}/{len(neg)})")
        print(f"  {name:<12} " + "  ".join(line))
    print("  (each: AUC all wrong / AUC vs claims of unanswerable asks only)")
    print("== whole asks")
    cur = lambda c: c["s"]["current"]
    for s in SPLITS:
        x = asks(recs, s, cur, logit(0.30))
        out["asks"].setdefault("current@0.30", {})[s] = x
        print(f"  current@0.30  {s:<8} {fmt_ask(x)}")
    vals0 = sorted({c["s"]["current"] for r in recs for c in r["claims"]})
    for rule, t in choose(
        recs, sel, cur, np.quantile(vals0, np.linspace(0, 1, 401)).tolist()
    ).items():
        key = f"current[{rule} p={1 / (1 + math.exp(-t)):.3f}]"
        for s_ in SPLITS:
            x = asks(recs, s_, cur, t)
            out["asks"].setdefault(key, {})[s_] = x
            print(f"  {key:<28} {s_:<8} {fmt_ask(x)}")
    curves = {"current": curve(recs, cur)}
    for name in ce:
        sc = lambda c, n=name: c["s"][n]
        curves[name] = curve(recs, sc)
        vals = sorted({c["s"][name] for r in recs for c in r["claims"]})
        grid = np.quantile(vals, np.linspace(0, 1, 401)).tolist()
        th = choose(recs, sel, sc, grid)
        for rule, t in th.items():
            key = f"{name}[{rule} t={t:.3f}]"
            for s in SPLITS:
                x = asks(recs, s, sc, t)
                out["asks"].setdefault(key, {})[s] = x
                print(f"  {key:<28} {s:<8} {fmt_ask(x)}")
        # AND: current >= 0.30 and ce >= t (t chosen on sel)
        gridc = grid
        for rule in ("net", "fa1"):
            both = lambda c, n=name: c["s"][n] if c["s"]["current"] >= logit(0.30) else -1e9
            t = choose(recs, sel, both, gridc)[rule]
            key = f"current@0.30 AND {name}[{rule} t={t:.3f}]"
            for s in SPLITS:
                x = asks(recs, s, both, t)
                out["asks"].setdefault(key, {})[s] = x
                print(f"  {key:<40} {s:<8} {fmt_ask(x)}")
        # stacked: logistic regression on [current logit, ce logit] fitted on sel claims
        X = np.array(
            [
                [c["s"]["current"], c["s"][name]]
                for r in recs
                if r["split"] in sel
                for c in r["claims"]
            ]
        )
        y = np.array([c["label"] for r in recs if r["split"] in sel for c in r["claims"]], float)
        mu, sd = X.mean(0), X.std(0) + 1e-9
        w = np.zeros(3)
        Z = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
        for _ in range(50):  # Newton, L2 1.0
            p = 1 / (1 + np.exp(-Z @ w))
            g = Z.T @ (p - y) + 1.0 * np.r_[w[:2], 0]
            H = (Z * (p * (1 - p))[:, None]).T @ Z + np.diag([1.0, 1.0, 0])
            w -= np.linalg.solve(H, g)
        st = lambda c, n=name: float(
            np.r_[(np.array([c["s"]["current"], c["s"][n]]) - mu) / sd, 1] @ w
        )
        vals2 = sorted({st(c) for r in recs for c in r["claims"]})
        grid2 = np.quantile(vals2, np.linspace(0, 1, 401)).tolist()
        for rule, t in choose(recs, sel, st, grid2).items():
            key = f"stack(current,{name})[{rule}]"
            for s in SPLITS:
                x = asks(recs, s, st, t)
                out["asks"].setdefault(key, {})[s] = x
                print(f"  {key:<40} {s:<8} {fmt_ask(x)}")
        cl = [c for r in recs if r["split"] == "fresh2" for c in r["claims"]]
        a2 = auc([st(c) for c in cl if c["label"]], [st(c) for c in cl if not c["label"]])
        print(f"  stack weights (std) {w.round(3).tolist()}  fresh2 AUC {a2:.3f}")
        out["auc"].setdefault(f"stack(current,{name})", {})["fresh2"] = a2
        curves[f"stack(current,{name})"] = curve(recs, st)
    print(
        "== answerer pool re-ranked by the scorer, top 3 gated (pool units, no faithfulness step)"
    )
    for name in ["current"] + list(ce):
        sc = lambda c, n=name: c["s"][n]
        vals = sorted({sc(c) for r in recs for c in r["pool"]})
        grid = np.quantile(vals, np.linspace(0, 1, 401)).tolist()
        rules = {"0.30": logit(0.30)} if name == "current" else {}
        rules.update(choose(recs, sel, sc, grid, fn=asks_rerank))
        for rule, t in rules.items():
            key = f"rerank {name}[{rule} t={t:.3f}]"
            for s_ in SPLITS:
                x = asks_rerank(recs, s_, sc, t)
                out["asks"].setdefault(key, {})[s_] = x
                print(f"  {key:<40} {s_:<8} {fmt_ask(x)}")
    print(
        "== fresh2 trade-off curve (measured, not an operating point): most right answers at <= k false answers"
    )
    ks = (0, 1, 2, 3, 5, 8, 12, 17)
    print("  " + " " * 30 + "  ".join(f"k={k:<3}" for k in ks))
    for name, cv in curves.items():
        print(f"  {name:<30}" + "  ".join(f"{cv.get(k, 0):<5}" for k in ks))
    out["fresh2_curve"] = curves
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
