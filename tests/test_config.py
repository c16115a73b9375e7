"""Configuration: defaults, config.toml, ENACT_* variables, the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from enact import components
from enact.config import Config, ConfigError, DaemonSettings, Setting
from enact.config import load as load_config

from conftest import DaemonFactory, run_cli

SETTINGS = components.load().settings()
"""enact's own keys: the daemon's and its features'."""


def load(home: Path, **options: Any) -> Config:
    """The configuration of enact's own keys unless told other ones."""
    return load_config(home, **{"settings": SETTINGS, **options})


def _home(tmp_path: Path, toml: str | None = None) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if toml is not None:
        (home / "config.toml").write_text(toml, encoding="utf-8")
    return home


def _one_line(error: pytest.ExceptionInfo[ConfigError]) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_every_key_has_a_documented_default(tmp_path: Path) -> None:
    config = load(_home(tmp_path), environ={})
    assert set(config.values) == {s.key for s in SETTINGS}
    assert set(config.sources.values()) == {"default"}
    for setting in SETTINGS:
        assert config[setting.key] == setting.default
        assert setting.doc
    assert config["daemon.workers"] == 2
    assert config["supervisor.max_restarts"] == 5
    assert config["supervisor.restart_window_s"] == 60.0
    assert config["daemon.shutdown_timeout_s"] == 10.0
    assert config["daemon.metrics_addr"] == "127.0.0.1:9464"
    rows = {row["key"]: row for row in config.describe()}
    assert rows["daemon.workers"] == {
        "key": "daemon.workers", "value": 2, "source": "default", "doc": rows["daemon.workers"]["doc"],
        "component": "core", "allowed": "between 0 and 64",
    }


def test_the_file_overrides_a_default(tmp_path: Path) -> None:
    home = _home(tmp_path, '[daemon]\nworkers = 4\nlog_level = "debug"\n[supervisor]\nrestart_window_s = 5\n')
    config = load(home, environ={})
    assert config["daemon.workers"] == 4
    assert config["daemon.log_level"] == "debug"
    assert config["supervisor.restart_window_s"] == 5.0
    assert isinstance(config["supervisor.restart_window_s"], float)
    assert config.sources["daemon.workers"] == "file"
    assert config.sources["supervisor.max_restarts"] == "default"


def test_the_environment_overrides_the_file(tmp_path: Path) -> None:
    home = _home(tmp_path, "[daemon]\nworkers = 4\n[supervisor]\nmax_restarts = 3\n")
    environ = {
        "ENACT_DAEMON_WORKERS": "8",
        "ENACT_CHAT_ALLOWED_CONVERSATIONS": "local:a, b ,,",
        "ENACT_DAEMON_SHUTDOWN_TIMEOUT_S": "2.5",
        "ENACT_SCRIPTED_RULES": "/tmp/rules.toml",
        "ENACT_HOME": "/elsewhere",  # not a setting, and not an error
        "PATH": "/bin",
    }
    config = load(home, environ=environ, settings=components.load().settings())
    assert config["daemon.workers"] == 8
    assert config.sources["daemon.workers"] == "environment"
    assert config["supervisor.max_restarts"] == 3
    assert config.sources["supervisor.max_restarts"] == "file"
    assert config["chat.allowed_conversations"] == ["local:a", "b"]
    assert config["daemon.shutdown_timeout_s"] == 2.5
    assert config["scripted.rules"] == "/tmp/rules.toml"


def test_the_command_line_wins(tmp_path: Path) -> None:
    home = _home(tmp_path, '[daemon]\nworkers = 4\nmetrics_addr = "127.0.0.1:1"\n')
    config = load(
        home,
        environ={"ENACT_DAEMON_WORKERS": "8"},
        overrides={"daemon.workers": 16, "daemon.metrics_addr": "127.0.0.1:0", "daemon.log_level": None},
    )
    assert config["daemon.workers"] == 16
    assert config.sources["daemon.workers"] == "command line"
    assert config["daemon.metrics_addr"] == "127.0.0.1:0"
    # An option the command line did not give (None) leaves the lower layers alone.
    assert config.sources["daemon.log_level"] == "default"


def test_an_out_of_range_command_line_value_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load(_home(tmp_path), environ={}, overrides={"daemon.workers": 65})
    assert "daemon.workers from the command line: must be between 0 and 64, got 65" in _one_line(error)


