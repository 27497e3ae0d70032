"""tiergnn.Dataset: a dataset directory (docs/FORMAT.md) opened through libtiergnn.

    ds = tiergnn.Dataset("data/cora")
    ds.num_nodes, ds.num_edges, ds.feat_dim, ds.num_classes
    x = ds.features            # read-only numpy.memmap of features.bin, [N, D], no copy
    y = ds.labels              # read-only numpy.memmap of labels.bin, int32 [N] (or [N, C])
    train = ds.split("train")  # int64 node ids
    ds.info()                  # what `tiergnn info` reports, as a dict

The library opens the directory (tg_dataset_open: meta.txt parsed, every file's size checked
against it), so a bad dataset raises TierGNNError with tiergnn's message naming the file and
what was expected; the arrays are then mapped with the dtypes and shapes the library read.
A Dataset is also a path (os.fspath), so it goes wherever a dataset directory does.
"""

import os
import re

import numpy as np

from . import _run

_FEAT_DTYPES = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2")}
_INDEX_DTYPES = {"u32": np.dtype("<u4"), "u64": np.dtype("<u8")}
_SPLIT_FILES = {"train": "train_idx.bin", "valid": "valid_idx.bin", "test": "test_idx.bin"}


def _map(path, dtype, shape):
    """A read-only memmap of a whole array file; an empty read-only array for an empty file
    (mmap cannot map 0 bytes)."""
    if int(np.prod(shape)) == 0:
        a = np.empty(shape, dtype)
        a.flags.writeable = False
        return a
    return np.memmap(path, dtype=dtype, mode="r", shape=shape)


class Dataset:
    """A tiergnn dataset directory: counts, arrays as memmaps, splits, `tiergnn info`."""

    def __init__(self, path):
        self.path = os.fsdecode(os.fspath(path))
        self._meta = _run.dataset_open(self.path)
        self._cache = {}

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return (f"tiergnn.Dataset({self.path!r}: {self.num_nodes} nodes, {self.num_edges} edges, "
                f"{self.feat_dim} features, {self.num_classes} classes)")

    # ------------------------------------------------------------ counts

    @property
    def num_nodes(self):
        return self._meta["num_nodes"]

    @property
    def num_edges(self):
        return self._meta["num_edges"]

    @property
    def feat_dim(self):
        return self._meta["feat_dim"]

    @property
    def num_classes(self):
        return self._meta["num_classes"]

    @property
    def multi_label(self):
        return self._meta["multi_label"]

    @property
    def feat_dtype(self):
        """numpy dtype of features.bin (float32 or float16)."""
        return _FEAT_DTYPES[self._meta["feat_dtype"]]

    @property
    def index_dtype(self):
        """numpy dtype of indices.bin and the split files (uint32 or uint64)."""
        return _INDEX_DTYPES[self._meta["index_dtype"]]

    @property
    def meta(self):
        """meta.txt as the library read it: counts, dtypes, source, files (size, crc32)."""
        return dict(self._meta, files={k: dict(v) for k, v in self._meta["files"].items()})

    # ------------------------------------------------------------ arrays

    def _file(self, name):
        return os.path.join(self.path, name)

    def _mapped(self, key, name, dtype, shape):
        if key not in self._cache:
            self._cache[key] = _map(self._file(name), dtype, shape)
        return self._cache[key]

    @property
    def features(self):
        """features.bin as a read-only numpy.memmap [num_nodes, feat_dim] (float32 or float16):
        the file's pages, not a copy."""
        return self._mapped("features", "features.bin", self.feat_dtype,
                            (self.num_nodes, self.feat_dim))

    @property
    def labels(self):
        """labels.bin as a read-only memmap: int32 [num_nodes] (-1 = unlabelled), or
        [num_nodes, num_classes] of 0/1 for a multi-label dataset."""
        shape = (self.num_nodes, self.num_classes) if self.multi_label else (self.num_nodes,)
        return self._mapped("labels", "labels.bin", np.dtype("<i4"), shape)

    @property
    def indptr(self):
        """indptr.bin as a read-only memmap, uint64 [num_nodes + 1] (CSC offsets)."""
        return self._mapped("indptr", "indptr.bin", np.dtype("<u8"), (self.num_nodes + 1,))

    @property
    def indices(self):
        """indices.bin as a read-only memmap [num_edges]: the in-neighbours of v are
        indices[indptr[v]:indptr[v + 1]]."""
        return self._mapped("indices", "indices.bin", self.index_dtype, (self.num_edges,))

    def split(self, name):
        """The node ids of split "train", "valid" or "test" as an int64 array."""
        if name not in _SPLIT_FILES:
            raise ValueError(f"split {name!r}: expected one of train, valid, test")
        count = self._meta["num_" + name]
        ids = _map(self._file(_SPLIT_FILES[name]), self.index_dtype, (count,))
        return np.array(ids, dtype=np.int64)

    # ------------------------------------------------------------ info

    def info(self):
        """What `tiergnn info` reports, as a dict: the counts and files of meta.txt, the split
        sizes, in-degree statistics and histogram, the label distribution, the derived/ files
        strategies built from the dataset ("derived": per directory, its entries with kind,
        params, bytes, state and why), and the report's text ("text", without the derived/
        listing)."""
        text = _run.dataset_info(self.path)
        m = self._meta
        n = m["num_nodes"]
        d = {k: m[k] for k in ("format_version", "source", "num_nodes", "num_edges", "feat_dim",
                               "feat_dtype", "index_dtype", "num_classes", "multi_label")}
        d["path"] = self.path
        d["splits"] = {"train": m["num_train"], "valid": m["num_valid"], "test": m["num_test"]}
        d["splits"]["none"] = max(0, n - sum(d["splits"].values()))
        d["files"] = {k: dict(v) for k, v in m["files"].items()}
        d["total_bytes"] = sum(v["size"] for v in m["files"].values())
        d["in_degree"] = _parse_degrees(text)
        d["histogram"] = _parse_histogram(text)
        d["labels"] = _parse_labels(text)
        d["derived"] = _run.dataset_derived(self.path)
        d["text"] = text
        return d


