"""A bounded set of PostgreSQL connections with deadlines that really hold (B-PG-2).

Why not ``psycopg_pool``: a run's session keeps its connection for the whole run (the advisory
lock lives on it), a connection whose unlock failed must be destroyed, and every network step of
``acquire`` must stop at the caller's deadline, shorter than libpq's whole-second
``connect_timeout`` if need be. So this module keeps its own small set:

* at most ``max_size`` connections exist at once (idle + in use + being opened);
* :meth:`Connections.take` waits for capacity until a deadline, reuses an idle connection or
  opens a new one in a helper thread (the caller stops waiting at its deadline; a connection
  that arrives later joins the idle set);
* every connection is wrapped in a :class:`Link` that another thread can :meth:`~Link.cut`:
  it shuts the socket down, so a blocked query fails at once. :class:`Watchdog` cuts links
  whose operation passed its deadline;
* :meth:`Link.gone` tells, without a round trip, that an idle connection was ended by the
  server or by a TCP keepalive (X-HOST), so that a session fails closed before sending;
* :meth:`Link.run` runs a :class:`~durable_postgresstore.sql.Prepared` statement, prepared on
  the connection at its first use: a save sends its parameters alone.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors, pq
from psycopg.generators import execute

from durable_postgresstore.sql import Prepared

__all__ = ["Alarm", "Closed", "Connections", "Link", "TimedOut", "Watchdog"]

logger = logging.getLogger("durable_postgresstore")


class Closed(Exception):
    """The connection set was closed while waiting."""


class TimedOut(Exception):
    """The deadline passed while waiting for capacity or a connection."""


class Alarm:
    """A scheduled callback; :meth:`cancel` returns whether it had already fired."""

    __slots__ = ("_lock", "callback", "deadline", "state")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.state = "pending"  # pending | fired | cancelled
        self._lock = threading.Lock()

    def _fire(self) -> None:
        with self._lock:
            if self.state != "pending":
                return
            self.state = "fired"
        try:
            self.callback()
        except Exception:  # a watchdog callback must never kill the watchdog
            logger.exception("watchdog callback failed")

    def cancel(self) -> bool:
        """Stop the alarm; return True when it fired before (or while) being cancelled."""
        with self._lock:
            if self.state == "pending":
                self.state = "cancelled"
            return self.state == "fired"

    @property
    def fired(self) -> bool:
        return self.state == "fired"


class Watchdog:
    """One daemon thread running callbacks at monotonic deadlines."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Alarm]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def schedule(self, deadline: float, callback: Callable[[], None]) -> Alarm:
        """Run ``callback`` (in the watchdog thread) at ``deadline`` unless cancelled first."""
        alarm = Alarm(deadline, callback)
        with self._cond:
            if self._stopped:
                # Nothing may wait unguarded: fire on the spot when the deadline is past,
                # otherwise run a short-lived timer.
                timer = threading.Timer(max(0.0, deadline - time.monotonic()), alarm._fire)
                timer.daemon = True
                timer.start()
                return alarm
            seq = next(self._seq)
            if seq % 1024 == 1023:
                # Cancelled alarms are dropped lazily; compact now and then so that many short
                # guarded operations do not pile up until their far deadlines.
                self._heap = [item for item in self._heap if item[2].state == "pending"]
                heapq.heapify(self._heap)
            heapq.heappush(self._heap, (deadline, seq, alarm))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif self._heap[0][2] is alarm:
                # Wake the thread only when this alarm is now the first due: otherwise it
                # already sleeps until an earlier deadline and finds this one then. (Waking it
                # for every guarded operation costs each save a thread switch.)
                self._cond.notify()
        return alarm

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][2].state != "pending":
                        heapq.heappop(self._heap)
                    if self._stopped and not self._heap:
                        self._thread = None
                        return
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        _, _, alarm = heapq.heappop(self._heap)
                        break
                    wait = self._heap[0][0] - now if self._heap else None
                    self._cond.wait(wait)
            alarm._fire()

    def stop(self) -> None:
        """Let the thread end once no pending alarm is left; later alarms use timers."""
        with self._cond:
            self._stopped = True
            self._heap = [item for item in self._heap if item[2].state == "pending"]
            heapq.heapify(self._heap)
            self._cond.notify()


