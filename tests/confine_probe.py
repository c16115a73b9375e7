"""A hostile task's probes of its sandbox, run inside it (stdlib only).

``python3 confine_probe.py WHO SETTINGS``: SETTINGS is a JSON file naming
the daemon's home, the owner's repository and a directory outside both;
the results go to ``report-WHO.json`` in the working directory, one entry
per probe: its name, whether it got through (``escaped``) and what it saw.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

SECRET_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY")


def run(*argv: str) -> tuple[bool, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except OSError as error:
        return False, f"{type(error).__name__}: {error}"
    said = (done.stderr or done.stdout).strip().splitlines()
    return done.returncode == 0, f"exit {done.returncode}: {said[0] if said else ''}"


def write(path: Path, text: str = "#!/bin/sh\necho escaped\n") -> tuple[bool, str]:
    try:
        path.write_text(text)
    except OSError as error:
        return False, f"{type(error).__name__}: {error.strerror}"
    return True, f"wrote {path}"


def read(path: Path, secret: str = "") -> tuple[bool, str]:
    try:
        data = path.read_bytes()
    except OSError as error:
        return False, f"{type(error).__name__}: {error.strerror}"
    if secret and secret.encode() not in data:
        return bool(data), f"read {len(data)} bytes, without the secret"
    return bool(data), f"read {len(data)} bytes" + (", the secret among them" if secret else "")


def capabilities() -> tuple[bool, str]:
    status = Path("/proc/self/status").read_text()
    effective = next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff"))
    return int(effective, 16) != 0, f"CapEff {effective}"


def control_socket(path: Path) -> tuple[bool, str]:
    with socket.socket(socket.AF_UNIX) as client:
        try:
            client.connect(str(path))
        except OSError as error:
            return False, f"{type(error).__name__}: {error.strerror}"
    return True, "connected"


def daemon_in_proc() -> tuple[bool, str]:
    seen = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            seen.append(cmdline)
    daemons = [line for line in seen if "daemon run" in line]
    return bool(daemons), f"{len(seen)} processes visible" + (f", the daemon: {daemons[0]}" if daemons else "")


def main() -> None:
    who, settings = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
    home, repo, outside = Path(settings["home"]), Path(settings["repo"]), Path(settings["outside"])
    probes = {
        "capabilities": capabilities,
        "unmount the home's mask": lambda: run("umount", str(home)),
        "unmount it lazily": lambda: run("umount", "-l", str(home)),
        "remount / read-write": lambda: run("mount", "-o", "remount,rw", "/"),
        "remount the home's mask read-write": lambda: run("mount", "-o", "remount,rw", str(home)),
        "mount a tmpfs": lambda: run("mount", "-t", "tmpfs", "none", str(outside)),
        "write outside the worktree": lambda: write(outside / f"escaped-{who}"),
        "write the owner's checkout": lambda: write(repo / f"escaped-{who}"),
        "plant .git/hooks/post-checkout": lambda: write(repo / ".git" / "hooks" / "post-checkout"),
        "read state/data.mdb": lambda: read(home / "state" / "data.mdb", settings["secret"]),
        "connect to control.sock": lambda: control_socket(home / "control.sock"),
        "see the daemon in /proc": daemon_in_proc,
        "read /etc/shadow": lambda: read(Path("/etc/shadow")),
        "see secret variables": lambda: (
            any(name in os.environ for name in SECRET_VARIABLES) or any(k.startswith("ENACT_") for k in os.environ),
            ", ".join(sorted(os.environ))),
    }
    report = []
    for name, probe in probes.items():
        try:
            escaped, detail = probe()
        except Exception as error:  # a probe that breaks did not get through
            escaped, detail = False, f"{type(error).__name__}: {error}"
        report.append({"probe": name, "escaped": escaped, "detail": detail})
    Path(f"report-{who}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
