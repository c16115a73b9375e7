"""A CODEX_HOME that points the real Codex CLI at a ModelServer, in a
scratch directory outside /tmp (see ``scratch_homes``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from scratch_homes import scratch_dir

FAKE_KEY_VARIABLE = "FAKE_MODEL_KEY"


@contextlib.contextmanager
def scratch_codex_home(base_url: str, *, model: str = "fake-model") -> Iterator[Path]:
    """A fresh CODEX_HOME for one test, removed afterwards."""
    with scratch_dir("codex-home-") as directory:
        yield codex_home(directory, base_url, model=model)


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
