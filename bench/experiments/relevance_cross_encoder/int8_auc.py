"""AUC of the int8 ONNX export of ce_TH_swap (one pair at a time, one thread) vs its torch scores."""

import json
import os
import sys

import numpy as np
import onnxruntime as ort
from transformers import AutoTokenizer

sys.path.insert(0, "/work/exp12")
from analyze import auc
from prep import ctx

m = "/work/exp12/models/ce_TH_swap"
tok = AutoTokenizer.from_pretrained(m)
so = ort.SessionOptions()
so.intra_op_num_threads = 1
so.inter_op_num_threads = 1
recs = [json.loads(l) for l in open("/work/exp12/claims.jsonl")]
ref = {r["qid"]: r for r in map(json.loads, open("/work/exp12/scores/ce_TH_swap.jsonl"))}
for name in ("model.onnx", "model_int8.onnx"):
    s = ort.InferenceSession(os.path.join(m, "onnx", name), so, providers=["CPUExecutionProvider"])
    for split in ("fresh", "fresh2"):
        pos, neg, d = [], [], []
        for r in recs:
            if r["split"] != split:
                continue
            for c, t in zip(r["claims"], ref[r["qid"]]["claims"]):
                e = tok(
                    [r["question"]],
                    [ctx(c["candidate"])],
                    truncation="only_second",
                    max_length=128,
                    return_tensors="np",
                )
                v = float(
                    s.run(
                        None,
                        {
                            k: e[k].astype(np.int64)
                            for k in ("input_ids", "attention_mask", "token_type_ids")
                        },
                    )[0][0, 0]
                )
                (pos if c["label"] else neg).append(v)
                d.append(abs(v - t))
        print(f"{name} {split}: AUC {auc(pos, neg):.3f}, mean |logit - torch| {np.mean(d):.3f}")
