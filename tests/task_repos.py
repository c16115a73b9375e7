"""Real git repositories for the task tests: a tiny Python project whose
test passes in well under a second."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "owner", "GIT_AUTHOR_EMAIL": "owner@example.invalid",
    "GIT_COMMITTER_NAME": "owner", "GIT_COMMITTER_EMAIL": "owner@example.invalid",
    "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent",
    # A repository given to an unprivileged user (tests.unprivileged) is
    # still the test's to look at, as root.
    "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
    # Looking never writes: ``git status`` would refresh the index, as root.
    "GIT_OPTIONAL_LOCKS": "0",
}



def pytest_doctor(python: str = sys.executable) -> str:
    """A doctor running the repository's real pytest with ``python``, without
    the plugins the test environment adds: hypothesis's alone costs each run
    about a second of CPU to import, and the suite runs a doctor hundreds of
    times."""
    return f"{python} -m pytest -q -p no:cacheprovider -p no:hypothesispytest -p no:xdist"


LIB = "def answer():\n    return 42\n"
TEST = "from lib import answer\n\n\ndef test_answer():\n    assert answer() == 42\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout


def make_repo(path: Path, *, doctor: str | None = pytest_doctor(),
              files: dict[str, str] | None = None) -> Path:
    """A repository on branch ``main`` with lib.py and a passing test; with
    ``doctor``, an .enact.toml naming that command."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    contents = {"lib.py": LIB, "tests/test_lib.py": TEST, **(files or {})}
    if doctor is not None:
        contents[".enact.toml"] = f'[doctor]\ncommand = "{doctor}"\ntimeout = 60\n'
    for name, text in contents.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    (path / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path