class Link:
    """One psycopg connection plus a safe way for another thread to cut it.

    The socket is duplicated at creation, so :meth:`cut` never touches a file descriptor that
    libpq may have closed and the system reused.
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.was_cut = False
        self.closed = False
        self._prepared: set[bytes] = set()
        try:
            self._sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        except (OSError, psycopg.Error):
            self._sock = None

    def cut(self) -> None:
        """Shut the connection's socket down (any thread): a blocked operation fails at once.

        The server sees the connection end, so its backend exits and its advisory locks are
        released. The link is useless afterwards.
        """
        with self._lock:
            if self.closed or self.was_cut:
                return
            self.was_cut = True
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)

    def gone(self) -> str | None:
        """Why an idle connection is known dead, from its socket alone (no round trip), or
        ``None`` when nothing says so.

        An idle connection outside a transaction receives nothing unprompted but the server's
        farewell: a socket error (a TCP keepalive or user timeout gave up: the peer vanished),
        an end of stream, or, on a connection without TLS, an error message (the server ended
        the session). Notices and parameter reports are left for libpq.
        """
        sock = self._sock
        if sock is None or self.closed or self.was_cut:
            return None
        # One system call: a pending socket error (a keepalive or user timeout gave up) is
        # reported by the peek itself; nothing to read is EAGAIN.
        try:
            head = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError as exc:
            code = exc.errno
            if code:
                return f"{errno.errorcode.get(code, code)}: {os.strerror(code)}"
            return f"{type(exc).__name__}: {exc.strerror or exc}"
        if not head:
            return "the server closed the connection"
        if head == b"E" and not self.conn.pgconn.ssl_in_use:
            return "the server ended the session"
        return None

    def healthy(self) -> bool:
        """True when the connection is open, not cut, and idle outside any transaction."""
        if self.closed or self.was_cut:
            return False
        pgconn = self.conn.pgconn
        # What conn.closed, conn.broken and conn.info.transaction_status tell, read from libpq
        # directly (no object made per call): a finished or broken connection is not OK.
        return (
            pgconn.status == pq.ConnStatus.OK
            and pgconn.transaction_status == pq.TransactionStatus.IDLE
        )

    def run(self, statement: Prepared, params: list[bytes | None]) -> pq.abc.PGresult:
        """Run ``statement`` with ``params`` (text or binary as the statement says; ``None``:
        NULL) on this connection and return its result, preparing it first on this
        connection's first use. Waits as psycopg does (Ctrl-C cancels the query).

        A prepared statement can vanish from the server session: psycopg sends ``DEALLOCATE
        ALL`` after a rollback on the connection (an inbox post that failed, say). Its
        execution then fails before anything runs, and the statement is prepared again and
        run once more.

        Raises:
            psycopg.Error: the statement failed, or the connection did.
        """
        conn = self.conn
        pgconn = conn.pgconn
        with conn.lock:
            for _ in range(2):
                if statement.name not in self._prepared:
                    pgconn.send_prepare(statement.name, statement.text, statement.types)
                    self._check(conn.wait(execute(pgconn))[-1])
                    self._prepared.add(statement.name)
                pgconn.send_query_prepared(statement.name, params, statement.formats)
                result = conn.wait(execute(pgconn))[-1]
                if result.status in _DONE:
                    return result
                if result.error_field(pq.DiagnosticField.SQLSTATE) != _NO_SUCH_STATEMENT:
                    break
                self._prepared.discard(statement.name)
            return self._check(result)

    def _check(self, result: pq.abc.PGresult) -> pq.abc.PGresult:
        if result.status not in _DONE:
            raise errors.error_from_result(result, encoding=self.conn.info.encoding)
        return result

    def close(self) -> None:
        """Close the connection (the server releases whatever it still held). Idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self.conn.close()
            except Exception:  # closing must never raise; the socket goes either way
                logger.debug("closing a PostgreSQL connection failed", exc_info=True)
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.close()


