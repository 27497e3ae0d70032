"""tiergnn.Loader against the C loader (python/tests/loader_dump.c) and the dataset's files.

Every strategy of `tiergnn strategies` yields through Python the batches the C loader yields
with the same options (ids, blocks, labels), x equals the feature file's rows, and x is the
loader's own memory (no copy); adjs are PyG's NeighborSampler's, checked against a
neighbourhood built by hand from the CSC files.
"""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tiergnn
from conftest import LOADER_DUMP, strategy_table

try:
    STRATEGIES = strategy_table()
except BaseException:  # no CLI: the tests that need it skip through their fixtures
    STRATEGIES = {}

# mem: the budget counts the whole process, torch included once a test imported it
OPTS = dict(fanouts=[5, 5], batch_size=256, seed=3, mem="512M", max_held=2, numpy=True)


class Files:
    """The dataset's arrays as docs/FORMAT.md lays them out."""

    def __init__(self, path):
        meta = dict(ln.split(" = ", 1) for ln in (Path(path) / "meta.txt").read_text().splitlines()
                    if " = " in ln and not ln.startswith(("#", "file")))
        self.n, self.d = int(meta["num_nodes"]), int(meta["feat_dim"])
        self.indptr = np.fromfile(Path(path) / "indptr.bin", dtype=np.uint64).astype(np.int64)
        idx = np.uint32 if meta["index_dtype"] == "u32" else np.uint64
        self.indices = np.fromfile(Path(path) / "indices.bin", dtype=idx).astype(np.int64)
        self.features = np.fromfile(Path(path) / "features.bin", np.float32).reshape(self.n, -1)
        self.labels = np.fromfile(Path(path) / "labels.bin", dtype=np.int32)
        self.train = np.fromfile(Path(path) / "train_idx.bin", dtype=idx).astype(np.int64)

    def in_neighbours(self, v):
        return self.indices[self.indptr[v]:self.indptr[v + 1]]


@pytest.fixture(scope="module")
def files(small_graph):
    return Files(small_graph)


