"""A full disk: the memory index is derived, so a failure to write it marks it
stale and it is rebuilt once space returns; it never takes the daemon down.
A write that cannot be made durable says "the disk is full" in one line.

The home is a small tmpfs the test mounts: as root only (skipped otherwise),
except under CI=true, where it must run (CI runs as root)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from enact.messages.memory import Context, ContextReply, Forget, Forgotten, Remember, Saved

from conftest import Daemon, DaemonFactory, wait_for

ZEBRA = "the zebra sleeps under the old stone bridge"


def _require_root() -> None:
    if os.geteuid() == 0:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("this test must run under CI, which runs as root: it mounts a tmpfs")
    pytest.skip("mounting a tmpfs needs root")


@contextlib.contextmanager
def _small_tmpfs(path: Path) -> Iterator[Path]:
    _require_root()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(path: Path) -> None:
    usage = subprocess.run(["du", "-a", str(path.parent)], capture_output=True, text=True).stdout
    assert shutil.disk_usage(path.parent).free > 1 << 20, f"the tmpfs is full before the test fills it:\n{usage}"
    with open(path, "wb") as filler:
        with contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        with contextlib.suppress(OSError):
            os.fsync(filler.fileno())


def _memory_restarts(daemon: Daemon) -> int:
    status = daemon.cli_json("status", "--json")
    assert "memory" in status["actor_names"] and "memory" not in status["stopped"]
    return int(status["restarts"].get("memory", 0))


def test_a_write_lmdb_cannot_commit_on_a_full_disk_says_so_in_one_line_and_changes_nothing(
    daemons: DaemonFactory,
) -> None:
    home = daemons.new_home()
    with _small_tmpfs(home):
        daemon = daemons.start(home)
        assert daemon.cli_json("memory", "remember", "--json", "alpha is the first letter")["outcome"] == "saved"
        _fill(home / "filler")
        as_json = daemon.cli("memory", "remember", "--json", ZEBRA)
        assert as_json.returncode == 1 and as_json.stderr == "", as_json
        error = orjson.loads(as_json.stdout)["error"]
        assert error.startswith("the disk is full: ") and "\n" not in error
        plain = daemon.cli("memory", "remember", ZEBRA)
        [line] = plain.stderr.splitlines()
        assert plain.returncode == 1 and line.startswith("enact: the disk is full: "), plain
        assert [fact["text"] for fact in daemon.cli_json("memory", "list", "--json")["facts"]] == [
            "alpha is the first letter"]
        assert daemon.process.poll() is None and _memory_restarts(daemon) == 0

        (home / "filler").unlink()
        assert daemon.cli_json("memory", "remember", "--json", ZEBRA)["outcome"] == "saved"
        _recall_finds_the_zebra(daemon)
        assert "Traceback" not in daemon.log_text()
        assert daemon.terminate() == 0


def test_a_fact_saved_on_a_full_disk_leaves_the_index_stale_and_it_is_rebuilt_once_space_returns(
    daemons: DaemonFactory,
) -> None:
    home = daemons.new_home()
    with _small_tmpfs(home):
        daemon = daemons.start(home)
        # Pages LMDB can reuse once the disk is full: the case where a
        # remember is saved and only the index cannot be written. Sent as
        # the CLI sends them, without a process each (they only make room).
        saved = [daemon.request(Remember(text=f"scratch fact {index} " + "s" * 400)) for index in range(20)]
        for fact in saved:
            assert isinstance(fact, Saved), fact
            assert isinstance(daemon.request(Forget(selector=fact.id)), Forgotten)
        _fill(home / "filler")

        saved = daemon.cli_json("memory", "remember", "--json", ZEBRA)
        assert saved["outcome"] == "saved"
        wait_for(lambda: "memory index is stale" in daemon.log_text(), what="the index marked stale")
        # Up and answering, the memory actor never restarted, and search
        # still finds the fact (from memory) while the index is stale.
        assert daemon.process.poll() is None and _memory_restarts(daemon) == 0
        _recall_finds_the_zebra(daemon)

        (home / "filler").unlink()
        wait_for(lambda: "memory index rebuilt from" in daemon.log_text().split("memory index is stale")[-1],
                 timeout=30, what="the index rebuilt")
        _recall_finds_the_zebra(daemon)
        assert _memory_restarts(daemon) == 0
        assert "Traceback" not in daemon.log_text()
        assert daemon.terminate() == 0
        # Rebuilt for good: the next start finds it reflecting the facts.
        again = daemons.start(home)
        _recall_finds_the_zebra(again)
        assert "memory index rebuilt" not in again.log_text()
        assert again.terminate() == 0


def _recall_finds_the_zebra(daemon: Daemon) -> None:
    # As for a resumed session: recall, not the startup context, finds it.
    recalled = daemon.request(Context(query="where does the zebra sleep", session_facts=(), owners=True))
    assert isinstance(recalled, ContextReply) and ZEBRA in recalled.recall_text
