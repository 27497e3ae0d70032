"""python/examples/train_sage.py's model and memory options, without a dataset: the fused SAGE
layer (SAGEConv, its ReLU and dropout folded into a bool mask) against the plain formulation
(F.relu, a dropout by torch.rand, two Linear layers and a mean by index_add_), its gradients by
gradcheck, what a training step saves for backward, and --malloc-threshold.
"""

import argparse
import ctypes.util
import importlib
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

EXAMPLES = Path(__file__).resolve().parents[2] / "python" / "examples"
sys.path.insert(0, str(EXAMPLES))
ts = importlib.import_module("train_sage")


def block(num_src, num_dst, max_deg, gen, dtype=torch.float32):
    """A random block as block_edges gives it (src, dst, 1 / degree, num_dst): destination i is
    source i, degrees 0..max_deg (some destinations without edges), sources anywhere."""
    deg = torch.randint(0, max_deg + 1, (num_dst,), generator=gen)
    dst = torch.repeat_interleave(torch.arange(num_dst), deg)
    src = torch.randint(0, num_src, (int(deg.sum()),), generator=gen)
    inv = 1.0 / deg.clamp(min=1).to(dtype)
    return src, dst, inv, num_dst


def blocks(dims_src, gen, dtype=torch.float32):
    """Blocks of a model whose layer l reads dims_src[l] rows and writes dims_src[l + 1]."""
    return [block(a, b, 4, gen, dtype) for a, b in zip(dims_src, dims_src[1:])]


def dropout(h, p, training):
    """F.dropout with train_sage.py's draws: an element kept where torch.rand gives p or more."""
    if not training or p == 0:
        return h
    return h * (torch.rand(h.shape) >= p) / (1 - p)


def plain_forward(model, x, edges):
    """The same model written with torch's own modules (train_sage.py before SAGEConv)."""
    h = x
    for l, layer in enumerate(model.layers):
        if l > 0:
            h = F.relu(h)
        p = model.input_dropout if l == 0 else model.dropout
        h = dropout(h, p, model.training)
        src, dst, inv, nd = edges[l]
        agg = h.new_zeros((nd, h.shape[1])).index_add_(0, dst, h[src]) * inv.unsqueeze(1)
        h = layer.lin_self(h[:nd]) + layer.lin_neigh(agg)
    return h


def grads(model, out, y):
    model.zero_grad(set_to_none=True)
    F.cross_entropy(out, y).backward()
    return [p.grad.clone() for p in model.parameters()]


# hidden 8 from 6 input features aggregates first, 8 -> 3 classes transforms first: both paths
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_fused_model_equals_the_plain_one(dropout):
    gen = torch.Generator().manual_seed(1)
    edges = blocks([60, 30, 12, 5], gen)
    x = torch.randn(60, 6, generator=gen)
    y = torch.randint(0, 3, (5,), generator=gen)
    torch.manual_seed(0)
    model = ts.SAGE(6, 8, 3, 3, dropout=dropout)
    for training in (False, True):
        model.train(training)
        torch.manual_seed(7)  # the same dropout masks, drawn in the same order
        out = model(x, edges)
        g = grads(model, out, y)
        torch.manual_seed(7)
        ref = plain_forward(model, x, edges)
        g_ref = grads(model, ref, y)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
        for a, b in zip(g, g_ref):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
        with torch.no_grad():  # evaluation's path: sage_forward, nothing saved
            torch.manual_seed(7)
            torch.testing.assert_close(model(x, edges), out, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fin,fout", [(5, 7), (7, 3)])  # aggregating first, transforming first
@pytest.mark.parametrize("z_grad", [True, False])
@pytest.mark.parametrize("masked", [True, False])
def test_sageconv_gradcheck(fin, fout, z_grad, masked):
    gen = torch.Generator().manual_seed(fin * 10 + fout)
    d = torch.float64
    src, dst, inv, nd = block(9, 4, 3, gen, d)
    z = torch.randn(9, fin, generator=gen, dtype=d, requires_grad=z_grad)
    mask = (torch.rand(9, fin, generator=gen) > 0.3) if masked else None
    scale = 1.0 / 0.7 if masked else 1.0
    ws = torch.randn(fout, fin, generator=gen, dtype=d, requires_grad=True)
    b = torch.randn(fout, generator=gen, dtype=d, requires_grad=True)
    wn = torch.randn(fout, fin, generator=gen, dtype=d, requires_grad=True)

    def f(z, ws, b, wn):
        return ts.SAGEConv.apply(z, mask, scale, ws, b, wn, src, dst, inv, nd)

    assert torch.autograd.gradcheck(f, (z, ws, b, wn))
    # and the value is the plain formulation's
    h = z if mask is None else z * mask * scale
    agg = h.new_zeros((nd, fin)).index_add_(0, dst, h[src]) * inv.unsqueeze(1)
    torch.testing.assert_close(f(z, ws, b, wn), h[:nd] @ ws.t() + b + agg @ wn.t())


def saved_bytes(fn, held):
    """Bytes of the distinct storages autograd saves for backward while fn runs, but for those
    of the tensors in held (the input, the edges, the parameters: the caller holds them)."""
    skip = {t.storage().data_ptr() for t in held}
    seen = {}

    def pack(t):
        st = t.storage()
        if st.data_ptr() not in skip:
            seen[st.data_ptr()] = st.size() * t.element_size()  # a view keeps all of it
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def test_training_step_saves_less_than_the_plain_model():
    """A batch shaped as the shared bench's, scaled down (each layer's sources 5 times its
    destinations, 128 features, hidden 256, 32 classes): the fused layers save less than half
    of what the plain model does (its float dropout masks, ReLU's outputs, the dropped input)."""
    gen = torch.Generator().manual_seed(3)
    edges = blocks([20000, 4000, 650, 100], gen)
    x = torch.randn(20000, 128, generator=gen)
    torch.manual_seed(0)
    model = ts.SAGE(128, 256, 32, 3, dropout=0.5).train()
    held = [x, *model.parameters(), *(t for e in edges for t in e[:3])]
    fused = saved_bytes(lambda: model(x, edges), held)
    plain = saved_bytes(lambda: plain_forward(model, x, edges), held)
    assert 0 < fused and fused * 2 < plain, (fused, plain)


def test_malloc_threshold_option():
    a = ts.parse_args(["data"])
    assert a.malloc_threshold == 2 << 20  # the default
    assert ts.parse_args(["data", "--malloc-threshold", "512K"]).malloc_threshold == 512 << 10
    assert ts.parse_args(["data", "--malloc-threshold", "0"]).malloc_threshold == 0
    for bad in ("64M", "-1M", "lots"):
        with pytest.raises(SystemExit):
            ts.parse_args(["data", "--malloc-threshold", bad])
    assert ts.set_malloc_threshold(0) is False  # 0: glibc's own, nothing done
    if not (sys.platform.startswith("linux") and ctypes.util.find_library("c") == "libc.so.6"):
        pytest.skip("not glibc")
    assert ts.set_malloc_threshold(2 << 20) is True
    with pytest.raises(argparse.ArgumentTypeError):
        ts.malloc_threshold_arg("33M")
