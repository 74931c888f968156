"""The layout the design asks for, read from the sources alone: small modules, small
functions, no import circle, app.yaml beside the Dockerfile, capabilities that plug in
(``tests/test_layers_built.py`` runs what needs a process: imports, the wheel, the image)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for folder in ("bot", "handlers")
        for path in (ROOT / folder).rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_app_yaml_and_dockerfile_are_at_the_top_level() -> None:
    for name in ("app.yaml", "Dockerfile", "pyproject.toml"):
        assert (ROOT / name).is_file(), name
    assert "bot/sandbox" in (ROOT / ".dockerignore").read_text().split()


def test_a_constructor_of_more_than_four_takes_them_by_keyword() -> None:
    """Nine positional arguments of similar types are a mix-up waiting to happen."""
    crowded = []
    for package in ("bot", "handlers"):
        for path in (ROOT / package).rglob("*.py"):
            if "sandbox" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                    positional = node.args.posonlyargs + node.args.args
                    if len(positional) - 1 > 4:
                        crowded.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert crowded == []


def test_the_core_s_services_and_functions_stay_small() -> None:
    """A service of the core takes at most 10 things to be built (more is several services
    in one: split it, or hand it one of its parts), and no function of the core runs past
    80 lines."""
    big = []
    for path in (ROOT / "handlers").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
            taken = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if node.name == "__init__" and len(taken) - 1 > 10:
                big.append(f"{where} takes {len(taken) - 1}")
            if (node.end_lineno or node.lineno) - node.lineno + 1 > 80:
                big.append(f"{where} is {(node.end_lineno or 0) - node.lineno + 1} lines")
    assert big == []


def test_no_class_name_is_defined_twice() -> None:
    """One name, one thing: a reader (and an import) never has to ask which one is meant."""
    where: dict[str, list[str]] = {}
    for package in ("bot", "handlers"):
        for path in (ROOT / package).rglob("*.py"):
            if "sandbox" in path.parts:
                continue
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef):
                    where.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_each_subcommand_s_usage_starts_with_its_name() -> None:
    from handlers.capabilities import REGISTRY

    assert len(REGISTRY.commands) > 15
    assert all(e.usage.startswith(f"/cluster {e.name}") for e in REGISTRY.commands)


def test_no_module_fills_another_module_s_state_when_imported() -> None:
    """``X.update(...)``, ``X.append(...)`` or ``X[k] = v`` at a module's top level on a name
    it imported: the state would depend on what else was imported, and in what order."""
    fills = []
    for package in ("bot", "handlers"):
        for path in (ROOT / package).rglob("*.py"):
            if "sandbox" in path.parts:
                continue
            tree = ast.parse(path.read_text())
            imported = {
                alias.asname or alias.name
                for node in tree.body
                if isinstance(node, ast.ImportFrom)
                for alias in node.names
            }
            for node in tree.body:
                call = node.value if isinstance(node, ast.Expr) else None
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and isinstance(call.func.value, ast.Name)
                    and call.func.value.id in imported
                    and call.func.attr in ("update", "append", "extend", "setdefault", "add")
                ):
                    fills.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert fills == []


def test_the_core_does_not_know_slack_s_error_codes() -> None:
    """Which of a platform's answers mean "the bot may not post here" is its adapter's."""
    from bot.slack.messenger import NOT_POSTABLE

    core = "".join(path.read_text() for path in (ROOT / "handlers").rglob("*.py"))
    assert [code for code in NOT_POSTABLE if code in core] == []


def _imports(path: Path, modules: set[str], typing: bool = False) -> set[str]:
    """The project modules ``path`` imports, at its top or in a function (a lazy import is
    still a dependency); imports only for the type checker are left out unless ``typing``."""
    found: set[str] = set()
    for statement in ast.parse(path.read_text()).body:
        checking = isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.dump(statement.test)
        if checking and not typing:
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                submodules = {f"{node.module}.{a.name}" for a in node.names} & modules
                found |= submodules
                if node.module in modules and len(submodules) < len(node.names):
                    found.add(node.module)  # a name from the module itself
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names} & modules
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import one another in a ring (Tarjan's components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            ring = []
            while True:
                other = stack.pop()
                ring.append(other)
                if other == module:
                    break
            if len(ring) > 1:
                found.append(sorted(ring))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle() -> None:
    """Each module can be read, and changed, after the ones it imports: imports for the type
    checker count too (a reader and mypy follow them)."""
    paths = {}
    for package in ("bot", "handlers"):
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            paths[name.removesuffix(".__init__")] = path
    modules = set(paths)
    graph = {name: _imports(path, modules, typing=True) - {name} for name, path in paths.items()}
    assert (
        "handlers.changes.approvals"
        in graph["handlers.idle.clicks"] | graph["handlers.idle.alerts"]
    )
    assert "handlers.reading.reports" in graph["handlers.capability"]  # for the type checker
    assert _circles(graph) == []
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Slack's own syntax and names: mentions, dates and channel links in mrkdwn, its id patterns,
# its Web API methods. The core says "a person", "a message", "not postable here".
SLACK_MARKS = ("<@", "<!", "<#", "[UW][A-Z0-9]", "S[A-Z0-9]", "chat.", "views.", "files.")
SLACK_METHODS = ("postMessage", "postEphemeral", "uploadV2", "usergroups", "conversations")


def _is_ts(name: str) -> bool:
    return name == "ts" or name.endswith("_ts")


def test_no_slack_word_or_id_pattern_in_the_core() -> None:
    found = []
    for path in (ROOT / "handlers").rglob("*.py"):
        tree = ast.parse(path.read_text())
        where = str(path.relative_to(ROOT))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Name):
                names.append(node.id)
            elif isinstance(node, ast.Attribute):
                names.append(node.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.append(node.name)
            elif isinstance(node, ast.arg):
                names.append(node.arg)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
            # Slack names a message by its ts; the core says MessageId (card_message, thread)
            found += [f"{where}: {n}" for n in names if "slack" in n.lower() or _is_ts(n)]
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                marks = [m for m in (*SLACK_MARKS, *SLACK_METHODS) if m in node.value]
                found += [f"{where}:{node.lineno}: {m!r}" for m in marks]
    assert found == []


# The flows that change something: a request's approval, execution and end, a release, the
# sweep that alerts, and what the alerts' clicks do.
WRITE_SIDE = {
    *(f"handlers.changes.{m}" for m in ("approvals", "execution", "tracking", "ledger")),
    *(f"handlers.changes.{m}" for m in ("release", "approval_card")),
    *(f"handlers.idle.{m}" for m in ("alerts", "clicks")),
    "handlers.sweep.sweep",
}


def _module_graph() -> dict[str, set[str]]:
    paths = {}
    for package in ("bot", "handlers"):
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            paths[name.removesuffix(".__init__")] = path
    return {name: _imports(path, set(paths)) - {name} for name, path in paths.items()}


def test_the_read_side_does_not_depend_on_the_write_side() -> None:
    graph = _module_graph()
    assert set(graph) >= WRITE_SIDE
    reading = sorted(m for m in graph if m.startswith("handlers.reading"))
    assert "handlers.reading.reports" in reading
    seen: set[str] = set()
    todo = list(reading)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    assert seen & WRITE_SIDE == set()
    assert graph["handlers.services"] & WRITE_SIDE  # the composition root does see it


def test_handlers_is_laid_out_by_capability() -> None:
    packages = {p.name for p in (ROOT / "handlers").iterdir() if (p / "__init__.py").exists()}
    assert {"changes", "idle", "slurm", "reading", "forms"} <= packages
    top = {p.stem for p in (ROOT / "handlers").glob("*.py")} - {"__init__"}
    assert not {m for m in top if m.startswith(("idle", "slurm", "approval", "form"))}, top


# what every capability builds on, beside the core: the change flow (changes), the cluster
# directory and the read side (reading), Slurm's own vocabulary (slurm)
SHARED = {"changes", "reading", "slurm"}


def test_nothing_but_the_list_names_a_plugged_in_capability() -> None:
    """The core (its modules, the sweep, the durable path, the domain, the forms) and the
    shared packages import no module of a capability that plugs in, type-only imports
    counted: only ``handlers/capabilities.py`` names them. Capabilities may use each other."""
    from handlers.capabilities import CAPABILITIES

    plugged = {c.build.__module__.split(".")[1] for c in CAPABILITIES} - SHARED
    assert {"idle", "health", "spend", "schedules"} <= plugged  # read from the registry
    paths = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts): p
        for p in (ROOT / "handlers").rglob("*.py")
    }
    modules = set(paths)
    named = {
        module: sorted(
            m for m in _imports(path, modules, typing=True) if m.split(".")[1] in plugged
        )
        for module, path in paths.items()
        if module.split(".")[1] not in plugged and module != "handlers.capabilities"
    }
    assert {module: found for module, found in named.items() if found} == {}


def test_what_a_person_can_do_is_declared_once() -> None:
    """A subcommand, the form its missing words open and its usage are one entry; a click is
    one declaration; nothing else reads a command's words (no second grammar)."""
    from handlers.capabilities import CAPABILITIES, REGISTRY

    assert {e.name for e in REGISTRY.commands if e.form is not None} == {
        "resize",
        "delete",
        "slurm",
        "schedule",
        "node",
    }
    ids = [i for c in CAPABILITIES for click in c.clicks for i in click.ids]
    assert len(ids) == len(set(ids))
    core = (ROOT / "handlers").rglob("*.py")
    readers = [p.name for p in core if "normal(text).split()" in p.read_text()]
    assert readers == ["dispatch.py"]  # the one place a command's text becomes words


