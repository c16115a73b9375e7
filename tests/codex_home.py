"""A CODEX_HOME that points the real Codex CLI at a ModelServer.

It lives in the checkout's git-ignored ``.tools/scratch``, or, when the
checkout itself is under /tmp, in ``~/.cache/enact-tests``: Codex refuses to
set up its sandbox helpers in a CODEX_HOME inside the temporary directory,
and then every tool call fails ("bwrap: execvp codex-linux-sandbox: No such
file or directory").
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _scratch() -> Path:
    in_checkout = Path(__file__).resolve().parent.parent / ".tools" / "scratch"
    temporary = (Path("/tmp"), Path(tempfile.gettempdir()).resolve())
    if any(in_checkout.is_relative_to(directory) for directory in temporary):
        return Path.home() / ".cache" / "enact-tests" / "codex-homes"
    return in_checkout


SCRATCH = _scratch()

FAKE_KEY_VARIABLE = "FAKE_MODEL_KEY"


@contextlib.contextmanager
def scratch_codex_home(base_url: str, *, model: str = "fake-model") -> Iterator[Path]:
    """A fresh CODEX_HOME for one test, removed afterwards."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="codex-home-", dir=SCRATCH))
    try:
        yield codex_home(directory, base_url, model=model)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def codex_home(directory: Path, base_url: str, *, model: str = "fake-model") -> Path:
    """Write ``config.toml`` naming the server as the model provider."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.toml").write_text(
        f'model_provider = "fake"\n'
        f'model = "{model}"\n'
        f"[model_providers.fake]\n"
        f'name = "fake"\n'
        f'base_url = "{base_url}/v1"\n'
        f'wire_api = "responses"\n'
        f'env_key = "{FAKE_KEY_VARIABLE}"\n'
    )
    return directory


def codex_env(home: Path) -> dict[str, str]:
    """The environment a codex process needs to use ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENACT_", "CODEX_", "OPENAI_"))}
    env["CODEX_HOME"] = str(home)
    env[FAKE_KEY_VARIABLE] = "not-a-real-key"
    return env
