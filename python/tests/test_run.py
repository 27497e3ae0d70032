"""tiergnn.train, evaluate and infer against the CLI with the same options; errors; stopping.

The CLI is TG_CLI (else the repository's build/tiergnn).
"""

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tiergnn

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("TG_CLI", str(ROOT / "build" / "tiergnn"))
# small and quick, and every setting that decides the model given explicitly
OPTS = dict(epochs=2, hidden=16, fanouts=[5, 5], batch_size=256, seed=3, threads=2)
# the epoch line's figures that do not depend on timing
SAME = ("epoch", "train_loss", "train_acc", "valid_acc", "valid_loss", "test_acc", "batches",
        "strategy", "io_needed_bytes")


def cli(*args):
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"no CLI at {CLI} (set TG_CLI)")
    r = subprocess.run([CLI, "-q", *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def cli_opts(opts):
    out = []
    for k, v in opts.items():
        v = ",".join(map(str, v)) if isinstance(v, list) else v
        out += ["--" + k.replace("_", "-")] + ([] if v is True else [v])
    return out


def same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a)
                      and math.isnan(b))


def tasks():
    return len(os.listdir("/proc/self/task"))


def rss_bytes():
    with open("/proc/self/status") as f:
        kb = next(ln for ln in f if ln.startswith("VmRSS:")).split()[1]
    return int(kb) << 10


def run_all(gen):
    """The epoch dicts of a train generator, and its return value."""
    epochs = []
    while True:
        try:
            epochs.append(next(gen))
        except StopIteration as stop:
            return epochs, stop.value


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return tiergnn.generate(tmp_path_factory.mktemp("ds") / "g", nodes=3000, avg_degree=10,
                            feat_dim=16, classes=4, seed=1, threads=2)


@pytest.fixture(scope="module")
def trained(ds, tmp_path_factory):
    """A Python run and the CLI run with the same options."""
    base = tmp_path_factory.mktemp("runs")
    epochs, final = run_all(tiergnn.train(ds, base / "py", **OPTS))
    out = cli("train", ds.path, "--out", base / "cli", "--json", *cli_opts(OPTS))
    lines = [json.loads(ln) for ln in out.splitlines()]
    return base, epochs, final, lines


def test_train_yields_the_cli_epoch_lines(trained):
    base, epochs, final, lines = trained
    assert len(epochs) == 2 and len(lines) == 3
    for mine, theirs in zip(epochs, lines):
        assert mine.keys() == theirs.keys()
        for k in SAME:
            assert same(mine[k], theirs[k]), k
    assert final.keys() == lines[2].keys()
    for k in ("best_epoch", "valid_acc", "test_acc", "epochs", "model", "strategy", "seed"):
        assert final[k] == lines[2][k], k
    assert final == json.loads((base / "py" / "result.json").read_text())


def test_train_checkpoints_are_the_cli_bytes(trained):
    base = trained[0]
    for name in ("checkpoint.bin", "best.bin"):
        assert (base / "py" / name).read_bytes() == (base / "cli" / name).read_bytes(), name


def test_out_of_core_strategy_with_its_options(ds, trained, tmp_path):
    """diskgnn with a strategy option is exact: the same checkpoint as the in-RAM run."""
    # --mem is the whole process's: this one's (pytest, NumPy, maybe torch) and 64M for the run
    mem = (rss_bytes() >> 20) + 64
    so = dict(OPTS, strategy="diskgnn", mem=f"{mem}M", hot_cache="20K", chunk_rows=64)
    epochs, final = run_all(tiergnn.train(ds, tmp_path / "dg", **so))
    assert [e["strategy"] for e in epochs] == ["diskgnn"] * 2
    assert final["mem_bytes"] == mem << 20
    base = trained[0]
    assert (tmp_path / "dg" / "checkpoint.bin").read_bytes() == \
        (base / "cli" / "checkpoint.bin").read_bytes()


def test_evaluate_is_cli_eval(ds, trained):
    base = trained[0]
    for split in ("test", "valid"):
        mine = tiergnn.evaluate(ds, base / "py", split=split, threads=2)
        theirs = json.loads(cli("eval", ds.path, "--checkpoint", base / "cli", "--split", split,
                                "--json", "--threads", 2))
        # the CLI's JSON has 6 significant digits, the dict the doubles themselves
        assert mine.keys() == theirs.keys()
        for k, v in theirs.items():
            assert mine[k] == pytest.approx(v, rel=1e-5) if isinstance(v, float) else mine[k] == v
    last = tiergnn.evaluate(ds, base / "py" / "checkpoint.bin", last=True, threads=2)
    assert last["epoch"] == 2 and last["count"] == 600


