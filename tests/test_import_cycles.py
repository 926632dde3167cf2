"""No two keras_bert modules import each other, however indirectly: every
`keras_bert` import is followed, at module level, inside functions and under
`TYPE_CHECKING` alike (a type-only import still ties two modules together for
a reader and for the next refactor)."""

import ast
import os

from repo_paths import REPO_ROOT as ROOT

PACKAGE = os.path.join(ROOT, "keras_bert")


def module_files():
    """Dotted name -> file, packages by their `__init__.py`."""
    files = {}
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path[:-3], ROOT).replace(os.sep, ".")
                files[dotted.removesuffix(".__init__")] = path
    return files


def import_graph(files):
    graph = {}
    for module, path in files.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("keras_bert"):
                for alias in node.names:  # `from pkg import submodule` imports the submodule
                    name = f"{node.module}.{alias.name}"
                    targets.add(name if name in files else node.module)
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("keras_bert")}
        graph[module] = {t for t in targets if t in files and t != module}
    return graph


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other():
    assert cycles(import_graph(module_files())) == []


def test_the_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