def _num(s):
    return float(s) if "." in s else int(s)


def _parse_degrees(text):
    out = {}
    m = re.search(r"^in-degree:\s+min (\d+), median (\d+), mean ([\d.]+), p99 (\d+), max (\d+)",
                  text, re.M)
    if m:
        out.update(zip(("min", "median", "mean", "p99", "max"), map(_num, m.groups())))
    m = re.search(r"(\d+) nodes \(([\d.]+)%\) have no in-neighbours", text)
    if m:
        out["no_in_neighbours"] = int(m.group(1))
    m = re.search(r"the top 1% of nodes \((\d+)\) hold ([\d.]+)% of the edges", text)
    if m:
        out["top1pct_nodes"] = int(m.group(1))
        out["top1pct_edge_share"] = float(m.group(2)) / 100
    return out


def _parse_histogram(text):
    """{"0": 6, "1-3": 322, ...}: nodes per in-degree bucket."""
    m = re.search(r"^histogram:\s+(.*)$", text, re.M)
    if not m:
        return {}
    pairs = (p.split(":") for p in m.group(1).split("|"))
    return {k.strip(): int(v) for k, v in pairs}


def _parse_labels(text):
    out = {}
    m = re.search(r"^labels:\s+(\d+) classes; per class min (\d+), max (\d+) nodes "
                  r"\((\d+) classes empty\); (\d+) unlabelled", text, re.M)
    if m:
        keys = ("classes", "per_class_min", "per_class_max", "empty_classes", "unlabelled")
        out.update(zip(keys, map(int, m.groups())))
    m = re.search(r"^labels:\s+multi-label, (\d+) classes, ([\d.]+) labels per node; per class "
                  r"min (\d+), max (\d+) nodes", text, re.M)
    if m:
        out.update(classes=int(m.group(1)), labels_per_node=float(m.group(2)),
                   per_class_min=int(m.group(3)), per_class_max=int(m.group(4)))
    m = re.search(r"^labels:.*\n\s+(0: \d+.*)$", text, re.M)
    if m:
        pairs = (p.split(":") for p in m.group(1).split("|"))
        out["counts"] = {int(k): int(v) for k, v in pairs}
    return out
