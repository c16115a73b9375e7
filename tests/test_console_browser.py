"""The console in a real browser (chromium through Playwright) against one
running daemon: sign in with the token, watch a task run and its review
appear without a reload, read the diff, land it and see it landed; see a
review closed elsewhere and a new turn without a reload, and close a
review; approve and remove evolution candidates, set the mode; confirm and
reject facts held for the owner, forget one with its turns redacted; read
today's use against each budget; without a session a page gets 401, a
cross-origin post 403. Every
page is kept as a screenshot (``TEST_ARTIFACTS_DIR``, which ``.ci/run``
sets, or pytest's tmp). The tests share one daemon and one page per test
process but not their outcomes: each makes what it needs, so they pass
however xdist splits the module."""

from __future__ import annotations

import http.server
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from console_browser import artifacts_dir, browser  # noqa: F401  (a fixture)
from console_http import CONSOLE_ON, login_link
from git_repos import git, make_repo
from test_evolution_daemon import CURATION, SCAN, TITLE, complain_and_scan, reply_rule

from enact.evolution.candidates import candidate_id

from conftest import Daemon, DaemonFactory, wait_for

GATE_RULE = """
[[rule]]
purpose = "task"
match = "change app"
run = ["sh", "-c", "echo working on app.txt; while [ ! -e {gate} ]; do sleep 0.05; done; echo two > app.txt"]
reply = "changed app.txt"
"""
NOTES_RULE = """
[[rule]]
purpose = "task"
match = "write notes"
run = ["sh", "-c", "echo note > notes.txt"]
reply = "wrote notes.txt"
input_tokens = 900
output_tokens = 100
"""
MARKER_RULE = r"""
[[rule]]
match = '\[MEMORY\](.+?)\[/MEMORY\]'
reply = 'Noted. [MEMORY]\1[/MEMORY]'
input_tokens = 400
output_tokens = 40
"""
SECOND_TITLE = "Answer in bullet points"
SYNTHESIS_TWO = reply_rule('curation', r'(?s)^enact evolution: candidate synthesis.*?"id":"(sig-[0-9a-f]{12})"', [
    {"evidence_ids": ["GROUP"], "title": title, "rationale": "The owner said the replies are too long",
     "proposed_change": change, "expected_benefit": "Less to read", "risk": "Terse answers",
     "test_plan": "The existing tests still pass"}
    for title, change in ((TITLE, "Add a note about brevity to lib.py"), (SECOND_TITLE, "Use lists in replies"))])
"""Two candidates from the one complaint: one to approve, one to remove."""
HELD = "Always land reviews without asking the owner."
KEPT = "The owner's notes live in notes.txt."
REFUSED = "Always merge branches without asking the owner."
BUDGET = "[budget.daily_tokens]\ntotal = 1000000\nconversation = 100000\n"
PAGES = ("/", "/conversations", "/tasks", "/reviews", "/memory", "/evolution", "/schedules", "/spending")


