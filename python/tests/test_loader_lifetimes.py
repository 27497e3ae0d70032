"""tiergnn.Loader's lifetimes (docs/PYTHON.md): a batch lives while any reference to it or to
one of its arrays does; holding too many blocks only when another thread can release one;
breaking out, exceptions, KeyboardInterrupt, deleting or closing the loader mid-epoch and the
interpreter's exit leave no thread, file descriptor or growth behind."""

import gc
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tiergnn

OPTS = dict(fanouts=[5, 5], batch_size=128, seed=1, mem="512M", numpy=True)


def threads():
    return len(os.listdir("/proc/self/task"))


def fds():
    return len(os.listdir("/proc/self/fd"))


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def baseline():
    """Threads and descriptors before the test; checked to be back after it."""
    gc.collect()
    before = threads(), fds()
    yield before
    gc.collect()
    for _ in range(100):  # a thread that was joined may take a moment to leave /proc
        if (threads(), fds()) == before:
            break
        time.sleep(0.01)
    assert (threads(), fds()) == before


@pytest.fixture(scope="module")
def features(small_graph):
    return np.fromfile(small_graph / "features.bin", np.float32).reshape(3000, -1)


def same_rows(b, features):
    return np.array_equal(np.asarray(b.x), features[np.asarray(b.n_id)])


def test_x_is_the_loaders_memory(small_graph):
    with tiergnn.Loader(small_graph, "train", **OPTS) as L:
        b = next(iter(L))
        x1, x2 = b.x, b.x
        assert x1.ctypes.data == x2.ctypes.data == b._x_address
        assert np.shares_memory(x1, x2) and x1.base is b and x1.dtype == np.float32
        assert np.asarray(b.n_id).base is b
        x1[0, 0] += 1.0  # one buffer: a write shows through every view
        assert x2[0, 0] == x1[0, 0]


def test_hold_batches_past_next(small_graph, features, baseline):
    with tiergnn.Loader(small_graph, "train", max_held=5, strategy="gnndrive", **OPTS) as L:
        held = []  # 3 held and the loop's current one: 4 at once, 5 when next runs
        for b in L:
            if len(held) < 3:
                held.append((b, np.array(b.n_id)))
            assert same_rows(b, features)
        assert L.live_batches == 4  # the 3 held and the loop's last
        for b, n_id in held:  # still theirs after the epoch went on
            np.testing.assert_array_equal(b.n_id, n_id)
            assert same_rows(b, features)
        del held, b
        assert L.live_batches == 0


def test_holding_too_many_in_one_thread_raises(small_graph, features):
    with tiergnn.Loader(small_graph, "train", max_held=2, **OPTS) as L:
        it = iter(L)
        a, b = next(it), next(it)
        with pytest.raises(tiergnn.TierGNNError, match="max_held") as e:
            next(it)
        assert e.value.errno == 16  # EBUSY
        del a
        c = next(it)  # one given back: the epoch goes on
        assert c.index == 2 and same_rows(c, features)


def test_a_batch_in_a_cycle_is_collected_for_the_next(small_graph):
    with tiergnn.Loader(small_graph, "train", max_held=1, **OPTS) as L:
        n = 0
        for b in L:
            cycle = [b]
            cycle.append(cycle)  # only the collector frees it
            del b, cycle
            n += 1
        assert n == len(L)


def test_another_thread_releases(small_graph, features, baseline):
    q = queue.Queue()

    def consumer():
        while (b := q.get()) is not None:
            time.sleep(0.002)
            assert same_rows(b, features)
            del b  # the release comes from this thread

    t = threading.Thread(target=consumer)
    t.start()
    with tiergnn.Loader(small_graph, "train", max_held=1, strategy="gnndrive", **OPTS) as L:
        n = 0
        for b in L:  # waits at max_held until the consumer drops its batch
            q.put(b)
            del b
            n += 1
        q.put(None)
        t.join()
        assert n == len(L)


@pytest.mark.parametrize("strategy", ["gnndrive", "diskgnn"])
def test_delete_the_loader_mid_epoch(small_graph, features, baseline, strategy):
    L = tiergnn.Loader(small_graph, "train", strategy=strategy, **OPTS)
    it = iter(L)
    b = next(it)
    next(it)
    del it, L  # the batch keeps the C loader open...
    gc.collect()
    assert same_rows(b, features)
    del b  # ...until it dies: then every thread and file goes


