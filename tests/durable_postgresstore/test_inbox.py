"""The PostgreSQL inbox announces posts: an owner listening hears of a post from any
connection at once (X-INBOX-2)."""

from __future__ import annotations

import threading
import uuid

from durable_core.testing import sample_record


def test_a_post_is_announced_to_the_runs_listener(make_store) -> None:
    # covers: X-INBOX-2
    owner, poster = make_store(), make_store()
    run_id = f"announced-{uuid.uuid4().hex[:8]}"
    with owner.acquire(run_id) as session:
        session.save(sample_record(run_id, 1), 0)
    heard = threading.Event()
    other = threading.Event()
    stop = owner.watch_posts(run_id, heard.set)
    stop_other = owner.watch_posts(f"{run_id}-other", other.set)
    try:
        assert poster.post_message(run_id, "box", b"{}") == 1
        assert heard.wait(5), "the post was not announced"
        assert not other.is_set()  # announced to its own run only
    finally:
        stop()
        stop_other()
