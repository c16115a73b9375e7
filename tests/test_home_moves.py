"""Moving a home to another host through real daemons on real LMDB: an
export imports into another home, whose daemon answers with the same memory
and history at a new generation and home id; the moved source refuses to
start, and ``--force`` runs it without ever polling Telegram; a corrupted
archive is named by ``home verify`` and refused by ``home import`` with
nothing written; an import into a non-empty home is refused."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import orjson
from home_state import snapshot
from telegram_server import FakeBotApi

from conftest import DaemonFactory, run_cli, wait_for

TOKEN = "7000001:AAH-secret-test-token-do-not-leak"
FACT = "The owner keeps bees on the roof"


def transcript(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_an_export_imports_into_another_home_that_answers_with_the_same_memory_and_history(
        daemons: DaemonFactory) -> None:
    source = daemons.new_home()
    daemon = daemons.start(source)
    assert daemon.cli_json("memory", "remember", "--json", FACT)["outcome"] == "saved"
    daemon.cli_json("send", "--json", "hello before the move")
    source_id = daemon.cli_json("status", "--json")["home_id"]
    assert source_id and (source / "home-id").read_text().strip() == source_id  # made at the first claim
    archive = source.parent / "home.tar.gz"
    exported = daemon.cli_json("home", "export", str(archive), "--json")  # through the running daemon
    assert exported["path"] == str(archive) and not exported["moved"]
    assert archive.stat().st_mode & 0o777 == 0o600
    turns_before = snapshot(source).databases[b"logs.turns"]
    assert daemon.terminate() == 0

    verified = run_cli(source, "home", "verify", str(archive))
    assert verified.returncode == 0 and ": ok" in verified.stdout, verified.stderr
    target = daemons.new_home()
    imported = run_cli(target, "home", "import", str(archive), "--json")
    assert imported.returncode == 0, imported.stderr
    outcome = orjson.loads(imported.stdout)
    assert outcome["generation"] == exported["manifest"]["generation"] + 1
    assert outcome["home_id"] != source_id and (target / "home-id").read_text().strip() == outcome["home_id"]
    assert outcome["native_sessions_dropped"] >= 1 and "fresh session" in outcome["not_portable"]
    said = run_cli(daemons.new_home(), "home", "import", str(archive))
    assert "native runtime sessions" in said.stdout.splitlines()[-1], said.stderr

    calls = target.parent / "transcript.jsonl"
    moved = daemons.start(target, env={"ENACT_SCRIPTED_TRANSCRIPT": str(calls)})
    assert moved.wait_ready().generation == outcome["generation"] + 1
    assert moved.cli_json("status", "--json")["home_id"] == outcome["home_id"]
    assert FACT in [fact["text"] for fact in moved.cli_json("memory", "list", "--json")["facts"]]
    moved.cli_json("send", "--json", "hello after the move")
    [first] = transcript(calls)
    assert first["resumed"] is None  # a fresh session, its startup context with the fact
    assert FACT in first["prompt"].split("Owner message", 1)[0]
    assert moved.terminate() == 0
    turns_after = snapshot(target).databases[b"logs.turns"]
    assert {key: turns_after[key] for key in turns_before} == turns_before
    assert len(turns_after) > len(turns_before)


def test_a_moved_home_refuses_to_start_and_forced_it_never_polls_telegram(daemons: DaemonFactory) -> None:
    with FakeBotApi(TOKEN) as bot:
        source = daemons.new_home()
        (source / "config.toml").write_text(
            f'[channels.telegram]\nenabled = true\napi_base = "{bot.url}"\npoll_timeout_s = 1\n')
        env = {"ENACT_TELEGRAM_TOKEN": TOKEN}
        daemon = daemons.start(source, env=env)
        wait_for(lambda: any(call.method == "getUpdates" for call in bot.calls), what="the channel polling")
        archive = source.parent / "moved.tar"
        refused = daemon.cli("home", "export", str(archive), "--move")
        assert refused.returncode == 2 and refused.stderr.strip() == (
            "enact: stop the daemon first (enact daemon stop): a home is moved with no daemon running on it")
        assert not archive.exists() and not (source / "moved.json").exists()
        assert daemon.terminate() == 0

        moving = run_cli(source, "home", "export", str(archive), "--move")
        assert moving.returncode == 0, moving.stderr
        assert (source / "moved.json").exists() and archive.exists()
        start = run_cli(source, "daemon", "start", env=env)
        assert start.returncode == 2
        [line] = start.stderr.strip().splitlines()
        assert "was moved to another host" in line and str(archive) in line and "--force" in line

        polled = len(bot.calls)
        forced = daemons.start(source, "--force", env=env)
        forced.cli_json("send", "--json", "still here")
        assert len(bot.calls) == polled  # not one call to the bot: no getUpdates, no send
        channels = {c["name"]: c for c in forced.cli_json("channel", "list", "--json", env=env)}
        assert channels["telegram"]["state"] == "disabled"
        assert forced.terminate() == 0
        assert "this home was moved to another host: the telegram channel is not started" in forced.log.read_text()
        assert len(bot.calls) == polled


def test_a_corrupted_archive_is_named_by_verify_and_refused_by_import_with_nothing_written(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    source = daemons.new_home()
    daemon = daemons.start(source)
    daemon.cli_json("memory", "remember", "--json", FACT)
    archive = tmp_path / "home.tar"
    daemon.cli_json("home", "export", str(archive), "--json")
    assert daemon.terminate() == 0

    corrupted = tmp_path / "corrupted.tar"
    with tarfile.open(archive) as original, tarfile.open(corrupted, "w") as copy:
        for member in original.getmembers():
            data = original.extractfile(member) if member.isfile() else None
            if data is not None and member.name == "backup/state/data.mdb":
                content = bytearray(data.read())
                content[len(content) // 2] ^= 0xFF  # one flipped byte: the sha256 no longer matches
                data = io.BytesIO(bytes(content))
            copy.addfile(member, data)
    named = run_cli(source, "home", "verify", str(corrupted))
    assert named.returncode == 1
    [line] = named.stderr.strip().splitlines()
    assert str(corrupted) in line and "state/data.mdb" in line

    target = tmp_path / "new-home"
    refused = run_cli(target, "home", "import", str(corrupted))
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert not target.exists()
    not_archive = tmp_path / "not-an-archive.tar"
    not_archive.write_bytes(b"hello")
    assert "cannot be read as an archive" in run_cli(target, "home", "verify", str(not_archive)).stderr
    assert not target.exists()


def test_an_import_into_a_non_empty_home_is_refused(daemons: DaemonFactory, tmp_path: Path) -> None:
    daemon = daemons.start()
    archive = tmp_path / "home.tar"
    daemon.cli_json("home", "export", str(archive), "--json")
    refused = run_cli(daemon.home, "home", "import", str(archive))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"enact: {daemon.home} is not empty; an archive is imported into an empty home only")
    assert daemon.terminate() == 0
