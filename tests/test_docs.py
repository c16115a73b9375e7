"""The README and the pages under docs/ are the user's manual: they must not
drift from the code, and every link in them must lead somewhere."""

from __future__ import annotations

import os
import re
import shlex
import socket
import struct
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

import orjson
import pytest

from enact.components import load
from enact.home import SOCKET_NAME
from enact.messages._framing import MAX_FRAME_BYTES

from conftest import DaemonFactory, enact_env

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
"""Every page of the manual: the README and each page under docs/."""


def _text(page: str) -> str:
    return (ROOT / page).read_text()


def _section(page: str, heading: str) -> str:
    """A heading's section of a page, up to the next heading of any level."""
    text = _text(page)
    start = text.index(f"\n{heading}\n")
    end = text.find("\n#", start + len(heading) + 2)
    return text[start : end if end != -1 else len(text)]


# --- the README ------------------------------------------------------------------

def test_the_readme_is_under_250_lines() -> None:
    assert len(README.read_text().splitlines()) < 250


def test_readme_shows_the_two_commands() -> None:
    section = _section("README.md", "## The two commands")
    assert "make run" in section and "make test" in section


def test_the_readmes_map_links_every_page_under_docs() -> None:
    readme = README.read_text()
    for page in sorted(DOCS.glob("*.md")):
        assert f"](docs/{page.name})" in readme, page.name


def _quick_start_commands() -> list[list[str]]:
    blocks = re.findall(r"```sh\n(.*?)```", _section("README.md", "## Quick start"), re.DOTALL)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith(".venv/bin/enact ")]


