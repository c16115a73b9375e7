"""The entry-point reader every CLI command and the daemon use to find the components."""

from __future__ import annotations

from pathlib import Path

from enact.entry_points import entry_points


def _distribution(where: Path, directory: str, text: str | None) -> None:
    (where / directory).mkdir(parents=True)
    if text is not None:
        (where / directory / "entry_points.txt").write_text(text)


def test_the_groups_entries_of_every_distribution_on_the_path_in_path_order(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _distribution(first, "enact_hello-0.1.dist-info",
                  "[console_scripts]\nhello = enact_hello:main\n\n[enact.extensions]\n"
                  "# a comment\nhello = enact_hello:HelloComponent\n")
    _distribution(first, "quiet-2.0.dist-info", None)  # no entry points at all
    _distribution(second, "enact.egg-info", "[enact.extensions]\ncore = enact.core:CoreComponent\n")
    found = entry_points("enact.extensions", [str(first), str(second), str(tmp_path / "absent")])
    assert [(e.name, e.value, e.distribution) for e in found] == [
        ("hello", "enact_hello:HelloComponent", "enact_hello"), ("core", "enact.core:CoreComponent", "enact")]


def test_the_first_distribution_of_a_name_on_the_path_wins(tmp_path: Path) -> None:
    # An editable install is seen twice (its checkout's egg-info, the venv's
    # dist-info): the first on the path is the one read, as importlib.metadata does.
    _distribution(tmp_path / "a", "enact.egg-info", "[enact.extensions]\ncore = enact.core:CoreComponent\n")
    _distribution(tmp_path / "b", "enact-0.1.0.dist-info", "[enact.extensions]\nold = enact.old:Gone\n")
    _distribution(tmp_path / "b", "Enact_Hello-0.1.dist-info", "[enact.extensions]\nhello = h:H\n")
    _distribution(tmp_path / "c", "enact-hello-0.2.dist-info", "[enact.extensions]\nhello = h2:H\n")
    found = entry_points("enact.extensions", [str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")])
    assert [e.value for e in found] == ["enact.core:CoreComponent", "h:H"]


def test_an_entry_point_loads_what_it_names() -> None:
    [core] = [e for e in entry_points("enact.extensions") if e.name == "core"]
    component = core.load()
    assert getattr(component, "name", None) == "core"
