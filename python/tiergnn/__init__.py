"""tiergnn: out-of-core GNN training; its loader feeds PyTorch models (docs/PYTHON.md).

    import tiergnn
    with tiergnn.Loader("data/products", "train", fanouts=[10, 10], batch_size=1024,
                        strategy="diskgnn", mem="1200M") as loader:
        for epoch in range(10):
            loader.set_epoch(epoch)
            for batch in loader:
                out = model(batch.x, batch.adjs)          # x: float32 [num_input_nodes, dim]
                loss = F.cross_entropy(out, batch.y)

The C extension tiergnn._loader holds the loader; the trainer, the dataset and the importers
live in tiergnn.dataset and tiergnn.run.
"""

from typing import NamedTuple, Optional, Tuple

from ._errors import TierGNNError


class Adj(NamedTuple):
    """One layer of batch.adjs, as torch_geometric's NeighborSampler yields it.

    edge_index: int64 [2, E], row 0 the source (local index into the layer's sources), row 1
    the target (local index into its targets, which are the first size[1] sources); e_id is
    None (tiergnn's blocks carry no edge ids); size = (num_src, num_dst).
    """

    edge_index: object
    e_id: Optional[object]
    size: Tuple[int, int]

    def to(self, *args, **kwargs):
        """A copy with edge_index moved as torch.Tensor.to moves it (PyG's Adj.to)."""
        e_id = self.e_id.to(*args, **kwargs) if self.e_id is not None else None
        return Adj(self.edge_index.to(*args, **kwargs), e_id, self.size)


EdgeIndex = Adj  # the name of torch_geometric's NeighborSampler for the same tuple


class Block(NamedTuple):
    """One layer of batch.blocks (tiergnn/graph.h's tg_block_t), input layer first.

    A local CSR over the layer's destinations: the sources of destination i are
    indices[indptr[i]:indptr[i + 1]] (local source positions); destination i is source i.
    weights: float32 per edge for the LADIES sampler, else None.
    """

    indptr: object
    indices: object
    num_src: int
    num_dst: int
    weights: Optional[object]

    def to(self, *args, **kwargs):
        """A copy with the arrays moved as torch.Tensor.to moves them."""
        w = self.weights.to(*args, **kwargs) if self.weights is not None else None
        return Block(self.indptr.to(*args, **kwargs), self.indices.to(*args, **kwargs),
                     self.num_src, self.num_dst, w)


from ._loader import Batch, Loader  # noqa: E402  (the extension reads Adj and Block above)

try:
    from .dataset import Dataset  # noqa: F401
except ImportError as e:  # the module not in this tree; anything else it raises propagates
    if e.name != __name__ + ".dataset":
        raise
try:
    from .run import evaluate, from_numpy, generate, import_ogb, infer, train  # noqa: F401
except ImportError as e:
    if e.name != __name__ + ".run":
        raise

__all__ = ["TierGNNError", "Loader", "Batch", "Adj", "EdgeIndex", "Block", "Dataset", "train", "evaluate",
           "infer", "generate", "import_ogb", "from_numpy"]
__all__ = [n for n in __all__ if n in globals()]
__version__ = "0.1.0"
