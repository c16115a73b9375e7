"""The actors' message metrics (enact.message_metrics): per-incarnation tallies
summed when the registry is collected, folded into their family when they stop."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from enact.message_metrics import ActorMessages


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_tallies_of_one_family_are_summed_and_survive_their_actors() -> None:
    registry = CollectorRegistry()
    messages = ActorMessages(registry)
    first, second = messages.tally("conversation"), messages.tally("conversation")
    first.count("inbox.HandleEvent", 0.00005)
    second.count("inbox.HandleEvent", 0.002)
    second.count("sessions.Open", 3.0)
    messages.retire(first)
    messages.retire(first)  # told twice (stopped, then failed): counted once
    assert sample(registry, "enact_actor_messages_total", actor="conversation", type="inbox.HandleEvent") == 2
    assert sample(registry, "enact_actor_messages_total", actor="conversation", type="sessions.Open") == 1
    assert sample(registry, "enact_actor_message_seconds_count", actor="conversation") == 3
    assert sample(registry, "enact_actor_message_seconds_bucket", actor="conversation", le="0.0001") == 1
    assert sample(registry, "enact_actor_message_seconds_bucket", actor="conversation", le="0.005") == 2
    assert sample(registry, "enact_actor_message_seconds_bucket", actor="conversation", le="5.0") == 3
    assert sample(registry, "enact_actor_message_seconds_bucket", actor="conversation", le="+Inf") == 3
    total = sample(registry, "enact_actor_message_seconds_sum", actor="conversation")
    assert total is not None and abs(total - 3.00205) < 1e-9


def test_a_new_family_is_exported_at_zero_and_an_idle_read_is_counted_without_a_time() -> None:
    registry = CollectorRegistry()
    messages = ActorMessages(registry)
    messages.tally("inbox")
    assert sample(registry, "enact_actor_message_seconds_count", actor="inbox") == 0
    messages.count_elsewhere("inbox", "inbox.GetOutcome")
    assert sample(registry, "enact_actor_messages_total", actor="inbox", type="inbox.GetOutcome") == 1
    assert sample(registry, "enact_actor_message_seconds_count", actor="inbox") == 0
    text = generate_latest(registry).decode()
    assert "# TYPE enact_actor_messages_total counter" in text
    assert "# TYPE enact_actor_message_seconds histogram" in text