def test_an_unknown_key_in_the_file_names_key_and_file(tmp_path: Path) -> None:
    home = _home(tmp_path, "[daemon]\nwrokers = 4\n")
    with pytest.raises(ConfigError) as error:
        load(home, environ={})
    message = _one_line(error)
    assert "'daemon.wrokers'" in message
    assert str(home / "config.toml") in message


def test_an_unknown_section_is_an_unknown_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown configuration key 'nope.x'"):
        load(_home(tmp_path, "[nope]\nx = 1\n"), environ={})


def test_a_nested_table_no_component_declares_is_an_unknown_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown configuration key 'daemon.extra.x'"):
        load(_home(tmp_path, "[daemon.extra]\nx = 1\n"), environ={})


def test_a_secret_is_shown_as_set_or_unset_and_never_read_from_the_file(tmp_path: Path) -> None:
    secret = Setting("vault.key", str, "", "A credential", env="ENACT_VAULT_KEY", secret=True)
    shown = load(_home(tmp_path, ""), environ={"ENACT_VAULT_KEY": "s3cr3t"}, settings=(secret,))
    assert shown["vault.key"] == "s3cr3t"
    assert [row["value"] for row in shown.describe()] == ["set"]
    assert [row["value"] for row in load(tmp_path / "home", environ={}, settings=(secret,)).describe()] == ["unset"]
    with pytest.raises(ConfigError, match="a secret is not read from the config file; set ENACT_VAULT_KEY"):
        load(_home(tmp_path, '[vault]\nkey = "s3cr3t"\n'), environ={}, settings=(secret,))


def test_a_top_level_value_is_refused(tmp_path: Path) -> None:
    home = _home(tmp_path, "workers = 4\n")
    with pytest.raises(ConfigError) as error:
        load(home, environ={})
    message = _one_line(error)
    assert "'workers'" in message and str(home / "config.toml") in message
    assert "settings live in sections" in message


def test_an_unknown_enact_variable_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load(_home(tmp_path), environ={"ENACT_DAEMON_WROKERS": "3"})
    assert "unknown configuration variable ENACT_DAEMON_WROKERS in the environment" in _one_line(error)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[daemon]\nworkers = "4"\n', "daemon.workers from {path}: expected int, got str '4'"),
        ("[daemon]\nworkers = 4.0\n", "daemon.workers from {path}: expected int, got float 4.0"),
        ("[daemon]\nworkers = true\n", "daemon.workers from {path}: expected int, got bool True"),
        ("[daemon]\nshutdown_timeout_s = true\n", "daemon.shutdown_timeout_s from {path}: expected float"),
        ("[daemon]\nlog_level = 3\n", "daemon.log_level from {path}: expected str, got int 3"),
        ('[chat]\nallowed_conversations = "a"\n', "chat.allowed_conversations from {path}: expected list"),
        ("[chat]\nallowed_conversations = [1]\n", "chat.allowed_conversations from {path}: expected a list of str"),
    ],
)
def test_a_wrong_type_in_the_file_names_key_and_file(tmp_path: Path, toml: str, expected: str) -> None:
    home = _home(tmp_path, toml)
    with pytest.raises(ConfigError) as error:
        load(home, environ={})
    assert expected.format(path=home / "config.toml") in _one_line(error)


@pytest.mark.parametrize(
    ("name", "raw", "key"),
    [
        ("ENACT_DAEMON_WORKERS", "four", "daemon.workers"),
        ("ENACT_DAEMON_WORKERS", "2.0", "daemon.workers"),
        ("ENACT_DAEMON_SHUTDOWN_TIMEOUT_S", "soon", "daemon.shutdown_timeout_s"),
    ],
)
def test_a_wrong_type_in_the_environment_names_key_and_variable(tmp_path: Path, name: str, raw: str, key: str) -> None:
    with pytest.raises(ConfigError) as error:
        load(_home(tmp_path), environ={name: raw})
    message = _one_line(error)
    assert message.startswith(f"{key} from ")
    assert name in message
    assert repr(raw) in message


