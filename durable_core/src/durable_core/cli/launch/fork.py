"""The fork step of ``durable fork``: the new run's first record, from the old run's
still-valid confirmed nodes, created before the new run executes."""

from __future__ import annotations

from typing import Any

import click

from durable_core.cli.launch.request import LaunchRequest
from durable_core.errors import ConflictError, NotFoundError

__all__ = ["start_fork"]


def start_fork(runtime: Any, graph: Any, request: LaunchRequest, options: dict[str, Any]) -> Any:
    """Create the fork's first record (see :func:`~durable_core.durable.fork.create_fork`) and
    say what it copied (on stderr, unless ``--json``).

    Args:
        runtime: the launch's runtime.
        graph: the configuration's graph.
        request: the command line (``fork_from``, ``rerun``, ``as_json``).
        options: the keyword arguments the run gets (``run_id`` is the new run's).

    Returns:
        The :class:`~durable_core.durable.ForkPlan`.

    Raises:
        ConflictError: the new run id has a record already.
        NotFoundError: the run to fork has no record.
    """
    from durable_core.durable.fork import create_fork

    assert request.fork_from is not None
    try:
        plan = create_fork(
            runtime,
            graph,
            run_id=request.fork_from,
            new_run_id=options["run_id"],
            version=options["version"],
            inputs=options["inputs"],
            rerun=request.rerun,
            input_identity=options["input_identity"],
        )
    except ConflictError as exc:
        raise ConflictError(
            f"run {options['run_id']!r} already exists: a fork needs a new run id ({exc})"
        ) from exc
    except NotFoundError as exc:
        raise NotFoundError(f"no record of run {request.fork_from!r} to fork: {exc}") from exc
    if not request.as_json:
        click.echo(
            f"forked run {request.fork_from!r} into {plan.new_run_id!r}: copied "
            f"{', '.join(plan.copied) or 'nothing'}; running again: "
            f"{', '.join(plan.rerun) or 'nothing'}",
            err=True,
        )
    return plan