def test_the_readmes_quick_start_works_as_written(daemons: DaemonFactory) -> None:
    commands = _quick_start_commands()
    assert commands[0] == ["send", "hello"] and commands[-1] == ["daemon", "stop"]
    daemon = daemons.start()
    for args in commands:
        result = daemon.cli(*args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        if args == ["send", "hello"]:
            assert result.stdout.strip() == "(scripted runtime) You said: hello"
    assert daemon.wait_exit() == 0


# --- what the pages say against the code -------------------------------------------

def test_the_architecture_page_says_who_handles_each_wire_prefix() -> None:
    from enact.messages import Kind, registered

    section = _section("docs/architecture.md", "### Wire prefixes")
    # enact's own requests only: other tests register types of their own.
    own = {r.actor for r in registered() if r.kind is Kind.REQUEST and r.cls.__module__.startswith("enact.")}
    for prefix in sorted(own):
        assert re.search(rf"^\|[^|\n]*`{prefix}`[^|\n]*\| ", section, re.MULTILINE), prefix


def _daemon_actors() -> set[str]:
    """Every actor and pool family enact's own components declare."""
    from enact import components
    from enact._app.commands import daemon_commands
    from enact.channels.local import LocalChannel
    from enact.components import DaemonParts
    from enact.messages.common import HUMAN_CLI

    installed = components.load()
    with tempfile.TemporaryDirectory() as directory:
        home = Path(directory)
        settings = installed.load_config(home, environ={})
        commands = daemon_commands(home, installed)
        parts = DaemonParts(settings=settings, runtime=installed.runtime(settings).make_runtime(settings, commands),
                            channels={"local": LocalChannel()}, origins={"local": HUMAN_CLI}, commands=commands)
        specs = components.component_actors(installed, parts)
    return {family for spec in specs for family in spec.families}


def test_the_architecture_page_describes_every_actor_the_components_declare() -> None:
    section = _section("docs/architecture.md", "## The picture in words")
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    for actor in sorted(_daemon_actors()):
        assert any(re.search(rf"`{actor}(:|`)", row.split("|")[1]) for row in rows), actor


def test_the_chat_page_lists_every_built_in_chat_command() -> None:
    from enact.commands import CommandRegistry

    section = _section("docs/chat.md", "## Registered commands")
    registry = CommandRegistry()
    for command in load().chat_commands(registry):
        assert re.search(rf"`/{re.escape(command.name)}[ `]", section), command.name
        assert re.search(rf"`/{re.escape(command.name)}[^|\n]*\| {command.authority.value} \|", section), (
            command.name, command.authority.value)


def test_the_cli_page_lists_every_top_level_command() -> None:
    section = _section("docs/cli.md", "## The commands, by area")
    for name in load().cli_commands():
        assert f"| `enact {name}` |" in section, name


def test_the_cli_page_gives_every_json_status_its_exit_code() -> None:
    from enact.cli._options import STATUSES

    section = _section("docs/cli.md", "## `--json`")
    for status in STATUSES:
        assert re.search(rf"^\| `{status}` \| \d", section, re.MULTILINE), status


def test_the_operations_page_names_every_metric_the_daemon_exports() -> None:
    from enact.metrics import Metrics

    metrics = Metrics()
    load().create_metrics(metrics.registry)
    page = _text("docs/operations.md")
    for family in metrics.registry.collect():
        if family.name.startswith("enact_"):
            assert f"`{family.name}" in page, family.name


def test_the_operations_page_names_every_alert_rule() -> None:
    rules = re.findall(r"- alert: (\w+)", (ROOT / "deploy/prometheus/alerts.yml").read_text())
    section = _section("docs/operations.md", "### Alerts")
    assert rules
    for rule in rules:
        assert f"| `{rule}` |" in section, rule


def test_the_commands_toml_example_is_on_the_chat_page() -> None:
    """Loaded for real by test_commands.py; here, that it is where the map says."""
    assert "[[command]]" in _section("docs/chat.md", "### Your own commands: `commands.toml`")


def test_the_limits_the_pages_give_are_the_codes() -> None:
    from enact.channels.telegram_text import MAX_MESSAGE
    from enact.commands import MAX_RECEIPT
    from enact.evolution.scan_batch import MAX_RECORD_TEXT
    from enact.evolution.scan_prompt import MAX_OBSERVATIONS
    from enact.evolution.synthesis import MAX_CANDIDATES, MAX_SIGNALS
    from enact.memory.admission import MAX_TAG_CHARS, MAX_TAGS
    from enact.messages.common import MAX_ID, MAX_TEXT
    from enact.tasks.doctor import HEAD_TAIL_LIMIT
    from enact.tasks.records import DEADLINE_RANGE_S, MAX_ATTEMPTS, MAX_BRIEF, MAX_REQUEST, REPAIRS_RANGE

    dash = "\N{EN DASH}"

    def limits(page: str) -> str:
        return " ".join(_section(page, "## Limits").split())

    assert f"at most {MAX_TEXT:,} characters" in limits("docs/chat.md")
    assert f"at most {MAX_ID}" in limits("docs/chat.md")
    assert f"clipped to {MAX_RECEIPT:,} characters" in limits("docs/chat.md")
    assert f"at most {MAX_MESSAGE:,} characters" in limits("docs/chat.md")
    assert f"at most {MAX_TAGS}, each at most {MAX_TAG_CHARS} characters" in limits("docs/memory.md")
    assert f"A request: at most {MAX_REQUEST:,} characters; a brief at most {MAX_BRIEF:,}" in limits("docs/tasks.md")
    assert f"Repairs: {REPAIRS_RANGE[0]}{dash}{REPAIRS_RANGE[1]}" in limits("docs/tasks.md")
    assert f"deadline: {DEADLINE_RANGE_S[0]}{dash}{DEADLINE_RANGE_S[1]:,} s" in limits("docs/tasks.md")
    assert f"Attempts: {MAX_ATTEMPTS}" in limits("docs/tasks.md")
    assert f"at most {HEAD_TAIL_LIMIT:,} characters of its output" in limits("docs/tasks.md")
    assert f"clipped to {MAX_RECORD_TEXT:,} characters" in limits("docs/evolution.md")
    assert f"at most {MAX_OBSERVATIONS} observations" in limits("docs/evolution.md")
    assert f"up to {MAX_SIGNALS} active, unlinked signals; at most {MAX_CANDIDATES} candidates" in limits(
        "docs/evolution.md")
    assert f"at most 1 MiB ({MAX_FRAME_BYTES:,} bytes)" in limits("docs/operations.md")


def test_every_page_ends_with_its_limits() -> None:
    for page in sorted(DOCS.glob("*.md")):
        if page.name == "architecture.md":
            continue  # how it is built, not what a user does
        headings = re.findall(r"^## (.+)$", _without_code(page.read_text()), re.MULTILINE)
        assert headings[-1] == "Limits", page.name


# --- links -------------------------------------------------------------------------

def _without_code(text: str) -> str:
    """The text outside fenced code blocks (a `#` there is no heading)."""
    return re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.MULTILINE | re.DOTALL)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text as rendered (code and link
    marks dropped), lowercased, every character but letters, digits, spaces,
    `-` and `_` removed, spaces turned to `-`."""
    rendered = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    kept = "".join(char for char in rendered.lower() if char.isalnum() or char in " -_")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor in ``page``; a repeated one gets `-1`, `-2`, …"""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", _without_code(page.read_text()), re.MULTILINE):
        slug, n = github_slug(heading), 0
        while (slug if n == 0 else f"{slug}-{n}") in found:
            n += 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def links(page: Path) -> list[str]:
    """The targets of the page's inline links, outside code."""
    text = _without_code(page.read_text())
    text = re.sub(r"``.+?``", "", text)  # a code span that holds a backtick
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)(?: \"[^\"]*\")?\)", text)


