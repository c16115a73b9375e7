"""The console's gate: one-time login tokens, sessions, the Host, Origin and
CSRF checks; as plain rules, and through a running daemon over HTTP."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

import pytest
from console_http import CONSOLE_ON, fetch, login_link, signed_in

import enact.console
from enact.console.auth import TOKEN_TTL_S, Gate, csrf_matches, host_allowed, origin_matches, own_hosts
from enact.console.pages_tasks import LAND_REFUSALS
from enact.messages.reviews import LandRefusal

from conftest import Daemon, DaemonFactory

STATIC = Path(enact.console.__file__).parent / "static"


def test_a_login_token_makes_one_session_and_is_spent_by_it() -> None:
    gate = Gate("0123456789abcdef")
    token, expires_at = gate.issue(now=1000.0)
    assert expires_at == 1000.0 + TOKEN_TTL_S
    redeemed = gate.redeem(token, now=1001.0)
    assert redeemed is not None
    session_id, session = redeemed
    assert gate.session(session_id) == session
    assert gate.redeem(token, now=1002.0) is None  # one use
    assert gate.session("not-a-session") is None and gate.session(None) is None


def test_an_unspent_token_is_void_once_it_expires() -> None:
    gate = Gate("0123456789abcdef")
    token, expires_at = gate.issue(now=1000.0)
    assert gate.redeem(token, now=expires_at) is None


def test_the_cookie_is_named_after_the_home() -> None:
    assert Gate("aaaa1111").cookie_name != Gate("bbbb2222").cookie_name


def test_only_the_consoles_own_address_is_a_host_it_answers() -> None:
    own = own_hosts("127.0.0.1", 9465)
    assert host_allowed("127.0.0.1:9465", own) and host_allowed("localhost:9465", own)
    for foreign in ("evil.example:9465", "127.0.0.1:9466", "127.0.0.1", "", None):
        assert not host_allowed(foreign, own)
    assert own_hosts("::1", 9465) == {"[::1]:9465", "localhost:9465"}


def test_a_change_needs_an_origin_of_this_console_and_the_sessions_csrf_token() -> None:
    assert origin_matches("http://127.0.0.1:9465", "127.0.0.1:9465")
    for origin in ("http://evil.example", "https://127.0.0.1:9465", "null", "", None, "http://127.0.0.1:9465/x"):
        assert not origin_matches(origin, "127.0.0.1:9465")
    gate = Gate("0123456789abcdef")
    token, _ = gate.issue(now=0.0)
    redeemed = gate.redeem(token, now=1.0)
    assert redeemed is not None
    session = redeemed[1]
    assert csrf_matches(session, session.csrf)
    assert not csrf_matches(session, "") and not csrf_matches(session, None) and not csrf_matches(session, "x")


def test_every_land_refusal_is_said_in_words() -> None:
    assert set(LAND_REFUSALS) == set(LandRefusal)


def test_the_vendored_front_end_files_are_the_pinned_ones() -> None:
    manifest = tomllib.loads((STATIC / "vendor" / "MANIFEST.toml").read_text())
    for entry in manifest["file"]:
        data = (STATIC / "vendor" / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["path"]
        assert (STATIC / "vendor" / entry["license"]).is_file()
        assert re.fullmatch(r"\d+\.\d+\.\d+", entry["version"])


# -- through a running daemon -----------------------------------------------


@pytest.fixture(scope="module")
def daemon(module_daemons: DaemonFactory) -> Daemon:
    return module_daemons.start(env=CONSOLE_ON)


@pytest.fixture(scope="module")
def address(daemon: Daemon) -> str:
    return login_link(daemon)["address"]


@pytest.mark.parametrize("path", ["/", "/tasks", "/reviews", "/memory", "/evolution", "/schedules", "/spending",
                                  "/conversations", "/events", "/static/vendor/htmx.min.js", "/tasks/1"])
def test_without_a_session_every_page_and_endpoint_answers_401(address: str, path: str) -> None:
    assert fetch(address, path).status == 401
    assert fetch(address, path, headers={"Cookie": "enact_console_x=forged"}).status == 401


def test_a_post_without_a_session_answers_401(address: str) -> None:
    answer = fetch(address, "/reviews/1/land", method="POST", headers={"Origin": f"http://{address}"})
    assert answer.status == 401


def test_the_login_link_signs_in_once_with_a_strict_http_only_cookie(daemon: Daemon) -> None:
    link = login_link(daemon)
    query = link["url"].split(link["address"], 1)[1]
    first = fetch(link["address"], query)
    assert first.status == 303 and first.headers["location"] == "/"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and cookie.startswith("enact_console_")
    assert fetch(link["address"], "/", headers={"Cookie": cookie.split(";")[0]}).status == 200
    assert fetch(link["address"], query).status == 401  # spent


def test_a_host_that_is_not_the_consoles_own_is_refused_even_signed_in(daemon: Daemon) -> None:
    address, cookie = signed_in(daemon)
    answer = fetch(address, "/", headers={"Host": "rebound.example:80", "Cookie": cookie})
    assert answer.status == 421
    assert fetch(address, "/login?token=x", headers={"Host": "rebound.example"}).status == 421


def test_a_cross_origin_post_is_refused_with_403_and_changes_nothing(daemon: Daemon) -> None:
    address, cookie = signed_in(daemon)
    page = fetch(address, "/reviews", headers={"Cookie": cookie})
    csrf = re.search(r'"X-CSRF-Token": "([^"]+)"', page.body)
    assert csrf is not None
    for origin in ("http://evil.example", "null", ""):
        headers = {"Cookie": cookie, "X-CSRF-Token": csrf.group(1), **({"Origin": origin} if origin else {})}
        assert fetch(address, "/reviews/1/land", method="POST", headers=headers).status == 403


def test_a_same_origin_post_without_the_csrf_token_is_refused_with_403(daemon: Daemon) -> None:
    address, cookie = signed_in(daemon)
    headers = {"Cookie": cookie, "Origin": f"http://{address}"}
    assert fetch(address, "/reviews/1/land", method="POST", headers=headers).status == 403
    forged = {**headers, "X-CSRF-Token": "forged"}
    assert fetch(address, "/reviews/1/land", method="POST", headers=forged).status == 403


def test_a_signed_in_page_has_security_headers(daemon: Daemon) -> None:
    address, cookie = signed_in(daemon)
    answer = fetch(address, "/", headers={"Cookie": cookie})
    assert answer.status == 200
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["referrer-policy"] == "no-referrer" and answer.headers["cache-control"] == "no-store"


def test_enact_console_says_so_when_the_console_is_off(daemons: DaemonFactory) -> None:
    daemon = daemons.start()  # the tests' daemons run without it by default
    done = daemon.cli("console", "--json")
    assert done.returncode == 2
    assert json.loads(done.stdout) == {"status": "refused", "code": "unsupported",
                                       "error": "no console link: the console is off (console.enabled = false)"}


def test_a_wildcard_console_address_is_refused_at_start(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    daemon = daemons.start(home, env={"ENACT_CONSOLE_ADDR": "0.0.0.0:9465", "ENACT_CONSOLE_ENABLED": "true"},
                           wait=False)
    assert daemon.wait_exit() != 0
    assert "console.addr" in daemon.log_text()
