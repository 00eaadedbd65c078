"""The planner: before retrieval, a `RetrievalPlan` from the question and what its asker may
see (docs/planner.md)."""