@pytest.mark.parametrize(
    ("toml", "environ", "expected"),
    [
        ("[daemon]\nworkers = -1\n", {}, "daemon.workers from {path}: must be between 0 and 64, got -1"),
        ("[daemon]\nworkers = 65\n", {}, "daemon.workers from {path}: must be between 0 and 64, got 65"),
        ('[daemon]\nlog_level = "loud"\n', {}, "daemon.log_level from {path}: must be one of debug, info"),
        ('[daemon]\nmetrics_addr = "nowhere"\n', {}, "daemon.metrics_addr from {path}: must be HOST:PORT"),
        ('[daemon]\nmetrics_addr = "h:70000"\n', {}, "daemon.metrics_addr from {path}: must be HOST:PORT"),
        ("[supervisor]\nmax_restarts = 0\n", {}, "supervisor.max_restarts from {path}: must be between 1 and 1000"),
        (None, {"ENACT_DAEMON_WORKERS": "100"},
         "daemon.workers from environment variable ENACT_DAEMON_WORKERS: must be between 0 and 64, got 100"),
        (None, {"ENACT_DAEMON_SHUTDOWN_TIMEOUT_S": "-1"},
         "daemon.shutdown_timeout_s from environment variable ENACT_DAEMON_SHUTDOWN_TIMEOUT_S: "
         "must be between 0 and 3600"),
    ],
)
def test_an_out_of_range_value_names_key_and_source(
    tmp_path: Path, toml: str | None, environ: dict[str, str], expected: str
) -> None:
    home = _home(tmp_path, toml)
    with pytest.raises(ConfigError) as error:
        load(home, environ=environ)
    assert expected.format(path=home / "config.toml") in _one_line(error)


@pytest.mark.parametrize(
    ("toml", "environ", "expected"),
    [
        ("[control]\nidle_timeout_s = inf\n", {}, "control.idle_timeout_s from {path}: must be between 0.1 and 86400"),
        ("[control]\nrequest_timeout_s = 1e308\n", {},
         "control.request_timeout_s from {path}: must be between 0.1 and 86400, got 1e+308"),
        ("[runtime]\ntimeout_s = nan\n", {}, "runtime.timeout_s from {path}: must be between 0.1 and 86400, got nan"),
        (None, {"ENACT_CONTROL_IDLE_TIMEOUT_S": "inf"},
         "control.idle_timeout_s from environment variable ENACT_CONTROL_IDLE_TIMEOUT_S: must be between"),
        (None, {"ENACT_CONTROL_REQUEST_TIMEOUT_S": "-inf"},
         "control.request_timeout_s from environment variable ENACT_CONTROL_REQUEST_TIMEOUT_S: must be between"),
        (None, {"ENACT_SUPERVISOR_MAX_RESTARTS": "10000000000000000000000"},
         "supervisor.max_restarts from environment variable ENACT_SUPERVISOR_MAX_RESTARTS: must be between 1"),
    ],
)
def test_a_non_finite_or_huge_number_is_refused_naming_key_and_source(
    tmp_path: Path, toml: str | None, environ: dict[str, str], expected: str
) -> None:
    home = _home(tmp_path, toml)
    with pytest.raises(ConfigError) as error:
        load(home, environ=environ)
    assert expected.format(path=home / "config.toml") in _one_line(error)


def test_every_number_setting_declares_a_finite_range() -> None:
    from enact.config import check_declaration

    for setting in components.load().settings():
        check_declaration(setting)  # raises for a number without between()
        if setting.kind in (int, float):
            assert setting.check is not None and setting.check.high is not None
            assert setting.check.high < 1e12, setting.key


def test_a_number_setting_without_a_range_is_refused_at_declaration() -> None:
    from enact.config import check_declaration

    with pytest.raises(ConfigError, match=r"setting x\.count is a number without a range"):
        check_declaration(Setting("x.count", int, 1, "A count"))


def test_the_environment_is_validated_even_when_the_file_is_fine(tmp_path: Path) -> None:
    home = _home(tmp_path, "[daemon]\nworkers = 4\n")
    with pytest.raises(ConfigError, match="ENACT_DAEMON_WORKERS"):
        load(home, environ={"ENACT_DAEMON_WORKERS": "65"})


