"""Keyed pools through a real supervisor: spawn on demand, idle retirement,
restart after a failure, and work that outlives the feeder."""

from __future__ import annotations

from test_supervisor import Crash, Flaky, Ping, Record, Recorder, Rig, rig, status_of, wait_until

from enact.actors.supervisor import ActorSpec

__all__ = ["rig"]  # the fixture, imported for these tests




def test_a_child_is_spawned_on_demand_and_gets_the_work(rig: Rig) -> None:
    events: list[str] = []
    supervisor = rig.started([])
    pool = supervisor.pool(
        "worker", lambda key: ActorSpec(name=f"worker:{key}", actor=Recorder, options={"events": events}),
        idle_s=60,
    )
    assert not supervisor.has("worker:a")
    pool.tell("a", "job-1", Record(text="one"))
    wait_until(lambda: "worker:a one" in events, what="the work reached the new child")
    assert events[0] == "start worker:a"
    assert pool.running("job-1") and pool.keys() == ["a"]
    pool.done("job-1")
    assert not pool.running("job-1")


def test_an_idle_child_is_retired_and_a_busy_one_is_kept(rig: Rig) -> None:
    events: list[str] = []
    supervisor = rig.started([])
    pool = supervisor.pool(
        "worker", lambda key: ActorSpec(name=f"worker:{key}", actor=Recorder, options={"events": events}),
        idle_s=0.1,
    )
    pool.tell("idle", "job-1", Record(text="one"))
    pool.tell("busy", "job-2", Record(text="two"))
    pool.done("job-1")
    rig.clock.advance(0.1)  # idle for idle_s: the pool's next check retires it
    wait_until(lambda: "stop worker:idle" in events, what="the idle child retired")
    assert not supervisor.has("worker:idle")
    assert supervisor.has("worker:busy") and pool.keys() == ["busy"]
    # Work for a retired key spawns it again.
    pool.tell("idle", "job-3", Record(text="three"))
    wait_until(lambda: "worker:idle three" in events, what="the retired child came back on demand")
    assert events.count("start worker:idle") == 2


def test_a_failed_child_is_restarted_and_keeps_its_work(rig: Rig) -> None:
    supervisor = rig.started([])
    pool = supervisor.pool("flaky", lambda key: ActorSpec(name=f"flaky:{key}", actor=Flaky), idle_s=60)
    pool.tell("a", "job-1", Ping())
    pool.tell("a", "job-2", Crash())
    wait_until(lambda: status_of(supervisor, "flaky:a").restarts == 1 and status_of(supervisor, "flaky:a").alive,
               what="the child restarted")
    assert supervisor.ask("flaky:a", Ping(), timeout=5) == 2
    assert pool.running("job-1") and pool.running("job-2")  # the pool, not the child, knows the work


def test_the_same_pool_is_returned_to_a_restarted_caller(rig: Rig) -> None:
    events: list[str] = []
    supervisor = rig.started([])

    def spec(key: str) -> ActorSpec:
        return ActorSpec(name=f"worker:{key}", actor=Recorder, options={"events": events})

    first = supervisor.pool("worker", spec, idle_s=60)
    first.tell("a", "job-1", Record(text="one"))
    again = supervisor.pool("worker", spec, idle_s=60)
    assert again is first and again.running("job-1")