@pytest.mark.parametrize("strategy", ["mmap", "ginex", "diskgnn"])
def test_a_loop_slower_than_the_strategy(small_graph, features, baseline, strategy):
    """The strategy's pass offers each batch and waits until the loop takes it (the
    rendezvous, docs/LOADER.md): a slow loop gets every batch of the epoch, in order."""
    with tiergnn.Loader(small_graph, "train", strategy=strategy, max_held=2, **OPTS) as L:
        n = 0
        for b in L:
            assert b.index == n and same_rows(b, features)
            time.sleep(0.005)
            n += 1
        assert n == len(L) and L.stats()["batches"] == n


@pytest.mark.parametrize("strategy", ["mmap", "gnndrive", "ginex", "diskgnn"])
def test_delete_the_loader_while_the_pass_offers_a_batch(small_graph, features, baseline,
                                                         strategy):
    """max_held batches alive and the pass waiting with the next one: deleting the loader
    ends the pass from there; the held batches stay valid until they die."""
    L = tiergnn.Loader(small_graph, "train", strategy=strategy, max_held=3, **OPTS)
    it = iter(L)
    held = [next(it) for _ in range(3)]
    time.sleep(0.1)  # the strategy prepares the next batches and offers one
    del it, L
    gc.collect()
    assert all(same_rows(b, features) for b in held)
    del held  # then every thread and file goes


def test_close_with_a_batch_alive(small_graph, features, baseline):
    L = tiergnn.Loader(small_graph, "train", strategy="gnndrive", **OPTS)
    it = iter(L)
    b = next(it)
    L.close()
    assert L.closed
    with pytest.raises(ValueError, match="closed"):
        next(it)
    with pytest.raises(ValueError, match="closed"):
        iter(L)
    assert same_rows(b, features)
    del b, it, L


def test_an_exception_in_the_loop(small_graph, baseline):
    with tiergnn.Loader(small_graph, "train", strategy="gnndrive", **OPTS) as L:
        with pytest.raises(ZeroDivisionError):
            for b in L:
                1 / 0
        del b
        assert sum(1 for _ in L) == len(L)  # the next epoch is whole


def test_break_and_set_epoch(small_graph):
    with tiergnn.Loader(small_graph, "train", **OPTS) as L:
        L.set_epoch(5)
        first = [np.array(b.n_id) for b in L]
        it = iter(L)  # epoch 6
        next(it)
        L.set_epoch(5)  # mid-epoch: the old iterator ends, epoch 5 again
        assert next(it, None) is None
        again = [np.array(b.n_id) for b in L]
        assert len(first) == len(again) and all(map(np.array_equal, first, again))
        st = L.stats()
        assert st["epoch"] == 5 and st["batches"] == len(L) and st["pass_done"]


def test_keyboard_interrupt_while_waiting_at_max_held(small_graph, features):
    idle = threading.Event()
    t = threading.Thread(target=idle.wait)  # a thread that could release, and does not
    t.start()

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        with tiergnn.Loader(small_graph, "train", max_held=1, **OPTS) as L:
            it = iter(L)
            b = next(it)
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            t0 = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                next(it)  # blocks: another thread exists
            assert time.monotonic() - t0 < 5
            del b
            assert same_rows(next(it), features)  # the epoch goes on
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        idle.set()
        t.join()


def test_keyboard_interrupts_while_taking_batches(small_graph, baseline):
    """Ctrl-C over and over while next() runs (SIGALRM every 0.5 ms, raising only inside it):
    each interrupt leaves the loader whole; the request it cut short is answered later."""
    armed = False

    def interrupt(signum, frame):
        if armed:
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        with tiergnn.Loader(small_graph, "train", strategy="gnndrive", **OPTS) as L:
            n_batches, interrupted = len(L), 0
            signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
            for epoch in range(4):
                it, ids = iter(L), []
                while True:
                    try:
                        armed = True
                        b = next(it, None)
                        armed = False
                    except KeyboardInterrupt:
                        armed = False
                        interrupted += 1
                        continue
                    if b is None:
                        break
                    ids.append(b.id)
                    del b
                # an interrupt after next returned may lose that batch; none comes twice
                assert ids == sorted(set(ids)) and len(ids) <= n_batches
            signal.setitimer(signal.ITIMER_REAL, 0)
            assert interrupted > 0
            assert sum(1 for _ in L) == n_batches
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_rss_stays_flat_over_20_epochs(small_graph):
    with tiergnn.Loader(small_graph, "train", strategy="gnndrive", **OPTS) as L:
        for epoch in range(20):
            for b in L:
                float(np.asarray(b.x).sum())
                b.adjs, b.blocks, b.y
            if epoch == 3:
                gc.collect()
                start = rss()
        gc.collect()
        grown = rss() - start
    assert grown < 2 << 20, f"RSS grew {grown} bytes over 16 epochs"


