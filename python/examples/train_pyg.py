#!/usr/bin/env python3
"""train_pyg.py - train_sage.py's GraphSAGE written with PyG (torch_geometric.nn.SAGEConv), fed
by tiergnn's loader exactly as PyG's NeighborSampler feeds it, or by PyG's own NeighborLoader
over memmapped features (--loader neighborloader, the baseline of bench/gpu/).

    PYTHONPATH=build/python python3 python/examples/train_pyg.py data/g4m --device cuda \\
        --strategy diskgnn --mem 1200M --layers 3 --hidden 256 --fanouts 10,10,10 \\
        --batch-size 1000 --epochs 2 --eval-fanouts train --eval-max-nodes 5000

PyG is not a Debian package: without torch_geometric this script says so and exits with 77
(the tests' "skipped"). Flags are train_sage.py's, plus --loader and --workers.

With tiergnn's loader, batch.adjs holds per layer (edge_index, e_id, size), input layer first,
edge_index[0] the sources (local positions in the layer's input) and edge_index[1] the targets
(the first size[1] of them), as NeighborSampler yields them, so the model is PyG's NeighborSampler
example unchanged:

    for i, (edge_index, _, size) in enumerate(adjs):
        x_target = x[:size[1]]
        x = self.convs[i]((x, x_target), edge_index)

SAGEConv (aggr mean, root weight, one bias) computes tiergnn's SAGE layer; the weights are reset
to Glorot-uniform as tiergnn's, and dropout is on every layer's input as train_sage.py's.

--loader neighborloader: torch_geometric.loader.NeighborLoader over a FeatureStore whose x is
the dataset's features.bin as a numpy.memmap (rows gathered by fancy indexing, through the page
cache) and a GraphStore holding the dataset's CSC in RAM (no edge_index is built), with
num_neighbors = the fanouts reversed (PyG lists the seeds' hop first). --mem is then not a
budget (PyG has none): run it under the same cgroup (membudget) as tiergnn's runs. Evaluation
then uses tiergnn's loader (strategy mmap) with the trained model.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_sage as ts  # noqa: E402  (flags, the loop, evaluation)

torch = ts.torch
F = ts.F
np = ts.np

try:
    import torch_geometric  # noqa: F401
    from torch_geometric.nn import SAGEConv
except ImportError:
    print("train_pyg.py: torch_geometric (PyG) is not installed; it is not packaged by Debian "
          "(pip install torch_geometric where a package index is reachable). "
          "python/examples/train_sage.py trains the same model in plain PyTorch.",
          file=sys.stderr)
    sys.exit(77)


class PygSAGE(torch.nn.Module):
    def __init__(self, fin, hidden, fout, layers, dropout=0.5, input_dropout=None):
        super().__init__()
        dims = [fin] + [hidden] * (layers - 1) + [fout]
        self.convs = torch.nn.ModuleList(SAGEConv(a, b, aggr="mean")
                                         for a, b in zip(dims, dims[1:]))
        for conv in self.convs:
            for lin in (conv.lin_l, conv.lin_r):  # neighbours' and root weights
                torch.nn.init.xavier_uniform_(lin.weight)
                if lin.bias is not None:
                    torch.nn.init.zeros_(lin.bias)
        self.dropout = dropout
        self.input_dropout = dropout if input_dropout is None else input_dropout

    def drop(self, x, i):
        return F.dropout(x, self.input_dropout if i == 0 else self.dropout, self.training)

    def forward(self, x, adjs):
        """NeighborSampler's convention: adjs per layer, outermost first."""
        for i, (edge_index, _, size) in enumerate(adjs):
            x = self.drop(x, i)
            x_target = x[:size[1]]
            x = self.convs[i]((x, x_target), edge_index)
            if i != len(self.convs) - 1:
                x = F.relu(x)
        return x

    def forward_subgraph(self, x, edge_index, batch_size, nodes_per_hop=None,
                         edges_per_hop=None):
        """NeighborLoader's convention: one subgraph for all layers, the seeds first; each
        layer trimmed to the hops it still needs when the loader says how many (PyG >= 2.3)."""
        for i, conv in enumerate(self.convs):
            if nodes_per_hop is not None:
                from torch_geometric.utils import trim_to_layer

                x, edge_index, _ = trim_to_layer(i, nodes_per_hop, edges_per_hop, x, edge_index)
            x = conv(self.drop(x, i), edge_index)
            if i != len(self.convs) - 1:
                x = F.relu(x)
        return x[:batch_size]


def tiergnn_inputs(normalize):
    """prepare(batch, device) for forward(x, adjs): batch.adjs as PyG's NeighborSampler's."""

    def prepare(batch, device):
        x = batch.x.to(device, non_blocking=True)
        if normalize:
            x = ts.normalize_rows(x)
        adjs = [(torch.as_tensor(ei).to(device), None, tuple(size))
                for ei, _, size in batch.adjs]
        y = torch.as_tensor(batch.y).reshape(-1).to(device=device, dtype=torch.int64)
        return (x, adjs), y

    return prepare


# ---------------------------------------------------------------- PyG's NeighborLoader


