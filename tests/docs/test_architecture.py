"""docs/architecture.md's size limits hold: every module, function or class over its limit is in the table of
exceptions (by name, without sizes that every refactor would have to edit), and nothing in the table is within the
limits any more."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMITS = {"module": 800, "function": 60, "class": 300}


def _functions(tree: ast.Module, module_name: str):
    """(qualified name, node): top-level functions as `module.function`, methods as `Class.method`."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{module_name}.{node.name}", node
        elif isinstance(node, ast.ClassDef):
            for child in ast.walk(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{child.name}", child


def _lines(node) -> int:
    return node.end_lineno - node.lineno + 1


def _over_limits():
    """(kind, name as the table writes it, lines) of every module, function and class over its limit."""
    found = []
    for folder in ("hf_elmo", "conversion"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "pretrained" in path.relative_to(ROOT).parts:
                continue  # the shipped model folder links to the package's own files
            source = path.read_text(encoding="utf-8")
            name = (path.relative_to(ROOT / "hf_elmo") if folder == "hf_elmo" else path.relative_to(ROOT)).as_posix()
            if source.count("\n") > LIMITS["module"]:
                found.append(("module", name, source.count("\n")))
            tree = ast.parse(source)
            found += [("class", node.name, _lines(node)) for node in ast.walk(tree)
                      if isinstance(node, ast.ClassDef) and _lines(node) > LIMITS["class"]]
            found += [("function", qualified, _lines(node)) for qualified, node in _functions(tree, name[:-3])
                      if _lines(node) > LIMITS["function"]]
    return found


def _documented_exceptions():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Size limits and their exceptions", 1)[1]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.M))


def test_everything_over_a_size_limit_is_a_documented_exception():
    documented = _documented_exceptions()
    assert documented, "the table of exceptions was not found in docs/architecture.md"
    over = _over_limits()
    for kind, name, lines in over:
        assert name in documented, f"{kind} {name} has {lines} lines, over {LIMITS[kind]}, and is not in docs/architecture.md"
    stale = set(documented) - {name for _, name, _ in over}
    assert not stale, f"docs/architecture.md lists exceptions that are within the limits now: {sorted(stale)}"


def _has_code(path: Path) -> bool:
    """Whether the module does more than gather names: anything beyond imports, a docstring, `__all__` and an
    `if __name__ == "__main__"` block."""
    def gathers(node) -> bool:
        return (isinstance(node, (ast.Import, ast.ImportFrom, ast.If))
                or isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                or isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"])
    return not all(gathers(node) for node in ast.parse(path.read_text(encoding="utf-8")).body)


def test_every_module_has_a_test_file_of_its_name_or_is_mapped_to_existing_ones():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Where each module is tested", 1)[1].split("\n## ", 1)[0]
    mapped = {}
    for modules, tests in re.findall(r"^\| (`[^|]+`) \| ([^|]+) \|$", section, flags=re.M):
        test_files = re.findall(r"`(tests/[^`]+\.py)`", tests)
        for module in re.findall(r"`([^`]+\.py)`", modules):
            mapped[module] = test_files
    # transformers' common suites (tests/transformers_suites/: its files, fetched or stand-ins such as
    # exporters/test_export.py) are named after transformers' modules, not ours.
    test_names = {path.stem[len("test_"):] for path in (ROOT / "tests").rglob("test_*.py")
                  if "transformers_suites" not in path.relative_to(ROOT).parts}
    for path in sorted((ROOT / "hf_elmo").rglob("*.py")):
        if "pretrained" in path.relative_to(ROOT).parts or path.name == "__init__.py" and path.parent.name == "hf_elmo":
            continue
        if path.name in ("__init__.py", "__main__.py") and not _has_code(path):  # a package marker, a one-line entry
            continue
        if path.stem in test_names:
            continue
        name = path.relative_to(ROOT / "hf_elmo").as_posix()
        assert name in mapped, f"hf_elmo/{path.relative_to(ROOT / 'hf_elmo')} has no test file of its name and no row in docs/architecture.md"
        assert mapped[name], f"docs/architecture.md names no test file for {name}"
        for test_file in mapped[name]:
            assert (ROOT / test_file).is_file(), f"docs/architecture.md: {test_file} (for {name}) does not exist"
