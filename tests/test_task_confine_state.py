"""Confinement replaces a runtime's state directory by the task's private
one, showing the owner's entries in it read-only but for the runtime's own
state: real bwrap on real directories (the real-CLI tests in
test_task_workers_real_clis.py drive this through Claude Code and Codex)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from scratch_homes import scratch_dir, snapshot

from enact.cancellation import CancellationToken
from enact.runtime._subprocess import CommandOutput, run_command
from enact.tasks.confine import Confinement, StateDir, confinement

from conftest import wait_for

OWN_STATE = ("projects", "sessions", "*.sqlite*")
TRANSCRIPT = "projects/-home-owner/chat.jsonl"


def run(confined: Confinement, command: str) -> CommandOutput:
    worktree = Path(confined.prefix[confined.prefix.index("--chdir") + 1])
    return run_command(confined.wrap(["sh", "-c", command]), stdin_text="", cwd=worktree, env=dict(confined.env),
                       timeout_s=30, cancel=CancellationToken())


@contextmanager
def confined_state(tmp_path: Path, require_binary: Callable[[str], str], files: dict[str, str],
                   links: dict[str, Path] | None = None) -> Iterator[tuple[Path, Confinement]]:
    """An owner's state directory holding ``files`` and symlinks ``links``
    (outside /tmp, as a real one is: the private /tmp would hide it), and a
    task confined with it."""
    require_binary("bwrap")
    worktree = tmp_path / "home" / "worktrees" / "task-1"
    worktree.mkdir(parents=True)
    with scratch_dir("state-") as state:
        for name, text in files.items():
            (state / name).parent.mkdir(parents=True, exist_ok=True)
            (state / name).write_text(text)
        for name, target in (links or {}).items():
            (state / name).symlink_to(target)
        with confinement("auto", home=tmp_path / "home", worktree=worktree,
                         state=(StateDir(state, OWN_STATE),)) as confined:
            yield state, confined


def test_a_confined_command_reads_the_owners_config_but_changes_nothing_in_the_owners_state_dir(
        tmp_path: Path, require_binary: Callable[[str], str]) -> None:
    files = {"settings.json": '{"owner": true}', "config.toml": 'model = "owner"\n', "commands/mine.md": "owner's",
             TRANSCRIPT: '{"turn": "owner"}\n', "state_5.sqlite": "db"}
    with confined_state(tmp_path, require_binary, files) as (state, confined):
        before = snapshot(state)
        [(_, private)] = confined.private_state
        seen = run(confined, f"cat {state}/settings.json {state}/config.toml {state}/commands/mine.md")
        refused = {name: run(confined, f"echo steered >> {state}/{name}")
                   for name in ("settings.json", "config.toml", "commands/mine.md", "commands/new.md")}
        created = run(confined, f"echo obey > {state}/CLAUDE.md && echo obey > {state}/AGENTS.md")
        transcript = run(confined, f"cat {state}/{TRANSCRIPT}; ls {state}/state_5.sqlite")
        forged = run(confined, f"mkdir -p {state}/projects/-home-owner && echo forged >> {state}/{TRANSCRIPT}")
        session = run(confined, f"mkdir -p {state}/sessions && echo mine > {state}/sessions/task.jsonl")
        assert (private / "CLAUDE.md").read_text() == "obey\n"  # the task's own, in its private directory
        assert (private / "sessions" / "task.jsonl").read_text() == "mine\n"
        assert snapshot(state) == before, "the owner's state directory changed"
    assert seen.stdout == '{"owner": true}model = "owner"\nowner\'s', seen
    assert all(output.exit_code != 0 and "Read-only file system" in output.stderr for output in refused.values())
    assert created.exit_code == 0 and forged.exit_code == 0 and session.exit_code == 0
    assert transcript.exit_code != 0 and "owner" not in transcript.stdout  # not there at all
    assert not private.exists() and not confined.tmp.parent.exists()  # the task's private directories are gone


def test_a_host_side_rename_over_an_owner_file_does_not_let_the_sandbox_write_the_owners_file(
        tmp_path: Path, require_binary: Callable[[str], str]) -> None:
    """The owner's CLI rewrites its config by renaming a new file over it,
    which on some kernels detaches the read-only mount on it in the sandbox:
    what the task then writes can only land in the empty mount point in its
    private directory."""
    with confined_state(tmp_path, require_binary, {"settings.json": '{"owner": 1}'}) as (state, confined):
        worktree = Path(confined.prefix[confined.prefix.index("--chdir") + 1])
        script = (f"touch ready; while [ ! -e go ]; do sleep 0.02; done; "
                  f"echo steered > {state}/settings.json && echo wrote")
        with subprocess.Popen(confined.wrap(["sh", "-c", script]), cwd=worktree, env=dict(confined.env),
                              stdout=subprocess.PIPE, text=True) as sandboxed:
            wait_for(lambda: (worktree / "ready").exists(), what="the sandbox to start")
            (state / "settings.json.tmp").write_text('{"owner": 2}')
            os.replace(state / "settings.json.tmp", state / "settings.json")
            (worktree / "go").touch()
            sandboxed.communicate(timeout=30)
            [(_, private)] = confined.private_state
            assert (private / "settings.json").read_text() in ("", "steered\n")  # written, if at all, there
        assert (state / "settings.json").read_text() == '{"owner": 2}'


def test_a_symlinked_config_file_is_read_and_stays_read_only_and_a_dangling_one_or_one_into_state_is_left_out(
        tmp_path: Path, require_binary: Callable[[str], str]) -> None:
    """As stow, chezmoi or home-manager leave an owner's config."""
    with scratch_dir("dotfiles-") as dotfiles:
        (dotfiles / "settings.json").write_text('{"linked": true}')
        links = {"settings.json": dotfiles / "settings.json", "CLAUDE.md": dotfiles / "gone.md",
                 "chats": Path("projects")}  # the last a link into the runtime's own state
        with confined_state(tmp_path, require_binary, {TRANSCRIPT: "owner's"}, links) as (state, confined):
            seen = run(confined, f"cat {state}/settings.json")
            refused = run(confined, f"echo steered > {state}/settings.json")
            dangling = run(confined, f"ls {state}/CLAUDE.md")
            linked_state = run(confined, f"ls {state}/chats")
            assert (state / "settings.json").is_symlink()
        assert seen.exit_code == 0 and seen.stdout == '{"linked": true}', seen
        assert refused.exit_code != 0 and "Read-only file system" in refused.stderr
        assert dangling.exit_code != 0 and linked_state.exit_code != 0
        assert (dotfiles / "settings.json").read_text() == '{"linked": true}'
