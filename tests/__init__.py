"""The test suite: ``tests/<distribution>/<package>/test_<module>.py``, every folder a package.

Helpers are imported by their package path (``from tests.durable_core.durable import scenarios``);
child scripts run as ``python -m tests.…`` from :data:`ROOT`.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository root: where ``python -m tests.…`` finds the ``tests`` package."""
