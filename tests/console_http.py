"""Plain HTTP to a daemon's console, for the tests: a login link from
``enact console``, a session cookie, and requests with any Host or Origin."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from conftest import Daemon

CONSOLE_ON = {"ENACT_CONSOLE_ENABLED": "true", "ENACT_CONSOLE_ADDR": "127.0.0.1:0"}


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: str


def login_link(daemon: Daemon) -> dict[str, str]:
    done = daemon.cli("console", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    link: dict[str, str] = json.loads(done.stdout)
    return link


def fetch(address: str, path: str, *, method: str = "GET", headers: dict[str, str] | None = None,
          body: str = "") -> Answer:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        sent = {"Host": address, **(headers or {})}
        connection.request(method, path, body=body.encode() or None, headers=sent)
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                      response.read().decode(errors="replace"))
    finally:
        connection.close()


def signed_in(daemon: Daemon) -> tuple[str, str]:
    """The console's address and a ``Cookie`` header of a fresh session."""
    link = login_link(daemon)
    answer = fetch(link["address"], urlsplit(link["url"]).path + "?" + urlsplit(link["url"]).query)
    assert answer.status == 303, answer
    cookie = answer.headers["set-cookie"].split(";", 1)[0]
    return link["address"], cookie
