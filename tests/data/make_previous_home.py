"""Writes ``previous_home.jsonl``: every record of a home written by the
previous release (enact before per-database schema versions), for
tests/test_schema_upgrade.py.

How it was made (main at 04bd647, the last commit before schema versions):

    git archive 04bd647 | tar -x -C /tmp/enact-previous
    PYTHONPATH=/tmp/enact-previous python tests/data/make_previous_home.py

It runs that release's real daemon on a new home with the ledger test
extension (tests/schema_fixture) at its version 1, has a chat turn
through it, adds three ledger entries, stops the daemon, and dumps every
named database: a JSON line naming each database, then one per record,
key and value in base64. The
tests load the lines into a fresh LMDB environment (the layout is LMDB's
own, so the records are all a home is), which is the home as that
release left it.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import lmdb
import orjson

import enact.storage

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "previous_home.jsonl"
LEDGER = HERE.parent / "schema_fixture"
ENTRIES = ("first entry", "the second entry", "a third and last entry")


def _enact(home: Path, env: dict[str, str], *args: str) -> str:
    # In the home's directory: `python -m` puts the working directory first
    # on the path, where a checkout's enact would win over PYTHONPATH's.
    done = subprocess.run([sys.executable, "-m", "enact", *args], env=env, capture_output=True, text=True,
                          timeout=60, check=False, cwd=home)
    if done.returncode != 0:
        raise SystemExit(f"enact {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def main() -> None:
    if hasattr(enact.storage, "DatabaseSchema"):
        raise SystemExit("run this with the previous release's enact on PYTHONPATH (see its docstring)")
    with tempfile.TemporaryDirectory(prefix="enact-previous-", dir="/tmp") as scratch:
        root = Path(scratch)
        site = root / "site"
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--target", str(site), str(LEDGER)], check=True, timeout=120)
        home = root / "h"
        home.mkdir(mode=0o700)
        env = {key: value for key, value in os.environ.items() if not key.startswith("ENACT_")}
        env.update(ENACT_HOME=str(home), ENACT_DAEMON_COMMAND_SERVER="false",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")])))
        daemon = subprocess.Popen([sys.executable, "-m", "enact", "daemon", "run", "--metrics-addr", "127.0.0.1:0"],
                                  env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, cwd=home)
        try:
            _wait_ready(daemon)
            _enact(home, env, "send", "hello from the previous release")
            for text in ENTRIES:
                _enact(home, env, "call", "ledger.Add", orjson.dumps({"text": text}).decode())
            _enact(home, env, "daemon", "stop")
            daemon.wait(timeout=30)
        finally:
            if daemon.poll() is None:
                daemon.kill()
        _dump(home / "state", OUTPUT)
    print(f"wrote {OUTPUT}")


def _wait_ready(daemon: subprocess.Popen[str]) -> None:
    """Read the daemon's log until its ``ready:`` line (it serves from
    then on), then keep echoing the rest so that its pipe never fills."""
    assert daemon.stdout is not None
    timer = threading.Timer(30, daemon.kill)  # a daemon that never says ready ends the read below
    timer.start()
    try:
        for line in daemon.stdout:
            sys.stderr.write(line)
            if "ready: control socket" in line:
                break
        else:
            raise SystemExit("the daemon did not become ready")
    finally:
        timer.cancel()
    threading.Thread(target=lambda: sys.stderr.writelines(daemon.stdout or ()), daemon=True).start()


def _dump(state: Path, output: Path) -> None:
    env = lmdb.open(str(state), readonly=True, max_dbs=64, lock=False)
    lines: list[bytes] = []
    try:
        with env.begin() as txn:
            names = [bytes(key) for key, _ in txn.cursor()]
        for name in names:
            lines.append(orjson.dumps({"database": name.decode()}))  # an empty one exists all the same
            with env.begin(db=env.open_db(name, create=False)) as txn:
                for key, value in txn.cursor():
                    lines.append(orjson.dumps({
                        "database": name.decode(),
                        "key": base64.b64encode(bytes(key)).decode(),
                        "value": base64.b64encode(bytes(value)).decode(),
                    }))
    finally:
        env.close()
    output.write_bytes(b"\n".join(lines) + b"\n")


if __name__ == "__main__":
    main()
