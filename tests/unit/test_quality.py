"""The house rules that a machine can check: mypy --strict and ruff on the package, and its imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sse_middleware"
RUNTIME = {"anyio", "opentelemetry"}  # pyproject.toml's dependencies (exceptiongroup: below, < 3.11 only)
SANS_IO = PACKAGE / "_core"  # the sans-I/O core: every module in it, by the layout
# optional extras: the Redis store, imported by open_store only for a redis URL
OPTIONAL = {"_resume/redis_store.py": {"redis"}, "_resume/redis_connect.py": {"redis"}}


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *cmd], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.slow  # a tool run, not a behaviour: the full run only
def test_mypy_strict() -> None:
    result = _run("mypy", "--strict", "sse_middleware")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_ruff() -> None:
    result = _run("ruff", "check", "sse_middleware", "tests", "examples", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def _imports(path: Path, *, at_runtime: bool = False) -> set[str]:
    """The top-level modules ``path`` imports; ``at_runtime``: leaving out what ``if TYPE_CHECKING:``
    guards, which only the type checker reads (so ``typing_extensions`` may appear there)."""
    tree = ast.parse(path.read_text())
    if at_runtime:
        for node in [n for n in ast.walk(tree) if isinstance(n, ast.If) and _type_checking(n.test)]:
            node.body = []
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_runtime_imports_only_the_allowed_dependencies(path: Path) -> None:
    imported = _imports(path, at_runtime=True)
    third_party = imported - set(sys.stdlib_module_names) - {"sse_middleware", "exceptiongroup"}
    assert third_party <= RUNTIME | OPTIONAL.get(path.relative_to(PACKAGE).as_posix(), set()), third_party
    if SANS_IO in path.parents:
        assert not _imports(path) & {"anyio", "asyncio", "starlette", "trio"}, "sans-I/O modules do no I/O"


def test_a_type_checking_import_is_no_runtime_dependency() -> None:
    """The control: ``typing_extensions`` under ``if TYPE_CHECKING:`` passes, imported at run time fails."""
    probe = PACKAGE / "_runtime_probe.py"
    guarded = "import typing\nif typing.TYPE_CHECKING:\n    from typing_extensions import Unpack\n"
    try:
        probe.write_text(guarded)
        test_runtime_imports_only_the_allowed_dependencies(probe)
        probe.write_text("from typing_extensions import Unpack\n")
        with pytest.raises(AssertionError, match="typing_extensions"):
            test_runtime_imports_only_the_allowed_dependencies(probe)
    finally:
        probe.unlink()


# The layers, lowest first: a module may import its own layer and those below it, never one above (nor,
# within a layer, a sibling package: telemetry and resume know nothing of each other). TYPE_CHECKING
# imports count: a type the core names from above is a dependency all the same.
LAYERS: list[set[str]] = [
    {"_types", "_exceptions", "_version"},
    {"_core"},
    {"_settings_types"},
    {"_settings"},
    {"_telemetry", "_resume"},
    {"_asgi"},
    {"_check", "__init__", "__main__"},
]
_LAYER_OF = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _top(path: Path) -> str:
    """The layer name of a module: its first part below the package (``_core``, ``_settings``, ...)."""
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def _internal_imports(path: Path) -> set[str]:
    """The package's own modules that ``path`` imports, as their first part below the package."""
    package = path.relative_to(PACKAGE).with_suffix("").parts[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = (*base, *(node.module.split(".") if node.module else ()))
                if not target:  # ``from .. import x``: the package's own __init__ (or a module named x)
                    target = ("__init__",)
            elif node.module and node.module.split(".")[0] == "sse_middleware":
                target = tuple(node.module.split(".")[1:]) or ("__init__",)
            else:
                continue
            found.add(target[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "sse_middleware":
                    found.add(parts[1] if len(parts) > 1 else "__init__")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_layers_import_downward_only(path: Path) -> None:
    mine = _top(path)
    assert mine in _LAYER_OF, f"{mine} is in no layer: add it to LAYERS"
    for target in _internal_imports(path) - {mine}:
        assert target in _LAYER_OF, f"{target} is in no layer: add it to LAYERS"
        assert _LAYER_OF[target] < _LAYER_OF[mine] or (
            _LAYER_OF[target] == _LAYER_OF[mine] == len(LAYERS) - 1
        ), f"{mine} imports {target}, which is not below it"


def test_the_layer_check_sees_an_upward_import() -> None:
    """The control: the check finds a relative, an absolute and a TYPE_CHECKING import of a higher layer."""
    core = PACKAGE / "_core"
    for source in (
        "from .._settings import StreamingSettings\n",
        "import sse_middleware._telemetry.recorder\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..._asgi.stream import Stream\n",
    ):
        probe = core / "dialects" / "_layer_probe.py" if "..." in source else core / "_layer_probe.py"
        try:
            probe.write_text(source)
            with pytest.raises(AssertionError, match="not below it"):
                test_layers_import_downward_only(probe)
        finally:
            probe.unlink()


OWNER = PACKAGE / "_core" / "lifecycle.py"  # the one writer of a response's phase and its client's state
# The phase and whether we ended it: assigned nowhere else in the package.
_LIFECYCLE_STATE = {"phase", "ours"}
# The client's state and why we ended the stream: nowhere else through a lifecycle (``life.client``), nor in
# the shell under any name it has had (the stream's flags before they moved into the lifecycle).
_CLIENT_STATE = {"client", "connected", "ending", "abandoned", "write_failure"}
_SHELL_FLAGS = _CLIENT_STATE | {"disconnected", "detached", "cut", "failure"}
SHELL = PACKAGE / "_asgi"


def _through_life(node: ast.expr) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id == "life") or (isinstance(n, ast.Attribute) and n.attr == "life")
        for n in ast.walk(node)
    )


def _state_writes(source: str, *, shell: bool = False) -> list[int]:
    """Lines that assign ``<anything>.phase`` or ``.ours``, the client's state through a lifecycle
    (``life.client``, ``life.ending``, ...), or in the shell (``shell``) any of its old flags (plain,
    augmented or annotated)."""
    lines = [
        line
        for line, part in _assigned_attributes(source)
        if part.attr in _LIFECYCLE_STATE
        or (part.attr in _CLIENT_STATE and _through_life(part.value))
        or (shell and part.attr in _SHELL_FLAGS)
    ]
    return sorted(set(lines))


def _assigned_attributes(source: str) -> list[tuple[int, ast.Attribute]]:
    """Each attribute assigned (plain, augmented or annotated), with its statement's line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        found += [(node.lineno, p) for t in targets for p in ast.walk(t) if isinstance(p, ast.Attribute)]
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_lifecycle_assigns_a_phase(path: Path) -> None:
    if path == OWNER:
        assert _state_writes(path.read_text()), "the owner makes the moves"
        return
    assert not _state_writes(path.read_text(), shell=SHELL in path.parents), (
        "only _core/lifecycle.py changes a phase or the client's state: call a transition"
    )


def test_the_phase_check_sees_a_write_from_outside() -> None:
    """The control: the writes the old shell made (``r.phase = move(...)``, ``r.ours = True``) are found."""
    assert _state_writes("r.phase = move(r.phase, Phase.ENDED)\n") == [1]
    assert _state_writes("x = 1\nself.r.ours = True\n") == [2]
    assert _state_writes("a, s.life.phase = 1, 2\n") == [1]
    assert not _state_writes("phase = life.phase\nif life.ours: pass\n")
    # the client's state and the ending, as the stream kept them before they moved into the lifecycle
    assert _state_writes("self.detached = self.disconnected = True\nstream.life.client = Client.GONE\n") == [
        2
    ]
    assert _state_writes("self.detached = self.disconnected = True\nself.cut = True\n", shell=True) == [1, 2]
    assert _state_writes("s.life.ending = info\n") == [1]
    assert _state_writes("life.abandoned = True\nlife.write_failure = exc\n") == [1, 2]
    assert not _state_writes("timeline.ending = 'end'\n")  # another object's word, outside the shell


# -- one writer to the client -----------------------------------------------------------------------------

# The one caller of the server's send once a response is a stream: the Writer's put, every write's one
# frame-out point (through compressing's send_encoded when the stream is compressed).
WRITER = {
    PACKAGE / "_asgi" / "writer.py": {"Writer.put"},
    PACKAGE / "_asgi" / "write_lock.py": {"compressing.send_encoded"},
}
_SEND = {"send", "_send", "server_send", "_server_send"}  # how the shell names the server's send
# Responses that never are a stream of the app's own: the server's send is theirs, as without us.
NOT_A_STREAM = {
    "_asgi/responder.py": {
        "Responder.send",  # pass-through: the server's own send, one check at the start
        "Responder._send_otherwise",  # a body before any start: the server decides
        "Responder._start",  # the start itself, and a response that turns out to be no stream (or HEAD)
    },
    "_asgi/resume.py": {"Resumption.answer", "_Follow._write"},  # answered from the log: the app never runs
    "_asgi/chat_resume.py": {"ChatResume.answer", "_NoContentFor404.__call__"},  # the AI SDK's resume
    "_asgi/middleware.py": {"Refusing.__call__"},  # a bad setting: the lifespan's startup refused, no stream
}


def _send_calls(source: str) -> set[str]:
    """The functions (by qualified name) that call something named as the server's send is."""
    found: set[str] = set()

    def visit(node: ast.AST, where: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, (*where, child.name))
                continue
            if isinstance(child, ast.Call):
                func = child.func
                name = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if name in _SEND:
                    found.add(".".join(where) or "<module>")
            visit(child, where)

    visit(ast.parse(source), ())
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_writer_calls_the_servers_send(path: Path) -> None:
    if path in WRITER:
        callers = _send_calls(path.read_text())
        assert callers, "the writer calls it"
        others = callers - WRITER[path]
        assert not others, f"{others} call the server's send: only the writer's put may"
        return
    allowed = NOT_A_STREAM.get(path.relative_to(PACKAGE).as_posix(), set())
    callers = _send_calls(path.read_text()) - allowed
    assert not callers, f"{callers} call the server's send: ask the stream's writer (_asgi/writer.py)"


def test_the_send_check_sees_a_write_from_outside_the_writer() -> None:
    """The control: the writes the stream and its timers made before the writer existed are found, in a
    module and in a function the allowance does not name."""
    assert _send_calls(
        "class Stream:\n    async def deliver(self, d):\n        await self.server_send(d)\n"
    ) == {"Stream.deliver"}
    assert _send_calls("async def f(send):\n    await send({})\n") == {"f"}
    assert not _send_calls("async def f(writer):\n    await writer.frame(b'', 0.0)\n")
    probe = PACKAGE / "_asgi" / "_send_probe.py"
    try:
        probe.write_text(
            "class Timers:\n    async def beat(self):\n        await self.stream.server_send({})\n"
        )
        with pytest.raises(AssertionError, match=r"Timers\.beat"):
            test_only_the_writer_calls_the_servers_send(probe)
    finally:
        probe.unlink()
    # in the writer's module, a method other than put (or a function outside the class) is still found
    assert _send_calls(
        "class Writer:\n    async def put(self):\n        await self._send({})\n"
        "    async def last(self):\n        await self._send({})\n"
        "async def helper(send):\n    await send({})\n"
    ) - WRITER[PACKAGE / "_asgi" / "writer.py"] == {"Writer.last", "helper"}
    # in a module the allowance names, a function it does not name is still found
    extra = (
        "class Responder:\n    def send(self, m):\n        return self._send(m)\n"
        "    def extra(self):\n        self._send({})\n"
    )
    assert _send_calls(extra) - NOT_A_STREAM["_asgi/responder.py"] == {"Responder.extra"}


# -- no import circles ------------------------------------------------------------------------------------


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level(tree: ast.Module) -> list[ast.stmt]:
    """The statements run when the module is imported (inside ``if TYPE_CHECKING:``, ``try:`` ... too),
    not those in function bodies: a factory that imports the implementation it picks, when called
    (``_resume/store.py``'s ``open_store``), makes no circle of modules."""
    found: list[ast.stmt] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            todo.extend(node.body)
            todo.extend(getattr(node, "orelse", []))
            todo.extend(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                todo.extend(handler.body)
    return found


def _module_imports(path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``path`` imports, by dotted name, ``TYPE_CHECKING`` imports included:
    ``from .x import y`` is module ``x.y`` when that is a module, else ``x``."""
    here = _module(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in _module_level(ast.parse(path.read_text())):
        bases: list[tuple[str, list[str]]] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join((*base, *(node.module.split(".") if node.module else ())))
            else:
                target = node.module or ""
            bases.append((target, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            bases.extend((alias.name, []) for alias in node.names)
        for target, names in bases:
            if not target.startswith("sse_middleware"):
                continue
            subs = {f"{target}.{name}" for name in names} & known
            found |= subs or ({target} & known)
    return found - {_module(path)}


def import_circles(paths: list[Path]) -> list[list[str]]:
    """Every circle of imports among ``paths`` (Tarjan's strongly connected components of size > 1)."""
    known = {_module(p) for p in paths}
    graph = {_module(p): _module_imports(p, known) for p in paths}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                strong(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strong(node)
    return circles


# The one circle left, outside the shell: the core's config names the dialect names for the type checker,
# and detection reads the config. It goes when the dialect names are derived from the format classes.
KNOWN_CIRCLES = [["sse_middleware._core.config", "sse_middleware._core.dialects.detect"]]


def test_no_import_circle_between_modules() -> None:
    """Calls run one way (a stream and its parts, the middleware and its responder): no module imports
    one that imports it back, directly or around a longer circle, ``TYPE_CHECKING`` imports included."""
    circles = import_circles(sorted(PACKAGE.rglob("*.py")))
    assert [c for c in circles if c not in KNOWN_CIRCLES] == []
    assert not import_circles(sorted(SHELL.rglob("*.py")))


def test_the_circle_check_sees_a_type_checking_import_back() -> None:
    """The control: the shell's old circle (the timers naming the stream for the type checker, the stream
    importing the timers) is found, and so is a longer one; a one-way pair is not."""
    asgi = PACKAGE / "_asgi"
    timers, stream = asgi / "_probe_timers.py", asgi / "_probe_stream.py"
    third = asgi / "_probe_third.py"
    try:
        stream.write_text("from ._probe_timers import Timers\n")
        timers.write_text(
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._probe_stream import S\n"
        )
        assert import_circles([stream, timers]) == [
            ["sse_middleware._asgi._probe_stream", "sse_middleware._asgi._probe_timers"]
        ]
        timers.write_text("from . import _probe_third\n")
        third.write_text("import sse_middleware._asgi._probe_stream\n")
        assert len(import_circles([stream, timers, third])) == 1
        third.write_text("from .._core import lifecycle\n")
        assert import_circles([stream, timers, third]) == []
    finally:
        for probe in (timers, stream, third):
            probe.unlink(missing_ok=True)


RUN_OWNER = PACKAGE / "_core" / "recovery" / "run.py"  # the one writer of a recovered run's stage


def _attribute_writes(source: str, names: set[str]) -> list[int]:
    """Lines that assign ``<anything>.<name>`` for one of ``names`` (plain, augmented or annotated)."""
    return sorted({line for line, part in _assigned_attributes(source) if part.attr in names})


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_run_state_assigns_a_runs_stage(path: Path) -> None:
    """A recovered stream's run (waiting for its start, streaming, refused, failed, ended, given up) moves
    only through :class:`~sse_middleware._core.recovery.run.RunState`'s transitions."""
    writes = _attribute_writes(path.read_text(), {"stage"})
    if path == RUN_OWNER:
        assert writes, "the owner makes the moves"
        return
    assert not writes, "only _core/recovery/run.py changes a run's stage: call a transition"


def test_the_stage_check_sees_a_write_from_outside() -> None:
    assert _attribute_writes("self.state.stage = Stage.FAILED\n", {"stage"}) == [1]
    assert _attribute_writes("x = 1\na, r.stage = 1, 2\n", {"stage"}) == [2]
    assert not _attribute_writes("stage = state.stage\nif state.stage is Stage.WAITING: pass\n", {"stage"})


def _clocks_through_any(source: str) -> list[int]:
    """Lines where something named ``*clocks*`` (a parameter, an attribute) is annotated ``Any``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        named: str | None = None
        annotation: ast.expr | None = None
        if isinstance(node, ast.arg):
            named, annotation = node.arg, node.annotation
        elif isinstance(node, ast.AnnAssign):
            target = node.target
            named = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
            annotation = node.annotation
        if named and "clocks" in named and isinstance(annotation, ast.Name) and annotation.id == "Any":
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_holds_the_writers_clocks_through_any(path: Path) -> None:
    """What writes the stall clock (recovery, between runs) holds the writer's typed ``Clocks``."""
    assert not _clocks_through_any(path.read_text())


def test_the_clocks_check_sees_an_any() -> None:
    assert _clocks_through_any("def f(self, clocks: Any) -> None: ...\n") == [1]
    assert _clocks_through_any("class A:\n    writer_clocks: Any\n") == [2]
    assert not _clocks_through_any("def f(self, clocks: Clocks, other: Any) -> None: ...\n")
