"""The package's shape, measured: its floors and the imports between them, import circles,
private state read across modules, top-level modules, the largest files and classes.

Every import counts (module level, inside functions, under ``TYPE_CHECKING``), because each one
is a dependency a reader must hold in mind. Usage: ``python tools/shape.py [--json]`` from the
project root. tests/test_layers.py asserts on the same measures.
"""

from __future__ import annotations

import argparse
import ast
import re
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "tripwire"

#: The floors, bottom to top: a module imports only from its own floor or below. The native
#: extension (``_native``) is the engine's floor (it is the engine, in C++). ``errors`` is the
#: one error hierarchy every floor raises.
FLOORS = ("errors", "base", "identity", "signals", "engine", "durability", "context", "budgets",
          "interchange", "policy", "session", "fleet", "supervisor", "harnesses", "web", "gateway",
          "corpus", "cli")
#: Top-level modules that are no floor: the package's own face (its public names, imported on
#: first use, and ``python -m tripwire``).
FACADE = ("tripwire", "tripwire.__main__")
MAX_MODULE_LINES = 800
MAX_CLASS_LINES = 400


def floor(module: str) -> int | None:
    """The floor of a module (its index in ``FLOORS``), None for the facade."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    top = "engine" if parts[1] == "_native" else parts[1]
    return FLOORS.index(top) if top in FLOORS else None


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (``.py`` and Cython sources)."""
    out: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*")):
        if path.suffix not in (".py", ".pyx") or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(current: str, is_package: bool, level: int, target: str | None) -> str:
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def _cython_imports(text: str) -> list[tuple[int, str | None, list[str]]]:
    """The ``from .x import y`` / ``import x`` lines of a .pyx/.pxi (and its include files)."""
    found = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("from ") and " import " in s and not s.startswith("from libc") \
                and not s.startswith("from cpython") and not s.startswith("from libcpp"):
            module = s[5:s.index(" import ")].strip()
            names = [n.strip().split(" as ")[0] for n in s[s.index(" import ") + 8:]
                     .strip("()").split(",") if n.strip()]
            level = len(module) - len(module.lstrip("."))
            found.append((level, module.lstrip(".") or None, names))
    return found


def imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the package modules it imports, counted whole."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        is_package = path.stem == "__init__"
        targets: list[tuple[int, str | None, list[str]]] = []
        if path.suffix == ".pyx":
            text = path.read_text()
            for inc in path.parent.glob("*.pxi"):
                text += "\n" + inc.read_text()
            targets = _cython_imports(text)
        else:
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    targets.append((node.level, node.module, [a.name for a in node.names]))
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name == PACKAGE or a.name.startswith(PACKAGE + "."):
                            targets.append((0, a.name, []))
        for level, module, names in targets:
            if level == 0:
                if module is None or not (module == PACKAGE or module.startswith(PACKAGE + ".")):
                    continue
                base = module
            else:
                base = _resolve(name, is_package, level, module)
            for n in names or [None]:
                candidate = f"{base}.{n}" if n else base
                hit = candidate if candidate in modules else base if base in modules else None
                if hit and hit != name:
                    graph[name].add(hit)
    return graph


