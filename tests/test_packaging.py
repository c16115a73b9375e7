"""What a real install gets: the wheel built from this checkout carries every
file of the package, not only its modules.

The editable install the tests run from reads files from the checkout, so a
data file the packaging leaves out (a console template, the body identity)
shows only in a real install: ``make install``, or a release the updater
installs, which then fails at start.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_carries_every_file_of_the_package(tmp_path: Path) -> None:
    tracked = subprocess.run(["git", "ls-files", "enact", "setup.cfg", "pyproject.toml", "README.md"], cwd=ROOT,
                             check=True, capture_output=True, text=True).stdout.split()
    data_files = {name for name in tracked if name.startswith("enact/") and not name.endswith(".py")}
    assert "enact/memory/body_identity.toml" in data_files  # the listing is what it claims to be
    # Built from a copy of the tracked files: a build in the checkout would
    # reuse its build/ folder, which keeps files an earlier build packaged.
    source = tmp_path / "source"
    for name in tracked:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(tmp_path), str(source)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("enact-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        packaged = set(archive.namelist())
    assert sorted(data_files - packaged) == []
