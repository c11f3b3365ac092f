"""``python -m durable_core``: the ``durable`` command."""

from durable_core.cli import main

if __name__ == "__main__":
    main()