def circles(graph: dict[str, set[str]], nodes: list[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out, key=len, reverse=True)


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from a lower floor of a higher one."""
    out = []
    for module, targets in sorted(graph.items()):
        low = floor(module)
        if low is None:
            continue
        out += [(module, t) for t in sorted(targets)
                if (high := floor(t)) is not None and high > low]
    return out


def _private_members(tree: ast.AST) -> set[str]:
    """The private (single underscore) names a module's classes define: methods, class-level
    names and annotations, ``__slots__`` entries, ``self._x = ...`` assignments."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            body = list(node.body)
            body += [b for n in node.body if isinstance(n, ast.If) for b in n.body]
            for b in body:
                if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(b.name)
                elif isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                    names.add(b.target.id)
                elif isinstance(b, ast.Assign):
                    for t in b.targets:
                        if isinstance(t, ast.Name):
                            names.add(t.id)
                            if t.id == "__slots__" and isinstance(b.value, (ast.Tuple, ast.List)):
                                names |= {e.value for e in b.value.elts
                                          if isinstance(e, ast.Constant)}
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _cython_text(path: Path) -> str:
    """A .pyx with its include files and its .pxd (the native core's whole source)."""
    parts = [path.read_text()] + [p.read_text() for p in sorted(path.parent.glob("*.pxi"))]
    parts += [p.read_text() for p in sorted(path.parent.glob("*.pxd"))]
    return "\n".join(parts)


def _cython_privates(text: str) -> set[str]:
    """The private names a Cython module defines: its cdef fields, its methods, what it
    assigns on ``self``."""
    return (set(re.findall(r"\bcdef\s+(?:public\s+|readonly\s+)?[\w\[\]\.<>, *]+?\s(_\w+)",
                           text))
            | set(re.findall(r"\b(?:c?p?def)\s+(?:[\w\[\]\.<>*]+\s+)?(_\w+)\s*\(", text))
            | set(re.findall(r"self\.(_\w+)\s*=", text)))


def private_reads(modules: dict[str, Path]) -> list[tuple[str, int, str]]:
    """``obj._name`` read in one module where ``_name`` is a private member of a class of
    another tripwire module only (``self``/``cls`` excepted: a class's own and inherited state):
    private state shared across modules. (module, line, expression). The native core counts
    both ways: its .pyx/.pxi read by a regex, its cdef fields as its private members."""
    trees = {m: ast.parse(p.read_text()) for m, p in modules.items() if p.suffix == ".py"}
    own = {m: _private_members(t) for m, t in trees.items()}
    cython = {m: _cython_text(p) for m, p in modules.items() if p.suffix == ".pyx"}
    own.update({m: _cython_privates(text) for m, text in cython.items()})
    defined_somewhere: set[str] = set().union(*own.values()) if own else set()
    out = []
    for m, tree in trees.items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and node.attr not in own[m] and node.attr in defined_somewhere):
                out.append((m, node.lineno, ast.unparse(node)))
    for m, text in cython.items():
        for n, line in enumerate(text.splitlines(), 1):
            for obj, name in re.findall(r"\b(\w+)\.(_[a-z]\w*)", line):
                if obj not in ("self", "cls") and name not in own[m] \
                        and name in defined_somewhere:
                    out.append((m, n, f"{obj}.{name}"))
    return sorted(out)


def classes(modules: dict[str, Path]) -> list[tuple[str, int, int]]:
    """(module.Class, lines, methods) of every class in the .py modules."""
    out = []
    for name, path in modules.items():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                methods = sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                              for n in node.body)
                out.append((f"{name}.{node.name}", lines, methods))
    return sorted(out, key=lambda c: -c[1])


def shape(root: Path = ROOT) -> dict[str, object]:
    modules = module_files(root)
    graph = imports(modules)
    found = circles(graph, sorted(modules))
    files = sorted(((m, len(p.read_text().splitlines())) for m, p in modules.items()),
                   key=lambda f: -f[1])
    top_level = sorted(m for m, p in modules.items()
                       if m.count(".") == 1 and p.stem != "__init__")
    return {
        "modules": len(modules),
        "top_level_modules": top_level,
        "packages": sorted({m for m, p in modules.items() if p.stem == "__init__"}),
        "circles": found,
        "largest_circle": len(found[0]) if found else 0,
        "upward_imports": upward(graph),
        "private_reads": private_reads(modules),
        "largest_files": files[:8],
        "largest_classes": classes(modules)[:8],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = shape()
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return 0
    top = result["top_level_modules"]
    print(f"modules: {result['modules']} ({len(top)} top-level: "  # type: ignore[arg-type]
          f"{' '.join(m.removeprefix(PACKAGE + '.') for m in top)}), "  # type: ignore[attr-defined]
          f"packages: {len(result['packages'])}")  # type: ignore[arg-type]
    found = result["circles"]
    print(f"import circles: {len(found)}; sizes {[len(c) for c in found]}")  # type: ignore[arg-type]
    for c in found:  # type: ignore[attr-defined]
        print("  circle:", " ".join(m.removeprefix(PACKAGE + ".") for m in c))
    ups = result["upward_imports"]
    print(f"imports from a lower floor of a higher one: {len(ups)}")  # type: ignore[arg-type]
    for a, b in ups:  # type: ignore[attr-defined]
        print(f"  {a} -> {b}")
    reads = result["private_reads"]
    print(f"private state read across modules: {len(reads)}")  # type: ignore[arg-type]
    for m, line, expr in reads:  # type: ignore[attr-defined]
        print(f"  {m}:{line}: {expr}")
    print("largest files:")
    for m, n in result["largest_files"]:  # type: ignore[attr-defined]
        print(f"  {n:5d}  {m}")
    print("largest classes (lines, methods):")
    for c, n, k in result["largest_classes"]:  # type: ignore[attr-defined]
        print(f"  {n:5d} {k:3d}  {c}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