def test_infer_returns_memmaps_of_the_cli_outputs(ds, trained, tmp_path):
    base = trained[0]
    pred, emb = tiergnn.infer(ds, base / "py", str(tmp_path / "p"), embeddings=True, threads=2,
                              format="npy")
    cli("infer", ds.path, "--checkpoint", base / "cli", "--out", tmp_path / "c", "--embeddings",
        "--threads", 2)
    assert isinstance(pred, np.memmap) and pred.dtype == np.int32 and pred.shape == (3000,)
    assert isinstance(emb, np.memmap) and emb.dtype == np.float32 and emb.shape == (3000, 16)
    assert (tmp_path / "p").read_bytes() == (tmp_path / "c").read_bytes()
    assert (tmp_path / "p.emb").read_bytes() == (tmp_path / "c.emb").read_bytes()
    assert np.array_equal(np.load(tmp_path / "p.npy"), pred)
    only = tiergnn.infer(ds, base / "py", str(tmp_path / "q"), threads=2)
    assert np.array_equal(only, pred)


def test_options_are_checked_when_called(ds, tmp_path):
    with pytest.raises(tiergnn.TierGNNError, match=r"unknown option '--windw' \(did you mean "
                                                   r"--window\?\)"):
        tiergnn.train(ds, tmp_path / "r", windw=4)  # raises before any next()
    with pytest.raises(tiergnn.TierGNNError, match="--epochs must be at least 1"):
        tiergnn.train(ds, tmp_path / "r", epochs=0)
    with pytest.raises(tiergnn.TierGNNError, match="--strategy 'diskgn'"):
        tiergnn.train(ds, tmp_path / "r", strategy="diskgn")
    with pytest.raises(tiergnn.TierGNNError, match="did you mean --split"):
        tiergnn.evaluate(ds, tmp_path, splt="test")
    with pytest.raises(tiergnn.TierGNNError, match="--format must be raw or npy"):
        tiergnn.infer(ds, tmp_path, str(tmp_path / "o"), format="csv")
    assert not (tmp_path / "r").exists()


def test_failures_raise_with_the_message(ds, tmp_path):
    with pytest.raises(MemoryError, match=r"--mem 1.00 MiB is too small for strategy diskgnn"):
        for _ in tiergnn.train(ds, tmp_path / "r", strategy="diskgnn", mem="1M", **OPTS):
            pass
    with pytest.raises(FileNotFoundError, match="none: not a dataset directory"):
        for _ in tiergnn.train(tmp_path / "none", tmp_path / "r2", epochs=1):
            pass
    with pytest.raises(tiergnn.TierGNNError, match="nothing"):
        tiergnn.evaluate(ds, tmp_path / "nothing")


def test_early_close_stops_and_joins(ds, trained, tmp_path):
    before = tasks()  # after the runs above: OpenBLAS's pool is up already
    fds = len(os.listdir("/proc/self/fd"))
    gen = tiergnn.train(ds, tmp_path / "r", **dict(OPTS, epochs=100000))
    first = next(gen)
    assert first["epoch"] == 1 and tasks() > before
    t0 = time.monotonic()
    gen.close()
    assert time.monotonic() - t0 < 10 and tasks() <= before
    assert len(os.listdir("/proc/self/fd")) <= fds  # the pipe and the run's files closed
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    assert cfg["epochs"] == 100000
    # the checkpoint written at the stop resumes
    epochs, final = run_all(tiergnn.train(ds, tmp_path / "r", resume=True, epochs=3, threads=2))
    assert [e["epoch"] for e in epochs][-1] == 3 and final["epochs"] == 3
    # a generator dropped without close() is closed by the garbage collector
    gen = tiergnn.train(ds, tmp_path / "r3", **dict(OPTS, epochs=100000))
    next(gen)
    del gen
    assert tasks() <= before


def test_keyboard_interrupt_stops_and_joins(ds, trained, tmp_path):
    before = tasks()
    # to the process, as a terminal's Ctrl-C: whichever thread receives it, the loop sees it
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    gen = tiergnn.train(ds, tmp_path / "r", **dict(OPTS, epochs=100000))
    timer.start()
    with pytest.raises(KeyboardInterrupt), contextlib.closing(gen):
        for _ in gen:
            pass
    timer.join()
    assert tasks() <= before
    assert (tmp_path / "r" / "checkpoint.bin").exists()


def test_gil_is_released_while_training(ds, tmp_path):
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    th = threading.Thread(target=tick)
    th.start()
    try:
        n = len(ticks)
        for _ in tiergnn.train(ds, tmp_path / "r", **dict(OPTS, epochs=3)):
            pass
        assert len(ticks) > n
    finally:
        stop.set()
        th.join()


def test_interpreter_exit_stops_the_run(ds, tmp_path):
    """A generator left open at exit: the run stops with its checkpoint, the process exits 0."""
    script = ("import sys, tiergnn\n"
              f"g = tiergnn.train({ds.path!r}, {str(tmp_path / 'r')!r}, epochs=100000, hidden=16,"
              " threads=2)\n"
              "next(g)\n"
              "sys.exit(0)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # the checkpoints of the stop, whole (no .tmp left); result.json is a finished run's;
    # plan.json is strategy auto's choice, written before the first epoch
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == \
        ["best.bin", "checkpoint.bin", "config.json", "plan.json"]
