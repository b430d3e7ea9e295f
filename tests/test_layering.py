"""The package's layering, read from its imports with ``ast``: every import in tilejit/
goes down the table below or stays in its own package, the modules imported at load
time form no circle, and an import inside a function says why it is there.

A failure names the two modules. To add a dependency, decide where it belongs in the
table first; an arrow that runs up means the code is in the wrong layer."""
import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tilejit")

# Floors, lowest first. A module may import modules of lower floors and of its own
# package; packages that share a floor may not import one another.
FLOORS = [
    ("version", "errors", "target", "options", "log", "syntax"),  # import nothing from tilejit
    ("language",),                  # what T.* is: declarations only
    ("layouts",),                   # CuTe-style layout algebra
    ("ir",),                        # what the passes decide, as plain data; the markers
    ("frontend",),                  # source → device, host and simulator programs
    ("passes", "codegen", "sim"),   # source passes; typing/lowering/NVPTX; the simulator
    ("compiler",),                  # the pipeline: frontend → passes → codegen
    ("runtime",),                   # kernel object, arguments, launch, driver, caches
    ("tuning", "carver"),           # autotune, benchmark timers; the device's figures
    ("tilelang",),                  # TileLang's doors
    ("testing", "autotuner", "profiler", "utils"),  # TileLang's module paths (thin)
    ("torch",),                     # kernels as torch.library custom operators
    ("",),                          # the package itself: tilejit/__init__.py
    ("cli",),                       # python -m tilejit: the commands
    ("__main__",),                  # python -m tilejit: the entry
]
FLOOR = {package: i for i, names in enumerate(FLOORS) for package in names}


def _modules():
    out = {}
    for directory, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                is_package = rel.endswith(".__init__")
                out[rel[:-len(".__init__")] if is_package else rel] = (path, is_package)
    return out


MODULES = _modules()


def _imports(module):
    """(imported tilejit module, line, at load time?, the import's source lines)."""
    path, is_package = MODULES[module]
    source = open(path).read()
    lines = source.splitlines()
    tree = ast.parse(source)
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[:len(module.split(".")) - node.level
                                          + (1 if is_package else 0)]
                base = ".".join(parts + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                     for a in node.names]
        else:
            continue
        context = lines[max(0, node.lineno - 2):node.end_lineno]
        for name in names:
            if name == "tilejit" or name.startswith("tilejit."):
                yield name, node.lineno, id(node) in top, context


def _package(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_is_in_the_table():
    assert {_package(m) for m in MODULES} <= set(FLOOR), \
        f"packages missing from FLOORS: {sorted({_package(m) for m in MODULES} - set(FLOOR))}"


def _edges():
    for module in MODULES:
        for target, line, eager, context in _imports(module):
            yield module, target, line, eager, context


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_down_the_floors(module):
    mine = _package(module)
    for target, line, _, _ in _imports(module):
        theirs = _package(target)
        if theirs == mine or target == "tilejit" and module == "tilejit":
            continue
        assert FLOOR[theirs] < FLOOR[mine], (
            f"{module} (floor {FLOOR[mine]}, {mine or 'tilejit'}) imports {target} (floor "
            f"{FLOOR[theirs]}, {theirs or 'tilejit'}) at line {line}: an import may only "
            "go down the floors of tests/test_layering.py")


def _circle(graph):
    """A circle of the graph (a list of nodes, first = last), or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None
    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_no_import_circles_at_load_time():
    graph = {m: set() for m in MODULES}
    for module, target, _, eager, _ in _edges():
        if eager and target in MODULES and target != module:
            graph[module].add(target)
    circle = _circle(graph)
    assert circle is None, "import circle at load time: " + " -> ".join(circle)


def test_the_circle_check_finds_one():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_imports_inside_functions_say_why():
    """A tilejit import inside a function (kept off the import path of a cached launch,
    or breaking a circle) carries a comment on its line or the line above."""
    missing = [f"{module}:{line} imports {target}"
               for module, target, line, eager, context in _edges()
               if not eager and not any("#" in text for text in context)]
    assert not missing, "imports inside functions without a comment saying why:\n" + \
        "\n".join(missing)


def test_the_table_catches_a_back_edge(tmp_path, monkeypatch):
    """The check itself: a language module that imported the runtime would fail."""
    bad = tmp_path / "bad.py"
    bad.write_text("from tilejit.runtime import kernel\n")
    monkeypatch.setitem(MODULES, "tilejit.language.bad", (str(bad), False))
    with pytest.raises(AssertionError, match="tilejit.language.bad .* imports tilejit.runtime"):
        test_imports_run_down_the_floors("tilejit.language.bad")
