#!/bin/sh
# Cross-fit folds of the chosen recipe (gold + swap 3 + scifact, 3 epochs), one thread, sequential.
cd /work/exp12
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1
for f in TF_swap HF_swap; do
  venv/bin/python train_ce.py --train data/train_$f.jsonl --out models/ce_$f --epochs 3 --max-minutes 20 > logs/train_ce_$f.log 2>&1 || exit 1
  venv/bin/python score_ce.py --model models/ce_$f --claims claims.jsonl --out scores/ce_$f.jsonl > logs/score_ce_$f.log 2>&1 || exit 1
done
