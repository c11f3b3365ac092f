"""Distributions installed on their own, in fresh virtual environments (C-2, plugins).

durable-core alone must work without any optional distribution; the numpy codec plugin is found
through its entry point once installed beside it. Installs use uv and its cache (``--offline``
first, so the test runs without a network when the cache holds the dependencies).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

pytestmark = pytest.mark.slow


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build fresh environments (https://docs.astral.sh/uv/)")
    return uv


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    env.pop("PYTHONPATH", None)
    return env


def _make_venv(path: Path, *projects: str) -> Path:
    uv = _uv()
    subprocess.run(
        [uv, "venv", "-q", "--python", sys.executable, str(path)],
        check=True,
        env=_env(),
        capture_output=True,
    )
    python = path / "bin" / "python"
    args = [uv, "pip", "install", "-q", "--python", str(python), *projects]
    offline = subprocess.run([*args, "--offline"], env=_env(), capture_output=True, text=True)
    if offline.returncode != 0:
        online = subprocess.run(args, env=_env(), capture_output=True, text=True)
        assert online.returncode == 0, f"{offline.stderr}\n{online.stderr}"
    return path / "bin"


def _plugins(bin_dir: Path) -> list[dict]:
    result = subprocess.run(
        [str(bin_dir / "durable"), "plugins", "--json"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# covers: C-2
def test_durable_core_alone_lists_only_its_own_plugins(tmp_path):
    bin_dir = _make_venv(tmp_path / "core", str(ROOT / "durable_core"))
    infos = _plugins(bin_dir)
    assert [i["name"] for i in infos] == ["memory", "runlog"]  # runlog: the run log
    memory, runlog = infos
    assert runlog["distribution"] == "durable-core"
    assert (runlog["stores"], runlog["codecs"], runlog["error"]) == ([], [], None)
    assert memory["distribution"] == "durable-core"
    assert memory["stores"] == ["memory"]
    assert memory["error"] is None
    assert memory["codecs"] == [
        "json:bool@1",
        "json:int@1",
        "json:float@1",
        "json:str@1",
        "json:bytes@1",
        "json:none@1",
    ]
    text = subprocess.run(
        [str(bin_dir / "durable"), "plugins"], env=_env(), capture_output=True, text=True
    ).stdout
    assert text.splitlines()[0].startswith("memory  (durable-core ")
    numpy_spec = subprocess.run(
        [str(bin_dir / "python"), "-c", "import importlib.util as u; print(u.find_spec('numpy'))"],
        env=_env(),
        capture_output=True,
        text=True,
    ).stdout
    assert numpy_spec.strip() == "None"  # durable-core does not pull numpy in


# covers: C-2
def test_the_numpy_plugin_installed_beside_core_is_found_and_works(tmp_path):
    bin_dir = _make_venv(
        tmp_path / "numpy",
        str(ROOT / "durable_core"),
        str(ROOT / "plugins" / "durable_codec_numpy"),
    )
    infos = {i["name"]: i for i in _plugins(bin_dir)}
    assert sorted(infos) == ["memory", "numpy", "runlog"]
    assert infos["numpy"]["distribution"] == "durable-codec-numpy"
    assert infos["numpy"]["codecs"] == ["numpy:ndarray@1"]
    script = (
        "import numpy as np\n"
        "from durable_core import Codecs\n"
        "codecs = Codecs.from_plugins()\n"
        "a = np.arange(6, dtype='>i2').reshape(2, 3)\n"
        "e = codecs.encode_value(np.ndarray, a)\n"
        "b = codecs.decode_value(np.ndarray, *e)\n"
        "assert b.dtype == a.dtype and (b == a).all(), b\n"
        "print(e.codec_id, e.version)\n"
    )
    result = subprocess.run(
        [str(bin_dir / "python"), "-c", script], env=_env(), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "numpy:ndarray 1"