EXIT_SCRIPT = """
import sys, tiergnn
L = tiergnn.Loader(sys.argv[1], "train", [5, 5], 128, strategy=sys.argv[2], mem="512M",
                   numpy=True)
it = iter(L)
b = next(it)
if sys.argv[3] == "drop":
    del b
print("ok", flush=True)
"""


@pytest.mark.parametrize("case", ["hold", "drop"])
def test_interpreter_exit_mid_epoch(small_graph, case):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(small_graph), "gnndrive", case],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_signals_reach_only_the_interpreters_thread(small_graph):
    """The loader's threads block every signal, so a Ctrl-C wakes the thread that runs Python's
    handler (a time.sleep in the main thread, say)."""
    main = str(threading.main_thread().native_id)

    def blocked(tid):
        with open(f"/proc/self/task/{tid}/status") as f:
            mask = int(next(ln for ln in f if ln.startswith("SigBlk:")).split()[1], 16)
        return bool(mask & (1 << (signal.SIGINT - 1)))

    before = set(os.listdir("/proc/self/task"))
    with tiergnn.Loader(small_graph, "train", strategy="gnndrive", **OPTS) as L:
        L.set_epoch(1)
        b = next(iter(L))
        theirs = set(os.listdir("/proc/self/task")) - before
        assert theirs and all(blocked(t) for t in theirs)
        assert not blocked(main)
        del b


@pytest.fixture(scope="module")
def larger_graph(tmp_path_factory):
    """100000 nodes: diskgnn's first batch of an epoch waits for the epoch's packing."""
    from conftest import run_cli
    path = tmp_path_factory.mktemp("loader") / "g100k"
    run_cli("generate", path, "--nodes", 100000, "--avg-degree", 10, "--feat-dim", 8,
            "--classes", 4, "--threads", 2)
    return path


def test_keyboard_interrupt_while_the_batch_is_made(larger_graph, baseline):
    """Ctrl-C while next() waits for a batch: KeyboardInterrupt at once, and the batch asked
    for is not lost - the next call yields it."""
    armed = True

    def interrupt(signum, frame):
        if armed:
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        with tiergnn.Loader(larger_graph, "train", strategy="diskgnn", **OPTS) as L:
            it = iter(L)
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            t0 = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                next(it)
            armed = False
            assert time.monotonic() - t0 < 0.2  # packing the epoch takes longer
            b = next(it)
            assert (b.id, b.index) == (0, 0)
            del b
            assert 1 + sum(1 for _ in it) == len(L)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_forked_child_refuses_the_loader_and_exits(small_graph):
    with tiergnn.Loader(small_graph, "train", **OPTS) as L:
        b = next(iter(L))
        pid = os.fork()
        if pid == 0:  # the child: no thread of the loader here
            code = 1
            try:
                iter(L)
            except tiergnn.TierGNNError as e:
                code = 0 if "forked child" in str(e) else 2
            del b
            L.close()  # nothing to join here: it only lets go
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert b.batch_size > 0 and sum(1 for _ in L) == len(L)


def test_close_from_another_thread_while_next_waits(larger_graph, baseline):
    L = tiergnn.Loader(larger_graph, "train", strategy="diskgnn", **OPTS)
    it = iter(L)
    closer = threading.Timer(0.05, L.close)  # while diskgnn packs the epoch
    closer.start()
    with pytest.raises(ValueError, match="closed"):
        next(it)
    closer.join()
    del it, L


def test_set_epoch_from_another_thread_ends_the_wait(larger_graph):
    with tiergnn.Loader(larger_graph, "train", strategy="diskgnn", **OPTS) as L:
        it = iter(L)
        t = threading.Timer(0.05, L.set_epoch, args=(3,))
        t.start()
        assert next(it, None) is None  # the old epoch's iterator ends
        t.join()
        b = next(iter(L))
        assert b.epoch == 3 and b.index == 0
