"""The runtime's layout: sub-packages that say what they hold, no import circles, one backend registry.

A new backend is one file plus one line in runtime/backends.py: loopback_backend.py is such a file,
and the test below launches on it through every path a rank's world group is built by.
"""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil

import pytest

import minitorch_dist
from minitorch_dist import launch
from minitorch_dist.runtime import backends
from minitorch_dist.runtime.backend import Backend

PACKAGE_DIR = os.path.dirname(minitorch_dist.__file__)


def _modules() -> dict[str, str]:
    """Every module of minitorch_dist: dotted name -> file."""
    found = {"minitorch_dist": os.path.join(PACKAGE_DIR, "__init__.py")}
    for info in pkgutil.walk_packages([PACKAGE_DIR], "minitorch_dist."):
        spec = importlib.util.find_spec(info.name)
        found[info.name] = spec.origin
    return found


def _imports(name: str, path: str, known) -> set[str]:
    """The modules of minitorch_dist that `name` imports, anywhere in the file (lazy imports too)."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = base + ("." + node.module if node.module else "")
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                out.add(full if full in known else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in known and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circles_in_the_kit():
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        # a package importing its own children (to re-export them) is not a circle
        graph[name] = {m for m in _imports(name, path, modules)
                       if not (m.startswith(name + ".") or name.startswith(m + ".") and
                               modules[m].endswith("__init__.py"))}
    assert _cycles(graph) == []


def test_every_runtime_file_opens_with_a_docstring_and_every_package_lists_its_modules():
    runtime = os.path.join(PACKAGE_DIR, "runtime")
    for folder, _, files in os.walk(runtime):
        if "__pycache__" in folder:
            continue
        for f in files:
            if f.endswith(".py"):
                doc = ast.get_docstring(ast.parse(open(os.path.join(folder, f)).read()))
                assert doc, f"{os.path.join(folder, f)} has no docstring"
        if folder != runtime and "__init__.py" in files:
            doc = ast.get_docstring(ast.parse(open(os.path.join(folder, "__init__.py")).read()))
            missing = [f for f in files if f.endswith(".py") and f != "__init__.py" and f not in doc]
            assert not missing, f"{folder}/__init__.py does not say what {missing} hold"


def test_the_runtime_floor_is_small():
    """The runtime's top folder holds the Group and its contract; the rest lives in sub-packages."""
    top = [f for f in os.listdir(os.path.join(PACKAGE_DIR, "runtime")) if f.endswith(".py")]
    assert len(top) <= 14, sorted(top)
    for sub in ("launching", "transports", "sim", "observe"):
        assert os.path.exists(os.path.join(PACKAGE_DIR, "runtime", sub, "__init__.py"))


@pytest.mark.parametrize("name", sorted(backends.BACKENDS))
def test_every_registered_backend_loads(name):
    info = backends.BACKENDS[name]
    cls = backends.backend_class(name)
    assert issubclass(cls, Backend) and cls.name == name
    assert info.starts in ("processes", "mpiexec", "threads")
    if info.starts != "threads":
        assert cls.world is not Backend.world, f"{name} starts as processes but has no Backend.world"


def test_an_unknown_backend_is_refused_with_the_list():
    with pytest.raises(minitorch_dist.LaunchError, match=r"use one of \('gloo', 'mpi', 'sim'"):
        launch(lambda g: 0, 2, backend="ncl")


def _rank(group):
    sub = group.subgroup([0, 1]) if group.rank < 2 else group      # only the members call subgroup
    x = group.rank * 1.0 + __import__("torch").zeros(3)
    y = x.clone()
    group.sendrecv(x, (group.rank + 1) % group.size, y, (group.rank - 1) % group.size)
    return group.backend, sub.backend, float(y[0])


def test_a_new_backend_is_one_file_and_one_registry_line(monkeypatch):
    line = backends.BackendInfo("gloo-tagged", "tests.runtime.loopback_backend", "TaggedGlooBackend",
                                "processes", "gloo with a count of posted sends (a test)")
    monkeypatch.setitem(backends.BACKENDS, "gloo-tagged", line)
    res = launch(_rank, 3, backend="gloo-tagged", fresh=True)
    assert [v[0] for v in res] == ["gloo-tagged"] * 3
    assert [v[1] for v in res[:2]] == ["gloo-tagged"] * 2
    assert [v[2] for v in res] == [2.0, 0.0, 1.0]
    assert "gloo-tagged" in backends.process_backends()
