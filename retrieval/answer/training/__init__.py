"""Fitting and training for the answer layer's learned parts: the relevance scorer
(`fit_relevance`) and the offline entailment model (`prepare_entailment`, `train_entailment`)."""
