"""The scripted runtime's task rules: ``run`` a command in the worktree, then reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from enact.runtime import RuntimeRequest
from enact.runtime.scripted import RulesError, ScriptedRuntime, parse_rules


def test_a_run_rule_executes_in_the_request_cwd_then_replies(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\npurpose = "task"\nmatch = "answer"\n'
                     'run = ["sh", "-c", "echo 43 > answer.txt; exit 1"]\n'
                     'reply = "(scripted runtime) changed the answer"\n')
    work = tmp_path / "work"
    work.mkdir()
    result = ScriptedRuntime(rules).invoke(RuntimeRequest(session_key="task:1", prompt="p", owner_message="answer",
                                                          cwd=work, sandbox="workspace-write", purpose="task"))
    assert (work / "answer.txt").read_text() == "43\n"
    assert result.text == "(scripted runtime) changed the answer"


@pytest.mark.parametrize(("rule", "problem"), [
    ('run = "echo"\nreply = "x"', "'run' must be a non-empty list"),
    ('run = []\nreply = "x"', "'run' must be a non-empty list"),
    ('run = ["true"]\naction = "x"', "'run' goes with 'reply'"),
    ('run = ["true"]\nreply = "x"', "'run' goes with purpose = \"task\""),
    ('fail = "x"\nfail_as = "sleepy"', "'fail_as' goes with 'fail' and is one of"),
    ('reply = "x"\nfail_as = "auth"', "'fail_as' goes with 'fail'"),
])
def test_bad_run_rules_are_refused_naming_the_rule(rule: str, problem: str) -> None:
    with pytest.raises(RulesError, match=problem):
        parse_rules(f'[[rule]]\nmatch = "a"\n{rule}\n', source="rules.toml")