def neighbor_loader(a, shuffle=True):
    """NeighborLoader over (memmapped features, the CSC in RAM) of a tiergnn dataset."""
    from torch_geometric.data import FeatureStore, GraphStore, TensorAttr
    from torch_geometric.loader import NeighborLoader

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "bench", "python"))
    from pygplus_loader import read_meta

    meta = read_meta(a.dataset)
    n, d = int(meta["num_nodes"]), int(meta["feat_dim"])
    idx = np.uint32 if meta["index_dtype"] == "u32" else np.uint64
    path = lambda f: os.path.join(a.dataset, f)  # noqa: E731

    class MemmapFeatureStore(FeatureStore):
        def __init__(self, arrays):
            super().__init__()
            self.arrays = arrays

        def _put_tensor(self, tensor, attr):
            self.arrays[attr.attr_name] = tensor
            return True

        def _get_tensor(self, attr):
            arr = self.arrays[attr.attr_name]
            index = attr.index
            if isinstance(index, torch.Tensor):
                rows = arr[index.cpu().numpy()]  # fancy indexing: a copy of those rows
            elif isinstance(index, (slice, np.ndarray)):
                rows = arr[index]
            else:
                rows = arr[:]
            return torch.from_numpy(np.ascontiguousarray(rows))

        def _remove_tensor(self, attr):
            return self.arrays.pop(attr.attr_name, None) is not None

        def _get_tensor_size(self, attr):
            return tuple(self.arrays[attr.attr_name].shape)

        def get_all_tensor_attrs(self):
            return [TensorAttr(group_name=None, attr_name=k) for k in self.arrays]

    class CSCGraphStore(GraphStore):
        def __init__(self):
            super().__init__()
            self.store = {}

        def _put_edge_index(self, edge_index, edge_attr):
            self.store[edge_attr.layout] = (edge_index, edge_attr)
            return True

        def _get_edge_index(self, edge_attr):
            got = self.store.get(edge_attr.layout)
            return got[0] if got else None

        def _remove_edge_index(self, edge_attr):
            return self.store.pop(edge_attr.layout, None) is not None

        def get_all_edge_attrs(self):
            return [attr for _, attr in self.store.values()]

    fs = MemmapFeatureStore({
        "x": np.memmap(path("features.bin"), dtype=np.float32, mode="r", shape=(n, d)),
        "y": np.fromfile(path("labels.bin"), dtype=np.int32).astype(np.int64),
    })
    gs = CSCGraphStore()
    indptr = torch.from_numpy(np.fromfile(path("indptr.bin"), dtype=np.uint64).astype(np.int64))
    row = torch.from_numpy(np.fromfile(path("indices.bin"), dtype=idx).astype(np.int64))
    # CSC: (row, colptr), sorted by destination by definition
    gs.put_edge_index((row, indptr), edge_type=None, layout="csc", size=(n, n))
    seeds = torch.from_numpy(np.fromfile(path("train_idx.bin"), dtype=idx).astype(np.int64))
    return NeighborLoader((fs, gs), num_neighbors=list(reversed(a.fanouts)), input_nodes=seeds,
                          batch_size=a.batch_size, shuffle=shuffle, num_workers=a.workers)


def neighborloader_inputs(normalize):
    def prepare(batch, device):
        x = batch.x.to(device, non_blocking=True)
        if normalize:
            x = ts.normalize_rows(x)
        hop_n = getattr(batch, "num_sampled_nodes", None)
        hop_e = getattr(batch, "num_sampled_edges", None)
        y = batch.y[:batch.batch_size].to(device=device, dtype=torch.int64)
        return (x, batch.edge_index.to(device), batch.batch_size, hop_n, hop_e), y

    return prepare


class SubgraphModel(torch.nn.Module):
    """PygSAGE called the NeighborLoader way (a wrapper, so that train_epoch calls model(*in))."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, edge_index, batch_size, hop_n, hop_e):
        return self.inner.forward_subgraph(x, edge_index, batch_size, hop_n, hop_e)


def fit_neighborloader(a, tiergnn, model, device):
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    t = time.perf_counter()
    loader = neighbor_loader(a)
    open_s = time.perf_counter() - t
    wrapped = SubgraphModel(model)
    prep = neighborloader_inputs(a.normalize_features)
    for epoch in range(a.epochs):
        timer = ts.Timer()
        rec = {"epoch": epoch + 1, "loader": "neighborloader"}
        if epoch == 0:
            rec["open_s"] = open_s
        rec.update(ts.train_epoch(wrapped, opt, loader, a, device, timer, prep))
        rec["time_s"] = timer.elapsed()
        rec["wait_s"] = timer.wait
        if "gpu_busy_s" in rec:
            rec["gpu_busy_share"] = rec["gpu_busy_s"] / rec["time_s"]
        if epoch + 1 == a.epochs and a.eval_every >= 0:
            del loader
            a.strategy = "mmap"
            prep_t = tiergnn_inputs(a.normalize_features)
            rec["valid_acc"] = ts.evaluate(tiergnn, model, a, device,
                                           ts.eval_seeds(tiergnn, a, "valid"), prep_t)
            rec["test_acc"] = ts.evaluate(tiergnn, model, a, device,
                                          ts.eval_seeds(tiergnn, a, "test"), prep_t)
        ts.report(a, rec)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    which, workers = "tiergnn", 0
    for flag in ("--loader", "--workers"):
        if flag in argv:
            i = argv.index(flag)
            v = argv[i + 1]
            del argv[i:i + 2]
            if flag == "--loader":
                which = v
            else:
                workers = int(v)
    if which not in ("tiergnn", "neighborloader"):
        sys.exit("train_pyg.py: --loader is tiergnn or neighborloader, not %s" % which)
    a = ts.parse_args(argv)
    a.workers = workers
    ts.set_malloc_threshold(a.malloc_threshold)
    tiergnn = ts.import_tiergnn()
    device = torch.device(a.device)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    ds = tiergnn.Dataset(a.dataset)
    model = PygSAGE(ds.feat_dim, a.hidden, ds.num_classes, a.layers, a.dropout,
                    a.input_dropout).to(device)
    if which == "neighborloader":
        return fit_neighborloader(a, tiergnn, model, device)
    return ts.fit(a, tiergnn, model, device, tiergnn_inputs(a.normalize_features))


if __name__ == "__main__":
    main()
