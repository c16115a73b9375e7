"""Components: enact's own, and a third-party one installed through the
``enact.extensions`` entry point into a real daemon."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import component_cases
import orjson
import pytest
from control_wire import RawClient
from roster_services import daemon_actors, daemon_parts, roster_services

from enact import components
from enact.channels import InboxInlet, InboxRefused
from enact.components import ChannelComponent, ComponentError, Components
from enact.config import ConfigError
from enact.entry_points import EntryPoint
from enact.messages.common import HUMAN_CLI, NotFound
from enact.messages.inbox import ChatEvent, Receive

from conftest import DaemonFactory, enact_env, run_cli

FIXTURE = Path(__file__).parent / "extension_fixture"


def _entry(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, distribution="enact-cases")


def _one_line(error: pytest.ExceptionInfo[ComponentError]) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


# -- in one process ------------------------------------------------------------


def test_enacts_own_components_are_its_core_features_channels_and_runtimes() -> None:
    installed = components.load(extensions=[])
    assert [c.name for c in installed.items] == ["core", "backup", "budget", "chat", "console", "evolution", "memory",
                                                 "skills", "tasks", "update", "local", "telegram", "claude", "codex",
                                                 "openai", "scripted"]
    assert [c.name for c in installed.channels()] == ["local", "telegram"]
    assert {"scripted", "codex", "claude", "openai"} <= set(installed.runtimes())
    by_key = {s.key: s for s in installed.settings()}
    assert by_key["scripted.rules"].component == "scripted"
    assert by_key["chat.local_deliver_command"].component == "local"
    assert by_key["daemon.workers"].component == "core"
    assert by_key["runtime.adapter"].allowed == "one of claude, codex, openai, scripted"


def test_runtime_adapter_chooses_among_the_installed_runtimes(tmp_path: Path) -> None:
    installed = components.load(extensions=[_entry("echo", "component_cases:EchoRuntimeComponent")])
    allowed = {s.key: s for s in installed.settings()}["runtime.adapter"].allowed
    assert allowed == "one of claude, codex, echo, openai, scripted"
    settings = installed.load_config(tmp_path, environ={"ENACT_RUNTIME_ADAPTER": "echo"})
    assert installed.runtime(settings).name == "echo"
    with pytest.raises(ConfigError) as error:
        installed.load_config(tmp_path, environ={"ENACT_RUNTIME_ADAPTER": "nope"})
    assert str(error.value) == (
        "runtime.adapter from environment variable ENACT_RUNTIME_ADAPTER: must be one of claude, codex, echo, "
        "openai, scripted, got 'nope'"
    )


def test_an_extension_may_be_a_class_or_a_factory(tmp_path: Path) -> None:
    installed = components.load(extensions=[_entry("fine", "component_cases:make_fine")])
    assert [c.name for c in installed.items][-1] == "fine"
    settings = installed.load_config(tmp_path, environ={"ENACT_FINE_LEVEL": "3"})
    assert settings["fine.level"] == 3
    assert {row["key"]: row["component"] for row in settings.describe()}["fine.level"] == "fine"


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("gone", "no_such_module_for_enact:Thing",
         "extension gone (no_such_module_for_enact:Thing) cannot be loaded: ModuleNotFoundError: "
         "No module named 'no_such_module_for_enact'"),
        ("plain", "component_cases:NotAComponent",
         "extension plain (component_cases:NotAComponent) is not an enact Component but NotAComponent"),
        ("other", "component_cases:Fine",
         "extension other (component_cases:Fine) declares the name 'fine'; its entry point must have that name"),
        ("local", "component_cases:Taken", "component local: the name is already taken"),
        ("enact", "component_cases:Reserved", "component enact: the name is already taken"),
        ("inbox", "component_cases:NamedLikeAProtocol", "component inbox: the name is already taken"),
        ("evolve", "component_cases:NamedLikeACoreSection", "component evolve: the name is already taken"),
        ("stray", "component_cases:OutsideItsSection",
         "component stray: setting chat.stray is outside its section [stray]"),
        ("baddefault", "component_cases:BadDefault",
         "component baddefault: baddefault.count from its declared default: expected int, got str 'three'"),
        ("copycat", "component_cases:SameKeyAsCore", "component copycat: daemon.workers is already declared by core"),
    ],
)
def test_a_broken_extension_is_refused_with_one_line_naming_it(name: str, value: str, problem: str) -> None:
    with pytest.raises(ComponentError) as error:
        components.load(extensions=[_entry(name, value)])
    assert _one_line(error) == problem


def test_a_components_actors_are_named_after_it(tmp_path: Path) -> None:
    parts = daemon_parts(tmp_path)
    installed = Components(items=(component_cases.TwoActors(),))
    assert [spec.name for spec in components.component_actors(installed, parts)] == ["two", "two:helper"]
    twice = Components(items=(component_cases.TwoActors(), component_cases.TwoActors()))
    with pytest.raises(ComponentError) as error:
        components.component_actors(twice, parts)
    assert _one_line(error) == "component two: the actor name 'two' is already taken"
    misnamed = Components(items=(component_cases.MisnamedActor(),))
    with pytest.raises(ComponentError) as error:
        components.component_actors(misnamed, parts)
    assert _one_line(error) == "component misnamed: its actor 'inbox' must be named after it"


def test_a_component_named_like_any_of_the_daemons_actors_or_their_pools_is_refused(tmp_path: Path) -> None:
    own = components.load(extensions=[])
    specs = daemon_actors(roster_services())
    for spec in specs:  # each actor serves its own protocol: even the CLI's commands refuse its name
        with pytest.raises(ComponentError) as error:
            components.check(Components(items=(*own.items, component_cases.named(spec.name)), own=own.own))
        assert _one_line(error) == f"component {spec.name}: the name is already taken"
    families = [family for spec in specs for family in spec.families]
    assert {"memory", "tasks", "reviews", "scheduler", "workers", "curator", "scanner", "conversation",
            "worker"} <= set(families)
    parts = daemon_parts(tmp_path)
    for name in families:
        installed = Components(items=(*own.items, component_cases.named(name)), own=own.own)
        with pytest.raises(ComponentError) as error:
            components.component_actors(installed, parts)
        assert _one_line(error) == f"component {name}: the name is already taken"


def test_a_request_is_served_only_under_its_own_prefix() -> None:
    from enact.messages.control import Status
    from enact.messages.local import Send

    assert components.routes([("local", {Send: print})]) == {Send: print}
    with pytest.raises(ComponentError) as error:
        components.routes([("local", {Status: print})])
    assert _one_line(error) == "local cannot serve control.Status: its prefix names another handler"


def test_a_channel_submits_only_its_own_events_under_the_origin_its_component_vouches_for() -> None:
    asked: list[tuple[str, object]] = []

    def refusing_inbox(target: str, message: Any) -> Any:
        asked.append((target, message))
        return NotFound(kind="channel", id="local")

    inlet = InboxInlet("local", refusing_inbox, origin=HUMAN_CLI)
    event = ChatEvent(channel="telegram", conversation="c", message_id="m", text="hi")
    with pytest.raises(ValueError, match="the local channel cannot submit an event of channel 'telegram'"):
        inlet.submit(event)
    assert asked == []
    own = dataclasses.replace(event, channel="local")
    with pytest.raises(InboxRefused, match="the inbox refused an event of the local channel: no channel local"):
        inlet.submit(own)
    assert asked == [("inbox", Receive(event=own, origin=HUMAN_CLI))]
    local, telegram = components.load().channels()
    assert local.origin() == HUMAN_CLI
    assert telegram.origin() == "chat:telegram"
    assert ChannelComponent.origin(local) == "chat:local"  # what any other channel vouches for


def test_only_the_chosen_runtime_checks_its_environment(tmp_path: Path) -> None:
    installed = Components(items=components.load().items)
    settings = installed.load_config(tmp_path, environ={"ENACT_SCRIPTED_RULES": str(tmp_path / "absent.toml")})
    with pytest.raises(ComponentError) as error:
        installed.validate_environment(settings)
    assert _one_line(error).endswith("absent.toml does not exist")


# -- a real package, installed, in real processes ------------------------------------


@pytest.fixture(scope="module")
def hello_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """PYTHONPATH that makes the installed enact-hello package visible."""
    root = tmp_path_factory.mktemp("hello")
    source = root / "source"
    shutil.copytree(FIXTURE, source)  # pip builds in the source tree; keep tests/ clean
    target = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(source)],
        check=True, capture_output=True, timeout=120,
    )
    return os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH", "")]))


def test_an_installed_extension_adds_its_settings_actor_requests_metric_chat_and_cli_commands(
    daemons: DaemonFactory, hello_path: str
) -> None:
    home = daemons.new_home()
    (home / "config.toml").write_text('[hello]\ngreeting = "good morning"\n')
    shown = run_cli(home, "config", "show", "--json", env={"PYTHONPATH": hello_path})
    assert shown.returncode == 0, shown.stderr
    rows = {row["key"]: row for row in orjson.loads(shown.stdout)["settings"]}
    assert rows["hello.greeting"] == {
        "key": "hello.greeting", "value": "good morning", "source": "file", "component": "hello",
        "doc": "What the hello extension says", "allowed": rows["hello.greeting"]["allowed"],
    }
    plain = run_cli(home, "config", "show", env={"PYTHONPATH": hello_path})
    [line] = [line for line in plain.stdout.splitlines() if line.startswith("hello.greeting")]
    assert '"good morning"' in line and "hello" in line.split('"good morning"')[1] and "(file)" in line

    daemon = daemons.start(home, env={"PYTHONPATH": hello_path})
    with RawClient(home) as client:
        reply = client.ask({"type": "hello.Greet", "body": {"name": "Ada"}})
        assert reply == {"type": "hello.Greeting", "body": {"text": "good morning, Ada"}}
        for pings in (1, 2):  # served by the extension's own actor
            assert client.ask({"type": "hello.Ping"}) == {"type": "hello.Pong", "body": {"pings": pings}}
    status = daemon.cli_json("status", "--json")
    assert "hello" in status["actor_names"]
    # Its chat command and its CLI command, both reaching its actor or its handler.
    env = {"PYTHONPATH": hello_path}
    sent = daemon.cli_json("send", "--json", "/hello.ping", env=env)
    assert (sent["status"], sent["reply"]) == ("replied", "pong 3")
    said = run_cli(home, "hello", "Cy", env=env)
    assert (said.returncode, said.stdout) == (0, "good morning, Cy\n"), said.stderr
    assert "hello" in run_cli(home, "--help", env=env).stdout
    # Its metric, in the daemon's registry with the rest.
    with urllib.request.urlopen(f"http://{status['metrics_addr']}/metrics", timeout=10) as page:
        scraped = page.read().decode()
    assert "enact_hello_pings_total 3.0" in scraped.splitlines()
    # `enact call` reaches an extension's types too.
    assert daemon.cli_json("call", "hello.Greet", '{"name": "Bo"}', env=env) == {
        "type": "hello.Greeting", "body": {"text": "good morning, Bo"}
    }
    listed = daemon.cli_json("call", "--list", "--json", env=env)
    assert "hello.Greet" in [described["type"] for described in listed]
    assert daemon.cli_json("send", "--json", "ping")["status"] == "replied"  # the built-in channel still works
    assert daemon.terminate() == 0


def test_a_bad_extension_setting_is_refused_with_one_line_naming_the_key(
    daemons: DaemonFactory, hello_path: str
) -> None:
    home = daemons.new_home()
    env = {"PYTHONPATH": hello_path, "ENACT_HELLO_GREETING": ""}
    shown = run_cli(home, "config", "show", env=env)
    assert shown.returncode == 2
    assert shown.stderr.strip() == (
        "enact: hello.greeting from environment variable ENACT_HELLO_GREETING: must be 1 to 40 characters, got ''"
    )
    daemon = daemons.start(home, env=env, wait=False)
    assert daemon.wait_exit() == 2
    [line] = daemon.log_text().strip().splitlines()
    assert line.startswith("enact: hello.greeting from environment variable ENACT_HELLO_GREETING")
    assert not (home / "state").exists()


def test_an_extensions_environment_check_stops_the_daemon_with_one_line(
    daemons: DaemonFactory, hello_path: str
) -> None:
    home = daemons.new_home()
    daemon = daemons.start(home, env={"PYTHONPATH": hello_path, "ENACT_HELLO_NEEDS_FILE": "/no/such/file"},
                           wait=False)
    assert daemon.wait_exit() == 2
    [line] = daemon.log_text().strip().splitlines()
    assert line == "enact: hello: hello.needs_file /no/such/file does not exist"


def test_an_extension_that_cannot_be_imported_stops_the_daemon_naming_it(
    daemons: DaemonFactory, tmp_path: Path
) -> None:
    """An installed distribution whose entry point names a missing module."""
    info = tmp_path / "site" / "enact_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: enact-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[enact.extensions]\nbroken = enact_broken_gone:Component\n")
    env = {"PYTHONPATH": str(tmp_path / "site")}
    home = daemons.new_home()
    expected = ("enact: extension broken (enact_broken_gone:Component) cannot be loaded: "
                "ModuleNotFoundError: No module named 'enact_broken_gone'")
    daemon = daemons.start(home, env=env, wait=False)
    assert daemon.wait_exit() == 2
    assert daemon.log_text().strip() == expected
    shown = subprocess.run([sys.executable, "-m", "enact", "config", "show"], env=enact_env(home, env),
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 2 and shown.stderr.strip() == expected
