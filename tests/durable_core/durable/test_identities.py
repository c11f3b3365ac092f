"""Fresh identities (R-REC-3): 32 lowercase hex characters, each handed out once, in every
thread and in a forked child."""

from __future__ import annotations

import os
import re
import threading

import pytest

from durable_core.durable import identities
from durable_core.durable.identities import new_id


def test_an_identity_is_32_lowercase_hex_characters_and_never_repeats() -> None:
    # covers: R-REC-3
    ids = [new_id() for _ in range(10 * identities._BATCH + 3)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_threads_taking_identities_together_never_get_the_same_one() -> None:
    # covers: R-REC-3
    taken: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(len(taken))

    def take(into: list[str]) -> None:
        start.wait()
        for _ in range(3 * identities._BATCH):
            into.append(new_id())

    threads = [threading.Thread(target=take, args=(into,)) for into in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for into in taken for i in into]
    assert len(set(every)) == len(every) == 8 * 3 * identities._BATCH


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_hand_out_its_parents_identities() -> None:
    # covers: R-REC-3
    identities._ready.clear()
    new_id()  # read a batch and take one: the parent holds unread identities now
    assert identities._ready
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first identities, to the parent
        try:
            os.write(write, "".join(new_id() for _ in range(4)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    child = {text[i : i + 32] for i in range(0, len(text), 32)}
    parent = {new_id() for _ in range(identities._BATCH)}
    assert len(child) == 4
    assert not child & parent