@pytest.mark.parametrize(
    "toml", ["[daemon\nworkers = 4\n", "[daemon]\nworkers = \n", "[daemon]\nworkers = 4\nworkers = 5\n"]
)
def test_invalid_toml_is_one_line(tmp_path: Path, toml: str) -> None:
    home = _home(tmp_path, toml)
    with pytest.raises(ConfigError) as error:
        load(home, environ={})
    message = _one_line(error)
    assert f"{home / 'config.toml'} is not valid TOML" in message


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    home = _home(tmp_path)
    (home / "config.toml").write_bytes(b"[daemon]\nlog_level = \"\xff\"\n")
    with pytest.raises(ConfigError) as error:
        load(home, environ={})
    assert "config.toml" in _one_line(error)


# --- `enact config show` as its own process -----------------------------------------


def _config_show(home: Path, *args: str, environ: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    env["ENACT_HOME"] = str(home)
    env.update(environ or {})
    return subprocess.run(
        [sys.executable, "-m", "enact", "config", "show", *args],
        env=env, capture_output=True, text=True, timeout=60,
    )


def test_config_show_json_prints_every_key_with_its_source(tmp_path: Path) -> None:
    home = _home(tmp_path, "[daemon]\nworkers = 4\n")
    result = _config_show(home, "--json", environ={"ENACT_SUPERVISOR_MAX_RESTARTS": "7"})
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = orjson.loads(result.stdout)["settings"]
    by_key = {row["key"]: row for row in rows}
    assert [row["key"] for row in rows] == [s.key for s in components.load().settings()]
    assert by_key["daemon.workers"]["value"] == 4 and by_key["daemon.workers"]["source"] == "file"
    assert by_key["supervisor.max_restarts"]["value"] == 7
    assert by_key["supervisor.max_restarts"]["source"] == "environment"
    assert by_key["daemon.log_level"] == {
        "key": "daemon.log_level", "value": "info", "source": "default", "doc": by_key["daemon.log_level"]["doc"],
        "component": "core", "allowed": "one of debug, info, warning, error",
    }
    assert by_key["scripted.rules"]["component"] == "scripted"
    assert by_key["chat.local_deliver_command"]["component"] == "local"


def test_config_show_prints_a_table(tmp_path: Path) -> None:
    result = _config_show(_home(tmp_path, "[daemon]\nworkers = 4\n"))
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("daemon.workers"))
    assert "4" in line and "(file)" in line and line.endswith("[between 0 and 64]")


def test_config_show_prints_only_whether_the_openai_key_is_set_and_from_where(tmp_path: Path) -> None:
    environ = {"ENACT_OPENAI_API_KEY": "sk-very-secret-key"}
    plain = _config_show(_home(tmp_path), environ=environ)
    as_json = _config_show(_home(tmp_path), "--json", environ=environ)
    for result in (plain, as_json):
        assert result.returncode == 0, result.stderr
        assert "sk-very-secret-key" not in result.stdout + result.stderr
    [row] = [row for row in orjson.loads(as_json.stdout)["settings"] if row["key"] == "runtime.openai.api_key"]
    assert (row["value"], row["source"]) == ("set", "environment")
    line = next(line for line in plain.stdout.splitlines() if line.startswith("runtime.openai.api_key"))
    assert '"set"' in line and "(environment)" in line
    unset = _config_show(_home(tmp_path), "--json")
    [row] = [row for row in orjson.loads(unset.stdout)["settings"] if row["key"] == "runtime.openai.api_key"]
    assert (row["value"], row["source"]) == ("unset", "default")
    in_file = _config_show(_home(tmp_path, '[runtime.openai]\napi_key = "sk-in-a-file"\n'))
    assert in_file.returncode == 2
    assert in_file.stderr.count("\n") == 1 and "sk-in-a-file" not in in_file.stderr
    assert "set ENACT_OPENAI_API_KEY instead" in in_file.stderr


def test_config_show_sizes_its_columns_from_the_longest_key_and_value(tmp_path: Path) -> None:
    result = _config_show(_home(tmp_path))
    assert result.returncode == 0, result.stderr
    rows = orjson.loads(_config_show(_home(tmp_path), "--json").stdout)["settings"]
    key_width = max(len(row["key"]) for row in rows)
    assert key_width > 30  # memory.max_pending_per_conversation: the fixed 30 columns once broke on it
    lines = result.stdout.splitlines()[1:]
    assert [line.split()[0] for line in lines] == [row["key"] for row in rows]
    # Every value starts in one column, two spaces after the longest key;
    # the component after the value, in one column too (unless a long list overran it).
    assert {line[key_width:key_width + 2] for line in lines} == {"  "}
    assert all(line[key_width + 2] != " " for line in lines)
    components_at = {line.index(f" {row['component']} ") for line, row in zip(lines, rows, strict=True)
                     if len(orjson.dumps(row["value"])) <= 32}
    assert len(components_at) == 1


