"""What ``durable run``, ``resume`` and ``fork`` were asked to do: one frozen request.

The CONFIG given on the command line is needed again at every step of a launch (loading the
configuration, creating a fork, explaining a refusal before the run started, the hints printed
after it): the request carries it, with the other arguments, so no step takes them one by one.
"""

from __future__ import annotations

import attrs

__all__ = ["LaunchRequest"]


@attrs.frozen
class LaunchRequest:
    """The command line of one ``run``, ``resume`` or ``fork``.

    Attributes:
        config_arg: the configuration file, as given.
        run_id_option: ``--run-id`` (or ``RUN_ID``; for ``fork``, ``--new-run-id``), or ``None``
            for the config's.
        as_json: print the result as JSON.
        resume: continue an existing run instead of starting one.
        resume_if_exists: (``run`` only) continue the run when it already has a record.
        input_options: ``--input KEY=VALUE`` / ``KEY=@FILE`` overrides of ``[inputs]``.
        max_running: ``--max-running``, overriding ``[runtime] max_running``.
        fork_from: (``fork``) the run to fork into the run id.
        rerun: (``fork``) the nodes to run again.
        store_url: ``--store URL``, replacing the config's ``[store]``.
        suspend: ``--suspend``: a run with nothing to do but wait ends ``waiting`` (X-WAIT).
    """

    config_arg: str
    run_id_option: str | None
    as_json: bool
    resume: bool
    resume_if_exists: bool = False
    input_options: tuple[str, ...] = ()
    max_running: int | None = None
    fork_from: str | None = None
    rerun: tuple[str, ...] = ()
    store_url: str | None = None
    suspend: bool = False

    @property
    def verb(self) -> str:
        """The command as the result names it before anything ran: fork, resume or run."""
        if self.fork_from is not None:
            return "fork"
        return "resume" if self.resume else "run"
