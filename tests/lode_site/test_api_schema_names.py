"""Two API schemas with one name and different fields collide in the OpenAPI components:
the document then describes one endpoint's responses with the other's fields (a graph
evidence schema named like the evidence endpoint's `EvidenceOut` would replace it)."""

from __future__ import annotations

import importlib
from collections import defaultdict
from pathlib import Path

from ninja import Schema

ROOT = Path(__file__).resolve().parents[2]


def test_no_two_api_schemas_share_a_name_with_different_fields() -> None:
    files = [*ROOT.glob("*/api.py"), *ROOT.glob("retrieval/web/*_api.py")]
    modules = {".".join(path.relative_to(ROOT).with_suffix("").parts) for path in files}
    assert "retrieval.web.graph_api" in modules and "notes.api" in modules
    by_name: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    where: dict[str, set[str]] = defaultdict(set)
    for name in modules:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Schema) and value is not Schema:
                by_name[value.__name__].add(tuple(sorted(value.model_fields)))
                where[value.__name__].add(name)
    clashes = {name: sorted(where[name]) for name, shapes in by_name.items() if len(shapes) > 1}
    assert clashes == {}
