"""The layout shows the design: every module sits on one floor, imports only from its own floor or below (entry
points excepted: they sit on the top floor), and no modules import each other in a circle.

The imports are read from the source (ast), every one of them: at the top, inside functions (a late import
hides nothing) and under ``TYPE_CHECKING``. ``import a.b.c`` also runs the ``__init__`` of ``a.b`` (and
``a``), so an import of a module counts as an import of each package above it too, except the importer's own
packages, which are already being imported when it runs.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.support.common import REPO as _REPO

PACKAGE = _REPO / "firstlight"

# The floors, lowest first. A module is on the floor of the longest name below that is it or a package above it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Leaves: words, text, files, settings and the observations' types; they import only each other. The
    # package itself is a leaf when imported: it holds the version (the reports print it) and loads the public
    # API's names on first use, by name; its ``if TYPE_CHECKING:`` imports of them, which never run, are the one
    # thing this test does not read.
    ("leaves", ("firstlight", "firstlight._version", "firstlight.vocab", "firstlight.redact", "firstlight.framing",
                "firstlight.learnedframe", "firstlight.logtext", "firstlight.formats", "firstlight.errors",
                "firstlight.files", "firstlight.deaths", "firstlight.config", "firstlight.timeline",
                "firstlight.timestamps", "firstlight.cputime", "firstlight.bounded")),
    # The one HTTP layer: how to ask a server, never what an engine is.
    ("wire", ("firstlight.wire",)),
    # Data about the engines: profiles, phase markers, failure lines, detection from lines, endpoints, commands.
    ("engines", ("firstlight.engines",)),
    # What firstlight observes and measures, and reads in a line: samplers, the readiness ladder and the
    # identification by endpoints, the checks before launch, the line interpreter, the benchmark client, the
    # history's store.
    ("observe", ("firstlight.samplers", "firstlight.probes", "firstlight.preflight", "firstlight.interpret",
                 "firstlight.bench", "firstlight.history")),
    # Observations in, verdict out: the judge, what it follows (trackers, phases), its typed result and its summary's
    # shapes, the one analysis of its output (anatomy, start type, engine clock), the serving tracker.
    ("judge", ("firstlight.judge", "firstlight.assessment", "firstlight.trackers", "firstlight.phases",
               "firstlight.result", "firstlight.analysis", "firstlight.summary", "firstlight.answers",
               "firstlight.starts", "firstlight.budgets", "firstlight.forecast",
               "firstlight.anatomy", "firstlight.serving", "firstlight.group")),
    # The one code that feeds a judge (issue 24) and the replay of a log through it.
    ("drive", ("firstlight.drive", "firstlight.logreplay")),
    # What is told to people and machines: reporters, the report, the record.
    ("report", ("firstlight.report",)),
    # A watch: the session, the launcher, the supervision after READY; the one builder of its settings.
    ("runner", ("firstlight.runner", "firstlight.settings")),
    # Watches of a different shape: a systemd unit's attempts; a container; the simulated server (a demo and a test
    # fixture).
    ("units", ("firstlight.units", "firstlight.containers", "firstlight.sim")),
    # Entry points: the command line, the public Python API, the pytest plugin, ``python -m``. They may import
    # anything; nothing imports them.
    ("entry", ("firstlight.cli", "firstlight.__main__", "firstlight.sim.__main__", "firstlight.api",
               "firstlight.pytest_plugin")),
)

# Known upward imports: none (issue 24's driver work removed the last ones: replay left engines/ for
# firstlight/logreplay.py, and the report no longer asks the runner how to detect the engine). No entry belongs
# here.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The firstlight modules that ``name`` imports explicitly (``from pkg import submodule`` is the submodule)."""
    known = set(known)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    body = _parsed(path.read_text(encoding="utf-8")).body
    if name == "firstlight":  # the façade: names for type checkers only (LAYERS, leaves)
        body = [n for n in body if not _is_type_checking_block(n)]
    for node in (n for statement in body for n in ast.walk(statement)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            targets = [target] + [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
        for t in targets:
            if t == "firstlight" or t.startswith("firstlight."):
                while t not in known and "." in t:
                    t = t.rsplit(".", 1)[0]
                found.add(t)
    found.discard(name)
    return found


@functools.cache
def _parsed(text: str) -> ast.Module:
    """Each module's tree, parsed once for all the checks of this file (read only)."""
    return ast.parse(text)


def _is_type_checking_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(mods: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules importing it runs: the ones it names, and the packages above them that are not
    its own."""
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        own = set(_ancestors(name))
        edges = set()
        for target in _imported(name, path, mods):
            edges.add(target)
            edges.update(a for a in _ancestors(target) if a not in own and a in mods)
        edges.discard(name)
        graph[name] = edges
    return graph


@functools.cache
def _package_graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(targets) for name, targets in import_graph(modules()).items()}


def package_graph() -> dict[str, set[str]]:
    """firstlight's own import graph, built once for the checks of this file: a copy each may change."""
    return {name: set(targets) for name, targets in _package_graph().items()}


def layer_of(name: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the matching name, floor)
    for floor, (_, names) in enumerate(LAYERS):
        for n in names:
            if (name == n or name.startswith(n + ".")) and (best is None or len(n) > best[0]):
                best = (len(n), floor)
    return None if best is None else best[1]


def upward_imports(graph: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    entry = len(LAYERS) - 1
    found = []
    for name, targets in graph.items():
        floor = layer_of(name)
        assert floor is not None
        if floor == entry:
            continue
        for t in targets:
            t_floor = layer_of(t)
            assert t_floor is not None
            if t_floor > floor:
                found.append((name, t))
    return sorted(found)


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(iter(children), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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
                    found.append(sorted(component))
    return found


# -- the tests ------------------------------------------------------------------------------------------------
def test_every_module_is_on_a_floor():
    assert [m for m in modules() if layer_of(m) is None] == []


def test_no_module_imports_from_a_higher_floor_but_the_known_ones():
    upward = upward_imports(package_graph())
    unexpected = [(m, t, f"{LAYERS[layer_of(m) or 0][0]} imports {LAYERS[layer_of(t) or 0][0]}")
                  for m, t in upward if (m, t) not in KNOWN_UPWARD]
    assert unexpected == []


def test_the_allow_list_holds_only_live_violations():
    upward = set(upward_imports(package_graph()))
    assert [pair for pair in KNOWN_UPWARD if pair not in upward] == []


def test_no_import_cycle():
    assert cycles(package_graph()) == []


def test_the_checks_find_an_upward_import_a_late_one_and_a_cycle(tmp_path: Path):
    """The same checks on a made-up package: a leaf importing the CLI inside a function, and a circle through a
    package's ``__init__`` (what ``wire/identify.py``'s late import of ``engines`` was)."""
    root = tmp_path / "firstlight"
    files = {
        "__init__.py": "",
        "vocab.py": "def f():\n    from firstlight.cli import app\n",
        "cli/__init__.py": "", "cli/app.py": "",
        "wire/__init__.py": "from firstlight.wire.identify import x\n",
        "wire/content.py": "", "wire/identify.py": "def x():\n    from firstlight.engines import y\n",
        "engines/__init__.py": "from .detect import y\n",
        "engines/detect.py": "from firstlight.wire.content import z\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    mods = {".".join(p.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__"): p
            for p in sorted(root.rglob("*.py"))}
    graph = import_graph(mods)
    assert ("firstlight.vocab", "firstlight.cli.app") in upward_imports(graph)
    assert ("firstlight.wire.identify", "firstlight.engines") in upward_imports(graph)
    assert cycles(graph) == [["firstlight.engines", "firstlight.engines.detect", "firstlight.wire",
                              "firstlight.wire.identify"]]


# The waist (issue 36, item 3): the judge's value types (Assessment, Event, Evidence, Progress) live in
# firstlight.assessment, and everything that only reads a verdict (every reporter, the report, the units, the pump)
# imports them from there. Only what holds a judge names firstlight.judge: the one driver and the replay of a log,
# the session's steps (its facts), the result's constructors (``RunResult.from_judge``), the one analysis of a judged
# start (``firstlight.analysis``) and the report's replay.
JUDGE_HOLDERS = {"firstlight.drive", "firstlight.logreplay", "firstlight.runner.session", "firstlight.result",
                 "firstlight.analysis", "firstlight.report.series"}


def judge_importers(graph: Mapping[str, set[str]]) -> set[str]:
    return {name for name, targets in graph.items() if "firstlight.judge" in targets and name != "firstlight.judge"}


def test_only_what_holds_a_judge_imports_the_judge():
    graph = package_graph()
    extra = judge_importers(graph) - JUDGE_HOLDERS - {n for n in graph if layer_of(n) == len(LAYERS) - 1}
    assert not extra, f"import the value types from firstlight.assessment instead: {sorted(extra)}"


def test_the_waist_rule_sees_a_reporter_importing_the_judge():
    graph = package_graph()
    graph["firstlight.report.console"] = {*graph["firstlight.report.console"], "firstlight.judge"}
    assert "firstlight.report.console" in judge_importers(graph) - JUDGE_HOLDERS


def session_subclasses(sources: Mapping[str, str]) -> list[str]:
    """Classes that derive from the Session (by name, as the source writes its bases)."""
    found = []
    for name, text in sources.items():
        for node in ast.walk(_parsed(text)):
            if isinstance(node, ast.ClassDef) and any(
                    (isinstance(b, ast.Name) and b.id == "Session")
                    or (isinstance(b, ast.Attribute) and b.attr == "Session") for b in node.bases):
                found.append(f"{name}.{node.name}")
    return found


def test_a_session_is_composed_from_its_parts_never_subclassed():
    """A unit's or a container's session is a Session given their sources' factory (``sources=``)."""
    texts = {p.relative_to(_REPO).with_suffix("").as_posix().replace("/", "."): p.read_text()
             for p in PACKAGE.rglob("*.py")}
    assert session_subclasses(texts) == []
    texts["firstlight.units.x"] = "from firstlight.runner import session\nclass UnitSession(session.Session): pass\n"
    assert session_subclasses(texts) == ["firstlight.units.x.UnitSession"]