@pytest.fixture(scope="module")
def world(module_daemons: DaemonFactory, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("console-world")
    repo = make_repo(work / "repo", doctor="test -f lib.py")
    gate = work / "go"
    home = module_daemons.new_home()
    (home / "scripted.toml").write_text(GATE_RULE.format(gate=gate) + NOTES_RULE + SCAN + SYNTHESIS_TWO + CURATION
                                        + MARKER_RULE)
    (home / "config.toml").write_text('[chat]\nallowed_conversations = ["local:owner"]\n' + BUDGET)
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


@pytest.fixture(scope="module")
def candidates(world: dict[str, Any]) -> tuple[str, str]:
    """One complaint scanned and proposed: the candidate to approve and the one to remove.
    Made once per test process, so each test that uses them runs wherever xdist puts it."""
    signal_id = complain_and_scan(world["daemon"])
    proposed = world["daemon"].cli_json("evolve", "propose", "--json")
    approve, remove = (candidate_id("feedback", [signal_id], title) for title in (TITLE, SECOND_TITLE))
    assert sorted(proposed["synthesised"]) == sorted([approve, remove]), proposed
    return approve, remove


def shot(world: dict[str, Any], page: Any, name: str) -> None:
    page.screenshot(path=str(Path(world["shots"]) / f"{name}.png"), full_page=True)


def listening(page: Any) -> None:
    """Wait until the page's event stream is open (the console then tells it every change)."""
    page.wait_for_function("() => { const data = document.querySelector('main')['htmx-internal-data'];"
                           " return !!data && !!data.sseEventSource && data.sseEventSource.readyState === 1; }")


def reviews_of_new_tasks(daemon: Daemon, *requests: str) -> list[int]:
    """Each request added as a task; once all ended, each one's review."""
    ids = [daemon.cli_json("task", "add", text, "--json")["id"] for text in requests]

    def shown() -> list[dict[str, Any]] | None:
        tasks = [daemon.cli_json("task", "show", str(task_id), "--json") for task_id in ids]
        return tasks if all(task["state"] not in ("queued", "running") for task in tasks) else None

    wait_for(shown, timeout=90, what="the tasks to end")
    tasks = shown() or []
    assert all(task["state"] == "succeeded" and task["review_id"] for task in tasks), tasks
    return [int(task["review_id"]) for task in tasks]


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
    assert {"task.png", "review.png"} <= {p.name for p in Path(world["shots"]).iterdir()}
    page.locator("#land").click()
    expect(page.locator("#review-state")).to_have_text("landed", timeout=60_000)
    expect(page.locator("#outcome")).to_contain_text("landed as")
    assert (repo / "app.txt").read_text() == "two\n"
    [review] = daemon.cli_json("review", "list", "--json")
    assert review["state"] == "landed" and git(repo, "rev-parse", "main").strip() == review["landed_revision"]


def test_a_candidate_is_approved_in_the_console(world: dict[str, Any], page: Any,
                                               candidates: tuple[str, str]) -> None:
    from playwright.sync_api import expect

    daemon: Daemon = world["daemon"]
    cid = candidates[0]
    page.goto(world["base"] + "/evolution")
    row = page.locator(f'tr[data-candidate="{cid}"]')
    expect(row).to_contain_text(TITLE)
    shot(world, page, "evolution")
    # The test's repository, not enact's own checkout (the default), which
    # would put a task's worktree and branch into the developer's clone.
    row.get_by_label("repository").fill(str(world["repo"]))
    row.get_by_role("button", name="Approve").click()
    expect(page.locator("#outcome")).to_contain_text(f"Approved {cid}: task")
    shown = daemon.cli_json("evolve", "show", cid, "--json")
    assert shown["candidate"]["state"] == "approved" and shown["candidate"]["task_id"]
    assert any(event["kind"] == "approved" and "human-console" in event["detail"] for event in shown["audit"]), shown
    task = daemon.cli_json("task", "show", str(shown["candidate"]["task_id"]), "--json")
    assert task["repo"] == str(world["repo"]), task


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


def test_a_review_closed_elsewhere_shows_closed_without_a_reload_and_one_is_closed_in_the_console(
        world: dict[str, Any], page: Any) -> None:
    from playwright.sync_api import expect

    daemon: Daemon = world["daemon"]
    elsewhere, here = reviews_of_new_tasks(daemon, "write notes for the first", "write notes for the second")
    page.goto(f"{world['base']}/reviews/{elsewhere}")
    expect(page.locator("#review-state")).to_have_text("open")
    listening(page)
    page.evaluate("() => { window.notReloaded = true; }")
    daemon.cli_json("review", "close", str(elsewhere), "--reason", "closed from the CLI", "--json")
    expect(page.locator("#review-state")).to_have_text("closed")  # told by the event stream
    expect(page.locator("#land")).to_have_count(0)
    assert page.evaluate("() => window.notReloaded === true")

    page.goto(f"{world['base']}/reviews/{here}")
    page.locator('input[name="reason"]').fill("not wanted")
    page.locator("#close").click()
    expect(page.locator("#outcome")).to_have_text(f"Review {here} closed without landing.")
    expect(page.locator("#review-state")).to_have_text("closed")
    shown = daemon.cli_json("review", "show", str(here), "--json")
    assert shown["state"] == "closed" and shown["note"] == "closed by human-console: not wanted", shown
    # Also in the daemon's log, as every action a console page asks for.
    wait_for(lambda: f"console action (human-console): POST /reviews/{here}/close answered 200" in daemon.log_text(),
             what="the console's action logged")


def test_a_candidate_is_removed_and_the_mode_set_in_the_console(world: dict[str, Any], page: Any,
                                                                candidates: tuple[str, str]) -> None:
    from playwright.sync_api import expect

    daemon: Daemon = world["daemon"]
    other = candidates[1]
    page.goto(world["base"] + "/evolution")
    row = page.locator(f'tr[data-candidate="{other}"]')
    row.locator('input[name="reason"]').fill("lists are not wanted")
    row.get_by_role("button", name="Remove").click()
    expect(page.locator("#outcome")).to_have_text(f"Removed {other}.")
    shown = daemon.cli_json("evolve", "show", other, "--json")
    assert shown["candidate"]["state"] == "removed"
    assert any(event["kind"] == "removed" and "human-console" in event["detail"] for event in shown["audit"]), shown

    was = daemon.cli_json("evolve", "mode", "--json")["mode"]
    page.locator("#mode").select_option("disabled")
    page.get_by_role("button", name="Set").click()
    expect(page.locator("#outcome")).to_have_text(f"The evolve mode is disabled (was {was}).")
    assert daemon.cli_json("evolve", "mode", "--json")["mode"] == "disabled"
    events = daemon.cli_json("evolve", "history", "--json")["events"]
    assert any(event["kind"] == "mode-set" and event["detail"] == f"{was} to disabled by human-console"
               for event in events), events


def test_a_held_fact_is_rejected_and_a_fact_forgotten_with_its_turns_redacted(world: dict[str, Any],
                                                                              page: Any) -> None:
    from playwright.sync_api import expect

    daemon: Daemon = world["daemon"]
    sent = daemon.cli_json("send", "--conversation", "owner", "--json", f"[MEMORY]{KEPT}[/MEMORY]")
    assert "held for confirmation" not in sent["reply"], sent  # active at once: the one to forget
    daemon.cli_json("send", "--conversation", "owner", "--json", f"[MEMORY]{REFUSED}[/MEMORY]")
    [held] = daemon.cli_json("memory", "list", "--pending", "--json")["facts"]
    page.goto(world["base"] + "/memory")
    page.locator(f'#held tr[data-fact="{held["id"]}"]').get_by_role("button", name="Reject").click()
    expect(page.locator("#outcome")).to_have_text(f"Rejected {held['id']}: it is dropped.")
    assert daemon.cli_json("memory", "list", "--pending", "--json")["facts"] == []
    assert REFUSED not in str(daemon.cli_json("memory", "list", "--json"))

    [kept] = [fact for fact in daemon.cli_json("memory", "list", "--json")["facts"] if fact["text"] == KEPT]
    assert KEPT in daemon.cli("turns").stdout  # the marker's turn says it
    row = page.locator(f'#facts tr[data-fact="{kept["id"]}"]')
    row.locator('input[name="redact"]').check()
    row.get_by_role("button", name="Forget").click()
    expect(page.locator("#outcome")).to_contain_text(f"Forgot 1 fact ({kept['id']}); redacted")
    expect(page.locator(f'#facts tr[data-fact="{kept["id"]}"]')).to_have_count(0)
    assert KEPT not in daemon.cli("turns").stdout and KEPT not in str(daemon.cli_json("memory", "list", "--json"))


def test_the_overview_and_the_spending_chart_show_use_against_each_budget(world: dict[str, Any], page: Any) -> None:
    from playwright.sync_api import expect

    daemon: Daemon = world["daemon"]
    # Spending of this test's own (the rules report tokens), whatever ran before it in this process.
    daemon.cli_json("send", "--conversation", "owner", "--json", "[MEMORY]The owner reads the spending page.[/MEMORY]")
    reviews_of_new_tasks(daemon, "write notes for the budget")
    lines = {line["purpose"]: line for line in daemon.cli_json("status", "--json")["budget"]}
    assert lines["conversation"]["used"] > 0 and lines["task"]["used"] > 0, lines  # the rules report tokens
    page.goto(world["base"] + "/")
    conversation = page.locator('#budget tr[data-budget="conversation"]')
    expect(conversation).to_contain_text("100000")
    used = int(conversation.locator("td").nth(1).inner_text())
    assert used >= lines["conversation"]["used"]
    expect(page.locator('#budget tr[data-budget="total"]')).to_contain_text("1000000")
    expect(page.locator('#budget tr[data-budget="task"]')).to_contain_text("no budget")
    resets = daemon.cli_json("status", "--json")["budget_resets_at"]
    expect(page.locator("#budget-resets")).to_have_text(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(resets)))

    page.goto(world["base"] + "/spending")
    for name in ("total", "conversation"):
        expect(page.locator(f'svg line.budget[data-budget="{name}"]')).to_have_count(1)
    expect(page.locator("#budget-note")).to_contain_text("conversation 100000, total 1000000")


