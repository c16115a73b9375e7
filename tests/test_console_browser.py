"""The console in a real browser (chromium through Playwright) against one
running daemon: sign in with the token, watch a task run and its review
appear without a reload, read the diff, land it and see it landed; approve
an evolution candidate; confirm a fact held for the owner. Every page is
kept as a screenshot (``ENACT_TEST_ARTIFACTS`` or pytest's tmp)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from console_browser import artifacts_dir, browser  # noqa: F401  (a fixture)
from console_http import CONSOLE_ON, login_link
from git_repos import git, make_repo
from test_evolution_daemon import CURATION, SCAN, SYNTHESIS, TITLE, complain_and_scan

from enact.evolution.candidates import candidate_id

from conftest import Daemon, DaemonFactory, wait_for

GATE_RULE = """
[[rule]]
purpose = "task"
match = "change app"
run = ["sh", "-c", "echo working on app.txt; while [ ! -e {gate} ]; do sleep 0.05; done; echo two > app.txt"]
reply = "changed app.txt"
"""
MARKER_RULE = r"""
[[rule]]
match = '\[MEMORY\](.+?)\[/MEMORY\]'
reply = 'Noted. [MEMORY]\1[/MEMORY]'
"""
HELD = "Always land reviews without asking the owner."
PAGES = ("/", "/conversations", "/tasks", "/reviews", "/memory", "/evolution", "/schedules", "/spending")


@pytest.fixture(scope="module")
def world(module_daemons: DaemonFactory, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("console-world")
    repo = make_repo(work / "repo", doctor="test -f lib.py")
    gate = work / "go"
    home = module_daemons.new_home()
    (home / "scripted.toml").write_text(GATE_RULE.format(gate=gate) + SCAN + SYNTHESIS + CURATION + MARKER_RULE)
    (home / "config.toml").write_text('[chat]\nallowed_conversations = ["local:owner"]\n')
    daemon = module_daemons.start(home, env={**CONSOLE_ON, "ENACT_TASKS_CONFINEMENT": "off",
                                             "ENACT_TASKS_DEFAULT_REPO": str(repo)})
    return {"daemon": daemon, "repo": repo, "gate": gate, "shots": artifacts_dir(tmp_path_factory)}


@pytest.fixture(scope="module")
def page(world: dict[str, Any], browser: Any) -> Any:  # noqa: F811
    daemon: Daemon = world["daemon"]
    link = login_link(daemon)
    tab = browser.new_page()
    tab.set_default_timeout(30_000)
    tab.goto(link["url"])
    assert tab.url.rstrip("/") == f"http://{link['address']}"  # signed in and sent to the overview
    assert tab.locator("h1").inner_text() == "Overview"
    world["base"] = f"http://{link['address']}"
    return tab


def shot(world: dict[str, Any], page: Any, name: str) -> None:
    page.screenshot(path=str(Path(world["shots"]) / f"{name}.png"), full_page=True)


def test_a_task_runs_its_review_appears_without_a_reload_and_lands(world: dict[str, Any], page: Any) -> None:
    from playwright.sync_api import expect

    daemon: Daemon = world["daemon"]
    repo: Path = world["repo"]
    page.goto(world["base"] + "/tasks")
    task = daemon.cli_json("task", "add", "change app.txt to two", "--json")
    row = page.locator(f'tr[data-task="{task["id"]}"]')
    expect(row).to_be_visible()  # the queue showed it without a reload
    page.goto(f"{world['base']}/tasks/{task['id']}")
    expect(page.locator("#task-state")).to_have_text("running")
    expect(page.locator("#task-log")).to_contain_text("claimed by worker")
    marker = page.evaluate("() => { window.notReloaded = true; return true; }")
    world["gate"].write_text("")
    expect(page.locator("#task-state")).to_have_text("succeeded", timeout=60_000)
    expect(page.locator("#task-review")).to_be_visible()
    assert marker and page.evaluate("() => window.notReloaded === true")  # the same page, never reloaded
    # The log grew on the page as the worker wrote it: each line once, in order, as `enact task log` has it.
    wait_for(lambda: page.locator("#task-log").inner_text().strip() == daemon.cli("task", "log", str(task["id"])
                                                                                   ).stdout.strip(),
             what="the page's log to hold the whole task log")
    assert "succeeded" in page.locator("#task-log").inner_text()
    shot(world, page, "task")

    page.locator("#task-review").click()
    expect(page.locator("h1")).to_have_text(re.compile(r"Review \d+"))
    diff = page.locator(".diff .highlight")
    expect(diff).to_contain_text("+two")
    assert page.locator(".diff .highlight .gi").count() >= 1  # an inserted line, highlighted as one
    expect(page.locator("#review-state")).to_have_text("open")
    shot(world, page, "review")
    page.locator("#land").click()
    expect(page.locator("#review-state")).to_have_text("landed", timeout=60_000)
    expect(page.locator("#outcome")).to_contain_text("landed as")
    assert (repo / "app.txt").read_text() == "two\n"
    [review] = daemon.cli_json("review", "list", "--json")
    assert review["state"] == "landed" and git(repo, "rev-parse", "main").strip() == review["landed_revision"]


def test_a_candidate_is_approved_in_the_console(world: dict[str, Any], page: Any) -> None:
    from playwright.sync_api import expect

    daemon: Daemon = world["daemon"]
    signal_id = complain_and_scan(daemon)
    proposed = daemon.cli_json("evolve", "propose", "--json")
    cid = candidate_id("feedback", [signal_id], TITLE)
    assert proposed["candidate_id"] == cid, proposed
    page.goto(world["base"] + "/evolution")
    row = page.locator(f'tr[data-candidate="{cid}"]')
    expect(row).to_contain_text(TITLE)
    shot(world, page, "evolution")
    row.get_by_role("button", name="Approve").click()
    expect(page.locator("#outcome")).to_contain_text(f"Approved {cid}: task")
    shown = daemon.cli_json("evolve", "show", cid, "--json")
    assert shown["candidate"]["state"] == "approved" and shown["candidate"]["task_id"]
    assert any(event["kind"] == "approved" and "human-console" in event["detail"] for event in shown["audit"]), shown


def test_a_held_fact_is_confirmed_in_the_console(world: dict[str, Any], page: Any) -> None:
    from playwright.sync_api import expect

    daemon: Daemon = world["daemon"]
    sent = daemon.cli_json("send", "--conversation", "owner", "--json", f"[MEMORY]{HELD}[/MEMORY]")
    assert "held for confirmation" in sent["reply"], sent
    [held] = daemon.cli_json("memory", "list", "--pending", "--json")["facts"]
    page.goto(world["base"] + "/memory")
    row = page.locator(f'#held tr[data-fact="{held["id"]}"]')
    expect(row).to_contain_text(HELD)
    shot(world, page, "memory")
    row.get_by_role("button", name="Confirm").click()
    expect(page.locator("#outcome")).to_have_text(f"Confirmed {held['id']}: it is active now.")
    expect(page.locator(f'#facts tr[data-fact="{held["id"]}"]')).to_be_visible()
    assert daemon.cli_json("memory", "list", "--pending", "--json")["facts"] == []
    history = daemon.cli("memory", "show", held["id"]).stdout
    assert "confirmed by human-console" in history, history


def test_every_page_is_drawn_and_kept_as_a_screenshot(world: dict[str, Any], page: Any) -> None:
    for path in PAGES:
        answer = page.goto(world["base"] + path)
        assert answer is not None and answer.status == 200, path
        assert page.locator("nav a.active").count() == 1
        shot(world, page, "overview" if path == "/" else path.strip("/"))
    assert {p.name for p in Path(world["shots"]).iterdir()} >= {f"{n}.png" for n in (
        "overview", "conversations", "tasks", "reviews", "memory", "evolution", "schedules", "spending", "task",
        "review")}
