"""What a skill leaves behind, and how long learning may take: the git
mirror a learning fetched is kept while its candidate may still be approved
and pruned by the use review once it is decided (or when the learning made
no candidate); a copy placed for a native runtime whose skill is no longer
installed is taken out at the next placement, the project's own left alone;
``enact learn`` and ``lineage scan`` are long requests, waited for by their
own settings on top of the request timeout."""

from __future__ import annotations

from pathlib import Path

import orjson
from actor_system import running_actors
from skill_repos import skill_repo
from test_skills_use import install_tidy_notes

from enact import components, config
from enact._app.control import wait_s
from enact.clock import ManualClock
from enact.messages._registry import registration_of
from enact.messages.common import HUMAN_CLI, Refused
from enact.messages.control import Status
from enact.messages.curator import Remove, Removed
from enact.messages.lineage import Scan
from enact.messages.skills import Learn, Learned, ReviewUse
from enact.skills.installed import placed
from enact.skills.sources import MIRRORS_DIR, mirror_of

ASSESSMENT = {"adds": "dated notes", "duplicates": "nothing", "conflicts": "nothing",
              "could_be_made_to": "nothing more", "verdict": "install"}


def test_a_mirror_is_kept_while_its_candidate_may_be_approved_and_pruned_once_it_is_decided(tmp_path: Path) -> None:
    home, clock = tmp_path / "home", ManualClock()
    home.mkdir()
    (home / "scripted.toml").write_text(f"[[rule]]\npurpose = 'skill'\nmatch = '(?s)^Assess a skill'\n"
                                        f"reply = '''{orjson.dumps(ASSESSMENT).decode()}'''\n")
    good, refused = skill_repo(tmp_path / "good-repo"), skill_repo(tmp_path / "refused-repo")
    mirrors = home / MIRRORS_DIR
    with running_actors(home, clock) as system:
        learned = system.ask("skills", Learn(source=str(good), path="skills/good", revision="main",
                                             origin=HUMAN_CLI))
        assert isinstance(learned, Learned), learned
        no_candidate = system.ask("skills", Learn(source=str(refused), path="skills/script", revision="main",
                                                  origin=HUMAN_CLI))
        assert isinstance(no_candidate, Refused) and "run.sh is executable" in no_candidate.reason
        assert mirror_of(mirrors, str(good)).is_dir() and mirror_of(mirrors, str(refused)).is_dir()

        system.ask("skills", ReviewUse())
        # The active candidate's mirror stays (approval reads the assessed commit from it); the other goes.
        assert mirror_of(mirrors, str(good)).is_dir() and not mirror_of(mirrors, str(refused)).exists()

        removed = system.ask("curator", Remove(candidate_id=learned.candidate_id, reason="not now",
                                               origin=HUMAN_CLI))
        assert isinstance(removed, Removed), removed
        system.ask("skills", ReviewUse())
        assert list(mirrors.iterdir()) == []


def test_a_placed_copy_of_a_skill_no_longer_installed_is_taken_out_and_the_projects_own_kept(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    install_tidy_notes(home, tmp_path, at=1.0)
    cwd = tmp_path / "conversation"
    under = ".agents/skills"
    (cwd / under / "projects-own").mkdir(parents=True)
    (cwd / under / "projects-own" / "SKILL.md").write_text("---\nname: projects-own\ndescription: x\n---\n")
    assert placed(home, cwd, under) == ["tidy-notes"]
    # Removed while nothing was running (no withdrawal): the next placement takes the copy out.
    (home / "skills" / ".records" / "tidy-notes.json").unlink()
    assert placed(home, cwd, under) == []
    assert sorted(entry.name for entry in (cwd / under).iterdir()) == ["projects-own"]


def test_learn_and_lineage_scan_are_waited_for_by_their_own_settings_on_top_of_the_request_timeout(
        tmp_path: Path) -> None:
    settings = config.load(tmp_path, environ={"ENACT_SKILLS_LEARN_TIMEOUT_S": "300",
                                              "ENACT_LINEAGE_SCAN_TIMEOUT_S": "900"},
                           settings=components.load().settings())

    def waited(message_type: type) -> float:
        registration = registration_of(message_type)
        assert registration is not None
        return wait_s(registration.long_wait, 120.0, settings.get)

    assert (waited(Learn), waited(Scan), waited(Status)) == (420.0, 1_020.0, 120.0)
