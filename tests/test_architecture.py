"""The dependency rule of docs/architecture.md, checked on the source.

Every project module belongs to one layer; a module may import from its own layer and the
layers below it, never from a layer above, and no two modules may import each other through
any chain. Imports inside functions count (they are how cycles used to hide); imports under
`if TYPE_CHECKING:` count for the layer rule but not for cycles, because they never run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lode_site", "notes", "externals", "retrieval", "spaces", "training")

# Lowest first. The names are the ones docs/architecture.md uses. `training` (the fitting
# commands, not shipped) sits above the product: it may import any of it, nothing imports it.
LAYERS = ("models", "vocabulary", "index", "documents", "search", "answer", "web", "training")

# Explicit homes; anything not listed falls to the suffix rules in `layer_of`.
EXPLICIT: dict[str, str] = {
    # Foundations: settings, ids, pure helpers that only models-level code needs.
    "lode_site.env": "models",
    "lode_site.settings": "models",
    "lode_site.test_settings": "models",
    "lode_site.ids": "models",
    "lode_site.checks": "models",
    "lode_site.apps": "models",
    "lode_site.throttle": "models",
    "lode_site.staticfiles": "models",
    "notes.rendering": "models",
    "notes.sources": "models",
    "externals.extract": "models",
    "externals.fetch": "models",
    "externals.folders": "models",
    # Spaces: the app's wiring and the personal space every new account gets.
    "spaces.apps": "models",
    "spaces.signals": "models",
    # The session's chosen space (the header's switcher) — read by views only.
    "spaces.current": "web",
    "spaces.context": "web",
    # Public read-only links: re-verifies cited evidence on every opening (search layer).
    "spaces.public": "search",
    "spaces.public_views": "web",
    "spaces.public_manage_views": "web",
    "spaces.admin_public": "web",
    # Shared vocabulary: how every stage reads text, queries, eligibility, trust and links.
    "retrieval.text": "vocabulary",
    "retrieval.words": "vocabulary",
    "retrieval.query": "vocabulary",
    "retrieval.eligibility": "vocabulary",
    "retrieval.highlight": "vocabulary",
    "retrieval.trust": "vocabulary",
    "retrieval.links": "vocabulary",
    # The request type of the views that read `request.htmx`.
    "lode_site.htmx": "web",
    # Settings → Access tokens.
    "lode_site.token_views": "web",
    # How the API reads request bodies (depth limit, objects only).
    "lode_site.api_bodies": "web",
    # An entry point: gunicorn's configuration warms each worker's embedding model.
    "lode_site.gunicorn_conf": "web",
    # The time budget is enforced through the lexical backends' vendor mechanism.
    "lode_site.budget": "index",
    # The fitting and training commands behind the shipped weights (not shipped).
    "training": "training",
    # Writing documents and versions (which indexes them) and mirroring sources.
    "notes.services": "documents",
    "notes.selectors": "documents",
    "externals.annotations": "documents",
    "externals.pipeline": "documents",
    "externals.services": "documents",
    "externals.selectors": "documents",
    "externals.tasks": "documents",
    "externals.webhooks": "documents",
    # Creating spaces, memberships and roles; moving documents between spaces.
    "spaces.services": "documents",
}
WEB_SUFFIXES = (
    "views", "annotation_views", "api", "urls", "admin", "forms", "middleware", "errors", "wsgi",
    "bootstrap",
)  # fmt: skip


def layer_of(module: str) -> str:
    """The layer of a project module (a dotted name), or an error naming what is unplaced."""
    parts = module.split(".")
    for prefix in (".".join(parts[:n]) for n in range(len(parts), 0, -1)):
        if prefix in EXPLICIT:
            return EXPLICIT[prefix]
    if "migrations" in parts:
        return "web"  # entry points like commands: they run the index's vendor DDL
    if parts[-1] == "models":
        return "models"
    if module.startswith("retrieval.") and parts[1] in ("index", "search", "answer", "web"):
        return parts[1]
    if "management" in parts or "templatetags" in parts or parts[-1] in WEB_SUFFIXES:
        return "web"
    if parts[-1] == "__init__" or module in PACKAGES:
        return "models"  # a package's __init__ holds nothing but its docstring
    raise LookupError(f"{module} has no layer: give it one in tests/test_architecture.py")


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    type_only: bool


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            modules[module_name(path)] = path
    return modules


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for inner in ast.walk(child):
                    if hasattr(inner, "lineno"):
                        lines.add(inner.lineno)
    return lines


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import of a project module in `path`, at any depth, resolved to the most
    specific project module it names (`from a.b import c` is `a.b.c` when that is a module)."""
    tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    type_only = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                targets.append(candidate if candidate in modules else base)
        for target in targets:
            if target.split(".")[0] not in PACKAGES:
                continue
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target in modules and target != module:
                found.append(Import(module, target, node.lineno, node.lineno in type_only))
    return found


