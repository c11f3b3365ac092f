"""The runs of a submission: :class:`RunSpec`, and reading them from a JSON-lines file (one run
per line: its run id and its inputs)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from durable_core.errors import ConfigError

__all__ = ["RunSpec", "check_unique", "read_runs_file"]


@attrs.frozen
class RunSpec:
    """One run to submit.

    Attributes:
        run_id: the run's id; ``None``: the configuration's ``run_id``.
        inputs: replacements of ``[inputs]`` entries by key name, in the forms ``[inputs]``
            takes: a literal value, ``{"value": …}``, ``{"path": …}`` (relative to the
            configuration's folder) or ``{"file": …, "as": …}``; or already parsed sources
            (``--input``: :func:`~durable_core.config.inputs.parse_input_override`).
        where: where the run was written, for messages (``runs.jsonl:3``).
    """

    run_id: str | None = None
    inputs: Mapping[str, Any] = attrs.field(factory=dict)
    where: str = ""


def read_runs_file(path: str | pathlib.Path) -> list[RunSpec]:
    """The runs of a JSON-lines file: one JSON object per line,
    ``{"run_id": "…", "inputs": {"key": value, …}}`` (``inputs`` may be left out). Blank lines
    and lines starting with ``#`` are skipped.

    Raises:
        ConfigError: the file cannot be read, a line is not such an object (the message names
            the line), a run id is empty or not a string, or a run id appears twice.
    """
    file = pathlib.Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--inputs-file {file}: cannot read it: {exc}") from exc
    specs = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{file}:{number}"
        try:
            entry = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not a JSON object ({exc})") from None
        if not isinstance(entry, dict):
            raise ConfigError(
                f'{where}: expected {{"run_id": "...", "inputs": {{...}}}}, found '
                f"{type(entry).__name__}"
            )
        extra = sorted(set(entry) - {"run_id", "inputs"})
        if extra:
            raise ConfigError(
                f"{where}: unknown key{'s' if len(extra) > 1 else ''} "
                f"{', '.join(map(repr, extra))}; a line holds 'run_id' and 'inputs'"
            )
        run_id = entry.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            raise ConfigError(f"{where}: 'run_id' must be a non-empty string, found {run_id!r}")
        inputs = entry.get("inputs", {})
        if not isinstance(inputs, dict):
            raise ConfigError(
                f"{where}: 'inputs' must be an object of input names to values, found "
                f"{type(inputs).__name__}"
            )
        specs.append(RunSpec(run_id=run_id, inputs=inputs, where=where))
    check_unique(specs)
    return specs


def check_unique(specs: Iterable[RunSpec]) -> None:
    """Refuse a submission that names one run twice.

    Raises:
        ConfigError: naming the run id and both places.
    """
    seen: dict[str | None, str] = {}
    for spec in specs:
        if spec.run_id in seen:
            raise ConfigError(
                f"run {spec.run_id!r} is listed twice ({seen[spec.run_id] or 'first'} and "
                f"{spec.where or 'again'}); each run is submitted once"
            )
        seen[spec.run_id] = spec.where
