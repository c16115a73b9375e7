"""Skills in a running daemon, through the CLI: a skill folder from a test
repository is refused for a link out, an executable or an oversized file;
the good one is assessed (the scripted runtime answers the ``skill`` call)
into a candidate, installed only when the owner approves it, offered to the
model in a new session's startup context, read by a model action (its use
recorded) and removed; offered to the real Claude Code CLI as a native
skill, whose Skill tool's use of it is recorded too, and placed where the
real Codex CLI lists it, its reading of the SKILL.md recorded as a use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import model_anthropic  # noqa: F401  (registers /v1/messages)
import orjson
import pytest
from skill_repos import skill_repo

from conftest import Daemon, DaemonFactory

ASSESSMENT = {"adds": "a habit of dated, tidy notes", "duplicates": "nothing", "conflicts": "nothing",
              "could_be_made_to": "nothing beyond editing notes", "verdict": "install: harmless and useful"}
RULES = f"""
[[rule]]
purpose = "skill"
match = "(?s)^Assess a skill"
reply = '{orjson.dumps(ASSESSMENT).decode()}'

[[rule]]
purpose = "scan"
match = "(?s)^enact evidence scan: feedback"
reply = "[]"

[[rule]]
match = "^please learn"
action = "learn"
args = {{ text = "/nowhere" }}
then = "Tried: {{receipt}}"

