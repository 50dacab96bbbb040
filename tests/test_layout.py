"""The package's layout is its pipeline: no import cycles, and imports only point down the layers (README, Layout).

Imports are read from the source with ast, wherever they are in a module (also inside functions: a deferred
import is still a dependency). `from . import x` counts as an import of the package too, as Python runs it.
"""
from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# installed name -> source folder (pyproject.toml's package-dir)
ROOTS = {"haiprof": "haiprof", "haiprof.collectors": "collectors", "haiprof.analyzers": "analyzers",
         "haiprof.fixes": "fixes"}

# Lower number = lower layer. A module may import its own group and any group of a lower layer, nothing else.
LAYERS = {
    "version": 0, "errors": 0, "phaseframes": 0,                  # what everyone may raise; phases.bin's framing
    "phasestore": 0.5,                                             # the phases' format, on that framing
    "module_state": 0,                                             # what copies of the user's model leave out
    "rundir": 1,                                                   # the data model
    "collectors": 2, "analyzers": 2, "fixes": 2, "render": 2,      # the stages: they never import each other
    "analysis": 3,                                                 # run directory -> summary, report
    "runtime": 4,                                                  # around the user's script
    "api": 5,                                                      # haiprof.load / haiprof.profile
    "commands": 6,                                                 # one module per CLI command
    "cli": 7,                                                      # the command table
    "haiprof": 8, "__main__": 8,                                   # the package root (lazy api) and python -m
}
STAGES = ("collectors", "analyzers", "fixes", "render")


def modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in ROOTS.items():
        for f in sorted((REPO / folder).rglob("*.py")):
            parts = [p for p in f.relative_to(REPO / folder).with_suffix("").parts if p != "__init__"]
            out[".".join([pkg, *parts])] = f
    return out


def imports(name: str, path: Path, known) -> set[str]:
    """The package modules `name` imports, anywhere in its source."""
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                up = base.split(".")[: len(base.split(".")) - node.level + 1]
                mod = ".".join(up + ([mod] if mod else []))
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)   # `from pkg import submodule`
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(m, f, mods) for m, f in mods.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v):
        state[v] = 1
        path.append(v)
        for w in sorted(g[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (c := visit(w)):
                return c
        path.pop()
        state[v] = 2
        return None

    for v in sorted(g):
        if v not in state and (c := visit(v)):
            return c
    return None


def group(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_graph_sees_the_package():
    g = graph()
    assert {"haiprof.cli", "haiprof.rundir", "haiprof.render.html", "haiprof.collectors.phases",
            "haiprof.analyzers.steps", "haiprof.fixes"} <= set(g)
    assert "haiprof.render.escape" in g["haiprof.render.html"]          # `from .escape import esc`
    assert "haiprof.analyzers.steps" in g["haiprof.analysis.summary"]    # `from haiprof.analyzers import steps`


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_has_a_layer():
    unplaced = sorted({m for m in graph() if group(m) not in LAYERS})
    assert not unplaced, f"place these in a layer's folder (or add the layer to LAYERS and README): {unplaced}"


def test_imports_point_down_the_layers():
    layer = {m: LAYERS.get(group(m), -1) for m in graph()}   # a module with no layer fails the test above
    wrong = [f"{a} -> {b}" for a, deps in graph().items() for b in sorted(deps)
             if group(a) != group(b) and layer[b] >= layer[a]]
    assert not wrong, "imports against the layers (README, Layout):\n" + "\n".join(wrong)


def test_stages_never_import_each_other():
    wrong = [f"{a} -> {b}" for a, deps in graph().items() if group(a) in STAGES
             for b in sorted(deps) if group(b) in STAGES and group(b) != group(a)]
    assert not wrong, "collectors, analyzers, fixes and render never import each other:\n" + "\n".join(wrong)


def test_module_names_in_strings_exist():
    """Subprocess entry points are strings (`python -m haiprof.runtime.sidecar`, torchrun's training script):
    a move that forgets one fails only at run time, so check every such string names a real module."""
    named = set()
    for f in modules().values():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"haiprof(\.[a-z_]+)+", node.value):
                named.add(node.value)
    assert {"haiprof.runtime.sidecar", "haiprof.runtime.worker"} <= named
    missing = [m for m in sorted(named) if importlib.util.find_spec(m) is None]
    assert not missing, f"strings name modules that do not exist: {missing}"


def test_every_package_is_installed():
    """pyproject.toml lists the packages by name: a new folder left out would be missing from the wheel."""
    tomllib = __import__("pytest").importorskip("tomllib")
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {m for m, f in modules().items() if f.name == "__init__.py"}
    assert packages <= listed, f"add to [tool.setuptools] packages: {sorted(packages - listed)}"
