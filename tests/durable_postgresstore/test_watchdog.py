"""The watchdog that cuts network operations past their deadline (no server needed)."""

from __future__ import annotations

import threading
import time

from durable_postgresstore._connections import Watchdog


def test_an_alarm_set_after_later_ones_fires_at_its_own_deadline() -> None:
    # covers: B-PG-2
    watchdog = Watchdog("test-watchdog")
    fired: list[str] = []
    early = threading.Event()
    try:
        now = time.monotonic()
        late = watchdog.schedule(now + 120, lambda: fired.append("late"))
        far = watchdog.schedule(now + 240, lambda: fired.append("never"))
        time.sleep(0.1)  # the thread now sleeps until the late alarm's deadline
        watchdog.schedule(now + 0.2, lambda: (fired.append("early"), early.set()))
        # not woken, it would fire the early alarm only at the late one's deadline
        assert early.wait(60), "the sleeping watchdog was not woken for an earlier alarm"
        assert fired == ["early"]
        assert far.cancel() is False and late.cancel() is False
    finally:
        watchdog.stop()


def test_a_cancelled_alarm_never_fires_and_later_ones_still_do() -> None:
    # covers: B-PG-2
    watchdog = Watchdog("test-watchdog")
    fired: list[int] = []
    done = threading.Event()
    gate = threading.Event()
    try:
        now = time.monotonic()
        # The first alarm holds the watchdog thread until the second one is cancelled, so the
        # second cannot fire first however slow the machine is.
        alarms = [watchdog.schedule(now, lambda: (fired.append(0), gate.wait(60)))]
        alarms += [
            watchdog.schedule(now + 0.05 * i, lambda i=i: fired.append(i)) for i in (1, 2, 3)
        ]
        alarms[1].cancel()
        gate.set()
        watchdog.schedule(now + 0.4, done.set)
        assert done.wait(60)
        assert fired == [0, 2, 3]
        assert alarms[2].fired and not alarms[1].fired
    finally:
        watchdog.stop()
