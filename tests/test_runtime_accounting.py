"""Runtime calls are counted in one place, and today's tokens survive a restart."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from enact.cancellation import Cancelled
from enact.metrics import Metrics
from enact.runtime import Capabilities, RuntimeAuthFailed, RuntimeFailure, RuntimeRequest, RuntimeResult, Usage
from enact.runtime.metered import MeteredRuntime

from conftest import DaemonFactory


class _Canned:
    name = "canned"
    capabilities = Capabilities(agentic=True, keeps_history=True, confines_subprocesses=False)
    waits_for = "the canned runtime"

    def __init__(self, outcome: RuntimeResult | BaseException) -> None:
        self.outcome = outcome

    def invoke(self, request: RuntimeRequest) -> RuntimeResult:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def _scrape(metrics: Metrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_a_call_counts_its_outcome_duration_and_tokens_by_kind_and_purpose() -> None:
    metrics = Metrics()
    metrics.initialise(adapters=("canned",))
    spent: list[tuple[str, Usage]] = []
    usage = Usage(input_tokens=30, cached_input_tokens=10, output_tokens=5, reasoning_tokens=2)
    runtime = MeteredRuntime(_Canned(RuntimeResult(text="hi", usage=usage)), metrics,
                             on_spent=lambda purpose, used: spent.append((purpose, used)))
    runtime.invoke(RuntimeRequest(session_key="", prompt="p", purpose="scan"))
    text = _scrape(metrics)
    assert 'enact_runtime_calls_total{adapter="canned",outcome="ok",purpose="scan"} 1.0' in text
    assert 'enact_runtime_calls_total{adapter="canned",outcome="ok",purpose="conversation"} 0.0' in text
    assert 'enact_runtime_call_seconds_count{adapter="canned",purpose="scan"} 1.0' in text
    assert 'enact_runtime_call_seconds_count{adapter="canned",purpose="conversation"} 0.0' in text
    assert 'enact_runtime_tokens_total{adapter="canned",kind="cached_input",purpose="scan"} 10.0' in text
    assert 'enact_runtime_tokens_total{adapter="canned",kind="reasoning",purpose="scan"} 2.0' in text
    assert 'enact_runtime_tokens_total{adapter="canned",kind="input",purpose="conversation"} 0.0' in text
    assert spent == [("scan", usage)]


@pytest.mark.parametrize(("raised", "outcome"), [
    (RuntimeAuthFailed("401", usage=Usage(input_tokens=4)), "auth"),
    (Cancelled("stop"), "cancelled"),
    (KeyError("a defect"), "failed"),
])
def test_a_failed_call_is_counted_by_its_kind_with_what_it_spent(raised: BaseException, outcome: str) -> None:
    metrics = Metrics()
    metrics.initialise(adapters=("canned",))
    runtime = MeteredRuntime(_Canned(raised), metrics)
    with pytest.raises(type(raised)):
        runtime.invoke(RuntimeRequest(session_key="k", prompt="p", purpose="task"))
    text = _scrape(metrics)
    assert f'enact_runtime_calls_total{{adapter="canned",outcome="{outcome}",purpose="task"}} 1.0' in text
    tokens = 4.0 if outcome == "auth" else 0.0
    assert f'enact_runtime_tokens_total{{adapter="canned",kind="input",purpose="task"}} {tokens}' in text


def test_full_access_is_refused_unless_the_config_allows_it() -> None:
    metrics = Metrics()
    result = RuntimeResult(text="done")
    request = RuntimeRequest(session_key="", prompt="p", sandbox="full-access", purpose="task")
    with pytest.raises(RuntimeFailure, match=r"runtime\.allow_full_access"):
        MeteredRuntime(_Canned(result), metrics).invoke(request)
    assert MeteredRuntime(_Canned(result), metrics, allow_full_access=True).invoke(request) is result
    with pytest.raises(RuntimeFailure, match="unknown sandbox mode 'yolo'"):
        MeteredRuntime(_Canned(result), metrics).invoke(RuntimeRequest(session_key="", prompt="p", sandbox="yolo"))


def test_todays_tally_survives_a_restart(daemons: DaemonFactory) -> None:
    daemon = daemons.start()
    assert daemon.cli("send", "hello").returncode == 0
    assert daemon.cli_json("status", "--json")["spending"][0]["calls"] == 1
    assert "reasoning), 1 call\n" in daemon.cli("status").stdout  # one call, not "1 calls"
    assert daemon.terminate() == 0
    restarted = daemons.start(daemon.home)
    assert restarted.cli("send", "again").returncode == 0
    (today,) = restarted.cli_json("status", "--json")["spending"]
    # 3: the scripted runtime forgot its sessions, so the resume is a call that fails, then a fresh one.
    assert (today["purpose"], today["calls"], today["input_tokens"]) == ("conversation", 3, 0)
    assert "conversation" in restarted.cli("status").stdout
