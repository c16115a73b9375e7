"""No module of enact imports from a layer above its own.

The layers, from the floor up, are declared once below; a module belongs to
the entry that names the longest prefix of it (or, written `=name`, just it). Every import counts: at the
top of a module, inside a function (a lazy import is still an import) and
under ``TYPE_CHECKING`` (a type is a dependency too). What runs upward today
is listed in ``EXCEPTIONS`` with its reason; the list may only shrink.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "enact"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("leaves: plain helpers that know nothing of the daemon", (
        "enact", "enact.home", "enact.process", "enact.retry", "enact.cancellation", "enact.tables",
        "enact.safe_files", "enact.credentials", "enact.claimed_clock", "enact.home_guard", "enact.environment",
        "enact.schedules", "enact.clock", "enact.entry_points", "enact.errors", "enact.addresses",
        "enact.wording", "enact.exit_codes",
        "enact.frozen_dataclass",  # the frozen classes' dataclass, made cheaper to apply
    )),
    ("the contract and the store: messages, storage, settings, the fence, metrics", (
        "enact.messages", "enact.storage", "enact.config", "enact.fence", "enact.metrics",
        "enact.ownership",  # whose a conversation is: the authority rule commands and the chat path share
        "enact.spoken",  # a command said in chat's words or the CLI's, by who asked
    )),
    ("the actor runtime: base, supervisor, keyed pools, asks, group commit", (
        "enact.actors._asks", "enact.actors._base", "enact.actors._batching", "enact.actors._long_work",
        "enact.actors._pool", "enact.actors._reply", "enact.actors._roster", "enact.actors._specs",
        "enact.actors._ticking", "enact.actors.supervisor",
    )),
    ("the command registry, its journaled runs and the owner's programs", (
        "enact.commands", "enact.command_journal", "enact.programs",
    )),
    ("components, the channel contract and the model runtimes they plug in", (
        "enact.components", "enact.runtime",
        "enact.budget",  # the budget every runtime call is held to: its settings, its day, the gate callers read
        "=enact.channels",  # the package's own module: what a channel is; the channels in it are features
    )),
    ("the features", ("enact.chat", "enact.memory", "enact.tasks", "enact.channels", "enact.backup",
                      "enact.budget.budget_actor", "enact.budget.component")),
    ("evolution: studies the features' history, proposes tasks; skills, assessed as its candidates", (
        "enact.evolution", "enact.skills")),
    ("the daemon's own component: the fence's actor, the token tally, /help", ("enact.epoch_actor", "enact.core")),
    ("the web console: the features' pages, over the requests the CLI sends", ("enact.console",)),
    ("the daemon: start-up and shut-down, and its plumbing", ("enact.daemon", "enact._app")),
    ("the CLI, which also runs the daemon", (
        "enact.cli", "enact.__main__",
        "enact.update",  # replaces the running daemon from outside it, through the CLI's client
        "enact.reference",  # writes the CLI and configuration references from them
    )),
)

CONTRACT_VALUES = {
    "enact.memory.facts": "a fact, as memory's protocol carries it",
    "enact.memory.context": "what the context of a turn decided, as memory's protocol carries it",
    "enact.memory.ranking": "what a fact's startup rank is made of (enact.memory.context is ranked by it)",
    "enact.memory.identity": "the identities memory's protocol carries",
    "enact.tasks.records": "a task and its events, as the tasks protocol carries them",
    "enact.tasks.scheduling": "a cron schedule and a backlog item, as the scheduler's protocol carries them",
    "enact.evolution.candidates": "an improvement candidate, as the curator's protocol carries it",
    "enact.evolution.modes": "the evolve mode, as the curator's protocol carries it",
    "enact.evolution.signals": "an evidence signal, as the scanner's protocol carries it",
}
"""Plain values that a protocol in ``enact.messages`` carries but that live
beside their feature's rules (moving them into the messages was measured to
make more imports run upward). The protocols may import them; each of them
imports nothing above the contract but the others of this list."""

EXCEPTIONS: dict[tuple[str, str], str] = {}
"""(importer, imported), each a prefix as in LAYERS: an import that runs
upward today, and why. Remove an entry once its import is gone."""


def _layer_of(module: str) -> int:
    """The layer naming the longest prefix of ``module``; an entry written
    ``=name`` names that module only, and wins over any prefix."""
    best, index = -1, -1
    for position, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            exact = prefix.startswith("=")
            name = prefix.lstrip("=")
            matches = module == name if exact else module == name or module.startswith(name + ".")
            strength = 1 << 16 if exact else len(name)
            if matches and strength > best:
                best, index = strength, position
    if index < 0:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it where it belongs")
    return index


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(module: str) -> bool:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Each enact module ``path`` imports, with the line; ``from a import b``
    names ``a.b`` when that is a module."""
    module = _module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            names = [f"{source}.{alias.name}" if _exists(f"{source}.{alias.name}") else source
                     for alias in node.names]
        else:
            continue
        for name in names:
            if name == "enact" or name.startswith("enact."):
                while not _exists(name):
                    name = name.rpartition(".")[0]
                yield name, node.lineno


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _excepted(importer: str, imported: str) -> bool:
    return any((importer == a or importer.startswith(a + ".")) and (imported == b or imported.startswith(b + "."))
               for a, b in EXCEPTIONS)


