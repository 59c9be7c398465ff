"""The package's imports go one way (issue 42): no cycles, nothing imports the command line, and every dependency is
an `import` statement a reader (or a tool) can see, except the lazy public names of `hf_elmo/__init__.py`.

Imports inside functions count: a lazy import is still a dependency."""

from __future__ import annotations

import ast

from paths import REPO_ROOT

PACKAGE = REPO_ROOT / "hf_elmo"


def _module_name(path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported_modules(name: str) -> set[str]:
    """The package modules that module `name` imports anywhere in its source."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in MODULES}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    found.add(f"{base}.{alias.name}")
                elif base in MODULES:
                    found.add(base)
    return found - {name}


GRAPH = {name: _imported_modules(name) for name in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def test_the_graph_is_read_from_the_sources():
    """The walk finds what the files import (a broken walk would make the tests below pass on an empty graph)."""
    assert "hf_elmo.models.elmo.configuration_elmo" in GRAPH["hf_elmo.models.elmo.modeling_elmo"]
    assert "hf_elmo.kernels.bilstm" in GRAPH["hf_elmo.kernels"]
    assert sum(map(len, GRAPH.values())) > 100


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


def test_nothing_imports_the_command_line():
    importers = {name: sorted(target for target in targets if target.startswith("hf_elmo.cli"))
                 for name, targets in GRAPH.items() if not name.startswith("hf_elmo.cli")}
    assert {name: targets for name, targets in importers.items() if targets} == {}


def test_only_the_package_init_imports_by_name():
    """`import_module` / `__import__` hide a dependency from readers and tools; only the lazy exports use it."""
    users = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            called = node.func if isinstance(node, ast.Call) else None
            called_name = getattr(called, "attr", None) or getattr(called, "id", None)
            imported = isinstance(node, ast.ImportFrom) and any(alias.name == "import_module" for alias in node.names)
            if called_name in ("import_module", "__import__") or imported:
                users.append(name)
                break
    assert users == ["hf_elmo"]
