"""The Loader's budget (docs/LOADER.md, "Memory"): beside the process and the input matrices the
strategy holds in flight it reserves max_held held batches, not one more: the batch the loop
has not taken yet waits in one of the strategy's own matrices. A refused `mem` names those
parts; at the `mem` it names the loader runs, with the process's RSS within it."""

import re
import threading
import time

import pytest

import tiergnn
from conftest import run_cli

# gnndrive with every row from disk: its feature buffer takes what the plan leaves, so the run
# uses its budget to the end; 6 batches of about 12 K input nodes (X about 13 MiB each)
OPTS = dict(fanouts=[10, 10], batch_size=1024, seed=3, strategy="gnndrive", max_batches=6,
            max_held=3, num_epochs=2, numpy=True, extractors=2, chunk_rows=64,
            features_in_ram=0, io_depth=8, io_gap=0)

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
SIZE = r"([0-9.]+) (B|KiB|MiB|GiB)"


def size(m, i):
    return float(m.group(i)) * UNITS[m.group(i + 1)]


def rss_anon():
    with open("/proc/self/status") as f:
        for ln in f:
            if ln.startswith("RssAnon:"):
                return int(ln.split()[1]) << 10
    return 0


@pytest.fixture(scope="module")
def wide_graph(tmp_path_factory):
    """30000 nodes of 256 features: a batch's X is larger than the plan's slack."""
    path = tmp_path_factory.mktemp("budget") / "g30k"
    run_cli("generate", path, "--nodes", 30000, "--avg-degree", 8, "--feat-dim", 256,
            "--classes", 4, "--seed", 3, "--threads", 2)
    return path


def refusal(graph, mem):
    with pytest.raises(MemoryError) as e:
        tiergnn.Loader(graph, "train", mem=mem, **OPTS)
    return str(e.value)


def test_refusal_counts_max_held_batches_and_the_named_mem_runs(wide_graph):
    msg = refusal(wide_graph, "4M")
    m = re.search(r"the process \(" + SIZE + r"\), (\d+) input matrices strategy gnndrive holds "
                  r"in flight \(" + SIZE + r" each.*\) and max_held (\d+) held batches \(" + SIZE
                  + r" each\) need " + SIZE + r" beside the " + SIZE + r" of data it holds; "
                  r"give --mem (\d+)M", msg)
    assert m, msg
    proc, k, x, held, each = size(m, 1), int(m.group(3)), size(m, 4), int(m.group(6)), size(m, 7)
    need, data, give = size(m, 9), size(m, 11), int(m.group(13)) << 20
    assert held == OPTS["max_held"]
    assert abs(proc + k * x + held * each - need) < 0.001 * need + 65536
    assert each > 8 << 20  # a batch's X: more than the plan's slack
    # the named --mem, and 2 MiB for the feature buffer's least (gnndrive's pass refuses less);
    # one slot more, as the loader reserved before, would not have fitted it
    mem = give + (2 << 20)
    assert data + need + each > mem
    peak, stop = [rss_anon()], threading.Event()

    def watch():  # next() releases the GIL while it waits
        while not stop.is_set():
            peak[0] = max(peak[0], rss_anon())
            time.sleep(0.001)

    t = threading.Thread(target=watch)
    t.start()
    try:
        with tiergnn.Loader(wide_graph, "train", mem=mem, **OPTS) as L:
            for epoch in range(2):
                it = iter(L)
                held = [next(it) for _ in range(OPTS["max_held"])]
                time.sleep(0.3)  # the strategy fills its matrices and offers the next batch
                del held
                n = OPTS["max_held"] + sum(1 for _ in it)
                assert n == len(L)
                st = L.stats()
                assert st["pass_done"] and st["data_bytes_peak"] <= mem
    finally:
        stop.set()
        t.join()
    print(f"{msg}\npeak RssAnon {peak[0] / 2**20:.1f} MiB of {mem / 2**20:.0f}")
    assert peak[0] <= mem, f"peak RssAnon {peak[0]} over mem {mem}"
