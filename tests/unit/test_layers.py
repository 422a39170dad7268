"""The layering that DEVELOPING.md states: imports point from the apps down to the core, never back.

1. core: ``storyjudge/core`` (and the package's ``__init__``);
2. the method: ``state.py``, ``prompts/``, ``nodes/``, ``graphs/``;
3. apps: ``storyjudge/apps``, ``eval/``, ``storyjudge/__main__.py``.

Every import counts, including those inside functions (lazy imports are still dependencies). No product
module imports ``tests``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["state.py", "prompts", "nodes", "graphs", "eval", "storyjudge"]


def layer_of(module: str) -> int | None:
    """The layer of a first-party module name, or None for third-party and standard-library modules."""
    top = module.split(".")[0]
    if top == "tests":
        return 99
    if module in ("storyjudge", "storyjudge.__init__") or module.startswith("storyjudge.core"):
        return 1
    if top in ("state", "prompts", "nodes", "graphs"):
        return 2
    if module.startswith("storyjudge.apps") or top == "eval" or module == "storyjudge.__main__":
        return 3
    if top == "storyjudge":
        return 0  # a module outside the three layers: the test below refuses it
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def product_files() -> list[Path]:
    files: list[Path] = []
    for entry in PRODUCT:
        path = ROOT / entry
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return files


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, resolving relative imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            # `from storyjudge import apps` imports storyjudge.apps
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def test_every_product_module_belongs_to_a_layer() -> None:
    outside = [module_name(p) for p in product_files() if layer_of(module_name(p)) in (0, None)]
    assert not outside, f"modules outside storyjudge/core and storyjudge/apps: {outside}"


@pytest.mark.parametrize("path", product_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path: Path) -> None:
    own = layer_of(module_name(path))
    assert own is not None
    upward = [
        f"line {line}: {module} (layer {layer_of(module)})"
        for line, module in imports_of(path)
        if (layer_of(module) or 0) > own
    ]
    assert not upward, f"{path.relative_to(ROOT)} is in layer {own} but imports " + "; ".join(upward)


def test_the_check_sees_a_crossing() -> None:
    """The rule above can fail: a core module importing a node is caught."""
    assert layer_of("nodes.judge") == 2 and layer_of("storyjudge.core.llm") == 1
    assert layer_of("storyjudge.apps.cli") == 3 and layer_of("tests.conftest") == 99
    tree = imports_of(ROOT / "storyjudge" / "core" / "llm.py")
    assert all((layer_of(module) or 0) <= 1 for _, module in tree)


def test_no_import_circles() -> None:
    """No product modules import each other, lazily or not (each of a circle would need the other first)."""
    import networkx as nx

    modules = {module_name(path): path for path in product_files()}
    imports = nx.DiGraph()
    for module, path in modules.items():
        imports.add_edges_from(
            (module, other) for _, other in imports_of(path) if other in modules and other != module
        )
    circles = list(nx.simple_cycles(imports))
    assert not circles, f"import circles: {circles}"
