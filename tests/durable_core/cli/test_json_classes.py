"""``[codecs] json`` in a run's TOML file: the classes a ``durable run`` stores as JSON."""

from __future__ import annotations

import itertools
import json
import sys
import textwrap

import pytest
from click.testing import CliRunner

from durable_core.cli import ExitCode, cli

_counter = itertools.count()

GRAPH = """
import enum

import attrs
from durable_core import Graph, Key


@attrs.frozen
class Acc:
    count: int
    total: int


class Colour(enum.Enum):
    RED = "red"


class Plain:  # neither attrs, a dataclass nor an enum
    pass


NUMBERS = Key("numbers", list[int])
ACC = Key("acc", Acc)
COLOUR = Key("colour", Colour)
graph = Graph("fold", inputs=[NUMBERS])


@graph.node("fold", requires=[NUMBERS], provides=[ACC, COLOUR])
def fold(rc):
    numbers = rc.get(NUMBERS)
    rc.set(ACC, Acc(len(numbers), sum(numbers)))
    rc.set(COLOUR, Colour.RED)
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    module = f"fold_graph_{next(_counter)}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(GRAPH))
    monkeypatch.chdir(tmp_path)
    yield tmp_path, module
    sys.modules.pop(module, None)


def write(tmp_path, module: str, codecs: str) -> str:
    path = tmp_path / "fold.toml"
    top, table = ("", codecs) if codecs.startswith("[") else (codecs, "")
    path.write_text(
        f'graph = "{module}:graph"\nrun_id = "fold-1"\nversion = "1"\n{top}\n'
        f"[inputs]\nnumbers = [1, 2, 3]\n\n"
        f'[store]\nbackend = "file"\ndirectory = "runs"\n\n{table}'
    )
    return str(path)


def test_a_class_named_in_codecs_json_is_stored_and_restored(project):
    tmp_path, module = project
    runner = CliRunner()
    missing = runner.invoke(cli, ["run", write(tmp_path, module, "")])
    assert missing.exit_code == ExitCode.ERROR, missing.output
    # the error shows how a 'durable run' user serves the class
    assert f'[codecs] json = ["{module}:Acc"]' in missing.stderr
    assert not list(tmp_path.glob("runs/*.json"))  # nothing was saved

    path = write(
        tmp_path, module, f'[codecs]\njson = ["{module}:Acc", "{module}:Colour"]\nplugins = []\n'
    )
    done = runner.invoke(cli, ["run", path, "--json"])
    assert done.exit_code == 0, done.output
    shown = json.loads(runner.invoke(cli, ["show", path, "fold-1", "fold", "--json"]).stdout)
    assert shown["outputs"]["acc"]["value"] == {"count": 3, "total": 6}
    assert shown["outputs"]["colour"]["value"] == "red"
    again = runner.invoke(cli, ["resume", path])
    assert again.exit_code == 0, again.output
    assert "1 restored from checkpoint" in again.stdout
    assert "acc = Acc(count=3, total=6)" in again.stdout


@pytest.mark.parametrize(
    ("codecs", "message"),
    [
        ('[codecs]\njson = ["{module}:Plain"]\n', "'{module}:Plain' cannot be stored as JSON"),
        ('[codecs]\njson = ["{module}:graph"]\n', "'{module}:graph' is not a class"),
        ('[codecs]\njson = ["{module}:Nope"]\n', "module '{module}' has no attribute 'Nope'"),
        ('[codecs]\njson = ["{module}"]\n', "expected 'package.module:attribute'"),
        ('[codecs]\njson = "{module}:Acc"\n', "expected a list"),
        ('[codecs]\nclasses = ["{module}:Acc"]\n', "unknown key 'classes'"),
        ('codecs = "numpy"\n', "expected a list of plugin names or a [codecs] table"),
        ('[codecs]\nplugins = ["absent-plugin"]\n', "needs the plugin 'absent-plugin'"),
    ],
)
def test_a_bad_codecs_table_is_a_config_error_before_anything_is_saved(project, codecs, message):
    tmp_path, module = project
    path = write(tmp_path, module, codecs.format(module=module))
    result = CliRunner().invoke(cli, ["run", path])
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert message.format(module=module) in result.stderr
    assert not (tmp_path / "runs").exists()
