"""A run's owner in its own process, to be killed with SIGKILL: ``python -m
tests.executor_owner STORE_DIR MARK_DIR EXECUTOR`` from the repository root (``EXECUTOR`` is
``process`` or a Dask scheduler address)."""

import sys

from durable_core import ProcessExecutor, Runtime
from durable_filestore import FileStore
from tests.executor_bodies import DIR, crash_graph


def main() -> None:
    store_dir, mark_dir, where = sys.argv[1:4]
    if where == "process":
        executor = ProcessExecutor(max_workers=2)
    else:
        from durable_executor_dask import DaskExecutor

        executor = DaskExecutor(address=where)
    runtime = Runtime(FileStore(store_dir), executor=executor)
    runtime.run(crash_graph(), run_id="crash", version="1", inputs={DIR: mark_dir})


if __name__ == "__main__":
    main()