def all_imports() -> list[Import]:
    modules = project_modules()
    return [i for name, path in modules.items() for i in imports_of(name, path, modules)]


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for name in project_modules():
        try:
            layer_of(name)
        except LookupError as exc:
            unplaced.append(str(exc))
    assert not unplaced, "\n".join(unplaced)


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = [
        f"{i.importer} ({layer_of(i.importer)}) imports {i.imported} "
        f"({layer_of(i.imported)}) on line {i.line}"
        for i in all_imports()
        if LAYERS.index(layer_of(i.imported)) > LAYERS.index(layer_of(i.importer))
    ]
    assert not upward, "\n".join(upward)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def import_cycles(edges: list[tuple[str, str]]) -> list[list[str]]:
    """Groups of modules that import each other through some chain (the strongly connected
    components of more than one module), each sorted, in order of their first member.
    Quadratic, which a few hundred modules can afford, and plain to read."""
    graph: dict[str, set[str]] = {}
    for importer, imported in edges:
        graph.setdefault(importer, set()).add(imported)
    reach = {node: reachable(graph, node) for node in graph}
    cycles: list[list[str]] = []
    placed: set[str] = set()
    for node in sorted(graph):
        if node in placed or node not in reach[node]:
            continue
        component = sorted(
            {node} | {other for other in reach[node] if node in reach.get(other, ())}
        )
        placed.update(component)
        cycles.append(component)
    return cycles


def test_no_import_cycles() -> None:
    edges = [(i.importer, i.imported) for i in all_imports() if not i.type_only]
    cycles = import_cycles(edges)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ([("a", "b"), ("b", "c")], []),
        ([("a", "b"), ("b", "a"), ("c", "a")], [["a", "b"]]),
        ([("a", "b"), ("b", "c"), ("c", "a")], [["a", "b", "c"]]),
    ],
)
def test_cycle_finder_finds_cycles(edges: list[tuple[str, str]], expected: list) -> None:
    assert import_cycles(edges) == expected


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a vocabulary module importing the search pipeline is reported."""
    fake = tmp_path / "retrieval" / "query.py"
    fake.parent.mkdir()
    fake.write_text("def f():\n    from retrieval.search.pipeline import search\n")
    modules = {"retrieval.query": fake, "retrieval.search.pipeline": fake}
    found = imports_of("retrieval.query", fake, modules)
    assert [(i.imported, i.line) for i in found] == [("retrieval.search.pipeline", 2)]
    assert LAYERS.index(layer_of("retrieval.search.pipeline")) > LAYERS.index(
        layer_of("retrieval.query")
    )


def test_nothing_in_the_product_imports_training() -> None:
    """The training commands are not installed with lode: a product module importing one,
    even inside a function, would fail on a user's machine."""
    found = [
        f"{i.importer} imports {i.imported} on line {i.line}"
        for i in all_imports()
        if i.imported.split(".")[0] == "training" and i.importer.split(".")[0] != "training"
    ]
    assert not found, "\n".join(found)


def is_api_module(module: str) -> bool:
    return module.rsplit(".", 1)[-1] == "api" or module.endswith("_api")


def is_view_module(module: str) -> bool:
    return module.rsplit(".", 1)[-1].endswith("views")


def test_api_modules_reach_no_view_module() -> None:
    """The API and the pages are siblings over the same services: an API module never imports
    a view module, directly or through another module (URLs come from `retrieval.links`)."""
    graph: dict[str, set[str]] = {}
    for i in all_imports():
        if not i.type_only:
            graph.setdefault(i.importer, set()).add(i.imported)
    apis = [module for module in project_modules() if is_api_module(module)]
    assert {"lode_site.api", "notes.api", "externals.api", "retrieval.web.search_api"} <= set(apis)
    found = {
        api: sorted(m for m in reachable(graph, api) if is_view_module(m))
        for api in apis
        if any(is_view_module(m) for m in reachable(graph, api))
    }
    assert not found, found