def test_a_secret_read_from_a_file_is_shown_as_that_files_setting(tmp_path: Path) -> None:
    token = Setting("vault.token", str, "", "A credential", env="ENACT_VAULT_TOKEN", secret=True,
                    read_from="vault.token_file")
    token_file = Setting("vault.token_file", str, "", "A file holding the credential")
    shown = {row["key"]: row["value"] for row in load(
        _home(tmp_path, '[vault]\ntoken_file = "/run/vault"\n'), environ={}, settings=(token, token_file)
    ).describe()}
    assert shown == {"vault.token": "from vault.token_file", "vault.token_file": "/run/vault"}
    both = load(_home(tmp_path), environ={"ENACT_VAULT_TOKEN": "s3cr3t"}, settings=(token, token_file))
    assert both.describe()[0]["value"] == "set"  # the environment's wins, as the channel reads it
    neither = load(_home(tmp_path, ""), environ={}, settings=(token, token_file))
    assert neither.describe()[0]["value"] == "unset"


def test_config_show_with_a_daemon_running_shows_the_daemons_configuration(daemons: DaemonFactory) -> None:
    home = daemons.new_home()
    secret = "sk-only-the-daemon-knows"
    daemon = daemons.start(home, env={"ENACT_DAEMON_WORKERS": "1", "ENACT_OPENAI_API_KEY": secret})
    plain = _config_show(home)  # this shell sets neither
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert lines[0] == f"the configuration of the running daemon (pid {daemon.pid}, home {home})"
    [workers] = [line for line in lines if line.startswith("daemon.workers ")]
    assert workers.split()[1] == "1" and "(environment)" in workers
    as_json = orjson.loads(_config_show(home, "--json").stdout)
    assert (as_json["from"], as_json["pid"], as_json["home"]) == ("daemon", daemon.pid, str(home))
    rows = {row["key"]: row for row in as_json["settings"]}
    assert (rows["daemon.workers"]["value"], rows["daemon.workers"]["source"]) == (1, "environment")
    assert (rows["runtime.openai.api_key"]["value"], rows["runtime.openai.api_key"]["source"]) == ("set", "environment")
    assert [row["key"] for row in as_json["settings"]] == [s.key for s in SETTINGS]
    # The secret is redacted by the daemon: it never crosses the socket.
    raw = run_cli(home, "call", "control.GetConfig").stdout
    assert orjson.loads(raw)["type"] == "control.ConfigReport"
    assert secret not in raw + plain.stdout + orjson.dumps(as_json).decode()
    assert daemon.terminate() == 0
    stopped = _config_show(home)
    assert stopped.stdout.splitlines()[0] == (
        f"this shell's view of the configuration: no daemon is running (home {home})")
    [workers] = [line for line in stopped.stdout.splitlines() if line.startswith("daemon.workers ")]
    assert workers.split()[1] == "2" and "(default)" in workers
    assert orjson.loads(_config_show(home, "--json").stdout)["from"] == "shell"


@pytest.mark.parametrize(
    ("toml", "environ", "needle"),
    [
        ("[daemon]\nwrokers = 4\n", {}, "daemon.wrokers"),
        ("[daemon\n", {}, "is not valid TOML"),
        (None, {"ENACT_NOPE": "1"}, "ENACT_NOPE"),
        (None, {"ENACT_DAEMON_WORKERS": "x"}, "daemon.workers"),
    ],
)
def test_a_bad_config_makes_config_show_exit_2_with_one_line(
    tmp_path: Path, toml: str | None, environ: dict[str, str], needle: str
) -> None:
    result = _config_show(_home(tmp_path, toml), environ=environ)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("enact: ") and needle in lines[0]
    as_json = _config_show(_home(tmp_path, toml), "--json", environ=environ)
    assert as_json.returncode == 2 and as_json.stderr == ""
    [line] = as_json.stdout.splitlines()  # with --json the error is JSON on standard output
    assert needle in orjson.loads(line)["error"]


