"""What import-linter's contracts in pyproject.toml cannot say about docs/architecture.md.

The layer rule itself ("nothing imports from a higher layer", with imports inside functions
and under `if TYPE_CHECKING:` counted) and "the product never imports training" are
import-linter contracts, run by tests/test_import_contracts.py. Its layers contract lists
modules by name, so this file checks that every module is listed in exactly one layer. It
also checks that no two modules import each other through any chain (imports inside
functions count; imports under `if TYPE_CHECKING:` do not, because they never run) and that
no API module reaches a view module: import-linter cannot leave type-only imports out of one
contract alone, nor match module names by their ending.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from importlinter.contracts.layers import LayerField

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lode_site", "notes", "externals", "retrieval", "spaces", "training")


def contract_layers() -> list[set[str]]:
    """The module names each layer of pyproject.toml's layers contract lists, highest first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return [{tail.name for tail in LayerField().parse(layer).module_tails} for layer in layers]


def declared_in(module: str, layers: list[set[str]]) -> list[str]:
    """The layer entries that hold `module`: the module itself or a package above it."""
    return [
        name
        for layer in layers
        for name in layer
        if module == name or module.startswith(name + ".")
    ]


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


def test_every_module_is_in_one_layer() -> None:
    """A new module fails here until pyproject.toml's layers contract lists it (or a package
    holding it). The apps' top packages hold layers of their own, so they cannot be a layer."""
    layers = contract_layers()
    unplaced = [
        f"{name} is in {len(found)} layers ({', '.join(found) or 'none'}): "
        "list it in one layer of [tool.importlinter] in pyproject.toml"
        for name in project_modules()
        for found in [declared_in(name, layers)]
        if len(found) > 1 or (not found and name not in PACKAGES)
    ]
    assert not unplaced, "\n".join(unplaced)


def test_the_top_packages_outside_the_layers_import_nothing() -> None:
    """The top package of each app holds nothing but its docstring; importing a project
    module from one would escape the layers contract."""
    modules = project_modules()
    layers = contract_layers()
    found = [
        f"{i.importer} imports {i.imported} on line {i.line}"
        for name in PACKAGES
        if not declared_in(name, layers)
        for i in imports_of(name, modules[name], modules)
    ]
    assert not found, "\n".join(found)


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


def test_imports_inside_functions_and_under_type_checking_are_found(tmp_path: Path) -> None:
    """The cycle check reads every import at any depth and tells type-only ones apart."""
    source = tmp_path / "query.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from retrieval import links\n"
        "def f():\n    from retrieval.search.pipeline import search\n"
    )
    modules = dict.fromkeys(
        ("retrieval.query", "retrieval.links", "retrieval.search.pipeline"), source
    )
    found = imports_of("retrieval.query", source, modules)
    assert [(i.imported, i.line, i.type_only) for i in found] == [
        ("retrieval.links", 3, True),
        ("retrieval.search.pipeline", 5, False),
    ]


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
