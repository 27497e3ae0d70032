"""tiergnn.Loader with PyTorch: torch tensors over the loader's memory (no copy), PyG's adjs,
a training step of a plain-torch SAGE over them. Skipped where torch is not installed."""

import gc

import numpy as np
import pytest

import tiergnn

torch = pytest.importorskip("torch")

OPTS = dict(fanouts=[5, 5], batch_size=128, seed=1, mem="512M")


def test_tensors_over_the_loaders_memory(small_graph):
    with tiergnn.Loader(small_graph, "train", **OPTS) as L:
        b = next(iter(L))
        x = b.x
        assert isinstance(x, torch.Tensor) and x.dtype == torch.float32
        assert x.data_ptr() == b.x.data_ptr() == b._x_address  # no copy, every access
        assert x.shape == (b.num_nodes, 16)
        assert b.n_id.dtype == torch.int64 and b.y.dtype == torch.int64
        assert b.y.shape == (b.batch_size,)
        feats = np.fromfile(small_graph / "features.bin", np.float32).reshape(3000, -1)
        np.testing.assert_array_equal(x.numpy(), feats[b.n_id.numpy()])
        del b  # the tensor keeps the batch alive
        gc.collect()
        assert L.live_batches == 1
        del x
        assert L.live_batches == 0


def test_adjs_as_pyg_uses_them(small_graph):
    with tiergnn.Loader(small_graph, "train", **OPTS) as L:
        b = next(iter(L))
        adjs = [adj.to("cpu") for adj in b.adjs]  # PyG's idiom
        assert all(isinstance(a, tiergnn.Adj) for a in adjs)
        ei, e_id, size = adjs[0]
        assert ei.dtype == torch.int64 and ei.shape[0] == 2 and e_id is None
        assert size == (b.num_nodes, adjs[1].size[0])
        blocks = [k.to("cpu") for k in b.blocks]
        assert blocks[0].indptr.dtype == torch.int64 and blocks[0].weights is None


class Sage(torch.nn.Module):
    """GraphSAGE with mean aggregation by index_add_, as NeighborSampler's examples run it."""

    def __init__(self, dims):
        super().__init__()
        self.lins = torch.nn.ModuleList(torch.nn.Linear(2 * a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x, adjs):
        for i, ((src, dst), _, (_, nd)) in enumerate((a.edge_index, a.e_id, a.size)
                                                     for a in adjs):
            agg = torch.zeros(nd, x.shape[1]).index_add_(0, dst, x[src])
            deg = torch.zeros(nd).index_add_(0, dst, torch.ones(len(dst))).clamp(min=1)
            x = self.lins[i](torch.cat([x[:nd], agg / deg[:, None]], 1))
            if i < len(adjs) - 1:
                x = x.relu()
        return x


def test_a_sage_step_trains(small_graph):
    torch.manual_seed(0)
    model = Sage([16, 32, 4])
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    with tiergnn.Loader(small_graph, "train", strategy="gnndrive", **OPTS) as L:
        for epoch in range(3):
            total = 0.0
            for b in L:
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(b.x, b.adjs), b.y)
                loss.backward()
                opt.step()
                total += float(loss)
            losses.append(total / len(L))
    assert losses[-1] < losses[0]