[[rule]]
match = "^please read the skill"
action = "skill.read"
args = {{ text = "tidy-notes" }}
then = "Read it: {{receipt}}"
"""


def transcript(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def daemon(daemons: DaemonFactory) -> Daemon:
    home = daemons.new_home()
    (home / "scripted.toml").write_text(RULES)
    (home / "config.toml").write_text('[chat]\nallowed_conversations = ["local:owner"]\n')
    return daemons.start(home, env={"ENACT_SCRIPTED_TRANSCRIPT": str(home.parent / "transcript.jsonl")})


def learn(daemon: Daemon, repo: Path, folder: str, *extra: str) -> Any:
    return daemon.cli("learn", str(repo), "--path", f"skills/{folder}", "--rev", "main", "--json", *extra,
                      timeout=90)


@pytest.mark.parametrize(("folder", "why"), [
    ("link-out", "secrets is a symbolic link leading out of the folder (to ../../../outside.txt)"),
    ("script", "run.sh is executable"),
    ("big", "blob.txt is 300000 bytes"),
])
def test_a_skill_with_a_link_out_an_executable_or_a_big_file_is_refused_before_any_model_call(
        daemon: Daemon, tmp_path: Path, folder: str, why: str) -> None:
    refused = learn(daemon, skill_repo(tmp_path / "repo"), folder)
    assert refused.returncode != 0 and why in refused.stdout + refused.stderr, refused
    repo = tmp_path / "repo"
    chat = daemon.cli_json("send", "--conversation", "owner", "--json", f"/learn {repo} skills/{folder} main")
    assert why in chat["reply"], chat
    assert transcript(daemon.home.parent / "transcript.jsonl") == []
    assert daemon.cli_json("evolve", "candidates", "--json") == []


def test_a_model_cannot_learn_a_skill(daemon: Daemon) -> None:
    asked = daemon.cli_json("send", "--conversation", "owner", "--json", "please learn")
    assert "learn needs a human; a model action cannot run it" in asked["reply"], asked
    calls = transcript(daemon.home.parent / "transcript.jsonl")
    assert calls and all(call["session_key"] == "local:owner" for call in calls)  # no assessment was asked for
    assert daemon.cli_json("evolve", "candidates", "--json") == []


def test_a_learned_skill_is_installed_on_approval_offered_read_and_removed(daemon: Daemon, tmp_path: Path) -> None:
    repo = skill_repo(tmp_path / "repo")
    calls = daemon.home.parent / "transcript.jsonl"
    learned = learn(daemon, repo, "good")
    assert learned.returncode == 0, (learned, daemon.log_text())
    body = orjson.loads(learned.stdout)
    [assessment] = transcript(calls)
    assert assessment["session_key"] == "" and assessment["prompt"].startswith("Assess a skill")
    assert "Date every note" in assessment["prompt"] and assessment["answer"] == orjson.dumps(ASSESSMENT).decode()
    [candidate] = daemon.cli_json("evolve", "candidates", "--json")
    assert candidate["id"] == body["candidate_id"] and candidate["source"] == "skill"
    assert candidate["rationale"] == ASSESSMENT["adds"]
    # Assessed, not installed: nothing in the home, nothing offered.
    assert daemon.cli_json("skills", "list", "--json")["skills"] == []
    assert daemon.cli("skills", "list").stdout.startswith("no skills installed (")
    assert not (daemon.home / "skills" / "tidy-notes").exists()

    approved = daemon.cli_json("evolve", "approve", body["candidate_id"], "--json")
    assert approved["installed"] == "tidy-notes" and approved["task_id"] is None
    [skill] = daemon.cli_json("skills", "list", "--json")["skills"]
    assert skill["revision"] == body["revision"] and skill["source"] == str(repo)
    assert {file["path"] for file in skill["digests"]} == {"SKILL.md", "reference.md", "alias.md"}
    assert daemon.cli_json("evolve", "show", body["candidate_id"], "--json")["candidate"]["state"] == "adopted"
    assert daemon.cli_json("task", "list", "--json") == []  # an approved skill makes no task

    daemon.cli_json("send", "--conversation", "owner", "--json", "hello")
    first_turn = transcript(calls)[-1]
    assert first_turn["session_key"] == "local:owner" and first_turn["resumed"] is None
    assert "- tidy-notes: Keep the owner's notes tidy and dated." in first_turn["prompt"]

    read = daemon.cli_json("send", "--conversation", "owner", "--json", "please read the skill")
    assert "Date every note" in read["reply"], read
    assert daemon.cli_json("skills", "list", "--json")["skills"][0]["uses"] == 1
    # The turn that read it is evidence the scanner reads: the skill's use is in its batch.
    scanned = daemon.cli_json("evolve", "scan", "--source", "feedback", "--json")
    [scan] = scanned["scans"] if isinstance(scanned, dict) else scanned
    assert scan["outcome"] == "completed", scanned
    assert "skill.read (ok)" in transcript(calls)[-1]["prompt"]

    removed = daemon.cli("skills", "remove", "tidy-notes")
    assert removed.returncode == 0 and "skill tidy-notes removed" in removed.stdout
    assert daemon.cli_json("skills", "list", "--json")["skills"] == []
    assert not (daemon.home / "skills" / "tidy-notes").exists()


def test_an_installed_skill_is_offered_to_the_real_claude_cli_as_a_native_skill_and_its_use_recorded(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    from claude_home import claude_env
    from model_server import ModelServer, Reply, ToolCall

    from enact.skills.installed import install
    from enact.skills.manifest import checked
    from enact.skills.settings import SkillLimits
    from enact.skills.sources import fetch_git

    from conftest import real_cli

    home = daemons.new_home()
    fetched = fetch_git(str(skill_repo(tmp_path / "repo")), "skills/good", "main", mirrors=tmp_path / "mirrors",
                        limits=SkillLimits())
    install(home, checked(fetched.folder, SkillLimits()), fetched, at=1.0, by="human-cli")
    with ModelServer() as server:
        env = {"ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": real_cli("claude"),
               **claude_env(home.parent / "claude-home", server.url)}
        daemon = daemons.start(home, env=env)
        # The model takes the skill up with Claude Code's own Skill tool, then answers.
        server.script(ToolCall("tidy-notes", tool="Skill"), Reply("noted"))
        sent = daemon.cli("send", "--json", "hello", timeout=90)
        assert sent.returncode == 0, (sent, daemon.log_text())
        assert orjson.loads(sent.stdout)["reply"] == "noted"
        # Recorded as the conversation's use, as a skill.read is.
        [listed] = daemon.cli_json("skills", "list", "--json")["skills"]
        assert listed["uses"] == 1, daemon.log_text()
        # Where Claude Code looks for a project's skills: the conversation's working directory.
        placed = home / "claude" / ".claude" / "skills" / "tidy-notes" / "SKILL.md"
        assert placed.read_text().startswith("---\nname: tidy-notes")
        # Claude Code (measured: 2.1.328) lists the skills it found for its Skill tool; the startup
        # context names the skill too, so the native listing is looked for by its own words.
        native = "skills are available for use with the Skill tool:\n\n- tidy-notes: Keep the owner's notes tidy"
        requests = [orjson.dumps(request.json()["messages"]).decode() for request in server.model_requests()]
        assert any(native.replace("\n", "\\n") in text for text in requests), requests
        # Removed, it is taken out of where Claude Code looks, too.
        assert daemon.cli("skills", "remove", "tidy-notes").returncode == 0
        assert not placed.parent.exists()
    assert not (home.parent / "claude-home" / ".claude" / "skills").exists()


def test_an_installed_skill_is_placed_where_the_real_codex_cli_lists_it_and_its_reading_recorded(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    from codex_home import FAKE_KEY_VARIABLE, codex_env, scratch_codex_home
    from model_server import ModelServer, Reply, ToolCall
    from test_skills_use import install_tidy_notes

    from conftest import real_cli

    home = daemons.new_home()
    install_tidy_notes(home, tmp_path, at=1.0)
    with ModelServer() as server, scratch_codex_home(server.url) as codex_home:
        env = {k: v for k, v in codex_env(codex_home).items() if k in ("CODEX_HOME", FAKE_KEY_VARIABLE)}
        env.update({"ENACT_RUNTIME_ADAPTER": "codex", "ENACT_CODEX_BIN": real_cli("codex")})
        daemon = daemons.start(home, env=env)
        # Codex (0.169) opens a listed skill's SKILL.md with a shell command: the model asks for that.
        server.script(ToolCall("cat .agents/skills/tidy-notes/SKILL.md"), Reply("noted"))
        sent = daemon.cli("send", "--json", "hello", timeout=90)
        assert sent.returncode == 0, (sent, daemon.log_text())
        assert orjson.loads(sent.stdout)["reply"] == "noted"
        placed = home / "conversation" / ".agents" / "skills" / "tidy-notes" / "SKILL.md"
        assert placed.read_text().startswith("---\nname: tidy-notes")
        first, second = (orjson.dumps(request.json()["input"]).decode() for request in server.model_requests())
        # Its own listing (the startup context names the skill too): the skill roots and the entry.
        assert "conversation/.agents/skills" in first and "- tidy-notes: Keep the owner's notes tidy" in first
        assert "Date every note" in second  # the command's output went back to the model
        [listed] = daemon.cli_json("skills", "list", "--json")["skills"]
        assert listed["uses"] == 1, daemon.log_text()


def test_a_task_whose_real_claude_cli_takes_up_the_skill_records_the_tasks_use(
        daemons: DaemonFactory, tmp_path: Path) -> None:
    from claude_home import claude_env
    from model_server import ModelServer, Reply, ToolCall
    from task_repos import git, make_repo
    from test_skills_use import install_tidy_notes
    from test_task_workers_real_clis import ADD_DOUBLE, assert_reviewed_with_the_edit, run_task

    from enact.tasks import task_branches

    from conftest import real_cli

    home = daemons.new_home()
    install_tidy_notes(home, tmp_path, at=1.0)
    repo = make_repo(tmp_path / "repo")
    with ModelServer() as server:
        server.script(ToolCall("tidy-notes", tool="Skill"), ToolCall(ADD_DOUBLE), Reply("done"))
        daemon = daemons.start(home, env={**claude_env(home.parent / "claude-home", server.url),
                                          "ENACT_RUNTIME_ADAPTER": "claude", "ENACT_CLAUDE_BIN": real_cli("claude"),
                                          "ENACT_TASKS_CONFINEMENT": "off"})
        shown = run_task(daemon, repo, "add a double function to lib.py")
        assert_reviewed_with_the_edit(daemon, repo, shown)
        log = daemon.cli("task", "log", str(shown["id"])).stdout
        assert "skills used: tidy-notes" in log, log
        [listed] = daemon.cli_json("skills", "list", "--json")["skills"]
        assert listed["uses"] == 1
        branch = task_branches.branch_of(daemon.home, shown["id"])
        assert git(repo, "diff", "--name-only", f"{branch}~1", branch).split() == ["lib.py"]
