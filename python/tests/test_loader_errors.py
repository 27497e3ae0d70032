"""tiergnn.Loader's errors raise with tiergnn's message (it names the path, option or part at
fault), as TierGNNError - also FileNotFoundError and MemoryError where those fit."""

import errno
import os
import subprocess
import sys

import pytest

import tiergnn

OPTS = dict(fanouts=[5, 5], batch_size=128, numpy=True)


def test_bad_path(tmp_path):
    missing = tmp_path / "no-such-dataset"
    with pytest.raises(tiergnn.TierGNNError, match="no-such-dataset") as e:
        tiergnn.Loader(missing, "train", **OPTS)
    assert isinstance(e.value, FileNotFoundError) and e.value.errno == errno.ENOENT


def test_dataset_object_with_path(small_graph):
    class Holder:
        path = str(small_graph)

    with tiergnn.Loader(Holder(), "train", **OPTS) as L:
        assert len(L) > 0


def test_unknown_strategy_option(small_graph):
    with pytest.raises(tiergnn.TierGNNError, match="bogus-opt"):
        tiergnn.Loader(small_graph, "train", strategy="gnndrive", bogus_opt=3, **OPTS)


def test_strategy_options_reach_the_strategy(small_graph):
    with pytest.raises(tiergnn.TierGNNError, match="disk-budget"):
        tiergnn.Loader(small_graph, "train", strategy="diskgnn", disk_budget="lots", **OPTS)
    with tiergnn.Loader(small_graph, "train", strategy="diskgnn", mem="512M", disk_budget="4M",
                        **OPTS) as L:
        assert sum(1 for _ in L) == len(L)


def test_unknown_strategy(small_graph):
    with pytest.raises(tiergnn.TierGNNError, match="nope"):
        tiergnn.Loader(small_graph, "train", strategy="nope", **OPTS)


def test_refused_mem(small_graph):
    with pytest.raises(MemoryError, match="--mem") as e:
        tiergnn.Loader(small_graph, "train", strategy="memory", mem="1M", **OPTS)
    assert isinstance(e.value, tiergnn.TierGNNError) and e.value.errno == errno.ENOMEM


def test_bad_mem_string(small_graph):
    with pytest.raises(tiergnn.TierGNNError, match="12Q"):
        tiergnn.Loader(small_graph, "train", mem="12Q", **OPTS)
    with pytest.raises(ValueError):
        tiergnn.Loader(small_graph, "train", mem=-5, **OPTS)


def test_refused_options(small_graph):
    with pytest.raises(tiergnn.TierGNNError, match="max_held 65"):
        tiergnn.Loader(small_graph, "train", max_held=65, **OPTS)
    with pytest.raises(tiergnn.TierGNNError, match="world_size"):
        tiergnn.Loader(small_graph, "train", rank=0, world_size=1000, **OPTS)
    with pytest.raises(tiergnn.TierGNNError, match="training"):
        tiergnn.Loader(small_graph, "training", **OPTS)
    with pytest.raises(tiergnn.TierGNNError, match="3000 nodes"):
        tiergnn.Loader(small_graph, [1, 2, 99999], **OPTS)
    with pytest.raises(ValueError, match=">= 0"):
        tiergnn.Loader(small_graph, [1, -2], **OPTS)
    with pytest.raises(TypeError, match="seeds"):
        tiergnn.Loader(small_graph, [0.5, 1.5], **OPTS)


FAULT_SCRIPT = """
import sys, tiergnn
try:
    with tiergnn.Loader(sys.argv[1], "train", [5, 5], 128, strategy="gnndrive", mem="48M",
                        numpy=True) as L:
        for b in L:
            pass
except tiergnn.TierGNNError as e:
    print(type(e).__name__, e.errno, e)
"""


def test_a_read_error_in_the_pass_names_the_file(small_graph):
    """The pass's error reaches the loop (TIERGNN_IO_FAULT: src/io/fault.c's rules)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
               TIERGNN_IO_FAULT="EIO@0-1T,file=features.bin")
    r = subprocess.run([sys.executable, "-c", FAULT_SCRIPT, str(small_graph)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("TierGNNError 5 ") and "features.bin" in r.stdout, r.stdout
