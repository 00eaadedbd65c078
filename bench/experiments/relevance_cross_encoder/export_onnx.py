"""Export a trained cross-encoder to ONNX (fp32, then int8 dynamic quantisation), check parity
with torch on padded batches, and time one-pair inference in onnxruntime with ONE thread.

  OMP_NUM_THREADS=1 /work/exp12/venv/bin/python /work/exp12/export_onnx.py --model models/ce_TH
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np
import onnxruntime as ort
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

sys.path.insert(0, os.path.dirname(__file__))
from prep import ctx

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--claims", default="/work/exp12/claims.jsonl")
a = ap.parse_args()
torch.set_num_threads(1)
tok = AutoTokenizer.from_pretrained(a.model)
model = BertForSequenceClassification.from_pretrained(a.model, attn_implementation="eager").eval()
recs = [json.loads(l) for l in open(a.claims)]
pairs = [
    (r["question"], ctx(c["candidate"]))
    for r in recs
    if r["split"] != "fresh2"
    for c in r["claims"]
][:300]
e = tok(
    [p[0] for p in pairs[:8]],
    [p[1] for p in pairs[:8]],
    truncation="only_second",
    max_length=128,
    padding=True,
    return_tensors="pt",
)
out = os.path.join(a.model, "onnx")
os.makedirs(out, exist_ok=True)
fp32 = os.path.join(out, "model.onnx")
torch.onnx.export(
    model,
    (e["input_ids"], e["attention_mask"], e["token_type_ids"]),
    fp32,
    input_names=["input_ids", "attention_mask", "token_type_ids"],
    output_names=["logits"],
    dynamic_axes={k: {0: "b", 1: "t"} for k in ("input_ids", "attention_mask", "token_type_ids")}
    | {"logits": {0: "b"}},
    opset_version=17,
    dynamo=False,
)
from onnxruntime.quantization import QuantType, quantize_dynamic

int8 = os.path.join(out, "model_int8.onnx")
quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8)
so = ort.SessionOptions()
so.intra_op_num_threads = 1
so.inter_op_num_threads = 1
res = {}
with torch.inference_mode():
    ref = [
        model(**tok([q], [b], truncation="only_second", max_length=128, return_tensors="pt"))
        .logits[0, 0]
        .item()
        for q, b in pairs[:100]
    ]
for name, path in (("fp32", fp32), ("int8", int8)):
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def run(batch):
        e = tok(
            [p[0] for p in batch],
            [p[1] for p in batch],
            truncation="only_second",
            max_length=128,
            padding=True,
            return_tensors="np",
        )
        return s.run(
            None,
            {k: e[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")},
        )[0][:, 0]

    padded = run(pairs[:100])
    t = time.time()
    single = [run([p])[0] for p in pairs[:200]]
    ms = (time.time() - t) * 1000 / 200
    t = time.time()
    [run(pairs[i : i + 3]) for i in range(0, 200, 3)]
    ms3 = (time.time() - t) * 1000 / 200
    res[name] = {
        "size_mb": round(os.path.getsize(path) / 1e6, 1),
        "ms_per_pair_single": round(ms, 2),
        "ms_per_pair_batch3": round(ms3, 2),
        "max_abs_diff_vs_torch_padded": float(np.max(np.abs(padded - np.array(ref)))),
        "max_abs_diff_single_vs_padded": float(np.max(np.abs(np.array(single[:100]) - padded))),
    }
with torch.inference_mode():
    t = time.time()
    for q, b in pairs[:100]:
        model(**tok([q], [b], truncation="only_second", max_length=128, return_tensors="pt"))
    res["torch_fp32_ms_per_pair_single"] = round((time.time() - t) * 10, 2)
res["mean_tokens"] = float(
    np.mean(
        [len(tok(q, b, truncation="only_second", max_length=128)["input_ids"]) for q, b in pairs]
    )
)
json.dump(res, open(os.path.join(out, "cost.json"), "w"), indent=1)
print(json.dumps(res, indent=1))