def c_batches(ds, strategy, tmp_path, epochs=2, rank=0, world=1, sampler="node", **opts):
    """The batches of loader_dump.c: a list of dicts as the Python side builds them."""
    if not os.access(LOADER_DUMP, os.X_OK):
        pytest.skip(f"no {LOADER_DUMP} (set TG_LOADER_DUMP)")
    out = tmp_path / f"dump-{strategy}-{rank}"
    fan = ",".join(map(str, opts.get("fanouts", OPTS["fanouts"])))
    args = [LOADER_DUMP, ds, out, strategy, fan, OPTS["batch_size"], OPTS["seed"], epochs,
            f"{rank}/{world}", sampler, OPTS["mem"]]
    r = subprocess.run(list(map(str, args)), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return parse_dump(np.fromfile(out, dtype=np.uint64))


def parse_dump(w):
    batches, p = [], 0

    def take(n):
        nonlocal p
        p += n
        return w[p - n:p]

    while p < len(w):
        epoch, bid, index, layers, nn, ns, lw = (int(v) for v in take(7))
        b = dict(epoch=epoch, id=bid, index=index, n_id=take(nn).astype(np.int64), blocks=[])
        for _ in range(layers):
            nd, nsrc, ne, hw = (int(v) for v in take(4))
            indptr, ind = take(nd + 1).astype(np.int64), take(ne).astype(np.int64)
            wts = take(ne).astype(np.uint32).view(np.float32) if hw else None
            b["blocks"].append((indptr, ind, nsrc, nd, wts))
        b["y"] = take(ns * lw).astype(np.int64)
        batches.append(b)
    return batches


def py_batches(loader, epochs=2, check=None):
    out = []
    for e in range(epochs):
        loader.set_epoch(e)
        for b in loader:
            if check:
                check(b)
            out.append(dict(epoch=b.epoch, id=b.id, index=b.index, n_id=np.array(b.n_id),
                            y=np.array(b.y).ravel(),
                            blocks=[(np.array(k.indptr), np.array(k.indices), k.num_src,
                                     k.num_dst, None if k.weights is None else
                                     np.array(k.weights)) for k in b.blocks]))
    return out


def assert_same(py, c):
    assert len(py) == len(c) > 0
    for p, q in zip(py, c):
        assert (p["epoch"], p["id"], p["index"]) == (q["epoch"], q["id"], q["index"])
        np.testing.assert_array_equal(p["n_id"], q["n_id"])
        np.testing.assert_array_equal(p["y"], q["y"])
        assert len(p["blocks"]) == len(q["blocks"])
        for a, b in zip(p["blocks"], q["blocks"]):
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
            assert a[2:4] == b[2:4]
            assert (a[4] is None) == (b[4] is None)
            if a[4] is not None:
                np.testing.assert_array_equal(a[4], b[4])


def check_x(files):
    def check(b):
        np.testing.assert_array_equal(np.asarray(b.x), files.features[np.asarray(b.n_id)])
        np.testing.assert_array_equal(np.asarray(b.y), files.labels[np.asarray(b.n_id)[:b.batch_size]])
    return check


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_yields_the_c_loaders_batches(small_graph, files, tmp_path, strategy):
    with tiergnn.Loader(small_graph, "train", strategy=strategy, **OPTS) as loader:
        assert loader.strategy == strategy
        py = py_batches(loader, check=check_x(files))
    assert_same(py, c_batches(small_graph, strategy, tmp_path))
    if STRATEGIES[strategy]:  # exact: memory's batches, byte for byte
        assert_same(py, c_batches(small_graph, "memory", tmp_path))


def test_ladies_blocks_carry_weights(small_graph, files, tmp_path):
    opts = dict(OPTS, fanouts=[200, 100])
    with tiergnn.Loader(small_graph, "train", strategy="memory", sampler="ladies", **opts) as L:
        py = py_batches(L, check=check_x(files))
    assert all(k[4] is not None and k[4].dtype == np.float32 for b in py for k in b["blocks"])
    assert_same(py, c_batches(small_graph, "memory", tmp_path, sampler="ladies", **opts))


def hand_made_adjs(files, seeds, layers):
    """PyG's adjs for every neighbour (fanout -1), by hand from the CSC: node order seeds
    first, then each newly reached node in order of first appearance (tiergnn/graph.h)."""
    nodes, pos, adjs = list(seeds), {v: i for i, v in enumerate(seeds)}, []
    for _ in range(layers):
        num_dst, src, dst = len(nodes), [], []
        for j in range(num_dst):
            for u in files.in_neighbours(nodes[j]):
                if u not in pos:
                    pos[u] = len(nodes)
                    nodes.append(u)
                src.append(pos[u])
                dst.append(j)
        adjs.append((np.array([src, dst], dtype=np.int64), (len(nodes), num_dst)))
    return np.array(nodes), adjs[::-1]  # outermost hop (the input layer) first


def test_adjs_are_neighbor_samplers(small_graph, files):
    seeds = files.train[:12]
    with tiergnn.Loader(small_graph, seeds, [-1, -1], 4, shuffle=False, numpy=True) as L:
        got = list(L)
        assert len(got) == 3
        for k, b in enumerate(got):
            n_id, adjs = hand_made_adjs(files, seeds[4 * k:4 * k + 4], 2)
            np.testing.assert_array_equal(b.n_id, n_id)
            assert b.batch_size == 4 and len(b.adjs) == 2
            for (ei, e_id, size), (want, want_size) in zip(b.adjs, adjs):
                assert ei.dtype == np.int64 and e_id is None and size == want_size
                np.testing.assert_array_equal(ei, want)
            # blocks: the same edges as a CSR over destinations, input layer first
            for blk, (ei, _, size) in zip(b.blocks, b.adjs):
                assert (blk.num_src, blk.num_dst) == size
                np.testing.assert_array_equal(np.repeat(np.arange(blk.num_dst),
                                                        np.diff(blk.indptr)), ei[1])
                np.testing.assert_array_equal(blk.indices, ei[0])


def test_sampled_adjs_are_edges_of_the_graph(small_graph, files):
    with tiergnn.Loader(small_graph, "train", **OPTS) as L:
        b = next(iter(L))
        n_id = np.asarray(b.n_id)
        sizes = [adj.size for adj in b.adjs]
        assert sizes[0][0] == b.num_nodes and sizes[-1][1] == b.batch_size
        assert all(sizes[i][1] == sizes[i + 1][0] for i in range(len(sizes) - 1))
        for ei, _, (ns, nd) in b.adjs:
            assert ei[0].max() < ns and ei[1].max() < nd
            for s, t in ei.T[::7]:
                assert n_id[s] in files.in_neighbours(n_id[t])


def test_num_neighbors_is_pygs_order(small_graph):
    kw = dict(OPTS)
    del kw["fanouts"]
    with tiergnn.Loader(small_graph, "train", fanouts=[7, 3], **kw) as a, \
            tiergnn.Loader(small_graph, "train", num_neighbors=[3, 7], **kw) as b:
        assert_same(py_batches(a, 1), py_batches(b, 1))
    with pytest.raises(TypeError, match="num_neighbors"):
        tiergnn.Loader(small_graph, "train", [5], num_neighbors=[5])


def test_rank_shares_partition_the_epoch(small_graph):
    with tiergnn.Loader(small_graph, "train", **OPTS) as L:
        whole = py_batches(L, 1)
    m = len(whole) // 3
    shares = []
    for r in range(3):
        with tiergnn.Loader(small_graph, "train", rank=r, world_size=3, **OPTS) as L:
            assert len(L) == m
            shares += py_batches(L, 1)
    for s in shares:
        s["index"] = s["id"]  # index counts within a share; ids are the epoch's
    assert_same(shares, [dict(w, index=w["id"]) for w in whole[:3 * m]])


def test_caller_seeds_in_order(small_graph, files):
    seeds = files.train[::-1][:100].copy()
    with tiergnn.Loader(small_graph, seeds, [3], 32, shuffle=False, **{"numpy": True}) as L:
        got = np.concatenate([np.array(b.n_id[:b.batch_size]) for b in L])
    np.testing.assert_array_equal(got, seeds)


@pytest.mark.parametrize("strategy", ["memory", "gnndrive"])
def test_cora_batches_are_the_c_loaders(cora, tmp_path, strategy):
    files = Files(cora)
    with tiergnn.Loader(cora, "train", strategy=strategy, **OPTS) as L:
        py = py_batches(L, check=check_x(files))
    assert_same(py, c_batches(cora, strategy, tmp_path))
