"""Confinement keeps what steers a runtime read-only inside its writable
state directory, real bwrap on real directories: existing paths are bound
over themselves, missing ones covered by placeholders that leave nothing
behind (the real-CLI tests in test_task_workers_real_clis.py drive this
through Claude Code and Codex)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
from scratch_homes import scratch_dir

from enact.cancellation import CancellationToken
from enact.runtime._subprocess import CommandOutput, run_command
from enact.tasks.confine import SteeringPath, confinement


def run(confined_argv: list[str], cwd: Path, env: dict[str, str]) -> CommandOutput:
    return run_command(confined_argv, stdin_text="", cwd=cwd, env=env, timeout_s=30, cancel=CancellationToken())


def test_steering_paths_in_a_writable_state_dir_stay_read_only_and_placeholders_are_removed(
        tmp_path: Path, require_binary: Callable[[str], str]) -> None:
    require_binary("bwrap")
    worktree = tmp_path / "home" / "worktrees" / "task-1"
    worktree.mkdir(parents=True)
    # Outside /tmp, as an owner's config is (the private /tmp would hide it).
    with scratch_dir("steering-") as state:
        (state / "settings.json").write_text('{"owner": true}')
        steering = (SteeringPath(state / "settings.json"), SteeringPath(state / "CLAUDE.md"),
                    SteeringPath(state / "commands", directory=True))
        with confinement("auto", home=tmp_path / "home", worktree=worktree, writable=(state,),
                         steering=steering) as confined:
            env = dict(confined.env)
            writes = {
                "settings.json": f"echo '{{}}' > {state}/settings.json",
                "CLAUDE.md": f"echo obey > {state}/CLAUDE.md",
                "commands": f"echo run > {state}/commands/evil.md",
            }
            refused = {name: run(confined.wrap(["sh", "-c", command]), worktree, env)
                       for name, command in writes.items()}
            kept = run(confined.wrap(["sh", "-c", f"echo session > {state}/history.jsonl"]), worktree, env)
            seen = run(confined.wrap(["cat", f"{state}/settings.json"]), worktree, env)
        assert all(output.exit_code != 0 for output in refused.values()), refused
        assert kept.exit_code == 0 and (state / "history.jsonl").read_text() == "session\n"
        assert seen.stdout == '{"owner": true}'
        assert (state / "settings.json").read_text() == '{"owner": true}'
        # The placeholders bwrap made in the owner's directory are gone again.
        assert sorted(path.name for path in state.iterdir()) == ["history.jsonl", "settings.json"]


def test_a_placeholder_another_confinement_still_uses_outlives_the_first(
        tmp_path: Path, require_binary: Callable[[str], str]) -> None:
    require_binary("bwrap")
    worktree = tmp_path / "home" / "worktrees" / "task-1"
    worktree.mkdir(parents=True)
    with scratch_dir("steering-") as state:
        steering = (SteeringPath(state / "CLAUDE.md"),)
        with confinement("auto", home=tmp_path / "home", worktree=worktree, writable=(state,),
                         steering=steering) as outer:
            with confinement("auto", home=tmp_path / "home", worktree=worktree, writable=(state,),
                             steering=steering) as inner:
                assert run(inner.wrap(["true"]), worktree, dict(inner.env)).exit_code == 0
            refused = run(outer.wrap(["sh", "-c", f"echo obey > {state}/CLAUDE.md"]), worktree, dict(outer.env))
            assert refused.exit_code != 0
            # Its mount point is still there for the outer one's sandboxes.
            assert (state / "CLAUDE.md").exists()
        assert not (state / "CLAUDE.md").exists()


def test_placeholders_a_killed_daemon_left_are_removed_by_the_next_confinement_if_still_empty(
        tmp_path: Path, require_binary: Callable[[str], str]) -> None:
    """The ledger in enact's home names them; what the owner wrote since stays."""
    require_binary("bwrap")
    home = tmp_path / "home"
    worktree = home / "worktrees" / "task-1"
    worktree.mkdir(parents=True)
    with scratch_dir("steering-") as state:
        with confinement("auto", home=home, worktree=worktree, writable=(state,),
                         steering=(SteeringPath(state / "AGENTS.md"),)):
            ledger = home / "confine" / "placeholders.json"
            assert orjson.loads(ledger.read_bytes()) == [{"path": str(state / "AGENTS.md"), "directory": False}]
        # What a kill -9 during three tasks' sandboxes leaves: their mount points and the ledger naming them.
        (state / "CLAUDE.md").touch(mode=0o444)
        (state / "commands").mkdir()
        (state / "settings.json").write_text('{"owner": "wrote it since"}')
        ledger.write_bytes(orjson.dumps([{"path": str(state / name), "directory": name == "commands"}
                                         for name in ("CLAUDE.md", "commands", "settings.json")]))
        other_home = tmp_path / "next-daemon-home"  # the next daemon's first confinement, this process's PLACEHOLDERS
        (other_home / "worktrees" / "task-2").mkdir(parents=True)
        with confinement("auto", home=other_home, worktree=other_home / "worktrees" / "task-2"):
            pass
        with confinement("auto", home=home, worktree=worktree, writable=(state,)):
            pass
        assert sorted(path.name for path in state.iterdir()) == ["settings.json"]
        assert not ledger.exists() or orjson.loads(ledger.read_bytes()) == []