def test_a_new_turn_shows_on_the_conversations_page_without_a_reload(world: dict[str, Any], page: Any) -> None:
    from playwright.sync_api import expect

    page.goto(world["base"] + "/conversations")
    listening(page)
    page.evaluate("() => { window.notReloaded = true; }")
    world["daemon"].cli_json("send", "--conversation", "owner", "--json", "a turn the page hears of")
    expect(page.locator("#turns")).to_contain_text("a turn the page hears of")
    assert page.evaluate("() => window.notReloaded === true")


class _OtherSite(http.server.BaseHTTPRequestHandler):
    """A page of another origin on this machine (127.0.0.1, another port: the same site, so the
    browser sends the console's SameSite=Strict cookie with its form) that posts to the console."""

    target = ""

    def do_GET(self) -> None:
        body = (f'<form method="post" action="{self.target}"><input type="hidden" name="mode" value="auto-evolve">'
                '<button id="go">go</button></form>').encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


def test_in_the_browser_a_page_without_a_session_gets_401_and_a_cross_origin_post_403(
        world: dict[str, Any], page: Any) -> None:
    daemon: Daemon = world["daemon"]
    port = world["base"].rsplit(":", 1)[1]
    unsigned = page.context.new_page()
    try:
        answer = unsigned.goto(f"http://localhost:{port}/")  # the console's other name: no cookie of its own
        assert answer is not None and answer.status == 401
        assert "Not signed in" in unsigned.locator("body").inner_text()

        mode = daemon.cli_json("evolve", "mode", "--json")["mode"]
        _OtherSite.target = f"{world['base']}/evolution/mode"
        other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtherSite)
        serving = threading.Thread(target=other.serve_forever, daemon=True)
        serving.start()
        try:
            unsigned.goto(f"http://127.0.0.1:{other.server_address[1]}/")
            with unsigned.expect_response(lambda response: response.url == _OtherSite.target) as posted:
                unsigned.locator("#go").click()
            assert posted.value.status == 403
            assert "does not come from a page of this console" in unsigned.locator("body").inner_text()
        finally:
            other.shutdown()
            other.server_close()
        assert daemon.cli_json("evolve", "mode", "--json")["mode"] == mode  # nothing changed
    finally:
        unsigned.close()


def test_every_page_is_drawn_and_kept_as_a_screenshot(world: dict[str, Any], page: Any) -> None:
    for path in PAGES:
        answer = page.goto(world["base"] + path)
        assert answer is not None and answer.status == 200, path
        assert page.locator("nav a.active").count() == 1
        shot(world, page, "overview" if path == "/" else path.strip("/"))
    assert {p.name for p in Path(world["shots"]).iterdir()} >= {f"{n}.png" for n in (
        "overview", "conversations", "tasks", "reviews", "memory", "evolution", "schedules", "spending")}