def test_github_slugs_as_github_makes_them() -> None:
    assert github_slug("Your own commands: `commands.toml`") == "your-own-commands-commandstoml"
    assert github_slug("The scripted runtime (`scripted`)") == "the-scripted-runtime-scripted"
    assert github_slug("Workers, the doctor and confinement") == "workers-the-doctor-and-confinement"
    assert github_slug("`--json`") == "--json"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    """A relative link names a file that exists and, with `#anchor`, a heading
    in it; an http(s) link is well formed (not fetched: no network here).
    docs/reference/ is generated (enact/reference.py): until it is, links to
    it fail here, on purpose."""
    broken = []
    for link in links(page):
        parsed = urllib.parse.urlsplit(link)
        if parsed.scheme in ("http", "https"):
            if not parsed.netloc or "." not in parsed.netloc or " " in link:
                broken.append(f"{link}: not a well-formed URL")
            continue
        if parsed.scheme:
            broken.append(f"{link}: a link of scheme {parsed.scheme!r}")
            continue
        target = (page.parent / urllib.parse.unquote(parsed.path)).resolve() if parsed.path else page
        if not target.is_file():
            broken.append(f"{link}: {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target} "
                          "does not exist")
        elif parsed.fragment and target.suffix == ".md" and parsed.fragment not in anchors(target):
            broken.append(f"{link}: no heading #{parsed.fragment} in {target.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


# --- the examples run ---------------------------------------------------------------

def test_the_operations_pages_frame_example_gets_a_status_report_from_a_daemon(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    section = _section("docs/operations.md", "## The control-socket frame format")
    [example] = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    result = subprocess.run(
        [sys.executable, "-c", example], env=enact_env(daemon.home), capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["control.StatusReport", "1"]


def test_a_frame_the_daemon_cannot_decode_gets_the_error_shape_the_page_gives(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    section = _section("docs/operations.md", "## The control-socket frame format")
    assert "4-byte unsigned big-endian length" in section and f"({MAX_FRAME_BYTES} bytes" in section
    assert '{"type": "control.Error", "body": {"message": "…"}}' in section
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(daemon.home / SOCKET_NAME))
        payload = b'{"type": "control.Nope", "body": {}}'
        sock.sendall(struct.pack(">I", len(payload)) + payload)
        reply = orjson.loads(sock.makefile("rb").read()[4:])  # the daemon closes after an error
    assert reply["type"] == "control.Error"
    assert "control.Nope" in reply["body"]["message"]


def test_the_cli_pages_completion_commands_print_a_completion_script() -> None:
    shells = re.findall(r"_ENACT_COMPLETE=(\w+)_source enact", _section("docs/cli.md", "## Shell completion"))
    assert sorted(shells) == ["bash", "fish", "zsh"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    for shell in shells:
        result = subprocess.run(
            [sys.executable, "-m", "enact"], env={**env, "_ENACT_COMPLETE": f"{shell}_source"},
            capture_output=True, text=True, timeout=30,
        )
        assert result.returncode == 0, result.stderr
        assert "_enact_completion" in result.stdout, shell
