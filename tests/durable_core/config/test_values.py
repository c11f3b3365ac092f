"""Values of the wrong kind in a configuration are ConfigErrors naming the file, the table and
the key (exit 6), never a confusing plugin name or an "unexpected" error (exit 9)."""

from __future__ import annotations

import pathlib
import textwrap

import pytest
from click.testing import CliRunner

from durable_core import ConfigError
from durable_core.cli import ExitCode, cli
from durable_core.config import load_config

MINIMAL = """
graph = "mod:graph"
run_id = "r1"
version = "1"
"""


def write(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "run.toml"
    path.write_text(textwrap.dedent(text))
    return path


# covers: E-1
def test_codecs_given_as_a_string_is_a_config_error_not_a_missing_plugin(tmp_path):
    path = write(tmp_path, 'codecs = "money"\n' + MINIMAL)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: top level, key 'codecs': expected a list"), message
    assert "a string ('money')" in message
    assert "'m'" not in message
    result = CliRunner().invoke(cli, ["inspect", str(path)])
    assert result.exit_code == ExitCode.CONFIG
    assert "error (ConfigError):" in result.stderr


def test_a_list_item_of_the_wrong_type_names_its_index(tmp_path):
    path = write(tmp_path, 'codecs = ["numpy", 3]\n' + MINIMAL)
    with pytest.raises(ConfigError, match=r"key 'codecs\[1\]': expected a string"):
        load_config(path)


# covers: E-1
@pytest.mark.parametrize("command", ["list", "inspect"])
def test_a_store_option_of_the_wrong_type_names_file_table_and_key(tmp_path, command):
    path = write(
        tmp_path, MINIMAL + '[store]\nbackend = "sqlite"\npath = "runs.sqlite"\ntimeout = "5"\n'
    )
    (tmp_path / "runs.sqlite").touch()  # list and inspect never create a store
    result = CliRunner().invoke(cli, [command, str(path)])
    assert result.exit_code == ExitCode.CONFIG, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error (ConfigError): {path}: [store] timeout: "), line
    assert "'5'" in line and "unexpected" not in line
    with pytest.raises(ConfigError, match=r"\[store\] timeout: the 'sqlite' store rejected"):
        load_config(path).open_store()
