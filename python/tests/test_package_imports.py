"""The weft package's modules import each other without cycles: read from the sources (ast), every
import of a sibling module counts, at the top of a file or inside a function, so a cycle cannot
hide behind a deferred import. The TF Fold spellings sit on top of the block combinators."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "weft"
EXTENSION = "_weft"  # the compiled module (weft/_weft*.so), below every Python module


def sibling_imports(path, modules):
    """The package's modules that `path` imports (`from . import x`, `from .x import y`,
    `import weft.x`, `from weft import x`, `from weft.x import y`), wherever in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level > 1:
                continue
            if node.level == 1:
                base = node.module
            elif node.module and (node.module == "weft" or node.module.startswith("weft.")):
                base = node.module[len("weft."):] if node.module != "weft" else None
            else:
                continue
            if base:  # from .x import y
                found.add(base.split(".")[0])
            else:  # from . import x: x itself when it is a module (or the extension), else the package
                found.update(a.name if a.name in modules | {EXTENSION} else "__init__" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("weft."))
    return {m for m in found if m in modules and m != path.stem}


def import_graph():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    return {p.stem: sibling_imports(p, modules) for p in PACKAGE.glob("*.py")}


def find_cycle(graph):
    """One cycle of the graph as a list of modules (first repeated last), or None."""
    state = {}  # module -> "open" while on the path, "done" after

    def visit(module, path):
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target, path + [target])
                if cycle:
                    return cycle
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module, [module])
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_package_modules_import_each_other_without_cycles():
    graph = import_graph()
    assert {"blocks", "_blocks", "_fold_compiler", "_fold_layers"} <= set(graph), sorted(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_tf_fold_spellings_sit_on_top_of_the_block_combinators():
    graph = import_graph()
    assert "_blocks" in graph["_fold_compiler"] and "_blocks" in graph["_fold_layers"]
    assert not graph["_blocks"] & {"blocks", "_fold_compiler", "_fold_layers", "__init__"}
    assert {"_blocks", "_fold_compiler", "_fold_layers"} <= graph["blocks"]
