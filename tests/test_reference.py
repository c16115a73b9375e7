"""The configuration and CLI references (``docs/reference/``) are written from
the code by ``enact.reference`` (``make docs``); they must be current and
carry every key, command and exit code."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from enact import reference
from enact.cli._client import BadRequest, ConnectionLost, DaemonError, NotRunning
from enact.cli._group import main
from enact.cli._options import STATUSES, failure_of
from enact.config import Setting
from enact.exit_codes import MEANINGS, ExitCode
from enact.messages.common import NotFound, RefusalCode, Refused

PAGES = reference.pages()
CONFIGURATION = PAGES["configuration.md"]
CLI = PAGES["cli.md"]
SETTINGS = reference.own_components().settings()
"""The daemon's own settings and those of enact's built-in components."""


def test_the_committed_reference_pages_are_what_the_code_writes_now() -> None:
    for name, text in PAGES.items():
        committed = reference.PAGES / name
        assert committed.is_file(), f"docs/reference/{name} is missing: run `make docs`"
        assert committed.read_text(encoding="utf-8") == text, f"docs/reference/{name} is out of date: run `make docs`"


def test_the_check_mode_names_a_stale_page_and_make_docs(tmp_path: Path) -> None:
    (tmp_path / "cli.md").write_text(CLI, encoding="utf-8")
    (tmp_path / "configuration.md").write_text(CONFIGURATION + "edited by hand\n", encoding="utf-8")
    assert reference.stale(tmp_path) == ["configuration.md"]
    assert "make docs" in reference.GENERATED


def test_the_pages_hold_nothing_of_the_machine_they_were_written_on() -> None:
    for text in PAGES.values():
        assert str(Path.home()) not in text and str(Path.cwd()) not in text
        assert str(reference.PAGES.parent.parent) not in text
        assert "Sentinel" not in text and "object at 0x" not in text


def _row_cells(page: str, first: str) -> list[str]:
    """The cells of the table row that starts with the cell ``first``, as the
    reader sees them (escaped pipes and ``<`` back)."""
    [row] = [line for line in page.splitlines() if line.startswith(f"| {first} |")]
    cells = re.split(r"(?<!\\)\|", row.strip().strip("|"))
    return [html.unescape(cell.strip().replace("\\|", "|")) for cell in cells]


def _setting_row(setting: Setting) -> dict[str, str]:
    header = ["key", "type", "default", "allowed", "environment", "component", "does"]
    return dict(zip(header, _row_cells(CONFIGURATION, f"`{setting.key}`"), strict=True))


def test_every_setting_has_a_row_with_its_variable_range_default_and_component() -> None:
    for setting in SETTINGS:
        row = _setting_row(setting)
        assert f"`{setting.env_name}" in row["environment"], setting.key
        assert row["allowed"] == setting.allowed, setting.key
        assert row["component"] == setting.component, setting.key
        assert row["default"] == f"`{reference.toml_value(setting.default)}`", setting.key
        assert row["does"] == " ".join(setting.doc.split()), setting.key


def test_each_component_has_its_own_table_in_the_order_config_show_lists_them() -> None:
    headings = re.findall(r"^## `(\w+)`", CONFIGURATION, re.MULTILINE)
    declaring = list(dict.fromkeys(setting.component for setting in SETTINGS))
    assert headings == declaring


def test_every_list_valued_variable_is_shown_in_both_of_its_forms() -> None:
    lists = [setting for setting in SETTINGS if setting.kind is list]
    assert lists, "the built-ins declare list-valued settings"
    for setting in lists:
        assert f"`{setting.env_name}='[" in CONFIGURATION, setting.env_name
        assert re.search(rf"`{setting.env_name}=[^'`\s]+,[^`\s]+`", CONFIGURATION), setting.env_name


def test_a_list_variables_two_example_forms_are_read_as_the_same_list() -> None:
    from enact.config import load

    for setting in (s for s in SETTINGS if s.kind is list):
        values = []
        for form in reference.list_variable_forms(setting):
            name, _, raw = form.partition("=")
            loaded = load(Path("/nonexistent-home"), environ={name: raw.strip("'")}, settings=SETTINGS)
            values.append(loaded[setting.key])
        assert values[0] == values[1] and len(values[0]) == 2, setting.key


def test_the_configuration_page_says_how_layers_win_and_ends_with_the_limits() -> None:
    layered = CONFIGURATION.index("## How configuration is layered")
    for flag in ("--metrics-addr", "--workers", "--log-level"):
        assert f"`{flag}`" in CONFIGURATION[layered:CONFIGURATION.index("## `core`")]
    assert CONFIGURATION.rstrip().rsplit("\n## ", 1)[1].startswith("Limits")


def _own_commands() -> Iterator[tuple[click.Command, click.Context]]:
    own = set(main.commands) | set(reference.own_components().cli_commands())
    root = click.Context(main, info_name="enact", **main.context_settings)
    for command, context in reference.walk(main, root):
        path = context.command_path.split()
        if len(path) < 2 or path[1] in own:
            yield command, context


def _section(path: str) -> str:
    start = CLI.index(f" `{path}`\n")
    end = CLI.find("\n#", start)
    return CLI[start : end if end != -1 else len(CLI)]


def test_every_command_has_a_section_with_its_usage_help_options_and_arguments() -> None:
    commands = list(_own_commands())
    assert len(commands) > 50
    for command, context in commands:
        section = _section(context.command_path)
        assert f"Usage: {context.command_path}" in section, context.command_path
        first_line = reference.help_text(command).splitlines()[0] if command.help else ""
        assert first_line in section, context.command_path
        for param in command.params:
            if isinstance(param, click.Option) and param.name in ("home",) and context.parent is not None:
                continue
            names = param.opts if isinstance(param, click.Option) else [param.human_readable_name]
            assert f"`{names[0]}`" in section, (context.command_path, names[0])


def test_every_command_takes_the_home_the_page_says_once_for_all() -> None:
    assert "`--home DIR`" in CLI
    for command, context in _own_commands():
        if not isinstance(command, click.Group):
            assert "home" in {param.name for param in command.params}, context.command_path


def test_every_exit_code_has_its_meaning_in_the_table() -> None:
    assert set(MEANINGS) == set(ExitCode)
    for code in ExitCode:
        assert _row_cells(CLI, str(int(code)))[1] == " ".join(MEANINGS[code].split())


def test_the_cli_and_the_daemon_exit_only_with_a_named_code() -> None:
    """Every exit code the CLI can produce is a member of ExitCode (and so in
    the table above): no command exits with a bare number."""
    package = Path(reference.__file__).parent
    sources = [*sorted((package / "cli").glob("*.py")), package / "daemon.py", *sorted((package / "_app").glob("*.py"))]
    bare = re.compile(r"(?:sys\.exit|SystemExit|exit_process|os\._exit)\(\s*-?\d|\bcode(?:: int)?\s*=\s*-?\d"
                      r"|\bEXIT_\w+\s*=\s*-?\d")
    found = [f"{path.name}:{number}" for path in sources
             for number, line in enumerate(path.read_text().splitlines(), 1) if bare.search(line)]
    assert found == []


@pytest.mark.parametrize("status", list(STATUSES))
def test_every_json_status_has_its_row_with_its_exit_codes(status: str) -> None:
    cells = _row_cells(CLI, f"`{status}`")
    assert cells[1] == ", ".join(str(int(code)) for code in STATUSES[status].exits)


def test_the_status_table_agrees_with_the_one_mapping_of_failures(tmp_path: Path) -> None:
    outcomes: list[object] = [Refused(reason="no", code=code) for code in RefusalCode]
    outcomes += [NotFound(kind="task", id="7"), BadRequest("too long"), ConnectionLost(tmp_path),
                 NotRunning(tmp_path), DaemonError("the disk is full")]
    for outcome in outcomes:
        failure = failure_of(outcome)
        assert failure is not None and failure.code in STATUSES[failure.status].exits, outcome
    for code in RefusalCode:
        assert f"`{code}`" in CLI


def test_no_module_of_enact_imports_the_generator() -> None:
    """The command line's start path stays as light as it was: only
    ``make docs`` and this test run ``enact.reference``."""
    package = Path(reference.__file__).parent
    importers = [path.relative_to(package).as_posix() for path in sorted(package.rglob("*.py"))
                 if re.search(r"^\s*(?:from enact(?:\.reference| import reference)|import enact\.reference)",
                              path.read_text(), re.MULTILINE)]
    assert importers == []