@pytest.mark.parametrize(
    ("toml", "environ", "needle"),
    [
        ("[control]\nidle_timeout_s = inf\n", {}, "control.idle_timeout_s from "),
        (None, {"ENACT_CONTROL_REQUEST_TIMEOUT_S": "1e308"},
         "control.request_timeout_s from environment variable ENACT_CONTROL_REQUEST_TIMEOUT_S: must be between"),
    ],
)
def test_a_daemon_given_an_endless_timeout_refuses_to_start_in_one_line_naming_the_key(
    daemons: DaemonFactory, toml: str | None, environ: dict[str, str], needle: str
) -> None:
    home = daemons.new_home()
    if toml is not None:
        (home / "config.toml").write_text(toml)
    daemon = daemons.start(home, env=environ, wait=False)
    assert daemon.wait_exit(timeout=30) == 2
    [line] = daemon.log_text().strip().splitlines()
    assert needle in line and "must be between 0.1 and 86400" in line, line
    if toml is not None:
        assert str(home / "config.toml") in line


# -- list-valued variables and exact messages -----------------------------------

_ALLOWED = "ENACT_CHAT_ALLOWED_CONVERSATIONS"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('["local:cli","work"]', ["local:cli", "work"]),
        ("['local:cli', 'work']", ["local:cli", "work"]),
        ("[]", []),
        ("local:cli,work", ["local:cli", "work"]),
        (" local:cli , work, ", ["local:cli", "work"]),
        ("", []),
    ],
)
def test_a_list_variable_takes_a_toml_list_or_comma_separated_items(
    tmp_path: Path, raw: str, expected: list[str]
) -> None:
    assert load(_home(tmp_path), environ={_ALLOWED: raw})["chat.allowed_conversations"] == expected


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('["local:cli",', 'expected a TOML/JSON list such as ["a", "b"] or a comma-separated list such as a,b'),
        ('"local:cli","work"', 'expected a TOML/JSON list such as ["a", "b"] or a comma-separated list such as a,b'),
        ("local:cli]", 'expected a TOML/JSON list such as ["a", "b"] or a comma-separated list such as a,b'),
        ("[1, 2]", "expected a list of strings"),
    ],
)
def test_a_malformed_list_variable_is_refused_naming_the_variable(tmp_path: Path, raw: str, problem: str) -> None:
    with pytest.raises(ConfigError) as error:
        load(_home(tmp_path), environ={_ALLOWED: raw})
    message = _one_line(error)
    assert message.startswith(f"chat.allowed_conversations from environment variable {_ALLOWED}: {problem}, got ")


def test_a_list_of_non_strings_in_the_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load(_home(tmp_path, "[chat]\nallowed_conversations = [1]\n"))
    assert _one_line(error).endswith(": expected a list of strings, got [1]")


def test_a_bad_metrics_address_is_named_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load(_home(tmp_path), overrides={"daemon.metrics_addr": "nonsense"})
    assert _one_line(error) == (
        "daemon.metrics_addr from the command line: must be HOST:PORT ([::1]:PORT for IPv6) "
        "with a port from 0 to 65535, got 'nonsense'"
    )


def test_a_bad_list_variable_stops_the_daemon_with_one_line(tmp_path: Path) -> None:
    home = _home(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENACT_")}
    env.update(ENACT_HOME=str(home), ENACT_CHAT_ALLOWED_CONVERSATIONS='["local:cli"')
    result = subprocess.run(
        [sys.executable, "-m", "enact", "daemon", "run", "--metrics-addr", "127.0.0.1:0"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("enact: chat.allowed_conversations from environment variable ENACT_CHAT_ALLOWED_")
    assert not (home / "state").exists()


def test_workers_help_says_what_it_controls() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "enact", "daemon", "run", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "task workers in the pool; 0: none in this daemon" in " ".join(result.stdout.split()).lower()


def test_the_clis_command_server_switch_is_not_a_configuration_variable(tmp_path: Path) -> None:
    from enact.cli._handoff import DISABLE_VARIABLE

    config = load(_home(tmp_path), environ={DISABLE_VARIABLE: "off", "ENACT_DAEMON_WORKERS": "1"})
    assert config.typed(DaemonSettings).workers == 1
