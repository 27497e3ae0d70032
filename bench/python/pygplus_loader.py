"""pygplus_loader.py - a mini-batch loader written the PyG+ way, the baseline of the Ginex and
GNNDrive papers: the features stay on disk as a numpy.memmap (the page cache holds what the
memory limit leaves), the graph's CSC (indptr and indices of the dataset) is read into RAM,
and each batch is sampled node-wise and its rows gathered by fancy-indexing the memmap.

Sampling has tiergnn's node-wise semantics (src/graph/sampler_node.c): from the seeds outwards,
for every destination of a layer up to `fanout` of its in-neighbours uniformly without
replacement (all of them when it has no more, -1 = all), the new sources appended after the
destinations in the order they are first met; the RNG differs, so the batches are not
tiergnn's own. A batch has the attributes of a tiergnn.Loader batch: x (torch.Tensor when torch
imports), n_id, y, batch_size, blocks (indptr, indices, num_src, num_dst per layer, input layer
first) and adjs ((edge_index, e_id, size) per layer as PyG's NeighborSampler yields them).

    from pygplus_loader import PygPlusLoader
    for batch in PygPlusLoader("data/g4m", "train", [10, 10, 10], 1000, seed=0):
        ...

With `prefetch` > 0 one thread samples and gathers that many batches ahead (a DataLoader
worker's role; numpy's gathers run while the trainer computes).
"""
import mmap
import os
import queue
import threading

import numpy as np

try:
    import torch
except ImportError:  # numpy arrays then
    torch = None

_DTYPES = {"u32": np.uint32, "u64": np.uint64, "i32": np.int32, "f32": np.float32,
           "f16": np.float16}


