"""The tests' own layout: what several test modules share lives in helper modules, never in a test
module another imports (an import runs the other module's fixtures' definitions and couples their
changes)."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    found |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return found


def test_no_test_module_imports_another():
    offenders = {str(path.relative_to(TESTS)): sorted(module for module in imported_modules(path)
                                                      if module.startswith("tests.")
                                                      and module.rsplit(".", 1)[-1].startswith("test_"))
                 for path in TESTS.rglob("*.py")}
    assert {path: modules for path, modules in offenders.items() if modules} == {}
