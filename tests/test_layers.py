"""The architecture's arrows, read from every module's imports (the AST).

Layers, lowest first: ``storage`` imports nothing of ours; ``cluster`` may use ``storage``;
``app`` may use ``cluster`` and ``storage``;
``api``, ``bench`` and ``pipeline`` sit side by side above ``app`` and may use ``app`` and
``storage`` but not each other, except that the benchmark measures the pipeline (never the
other way round); ``timerstore`` (the console script) is the composition root above them
all; ``client`` is the standalone HTTP client and imports nothing of ours (the benchmark's
soak drives the service through it).
Every import counts, also those inside functions and ``importlib.import_module`` calls
with a constant name; a dynamic ``importlib`` call is refused outright (it hides an arrow).
No import circle may exist between modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "storage": {"storage"},
    # the cluster sits between app and storage; a single node never runs any of it
    "cluster": {"cluster", "storage"},
    "app": {"app", "cluster", "storage"},
    "api": {"api", "app", "storage"},
    # the benchmark measures the Spark import, and the soak drives the service through the client
    "bench": {"bench", "app", "cluster", "storage", "pipeline", "client"},
    "pipeline": {"pipeline", "app", "storage"},
    "client": {"client"},
    "timerstore": {"timerstore", "api", "app", "bench", "cluster", "pipeline", "storage", "client"},
}
OURS = set(ALLOWED)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for top in OURS:
        for path in (ROOT / top).rglob("*.py") if (ROOT / top).is_dir() else ():
            found[_module_name(path)] = path
    return found


def _resolve(module: str, name: str, package: str, level: int, known: set[str]) -> str:
    """The module an ``import``/``from ... import`` names (a submodule when it is one)."""
    if level:
        base = package.split(".")
        base = base[: len(base) - level + 1]
        module = ".".join([*base, module] if module else base)
    candidate = f"{module}.{name}" if name else module
    return candidate if candidate in known else module


def _imports(name: str, path: Path, known: set[str]) -> tuple[set[str], list[str]]:
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    dynamic: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                targets.add(_resolve(node.module or "", alias.name, package, node.level, known))
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                targets.add(arg.value)
            else:
                dynamic.append(f"{name}:{node.lineno}")
    return {t for t in targets if t.split(".")[0] in OURS}, dynamic


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module" or (
            func.attr == "__import__" and isinstance(func.value, ast.Name)
        )
    return isinstance(func, ast.Name) and func.id in {"__import__", "import_module"}


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    modules = _modules()
    known = set(modules)
    graph, dynamic = {}, []
    for name, path in modules.items():
        graph[name], found = _imports(name, path, known)
        dynamic += found
    return graph, dynamic


def test_every_import_points_down_or_sideways_within_its_layer() -> None:
    graph, dynamic = _graph()
    assert not dynamic, f"importlib with a computed name hides an arrow: {dynamic}"
    wrong = _wrong_arrows(graph)
    assert not wrong, "imports against the layer rule:\n" + "\n".join(wrong)


def _wrong_arrows(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if target.split(".")[0] not in ALLOWED[source.split(".")[0]]
    )


def test_no_import_circle_between_modules() -> None:
    graph, _ = _graph()
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1]
    assert not cycles, f"import circles: {cycles}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the module graph is a few hundred nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is None:
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
                    components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def test_the_checker_sees_a_wrong_arrow_and_a_circle() -> None:
    """The rule itself must be able to fail: a planted upward import and a planted cycle."""
    graph = {"storage.x": {"app.y"}, "app.y": {"storage.x"}}
    assert _wrong_arrows(graph) == ["storage.x -> app.y"]
    assert [c for c in _strongly_connected(graph) if len(c) > 1] == [["app.y", "storage.x"]]
