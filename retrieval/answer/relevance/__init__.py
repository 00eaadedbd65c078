"""Relevance: does a claim *answer* the question, not merely quote its source?

A question × claim pair is scored by a fitted logistic regression (`model`, weights in
retrieval/data/relevance.json, fitted by training/fit_relevance.py) over the pair's `features`
(from the question's type, `question`; the claim's answer types, `claim_types`; word rarity,
`rarity`). `scoring` scores pairs for the gate's relevance step and the extractive answerer;
`section_rule` stands beside the score for procedure questions; `egress_floor` decides which
evidence may be sent to a remote model. The figures are bench/README.md's.
"""