def _upward() -> list[tuple[str, int, str]]:
    found = []
    for path in _modules():
        importer = _module_of(path)
        for imported, line in _imports(path):
            if _layer_of(imported) <= _layer_of(importer):
                continue
            if imported in CONTRACT_VALUES and importer.startswith("enact.messages."):
                continue
            if not _excepted(importer, imported):
                found.append((importer, line, imported))
    return found


def test_every_module_is_in_a_layer() -> None:
    for path in _modules():
        _layer_of(_module_of(path))


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    found = [f"{importer}:{line} imports {imported} "
             f"({LAYERS[_layer_of(importer)][0].split(':')[0]} -> {LAYERS[_layer_of(imported)][0].split(':')[0]})"
             for importer, line, imported in _upward()]
    assert not found, "imports from a higher layer:\n" + "\n".join(found)


def test_the_contract_values_import_nothing_above_the_contract_but_each_other() -> None:
    contract = next(i for i, (name, _) in enumerate(LAYERS) if name.startswith("the contract"))
    for module in CONTRACT_VALUES:
        path = PACKAGE.parent.joinpath(*module.split(".")).with_suffix(".py")
        above = [imported for imported, _ in _imports(path)
                 if _layer_of(imported) > contract and imported not in CONTRACT_VALUES]
        assert not above, f"{module}, a value the protocols carry, imports {above}"


def test_every_exception_is_still_needed() -> None:
    for importer, imported in sorted(EXCEPTIONS):  # none today: keep it so
        assert _layer_of(imported) > _layer_of(importer), f"{importer} -> {imported} does not run upward"
        assert any(
            (module == importer or module.startswith(importer + "."))
            and any(name == imported or name.startswith(imported + ".") for name, _ in _imports(path))
            for path in _modules()
            for module in [_module_of(path)]
        ), f"{importer} no longer imports {imported}: remove the exception"


def test_the_layers_say_what_the_design_says() -> None:
    # The protocols and storage are the floor, the daemon and the CLI the top.
    assert _layer_of("enact.messages.tasks") < _layer_of("enact.actors._base") < _layer_of("enact.tasks.queue")
    assert _layer_of("enact.storage") < _layer_of("enact.commands")
    assert _layer_of("enact.cli._server") > _layer_of("enact.daemon") > _layer_of("enact.core")
    # A runtime is called by the features; the actor runtime is under them.
    assert _layer_of("enact.chat.inbox_actor") > _layer_of("enact.runtime.codex")
    assert _layer_of("enact.tasks.workers_actor") > _layer_of("enact.runtime.codex")
    assert _layer_of("enact.actors._asks") < _layer_of("enact.memory.forgetting")