def read_meta(path):
    meta = {}
    with open(os.path.join(path, "meta.txt")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            k, v = (s.strip() for s in line.split("=", 1))
            if k != "file":
                meta[k] = v
    return meta


class Block:
    """One layer's local CSR over destinations; sources are positions in the layer's input."""

    __slots__ = ("indptr", "indices", "num_src", "num_dst", "weights")

    def __init__(self, indptr, indices, num_src, num_dst):
        self.indptr, self.indices = indptr, indices
        self.num_src, self.num_dst, self.weights = num_src, num_dst, None


class Batch:
    __slots__ = ("x", "n_id", "y", "batch_size", "blocks", "_adjs")

    @property
    def adjs(self):
        """Per layer, input layer first: (edge_index [2, E] (source, destination), e_id None,
        (num_src, num_dst)), as PyG's NeighborSampler."""
        if self._adjs is None:
            out = []
            for b in self.blocks:
                deg = np.diff(b.indptr)
                dst = np.repeat(np.arange(b.num_dst, dtype=np.int64), deg)
                ei = np.stack([b.indices.astype(np.int64), dst])
                out.append((torch.from_numpy(ei) if torch else ei, None,
                            (b.num_src, b.num_dst)))
            self._adjs = out
        return self._adjs


class PygPlusLoader:
    def __init__(self, path, seeds, fanouts, batch_size, shuffle=True, seed=0,
                 drop_last=False, prefetch=1, max_batches=0, advice="random"):
        meta = read_meta(path)
        self.num_nodes = n = int(meta["num_nodes"])
        self.feat_dim = d = int(meta["feat_dim"])
        self.num_classes = int(meta["num_classes"])
        if int(meta.get("multi_label", "0")):
            raise ValueError("pygplus_loader: multi-label datasets are not supported")
        idx = _DTYPES[meta["index_dtype"]]
        # the CSC in RAM, as PyG+ holds its adjacency
        self.indptr = np.fromfile(os.path.join(path, "indptr.bin"), dtype=np.uint64).astype(
            np.int64)
        self.indices = np.fromfile(os.path.join(path, "indices.bin"), dtype=idx)
        # the features on disk, through the page cache
        self.x = np.memmap(os.path.join(path, "features.bin"), dtype=_DTYPES[meta["feat_dtype"]],
                           mode="r", shape=(n, d))
        # madvise(MADV_RANDOM), as a user tunes a memmap read at random: without it every page
        # fault reads the device's whole read-ahead window (read_ahead_kb: 8 MiB on the shared
        # bench's machine, where a batch then read more than 200 GB; bench/README.md)
        if advice == "random":
            self.x._mmap.madvise(mmap.MADV_RANDOM)
        elif advice != "normal":
            raise ValueError("pygplus_loader: advice %r, expected random or normal" % advice)
        self.labels = np.fromfile(os.path.join(path, "labels.bin"), dtype=np.int32)
        if isinstance(seeds, str):
            f = {"train": "train_idx.bin", "valid": "valid_idx.bin", "test": "test_idx.bin"}[seeds]
            seeds = np.fromfile(os.path.join(path, f), dtype=idx)
        self.seeds = np.asarray(seeds, dtype=np.int64)
        self.fanouts = [int(f) for f in fanouts]
        self.batch_size = int(batch_size) if batch_size else len(self.seeds)
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.prefetch, self.max_batches = prefetch, max_batches
        self.epoch = 0
        self._map = np.full(n, -1, dtype=np.int64)  # global id -> local position, per batch

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        n = len(self.seeds) // self.batch_size
        n = n if self.drop_last or len(self.seeds) % self.batch_size == 0 else n + 1
        return min(n, self.max_batches) if self.max_batches else n

    # ------------------------------------------------------------ sampling

    def _choose(self, rng, beg, deg, f):
        """Edge positions: for each destination, min(f, deg) of [beg, beg + deg) without
        replacement (all when f < 0 or deg <= f), grouped by destination."""
        k = deg if f < 0 else np.minimum(deg, f)
        out = np.empty(int(k.sum()), dtype=np.int64)
        ptr = np.zeros(len(deg) + 1, dtype=np.int64)
        np.cumsum(k, out=ptr[1:])
        full = k == deg
        if full.any():  # every neighbour: the whole range
            rows = np.nonzero(full)[0]
            kk = k[rows]
            rep = np.repeat(rows, kk)
            off = np.arange(len(rep)) - np.repeat(np.cumsum(kk) - kk, kk)
            out[ptr[rep] + off] = beg[rep] + off
        # f of deg distinct offsets where deg > f: near f, the f smallest of deg random keys
        # (one sort over those destinations' edges); for large degrees (hubs), f draws per
        # destination, drawn again where two collide (a vectorised Floyd's stand-in: no O(deg)
        # work per hub)
        small = np.nonzero(~full & (deg <= 8 * max(f, 1)))[0]
        if len(small):
            dg = deg[small]
            seg = np.repeat(np.arange(len(small)), dg)
            off = np.arange(len(seg)) - np.repeat(np.cumsum(dg) - dg, dg)
            order = np.argsort(seg + rng.random(len(seg)))
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order)) - np.repeat(np.cumsum(dg) - dg, dg)
            keep = rank < f
            sel_seg, sel_off = seg[keep], off[keep]  # in (destination, offset) order
            pos = ptr[small][sel_seg] + (np.arange(len(sel_seg)) -
                                         np.repeat(np.arange(len(small)) * f, f))
            out[pos] = beg[small][sel_seg] + sel_off
        big = np.nonzero(~full & (deg > 8 * max(f, 1)))[0]
        while len(big):
            d = np.sort(rng.integers(0, deg[big, None], size=(len(big), f)), axis=1)
            ok = ~(np.diff(d, axis=1) == 0).any(axis=1)
            rows = big[ok]
            out[ptr[rows, None] + np.arange(f)] = beg[rows, None] + d[ok]
            big = big[~ok]
        return ptr, out

    def _sample(self, seeds, rng):
        nodes = np.asarray(seeds, dtype=np.int64)
        m = self._map
        m[nodes] = np.arange(len(nodes))
        blocks = []
        for f in reversed(self.fanouts):  # from the seeds outwards
            num_dst = len(nodes)
            beg = self.indptr[nodes]
            deg = self.indptr[nodes + 1] - beg
            ptr, pos = self._choose(rng, beg, deg, f)
            nbr = self.indices[pos].astype(np.int64)
            loc = m[nbr]
            new = loc < 0
            if new.any():
                u, first = np.unique(nbr[new], return_index=True)
                u = u[np.argsort(first, kind="stable")]  # in the order first met
                m[u] = np.arange(len(nodes), len(nodes) + len(u))
                nodes = np.concatenate([nodes, u])
                loc = m[nbr]
            blocks.append(Block(ptr, loc.astype(np.uint32), len(nodes), num_dst))
        m[nodes] = -1
        blocks.reverse()
        return nodes, blocks

    def _make(self, b, order, rng):
        s = order[b * self.batch_size:(b + 1) * self.batch_size]
        nodes, blocks = self._sample(s, rng)
        x = self.x[nodes]  # fancy indexing of the memmap: page faults, rows in batch order
        bt = Batch()
        bt.x = torch.from_numpy(x) if torch else x
        bt.n_id = nodes
        y = self.labels[s].astype(np.int64)
        bt.y = torch.from_numpy(y) if torch else y
        bt.batch_size = len(s)
        bt.blocks, bt._adjs = blocks, None
        return bt

    def _batches(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(self.seeds) if self.shuffle else self.seeds
        for b in range(len(self)):
            yield self._make(b, order, rng)

    def __iter__(self):
        if self.prefetch <= 0:
            yield from self._batches()
            self.epoch += 1
            return
        q = queue.Queue(self.prefetch)
        stop = threading.Event()

        def work():
            try:
                for bt in self._batches():
                    if stop.is_set():
                        return
                    q.put(bt)
                q.put(None)
            except BaseException as e:  # handed to the consumer
                q.put(e)

        t = threading.Thread(target=work, daemon=True)
        t.start()
        try:
            while True:
                bt = q.get()
                if bt is None:
                    break
                if isinstance(bt, BaseException):
                    raise bt
                yield bt
        finally:
            stop.set()
            while t.is_alive():  # unblock a put waiting on a full queue
                try:
                    q.get_nowait()
                except queue.Empty:
                    pass
                t.join(0.05)
        self.epoch += 1
