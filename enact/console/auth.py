"""Who may use the console: one-time login tokens, sessions, and the checks
every request passes (its Host, its Origin and CSRF token when it changes
something). Plain rules with the time as an argument, tested without a server.

A token comes only from the control socket (``console.Login``), whose
caller is the owner; spending it makes a session, held in this daemon's
memory (a restart signs everyone out) and named in a cookie whose name
carries this home's id, so the consoles of two homes on one host do not
take each other's cookie (a browser keys cookies by host, not by port).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from urllib.parse import urlsplit

from enact.frozen_dataclass import dataclass

TOKEN_TTL_S = 600.0
"""An unspent login token is void after ten minutes."""
MAX_TOKENS = 16
MAX_SESSIONS = 32
"""The oldest session is ended past this many: a bound, not a policy."""
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True, slots=True)
class Session:
    id_hash: str
    csrf: str
    started_at: float


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Gate:
    """The tokens and sessions of one console; safe across the server's threads."""

    def __init__(self, home_id: str) -> None:
        self.cookie_name = f"enact_console_{home_id[:16]}"
        self._lock = threading.Lock()
        self._tokens: dict[str, float] = {}  # sha256 of a token -> when it expires
        self._sessions: dict[str, Session] = {}  # sha256 of a session id -> the session

    def issue(self, now: float) -> tuple[str, float]:
        """A fresh one-time token and when it expires."""
        token = secrets.token_urlsafe(32)
        expires_at = now + TOKEN_TTL_S
        with self._lock:
            self._tokens = {key: at for key, at in self._tokens.items() if at > now}
            while len(self._tokens) >= MAX_TOKENS:
                del self._tokens[min(self._tokens, key=self._tokens.__getitem__)]
            self._tokens[_digest(token)] = expires_at
        return token, expires_at

    def redeem(self, token: str, now: float) -> tuple[str, Session] | None:
        """Spend ``token``: a new session and the id its cookie carries, or
        None for a token unknown, spent or expired."""
        with self._lock:
            expires_at = self._tokens.pop(_digest(token), None)
            if expires_at is None or expires_at <= now:
                return None
            session_id = secrets.token_urlsafe(32)
            session = Session(id_hash=_digest(session_id), csrf=secrets.token_urlsafe(32), started_at=now)
            while len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions.values(), key=lambda s: s.started_at)
                del self._sessions[oldest.id_hash]
            self._sessions[session.id_hash] = session
            return session_id, session

    def session(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            return self._sessions.get(_digest(session_id))

    def end(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(session.id_hash, None)


def own_hosts(host: str, port: int) -> frozenset[str]:
    """The Host headers the console answers: its own address, and
    ``localhost`` beside a loopback one (a name no outside DNS answers).
    Any other name that reaches it is a rebinding attack or a mistake."""
    shown = f"[{host}]" if ":" in host else host
    names = {f"{shown}:{port}"}
    if host in ("127.0.0.1", "::1", "localhost"):
        names |= {f"localhost:{port}", f"127.0.0.1:{port}"} if host != "::1" else {f"localhost:{port}"}
    return frozenset(names)


def host_allowed(host_header: str | None, own: frozenset[str]) -> bool:
    return host_header is not None and host_header.lower() in own


def origin_matches(origin_header: str | None, host_header: str) -> bool:
    """A request that changes something must say it comes from a page of
    this console: its Origin is ``http://`` and the (checked) Host."""
    if not origin_header:
        return False
    parts = urlsplit(origin_header)
    return parts.scheme == "http" and parts.netloc.lower() == host_header.lower() and not parts.path.strip("/")


def csrf_matches(session: Session, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(session.csrf.encode(), (sent or "").encode())
