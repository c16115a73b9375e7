"""A skill folder's checks: front matter, limits, links, executables; from a
local folder and from a git repository at a revision."""

from __future__ import annotations

from pathlib import Path

import pytest
from skill_repos import GOOD, git, skill_repo

from enact.skills.installed import body, find, install, installed, placed, remove
from enact.skills.manifest import SkillFiles, SkillRefused, checked, front_matter
from enact.skills.settings import SkillLimits
from enact.skills.sources import fetch_git, read_local

LIMITS = SkillLimits()


def test_front_matter_reads_key_value_lines_and_quoted_values() -> None:
    pairs, rest = front_matter("---\nname: a-b\ndescription: \"Does: things\"\n  nested: no\n- item\n---\nBody\n")
    assert pairs == {"name": "a-b", "description": "Does: things"}
    assert rest == "Body"


def test_front_matter_absent_or_unclosed_gives_nothing() -> None:
    assert front_matter("# Title\n")[0] == {}
    assert front_matter("---\nname: x\n")[0] == {}


@pytest.mark.parametrize(("text", "problem"), [
    ("---\nname: Bad Name\ndescription: d\n---\n", "needs a name"),
    ("---\nname: ok\n---\n", "needs a description"),
    ("no front matter", "needs a name"),
])
def test_a_bad_manifest_is_refused_with_its_reason(text: str, problem: str) -> None:
    with pytest.raises(SkillRefused, match=problem):
        checked(SkillFiles(files={"SKILL.md": text.encode()}), LIMITS)


def test_a_folder_without_skill_md_is_refused() -> None:
    with pytest.raises(SkillRefused, match=r"no SKILL\.md"):
        checked(SkillFiles(files={"README.md": b"x"}), LIMITS)


def test_too_many_files_and_bytes_are_refused() -> None:
    files = {"SKILL.md": GOOD.encode(), **{f"f{i}": b"x" * 600 for i in range(3)}}
    with pytest.raises(SkillRefused) as refused:
        checked(SkillFiles(files=files), SkillLimits(max_files=2, max_bytes=1024, max_file_bytes=500))
    message = str(refused.value)
    assert "4 files; at most 2" in message and "at most 1024" in message and "f0 is 600 bytes" in message


def test_a_git_skill_is_read_at_its_revision_with_inner_links_as_files(tmp_path: Path) -> None:
    repo = skill_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD")
    fetched = fetch_git(str(repo), "skills/good", "main", mirrors=tmp_path / "mirrors", limits=LIMITS)
    assert fetched.revision == head
    skill = checked(fetched.folder, LIMITS)
    assert skill.name == "tidy-notes" and skill.description == "Keep the owner's notes tidy and dated."
    assert skill.files["alias.md"] == b"More about it.\n"
    assert set(skill.digests) == {"SKILL.md", "reference.md", "alias.md"}


@pytest.mark.parametrize(("folder", "problem", "allowed"), [
    ("link-out", "secrets is a symbolic link leading out of the folder (to ../../../outside.txt)", False),
    ("script", "run.sh is executable (pass --allow-scripts", False),
    ("big", "blob.txt is 300000 bytes", True),
])
def test_a_git_skill_with_a_link_out_an_executable_or_a_big_file_is_refused(
        tmp_path: Path, folder: str, problem: str, allowed: bool) -> None:
    repo = skill_repo(tmp_path / "repo")
    fetched = fetch_git(str(repo), f"skills/{folder}", "HEAD", mirrors=tmp_path / "mirrors", limits=LIMITS)
    with pytest.raises(SkillRefused, match=problem.replace("(", r"\(").replace(")", r"\)")):
        checked(fetched.folder, LIMITS, allow_scripts=allowed)


def test_an_executable_is_accepted_with_allow_scripts(tmp_path: Path) -> None:
    repo = skill_repo(tmp_path / "repo")
    fetched = fetch_git(str(repo), "skills/script", "HEAD", mirrors=tmp_path / "mirrors", limits=LIMITS)
    assert checked(fetched.folder, LIMITS, allow_scripts=True).name == "script"


def test_an_unknown_revision_or_path_is_refused(tmp_path: Path) -> None:
    repo = skill_repo(tmp_path / "repo")
    with pytest.raises(SkillRefused, match="no revision nope"):
        fetch_git(str(repo), "skills/good", "nope", mirrors=tmp_path / "mirrors", limits=LIMITS)
    with pytest.raises(SkillRefused, match=r"could not be read|not a folder"):
        fetch_git(str(repo), "skills/none", "HEAD", mirrors=tmp_path / "mirrors", limits=LIMITS)


def test_a_local_folder_refuses_a_link_out_and_reads_an_inner_one(tmp_path: Path) -> None:
    repo = skill_repo(tmp_path / "repo")
    good = read_local(repo / "skills" / "good", LIMITS)
    assert good.revision.startswith("sha256:") and checked(good.folder, LIMITS).files["alias.md"]
    (tmp_path / "outside.txt").write_text("secret")
    with pytest.raises(SkillRefused, match="secrets is a symbolic link leading out"):
        checked(read_local(repo / "skills" / "link-out", LIMITS).folder, LIMITS)
    with pytest.raises(SkillRefused, match=r"run\.sh is executable"):
        checked(read_local(repo / "skills" / "script", LIMITS).folder, LIMITS)


def test_install_records_digests_and_remove_forgets(tmp_path: Path) -> None:
    home = tmp_path / "home"
    fetched = fetch_git(str(skill_repo(tmp_path / "repo")), "skills/good", "main", mirrors=tmp_path / "m",
                        limits=LIMITS)
    record = install(home, checked(fetched.folder, LIMITS), fetched, at=5.0, by="human-cli")
    assert installed(home) == [record] and record.revision == fetched.revision
    assert (home / "skills" / "tidy-notes" / "alias.md").read_text() == "More about it.\n"
    assert "Date every note" in (body(home, "tidy-notes") or "")
    cwd = tmp_path / "work"
    cwd.mkdir()
    assert placed(home, cwd, ".claude/skills") == ["tidy-notes"]
    assert (cwd / ".claude" / "skills" / "tidy-notes" / "SKILL.md").read_text() == GOOD
    assert remove(home, "tidy-notes") == record
    assert find(home, "tidy-notes") is None and installed(home) == []


def test_a_commit_the_mirror_holds_is_read_without_the_source(tmp_path: Path) -> None:
    import shutil

    repo = skill_repo(tmp_path / "repo")
    fetched = fetch_git(str(repo), "skills/good", "main", mirrors=tmp_path / "mirrors", limits=LIMITS)
    shutil.rmtree(repo)
    again = fetch_git(str(repo), "skills/good", fetched.revision, mirrors=tmp_path / "mirrors", limits=LIMITS,
                      fetch=False)
    assert again.revision == fetched.revision and again.folder.files == fetched.folder.files
