"""Shared by python/tests: where the CLI, the C loader's dump helper and the datasets are.

ctest (CMakeLists.txt, python_tests) sets TG_CLI, TG_LOADER_DUMP, TG_TEST_TMP and TG_SHARED_DIR;
run by hand, the defaults are the repository's build/ and ../shared:

    PYTHONPATH=build/python /usr/bin/python3 -m pytest -q python/tests
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("TG_CLI", str(ROOT / "build" / "tiergnn"))
LOADER_DUMP = os.environ.get("TG_LOADER_DUMP", str(ROOT / "build" / "tgpy_loader_dump"))
SHARED = Path(os.environ.get("TG_SHARED_DIR", ROOT.parent / "shared"))


def run_cli(*args):
    """The CLI's stdout; skips the test when there is no CLI, fails on its error."""
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"no CLI at {CLI} (set TG_CLI)")
    r = subprocess.run([CLI, "-q", *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="session")
def small_graph(tmp_path_factory):
    """A generated graph of 3000 nodes, 16 features, 4 classes (the strategies write their
    derived files beside it, so it lives in a temporary directory)."""
    path = tmp_path_factory.mktemp("loader") / "g3k"
    run_cli("generate", path, "--nodes", 3000, "--avg-degree", 10, "--feat-dim", 16,
            "--classes", 4, "--seed", 3, "--threads", 2)
    return path


def strategy_table():
    """{name: exact} for the strategies of `tiergnn strategies`, auto left out."""
    out = run_cli("strategies")
    table = {}
    for ln in out.splitlines()[1:]:
        m = re.match(r"^([a-z][a-z0-9_-]*)((\s+\[[^]]*\])*)$", ln)
        if m and m.group(1) != "auto":
            table[m.group(1)] = "[exact]" in m.group(2)
    return table


@pytest.fixture(scope="session")
def cora(tmp_path_factory):
    """The shared Cora (OGB's raw layout, the planetoid split) imported with the CLI."""
    src = SHARED / "datasets" / "cora"
    if not (src / "raw").is_dir():
        pytest.skip(f"no Cora at {src}")
    path = tmp_path_factory.mktemp("cora") / "cora"
    run_cli("import", path, "--from", "ogb", src, "--split", "planetoid")
    return path