def test_every_kind_of_form_goes_through_the_same_flow() -> None:
    """A kind of form is one entry in its capability's ``forms``: the flow and the platform's
    modals run any kind without naming one (no ladder of ``if state.kind == ...``)."""
    from handlers.capabilities import REGISTRY
    from handlers.forms.asks import FormKind

    kinds = {v for k, v in vars(FormKind).items() if not k.startswith("_")}
    assert kinds <= set(REGISTRY.forms)  # every form a shipped command asks for is there
    for path in ("handlers/forms/flow.py", "bot/slack/modals.py", "bot/slack/listeners.py"):
        source = (ROOT / path).read_text()
        assert "FormKind" not in source and ".kind ==" not in source, path


def test_the_composition_root_holds_a_chat_platform_not_slack() -> None:
    """The platform seam: ``bot/app.py`` builds the core and hands it to the chat platform
    the settings name (``bot/platform.py``), never importing Slack's package; the service's
    routes and the pipeline hook are given what they call, not the service. A second
    platform is its package and one line in ``PLATFORMS``."""
    graph = _module_graph()
    from bot.platform import PLATFORMS

    assert not {m for m in graph["bot.app"] | graph["bot.serve"] if m.startswith("bot.slack")}
    assert "bot.platform" in graph["bot.app"]
    assert PLATFORMS == {"slack": "bot.slack.adapter:SlackAdapter"}  # the one switch
    for module in ("bot.routes", "bot.release_api", "bot.slack.adapter"):
        assert "bot.app" not in graph[module], module
    assert not {m for m in graph["bot.routes"] | graph["bot.release_api"] if "slack" in m}


def test_the_stand_ins_are_a_package_of_their_own() -> None:
    """The stand-ins answer as Slack and the control plane document, never by the bot's own
    reading of them: they import nothing of the service (a rule shared with the bot would
    make the simulator agree with the bot because one wrote both). The service reaches them
    only from the commands that run them (demo, sandbox, simulator)."""
    graph = _module_graph()
    stand_ins = {m for m in graph if m.startswith("bot.sandbox")}
    assert len(stand_ins) > 20
    reached = {m for s in stand_ins for m in graph[s]} - stand_ins
    assert {m for m in reached if m.startswith(("bot.", "handlers."))} == set()
    users = {m for m in graph if m not in stand_ins and graph[m] & stand_ins}
    assert users <= {"bot.demo", "bot.cli"}, users
