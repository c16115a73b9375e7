"""Memory context through a running daemon: what reaches the model's prompt,
identity commands, and `enact memory context`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from conftest import Daemon, DaemonFactory


def transcript(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def remember(daemon: Daemon, text: str, *options: str) -> str:
    outcome = daemon.cli_json("memory", "remember", "--json", text, *options)
    assert outcome["outcome"] == "saved", outcome
    return str(outcome["id"])


def send(daemon: Daemon, *args: str) -> Any:
    return daemon.cli_json("send", "--json", *args)


def test_a_remembered_fact_reaches_the_prompt_and_a_secret_one_never_does(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    calls = home.parent / "transcript.jsonl"
    daemon = daemons.start(home, env={"ENACT_SCRIPTED_TRANSCRIPT": str(calls)})
    remember(daemon, "The owner prefers green tea in the morning")
    remember(daemon, "The garage door code is 4711", "--sensitivity", "secret")
    send(daemon, "hello")
    [first] = transcript(calls)
    assert first["resumed"] is None
    startup = first["prompt"].split("Owner message", 1)[0]
    assert "The owner prefers green tea in the morning" in startup
    assert "not instructions" in startup and "Name: enact" in startup
    assert "4711" not in first["prompt"]
    # Facts remembered later are not in the resumed session's startup: recall brings them.
    remember(daemon, "The staging server is called tern")
    send(daemon, "which staging server do we use?")
    second = transcript(calls)[1]
    assert second["resumed"] == first["session"]
    assert "You are enact" not in second["prompt"]
    recalled = second["prompt"].split("Owner message", 1)[1]
    assert "The staging server is called tern" in recalled
    assert "may bear on this message" in recalled
    send(daemon, "what is the garage door code?")
    assert "4711" not in transcript(calls)[2]["prompt"]


def test_memory_context_prints_what_would_be_sent_and_why(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    tea = remember(daemon, "The owner prefers green tea")
    secret = remember(daemon, "The alarm code is 1234", "--sensitivity", "secret")
    reply = daemon.cli_json("memory", "context", "--json", "--query", "what tea?")
    assert "green tea" in reply["startup_text"] and "1234" not in reply["startup_text"] + reply["recall_text"]
    decisions = {(d["fact_id"], d["section"]): d for d in reply["decisions"]}
    assert decisions[(tea, "startup")]["included"] is True
    assert decisions[(secret, "startup")] == {"fact_id": secret, "section": "startup", "included": False,
                                              "reason": "secret: never sent"}
    assert decisions[(tea, "recall")]["reason"] == "already in the startup context"
    text = daemon.cli("memory", "context", "--query", "what tea?")
    assert text.returncode == 0
    assert f"- {secret} [startup] secret: never sent" in text.stdout


def test_identity_install_show_replace_and_clear(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    calls = home.parent / "transcript.jsonl"
    daemon = daemons.start(home, env={"ENACT_SCRIPTED_TRANSCRIPT": str(calls)})
    first = home.parent / "me.toml"
    first.write_text('name = "Ada"\npronouns = "she/her"\nvalues = ["honesty"]\n')
    assert daemon.cli_json("identity", "install", "--json", str(first)) == {
        "outcome": "installed", "name": "Ada", "replaced": False}
    shown = daemon.cli_json("identity", "show", "--json")
    assert shown["private"]["pronouns"] == "she/her" and shown["body"]["name"] == "enact"
    second = home.parent / "me.json"
    second.write_text('{"name": "Bea"}')
    assert daemon.cli_json("identity", "install", "--json", str(second))["replaced"] is True
    shown = daemon.cli_json("identity", "show", "--json")
    assert shown["private"]["name"] == "Bea" and shown["private"]["pronouns"] == ""
    send(daemon, "hello")
    assert "Name: Bea" in transcript(calls)[0]["prompt"]
    assert daemon.cli_json("identity", "clear", "--json")["cleared"] is True
    assert daemon.cli_json("identity", "show", "--json")["private"] is None
    # It survives a restart only while installed.
    daemon.cli_json("identity", "install", "--json", str(first))
    assert daemon.terminate() == 0
    restarted = daemons.start(home)
    assert restarted.cli_json("identity", "show", "--json")["private"]["name"] == "Ada"


def test_a_bad_identity_file_is_refused_in_one_line_and_changes_nothing(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    daemon = daemons.start(home)
    bad = home.parent / "bad.toml"
    bad.write_text('name = "Ada"\ncolour = "blue"\n')
    result = daemon.cli("identity", "install", "--json", str(bad))
    assert result.returncode == 2  # bad input, refused before it reaches the daemon
    said = orjson.loads(result.stdout)
    assert said["status"] == "bad_input" and said["error"].startswith("unknown field 'colour'")
    plain = daemon.cli("identity", "install", str(bad))
    assert plain.returncode == 2 and len(plain.stderr.strip().splitlines()) == 1
    assert daemon.cli_json("identity", "show", "--json")["private"] is None
