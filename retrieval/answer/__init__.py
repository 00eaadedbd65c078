"""Answering: evidence pack, answerers, the gate, egress, the trace, and `ask`
as the orchestrator."""
