"""Recovery events: runtime observers and the ``durable_recovery_event`` plugin hook."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from durable_core import (
    AttemptState,
    EventKind,
    MemoryStore,
    RecoveryEvent,
    Runtime,
    hookimpl,
    make_plugin_manager,
)
from tests.durable_core.durable.scenarios import (
    SEED,
    CallLog,
    FailingStore,
    load,
    open_store,
    retry3,
    with_sub,
)

STORES = ["memory", "file", "sqlite"]


class Recorder:
    """A real plugin object implementing the ``durable_recovery_event`` hook."""

    def __init__(self) -> None:
        self.events: list[RecoveryEvent] = []

    @hookimpl
    def durable_recovery_event(self, event: RecoveryEvent) -> None:
        self.events.append(event)


class Broken:
    """A plugin whose hook raises: logged, never fails the run, never hides the event from
    other plugins."""

    calls = 0

    @hookimpl
    def durable_recovery_event(self, event: RecoveryEvent) -> None:
        Broken.calls += 1
        raise RuntimeError("the dashboard is down")


def summary(events: list[RecoveryEvent]) -> list[tuple[str, str, str, int, int]]:
    return [
        (str(e.kind), e.scope_path, e.node_id, e.attempt_index, e.attempt_limit) for e in events
    ]


@pytest.mark.parametrize("kind", STORES)
def test_the_hook_and_observers_see_every_step_of_run_and_resume(kind: str, tmp_path: Path) -> None:
    # covers: R-ATT-1, R-ATT-2, R-ATT-3, R-SCOPE-2
    store = open_store(kind, tmp_path / "store")
    recorder = Recorder()
    plugins = make_plugin_manager(autoload=False, plugins=[("recorder", recorder)])
    observed: list[RecoveryEvent] = []
    log = CallLog(tmp_path / "calls.log")
    runtime = Runtime(store, observers=[observed.append], plugins=plugins)
    result = runtime.run(retry3(log), run_id="r1", version="v1", inputs={SEED: 2})
    assert result.status == "completed"
    assert recorder.events == observed
    assert {e.run_id for e in observed} == {"r1"}
    steps = summary(observed)
    assert steps[0] == ("run_started", "", "", 0, 0)
    assert observed[0].total_nodes == 2 and observed[0].revision == 1
    assert steps[-1] == ("run_finished", "", "", 0, 0)
    assert observed[-1].status == "completed"
    flaky = [s for s in steps if s[2] == "flaky"]
    assert flaky == [
        ("attempt_started", "", "flaky", 1, 1),  # the root attempt
        ("attempt_started", "", "flaky", 1, 3),  # Retry tries
        ("node_running", "", "flaky", 1, 1),  # its input arrived: the body starts
        ("attempt_failed", "", "flaky", 1, 3),
        ("attempt_started", "", "flaky", 2, 3),
        ("attempt_failed", "", "flaky", 2, 3),
        ("attempt_started", "", "flaky", 3, 3),
        ("node_confirmed", "", "flaky", 1, 1),
    ]
    failed = [e for e in observed if e.kind is EventKind.ATTEMPT_FAILED]
    assert failed[0].error == "ConnectionError: flaky try 1 failed"
    # each event carries the revision of the save that holds its change
    record = load(store, "r1")
    assert observed[-1].revision == record.revision
    for event in observed:
        if event.kind in (EventKind.ATTEMPT_STARTED, EventKind.ATTEMPT_FAILED):
            assert event.attempt_id in record.attempts
    revisions = [e.revision for e in observed]
    assert revisions == sorted(revisions)

    recorder.events.clear()
    again = Runtime(store, plugins=plugins).resume(
        retry3(log), run_id="r1", version="v1", inputs={SEED: 2}
    )
    assert again.status == "completed"
    assert summary(recorder.events) == [
        ("run_resumed", "", "", 0, 0),
        ("node_restored", "", "prep", 1, 1),
        ("node_restored", "", "flaky", 1, 1),
        ("run_finished", "", "", 0, 0),
    ]
    store.close()


def test_events_name_the_scope_path_of_nodes_in_a_sub(tmp_path: Path) -> None:
    # covers: R-SCOPE-1, R-SCOPE-2
    recorder = Recorder()
    plugins = make_plugin_manager(autoload=False, plugins=[("recorder", recorder)])
    store = MemoryStore()
    log = CallLog(tmp_path / "calls.log")
    Runtime(store, plugins=plugins).run(with_sub(log), run_id="r1", version="v1", inputs={SEED: 1})
    confirmed = [
        (e.scope_path, e.node_id) for e in recorder.events if e.kind is EventKind.NODE_CONFIRMED
    ]
    assert confirmed == [
        ("", "before"),
        ("inner", "c1"),
        ("inner", "c2"),
        ("inner", "c3"),
        ("", "inner"),
        ("", "after"),
    ]


def test_adopted_attempts_are_reported(tmp_path: Path) -> None:
    # covers: R-ATT-4
    real = MemoryStore()
    log = CallLog(tmp_path / "calls.log")
    # Stop the run at the save that fails flaky's first try: its root attempt and that try were
    # saved active (with the try's start), "prep" is confirmed.
    failing = FailingStore(
        real,
        lambda record: any(
            a.boundary and a.state is AttemptState.FAILED for a in record.attempts.values()
        ),
    )
    with pytest.raises(Exception, match="may or may not"):
        Runtime(failing).run(retry3(log), run_id="r1", version="v1", inputs={SEED: 2})
    stored = load(real, "r1")
    assert sorted((a.node_id, a.boundary, a.state) for a in stored.attempts.values()) == [
        ("flaky", "", AttemptState.ACTIVE),
        ("flaky", "node:0", AttemptState.ACTIVE),
        ("prep", "", AttemptState.CONFIRMED),
    ]
    observed: list[RecoveryEvent] = []
    result = Runtime(real, observers=[observed.append]).resume(
        retry3(log), run_id="r1", version="v1", inputs={SEED: 2}
    )
    assert result.status == "completed"
    adopted = [
        (e.node_id, e.attempt_index, e.attempt_limit)
        for e in observed
        if e.kind is EventKind.ATTEMPT_ADOPTED
    ]
    assert adopted == [("flaky", 1, 1), ("flaky", 1, 3)]
    assert log.count("prep") == 1 and log.count("flaky") == 3
    assert observed[0].kind is EventKind.RUN_RESUMED and observed[0].total_nodes == 2


def test_an_observer_or_a_hook_that_raises_never_fails_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # covers: G-11
    recorder = Recorder()
    Broken.calls = 0
    plugins = make_plugin_manager(
        autoload=False, plugins=[("recorder", recorder), ("broken", Broken())]
    )

    def bad_observer(event: RecoveryEvent) -> None:
        raise ValueError("observer bug")

    seen: list[RecoveryEvent] = []
    log = CallLog(tmp_path / "calls.log")
    with caplog.at_level(logging.ERROR, logger="durable_core.durable"):
        result = Runtime(MemoryStore(), observers=[bad_observer, seen.append], plugins=plugins).run(
            retry3(log), run_id="r1", version="v1", inputs={SEED: 2}
        )
    assert result.status == "completed"
    assert len(seen) == len(recorder.events) == Broken.calls > 5
    assert "observer bug" in caplog.text and "the dashboard is down" in caplog.text
    assert "'broken'" in caplog.text


def test_plugins_registered_between_runs_get_each_event_once(tmp_path: Path) -> None:
    # The runtime keeps the hook's callers between events; a change of plugins is seen.
    first, second = Recorder(), Recorder()
    plugins = make_plugin_manager(autoload=False, plugins=[("first", first)])
    observed: list[RecoveryEvent] = []
    runtime = Runtime(MemoryStore(), observers=[observed.append], plugins=plugins)
    graph = retry3(CallLog(tmp_path / "calls.log"))
    assert runtime.run(graph, run_id="r1", version="v1", inputs={SEED: 2}).status == "completed"
    assert first.events == observed
    plugins.register(second, name="second")
    observed.clear()
    first.events.clear()
    assert runtime.run(graph, run_id="r2", version="v1", inputs={SEED: 2}).status == "completed"
    assert first.events == observed and second.events == observed
    plugins.unregister(name="first")
    observed.clear()
    first.events.clear()
    second.events.clear()
    assert runtime.run(graph, run_id="r3", version="v1", inputs={SEED: 2}).status == "completed"
    assert first.events == [] and second.events == observed


def test_a_resume_nobody_listens_to_builds_no_event_per_restored_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: R-NODE-1
    # Without an observer or a durable_recovery_event plugin, restoring a node builds no
    # event; the count of restored nodes is the same. With a listener, each restored node's
    # event carries its attempt, scope and the committed revision.
    import durable_core.durable.checkpointer as checkpointer_module

    made: list[object] = []

    def counting(*args: object, **kwargs: object) -> RecoveryEvent:
        event = RecoveryEvent(*args, **kwargs)  # type: ignore[arg-type]
        made.append(event.kind)
        return event

    monkeypatch.setattr(checkpointer_module, "RecoveryEvent", counting)
    store = MemoryStore()
    log = CallLog(tmp_path / "calls.log")
    first = Runtime(store).run(retry3(log), run_id="r1", version="v1", inputs={SEED: 2})
    assert first.status == "completed" and first.restored == 0
    calls = log.calls()
    made.clear()
    unheard = make_plugin_manager(autoload=False, plugins=[])  # plugins, none listening
    for runtime in (Runtime(store), Runtime(store, plugins=unheard)):
        result = runtime.resume(retry3(log), run_id="r1", version="v1", inputs={SEED: 2})
        assert result.status == "completed" and result.restored == 2
        assert EventKind.NODE_RESTORED not in made
    assert log.calls() == calls  # nothing ran again

    observed: list[RecoveryEvent] = []
    result = Runtime(store, observers=[observed.append]).resume(
        retry3(log), run_id="r1", version="v1", inputs={SEED: 2}
    )
    assert result.restored == 2 and log.calls() == calls
    record = load(store, "r1")
    root = record.scopes[record.root_scope]
    restored = [e for e in observed if e.kind is EventKind.NODE_RESTORED]
    assert restored == [
        RecoveryEvent(
            kind=EventKind.NODE_RESTORED,
            run_id="r1",
            scope_path="",
            node_id=node_id,
            attempt_index=1,
            attempt_limit=1,
            revision=record.revision,
            attempt_id=root.nodes[node_id].attempt,
            scope_id=record.root_scope,
        )
        for node_id in ("prep", "flaky")
    ]