_DONE = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)
_NO_SUCH_STATEMENT = b"26000"  # invalid_sql_statement_name: the statement is not prepared


class _Opening:
    """A connection being opened by a helper thread."""

    __slots__ = ("abandoned", "done", "error", "link")

    def __init__(self) -> None:
        self.done = False
        self.abandoned = False
        self.link: Link | None = None
        self.error: BaseException | None = None


class Connections:
    """At most ``max_size`` connections: idle ones, ones in use, and ones being opened.

    Args:
        connect: opens one psycopg connection (blocking; bounded by libpq's connect_timeout).
        max_size: the most connections that may exist at once (>= 1).
        name: used for helper thread names.
    """

    def __init__(
        self, connect: Callable[[], psycopg.Connection[Any]], max_size: int, name: str
    ) -> None:
        self._connect = connect
        self._max_size = max_size
        self._name = name
        self._cond = threading.Condition()
        self._idle: list[Link] = []
        self._total = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def take(self, deadline: float) -> tuple[Link, bool]:
        """Return ``(link, reused)``: an idle connection, or a new one opened before ``deadline``.

        Raises:
            TimedOut: no capacity came free, or the new connection did not open, in time.
            Closed: :meth:`close` was called meanwhile.
            psycopg.Error: opening the connection failed (refused, bad password …).
        """
        with self._cond:
            while True:
                if self._closed:
                    raise Closed()
                if self._idle:
                    return self._idle.pop(), True
                if self._total < self._max_size:
                    self._total += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimedOut()
                self._cond.wait(remaining)
            opening = _Opening()
        threading.Thread(
            target=self._open, args=(opening,), name=f"{self._name}-connect", daemon=True
        ).start()
        with self._cond:
            while not opening.done and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            if opening.done:
                if opening.link is not None:
                    return opening.link, False
                self._total -= 1
                self._cond.notify_all()
                assert opening.error is not None
                raise opening.error
            # The helper thread finishes on its own and files the link (or frees the slot).
            opening.abandoned = True
            if self._closed:
                raise Closed()
            raise TimedOut()

    def _open(self, opening: _Opening) -> None:
        link: Link | None = None
        error: BaseException | None = None
        try:
            link = Link(self._connect())
        except BaseException as exc:  # handed to the waiting caller
            error = exc
        with self._cond:
            opening.done = True
            close_it = False
            if not opening.abandoned:
                opening.link, opening.error = link, error
            elif link is not None and not self._closed:
                self._idle.append(link)  # arrived late: useful to the next caller
            else:
                self._total -= 1
                close_it = link is not None
            self._cond.notify_all()
        if close_it and link is not None:
            link.close()

    def give_back(self, link: Link) -> None:
        """Return a link after use: kept idle when healthy, closed otherwise."""
        keep = link.healthy()
        with self._cond:
            if keep and not self._closed:
                self._idle.append(link)
                self._cond.notify_all()
                return
        self.discard(link)

    def discard(self, link: Link) -> None:
        """Close a link and free its slot."""
        link.close()
        with self._cond:
            self._total -= 1
            self._cond.notify_all()

    def close(self) -> None:
        """Refuse new work, wake every waiter, and close the idle connections."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for link in idle:
            self.discard(link)

    def wait_empty(self, deadline: float) -> bool:
        """Wait until every connection is closed or ``deadline`` passes; True when empty."""
        with self._cond:
            while self._total > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    @property
    def size(self) -> int:
        """Connections existing now (idle, in use, being opened)."""
        return self._total

    @property
    def idle(self) -> int:
        return len(self._idle)


def connect_timeout_for(seconds: float) -> int:
    """libpq's ``connect_timeout`` (whole seconds, at least 2) covering ``seconds``."""
    return max(2, math.ceil(seconds))
