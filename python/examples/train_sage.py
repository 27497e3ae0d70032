#!/usr/bin/env python3
"""train_sage.py - GraphSAGE in plain PyTorch (no PyG) on tiergnn's out-of-core loader.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/train_sage.py data/cora \\
        --layers 2 --hidden 64 --fanouts 10,10 --batch-size 32 --epochs 30
    membudget --evict data/g4m 1200M -- /usr/bin/python3 python/examples/train_sage.py data/g4m \\
        --strategy diskgnn --mem 1200M --torch-mem 300M --layers 3 --hidden 256 \\
        --fanouts 10,10,10 --batch-size 1000 --epochs 2 --eval-every 0 --eval-fanouts train \\
        --eval-max-nodes 5000

`--mem` is the whole process's: the loader gets it less `--torch-mem`, what the model's
activations and torch's allocator take beside it (on the CPU, a step of the shared bench's
3 x 256 model on 1000 seeds peaks at about 190 MiB beyond its batch, against 325 MiB with
torch's own modules: bench/README.md, "Session 26"; on a GPU they are in the GPU's memory).
`--malloc-threshold` (default 2M) has glibc map each tensor of that size or more on its own,
so that memory freed by a step goes back to the system rather than staying in malloc's heaps.

tiergnn samples the batches and gathers their feature rows under `--mem` with any strategy
(tiergnn strategies); this script does the model, on the CPU or with `--device cuda`. Prints one
line per epoch (time, time waiting for batches, loss, accuracies) and, with --json, one JSON
object per epoch on stdout instead.

The model is tiergnn's own SAGE (include/tiergnn/nn.h), so that the same hyperparameters give
the same accuracy as `tiergnn train --model sage`:
    h_i = x_i W_self + mean_{j in N(i)} x_j W_neigh + b      (mean = 0 when N(i) is empty)
ReLU between layers, dropout (--input-dropout, default --dropout) on the input features and
(--dropout) on every later layer's input, Glorot-uniform weights and zero biases,
log-softmax + cross-entropy over the labelled seeds, Adam (lr 0.01, betas 0.9 / 0.999, eps 1e-8,
--weight-decay added to the gradient as torch's Adam does), --normalize-features as tiergnn's
L1 row normalisation. What differs: the RNG (initial weights and dropout masks), float
rounding (the aggregation order) and, with --eval-max-nodes, which nodes are sampled.

Evaluation (after the last epoch, and every --eval-every epochs): the valid and test splits
through a loader of --eval-strategy (mmap: the same batches as any strategy's, in any budget)
within the same --mem, with all neighbours (--eval-fanouts all, as tiergnn train's layer-wise
evaluation computes) or the training fanouts (train); the training loader is closed meanwhile
so that one budget holds at a time, and opened again at the next epoch. The reported test
accuracy is the one at the best validation epoch, as tiergnn train's.
"""
import argparse
import ctypes
import json
import math
import sys
import time

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("train_sage.py: PyTorch is not installed (Debian: apt-get install python3-torch)",
          file=sys.stderr)
    sys.exit(77)


def import_tiergnn():
    try:
        import tiergnn
    except ImportError as e:
        print("train_sage.py: cannot import tiergnn (%s): build it with `make python` and run "
              "with PYTHONPATH=build/python, or `pip install ./python --no-build-isolation`"
              % e, file=sys.stderr)
        sys.exit(77)
    return tiergnn


# ---------------------------------------------------------------- the model
#
# A step of the shared bench's model (3 x 256, 1000 seeds, fanouts 10,10,10: about 300 K input
# rows of 128 features) must fit beside the loader in a 1200M cgroup. Written with torch's own
# modules it keeps, per layer, F.dropout's float mask and its output, ReLU's output, a copy of
# the input for the dropped features and the gradients' full-size scatters: 325 MiB at its peak
# beyond the batch (bench/python/step_memory.py). SAGEConv below computes a layer's self and
# neighbour parts in one autograd function that saves only what its backward reads (the
# destinations' rows, the mean of the neighbours, a bool mask), with the ReLU and dropout in
# front of it folded into that mask and applied a block of rows or a chunk of edges at a time:
# 156-187 MiB.

BLOCK_ELEMS = 1 << 21  # elements of a block of rows (8 MiB of float32)
CHUNK_BYTES = 8 << 20  # bytes of the rows one index_add_ gathers


def row_blocks(n, width):
    """(start, end) of blocks of rows of an n x width matrix, BLOCK_ELEMS elements a block."""
    step = max(1, BLOCK_ELEMS // max(width, 1))
    return ((s, min(s + step, n)) for s in range(0, n, step))


def masked_rows(z, mask, scale, r0, r1):
    """Rows r0:r1 of h = z * mask * scale (a view of z when there is nothing to apply: never
    modify it in place)."""
    h = z[r0:r1]
    if mask is not None:
        h = h * mask[r0:r1]
    if scale != 1.0:
        h = h * scale if mask is None else h.mul_(scale)
    return h


def index_sum(x, mask, scale, gather, scatter, num_out):
    """out[scatter[e]] += (x * mask * scale)[gather[e]] over the edges e, by index_add_ over
    chunks of edges, so that no E x F message matrix is held (the input layer's block on the
    shared bench has 676 K edges): the rows are gathered, masked and scaled a chunk at a time."""
    out = x.new_zeros((num_out, x.shape[1]))
    chunk = max(1, CHUNK_BYTES // max(x.shape[1] * x.element_size(), 1))
    for s in range(0, gather.numel(), chunk):
        g = gather[s:s + chunk]
        rows = x.index_select(0, g)
        if mask is not None:
            rows.mul_(mask.index_select(0, g))
        if scale != 1.0:
            rows.mul_(scale)
        out.index_add_(0, scatter[s:s + chunk], rows)
    return out


def sage_forward(z, mask, scale, w_self, bias, w_neigh, src, dst, inv_deg, num_dst,
                 dst_rows=False):
    """tiergnn's SAGE layer on h = z * mask * scale (mask: bool or None):
        out_i = h_i W_self^T + b + (mean over the block's edges (j, i) of h_j) W_neigh^T
    Returns (out, agg, hd): agg the neighbours' mean when the layer aggregates first, None when
    it transforms first (a narrowing layer aggregates its fout-wide rows); hd a copy of h's
    destination rows with dst_rows, else None (the self part then takes h a block at a time)."""
    fin, fout = z.shape[1], w_self.shape[0]
    hd = None
    if dst_rows:
        hd = masked_rows(z, mask, scale, 0, num_dst)
        if mask is None and scale == 1.0:
            hd = hd.clone()  # not a view: it would keep all of z
        out = torch.addmm(bias, hd, w_self.t())
    else:
        out = z.new_empty((num_dst, fout))
        for r0, r1 in row_blocks(num_dst, fin):
            torch.addmm(bias, masked_rows(z, mask, scale, r0, r1), w_self.t(), out=out[r0:r1])
    if fout < fin:  # narrower: transform the sources, then aggregate fout-wide rows
        t = z.new_empty((z.shape[0], fout))
        for r0, r1 in row_blocks(z.shape[0], fin):
            torch.mm(masked_rows(z, mask, scale, r0, r1), w_neigh.t(), out=t[r0:r1])
        out.add_(index_sum(t, None, 1.0, src, dst, num_dst).mul_(inv_deg.unsqueeze(1)))
        return out, None, hd
    agg = index_sum(z, mask, scale, src, dst, num_dst).mul_(inv_deg.unsqueeze(1))
    out.addmm_(agg, w_neigh.t())  # in place: one num_dst x fout matrix for the layer
    return out, agg, hd


class SAGEConv(torch.autograd.Function):
    """sage_forward with autograd: SAGEConv.apply(z, mask, scale, w_self, bias, w_neigh, src,
    dst, inv_deg, num_dst). The gradients are the plain formulation's (h = z * mask * scale
    into two Linear layers and a mean by index_add_), but only these are saved:
      - aggregating first, the neighbours' mean (num_dst x fin) for W_neigh's gradient;
      - h's destination rows for W_self's: when z needs a gradient (a previous layer's output,
        which nothing else keeps) a copy of them; when it needs none (the batch's features,
        which the caller holds through the step anyway) z itself and the mask's rows;
      - transforming first (W_neigh's gradient reads every row of h): z and the mask;
      - the mask (bool, a byte per element) when z needs a gradient: it is ReLU's and
        dropout's backward at once.
    Nothing of E x F nor a float mask is saved; the backward gathers and scatters by chunks of
    edges as the forward does."""

    @staticmethod
    def forward(ctx, z, mask, scale, w_self, bias, w_neigh, src, dst, inv_deg, num_dst):
        need_z = ctx.needs_input_grad[0]
        aggregates = w_self.shape[0] >= z.shape[1]
        # a copy of h's destination rows only where z needs a gradient and the layer aggregates
        # first: that copy is smaller than z, which can then go once the next layer has it
        copy = need_z and aggregates
        out, agg, hd = sage_forward(z, mask, scale, w_self, bias, w_neigh, src, dst, inv_deg,
                                    num_dst, dst_rows=copy)
        if copy:
            hsrc, hmask, hscale = hd, None, 1.0
        else:  # z itself: held by the caller, or every row of h is read again (transforming)
            hsrc, hscale = z, scale
            hmask = mask[:num_dst].clone() if aggregates and mask is not None else mask
        ctx.save_for_backward(hsrc, hmask, mask if need_z else None, agg, w_self, w_neigh,
                              src, dst, inv_deg)
        ctx.hscale, ctx.scale, ctx.num_src, ctx.num_dst = hscale, scale, z.shape[0], num_dst
        return out

    @staticmethod
    def backward(ctx, g):
        hsrc, hmask, mask, agg, w_self, w_neigh, src, dst, inv_deg = ctx.saved_tensors
        need_z, _, _, need_ws, need_b, need_wn = ctx.needs_input_grad[:6]
        nd, fin = ctx.num_dst, w_self.shape[1]
        g = g.contiguous()
        gz = gws = gb = gwn = None
        if need_b:
            gb = g.sum(0)
        if need_ws:  # g^T h[:num_dst], h's rows rebuilt a block at a time
            gws = g.new_zeros(w_self.shape)
            for r0, r1 in row_blocks(nd, fin):
                gws.addmm_(g[r0:r1].t(), masked_rows(hsrc, hmask, ctx.hscale, r0, r1))
        ginv = g * inv_deg.unsqueeze(1)  # the mean's backward: g / degree to every source
        if agg is not None:  # aggregated first: out += agg W_neigh^T
            if need_wn:
                gwn = g.t().mm(agg)
            if need_z:
                gz = index_sum(ginv.mm(w_neigh), None, 1.0, dst, src, ctx.num_src)
        else:  # transformed first: out += mean(h W_neigh^T)
            gt = index_sum(ginv, None, 1.0, dst, src, ctx.num_src)  # num_src x fout
            if need_wn:
                gwn = g.new_zeros(w_neigh.shape)
                for r0, r1 in row_blocks(ctx.num_src, fin):
                    gwn.addmm_(gt[r0:r1].t(), masked_rows(hsrc, hmask, ctx.hscale, r0, r1))
            if need_z:
                gz = gt.mm(w_neigh)
            del gt
        if need_z:
            gz[:nd].addmm_(g, w_self)  # the self part
            if mask is not None:  # ReLU's and dropout's backward
                gz.mul_(mask)
            if ctx.scale != 1.0:
                gz.mul_(ctx.scale)
        return gz, None, None, gws, gb, gwn, None, None, None, None


def relu_dropout_mask(z, p, relu):
    """(mask, scale) such that dropout(relu(z), p) = z * mask * scale: mask a bool matrix (None
    when neither applies), drawn and compared a block of rows at a time. An element is kept when
    a uniform draw in [0, 1) is at least p (F.dropout's law; torch 1.13's bernoulli_, which
    F.dropout draws with on the CPU, takes 1.5 times as long: 0.57 s against 0.38 s for the
    shared bench's input layer), and a kept one is scaled by 1 / (1 - p)."""
    if p <= 0 and not relu:
        return None, 1.0
    mask = torch.empty(z.shape, dtype=torch.bool, device=z.device)
    for r0, r1 in row_blocks(z.shape[0], z.shape[1]):
        m = mask[r0:r1]
        if p <= 0:
            torch.gt(z[r0:r1], 0, out=m)
            continue
        torch.ge(torch.rand(m.shape, device=z.device), p, out=m)
        if relu:
            m.logical_and_(z[r0:r1] > 0)
    if p <= 0:
        return mask, 1.0
    return mask, (1.0 / (1.0 - p) if p < 1 else 0.0)


def as_int64(a):
    """A torch.Tensor or NumPy array of integers as an int64 tensor (no copy when it is one)."""
    if torch.is_tensor(a):
        return a.to(torch.int64)
    return torch.from_numpy(np.asarray(a).astype(np.int64, copy=False))


def block_edges(blk, device):
    """A block (tiergnn's CSR over destinations) as (src, dst, 1 / degree, num_dst) tensors."""
    indptr, src = as_int64(blk.indptr), as_int64(blk.indices)
    deg = indptr[1:] - indptr[:-1]
    dst = torch.repeat_interleave(torch.arange(int(blk.num_dst)), deg)
    inv = 1.0 / deg.clamp(min=1).to(torch.float32)
    return (src.to(device), dst.to(device), inv.to(device), int(blk.num_dst))


class SAGELayer(torch.nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.lin_self = torch.nn.Linear(fin, fout, bias=True)
        self.lin_neigh = torch.nn.Linear(fin, fout, bias=False)
        for lin in (self.lin_self, self.lin_neigh):
            torch.nn.init.xavier_uniform_(lin.weight)  # Glorot, as tiergnn's nn
        torch.nn.init.zeros_(self.lin_self.bias)

    def forward(self, h, edges, mask=None, scale=1.0):
        """The layer on h * mask * scale (relu_dropout_mask's; by default h itself)."""
        src, dst, inv, num_dst = edges
        args = (h, mask, scale, self.lin_self.weight, self.lin_self.bias,
                self.lin_neigh.weight, src, dst, inv, num_dst)
        if torch.is_grad_enabled():
            return SAGEConv.apply(*args)
        return sage_forward(*args)[0]  # under no_grad (evaluation) nothing is saved


class SAGE(torch.nn.Module):
    def __init__(self, fin, hidden, fout, layers, dropout=0.5, input_dropout=None):
        super().__init__()
        dims = [fin] + [hidden] * (layers - 1) + [fout]
        self.layers = torch.nn.ModuleList(SAGELayer(a, b) for a, b in zip(dims, dims[1:]))
        self.dropout = dropout
        self.input_dropout = dropout if input_dropout is None else input_dropout

    def forward(self, x, edges):
        """Dropout on every layer's input, ReLU between layers; both go into the layer as its
        mask, so neither allocates a matrix of its own."""
        h = x
        for l, layer in enumerate(self.layers):
            p = (self.input_dropout if l == 0 else self.dropout) if self.training else 0.0
            mask, scale = relu_dropout_mask(h, p, relu=l > 0)
            h = layer(h, edges[l], mask, scale)
            del mask  # before the next layer's is drawn
        return h


def normalize_rows(x):
    """tiergnn's --normalize-features: each row / the sum of its absolute values (0 rows stay)."""
    s = x.abs().sum(1, keepdim=True)
    return x / torch.where(s > 0, s, torch.ones_like(s))


def batch_inputs(batch, device, normalize):
    x = batch.x if torch.is_tensor(batch.x) else torch.from_numpy(np.asarray(batch.x))
    x = x.to(device, non_blocking=True)
    if normalize:
        x = normalize_rows(x)
    y = batch.y if torch.is_tensor(batch.y) else torch.from_numpy(np.asarray(batch.y))
    y = y.reshape(-1).to(device=device, dtype=torch.int64)
    edges = [block_edges(b, device) for b in batch.blocks]
    return x, edges, y


def sage_inputs(normalize):
    """prepare(batch, device) -> ((x, edges), y) for SAGE.forward."""

    def prepare(batch, device):
        x, edges, y = batch_inputs(batch, device, normalize)
        return (x, edges), y

    return prepare


# ---------------------------------------------------------------- training


def parse_fanouts(s):
    return [int(v) for v in s.split(",")]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset")
    p.add_argument("--strategy", default="auto", help="tiergnn strategy (tiergnn strategies)")
    p.add_argument("--mem", default=None, help="the loader's budget, e.g. 1200M (none: the "
                   "cgroup's limit or none); see --torch-mem")
    p.add_argument("--torch-mem", default="0",
                   help="what the model, its activations and torch's allocator take beside the "
                   "loader, taken off --mem for the loader (e.g. 400M); default 0")
    p.add_argument("--opt", action="append", default=[], metavar="NAME=VALUE",
                   help="a strategy option (tiergnn strategies NAME), e.g. disk-budget=4G")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--fanouts", type=parse_fanouts, default=None,
                   help="input layer first, -1 = all (default 10 per layer)")
    p.add_argument("--batch-size", type=int, default=1024, help="0 = the whole split at once")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--input-dropout", type=float, default=None)
    p.add_argument("--normalize-features", action="store_true")
    p.add_argument("--seed", type=int, default=0, help="batches (tiergnn's) and torch's RNG")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--eval-every", type=int, default=1,
                   help="evaluate every N epochs and after the last (0: after the last only; "
                   "the training loader then stays open across epochs)")
    p.add_argument("--eval-fanouts", default="all", help="all (full neighbours) or train")
    p.add_argument("--eval-strategy", default=None,
                   help="the evaluation loader's strategy (default: memory after memory, else "
                   "mmap: the same batches, and it runs in any budget)")
    p.add_argument("--eval-max-nodes", type=int, default=0,
                   help="evaluate a fixed random sample of N nodes per split (0: all)")
    p.add_argument("--eval-batch-size", type=int, default=0, help="default: --batch-size")
    p.add_argument("--max-batches", type=int, default=0, help="batches per epoch at most")
    p.add_argument("--max-held", type=int, default=1,
                   help="batches alive at once (the loader's slots are this + 1): the loop "
                   "drops each batch before it takes the next")
    p.add_argument("--json", action="store_true", help="one JSON object per epoch on stdout")
    p.add_argument("--malloc-threshold", type=malloc_threshold_arg, default="2M", metavar="SIZE",
                   help="glibc's M_MMAP_THRESHOLD: every allocation of SIZE or more (a tensor) "
                   "is mapped on its own and given back to the system when freed (default 2M, "
                   "at most 32M; 0: glibc's own, which rises up to 32M)")
    a = p.parse_args(argv)
    if a.fanouts is None:
        a.fanouts = [10] * a.layers
    if len(a.fanouts) != a.layers:
        p.error("--fanouts has %d values for --layers %d" % (len(a.fanouts), a.layers))
    return a


def parse_size(s):
    if s is None:
        return 0
    s = str(s).strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(s[-1:], 1)
    return int(float(s.rstrip("KMGT") or 0) * mult)


M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's limit on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX)


def malloc_threshold_arg(s):
    """--malloc-threshold: a size (K/M/G suffixes), 0 to leave glibc's, at most 32M."""
    try:
        n = parse_size(s)
    except ValueError:
        raise argparse.ArgumentTypeError("not a size: %r" % s)
    if n < 0 or n > MMAP_THRESHOLD_MAX:
        raise argparse.ArgumentTypeError("%s: between 0 and 32M (glibc's limit)" % s)
    return n


def set_malloc_threshold(n):
    """mallopt(M_MMAP_THRESHOLD, n) with glibc (n bytes; 0: nothing done). Returns whether it was
    set. Why: glibc serves an allocation under the threshold from its heaps, which keep what is
    freed for later allocations and give back only a free top; its threshold starts at 128 KiB
    and rises to the size of every mapped block freed, up to 32 MiB. After the first steps, a
    step's tensors (up to 32 MiB each at the shared bench) come from the heaps, and their
    high-water mark, fragmented, stays resident beside the loader, whose budget counts the
    process's memory. A fixed threshold (which also stops its rise) maps every tensor of n bytes
    or more on its own and unmaps it when freed: resident memory follows the live tensors, for a
    page fault per new page. Another libc's allocator is left as it is."""
    if not n:
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, int(n)) == 1


def loader_mem(a):
    """The loader's budget: --mem less --torch-mem (None: no budget)."""
    if a.mem is None:
        return None
    m = parse_size(a.mem) - parse_size(a.torch_mem)
    if m <= 0:
        sys.exit("train_sage.py: --torch-mem %s leaves nothing of --mem %s" % (a.torch_mem, a.mem))
    return m


def strategy_options(a):
    out = {}
    for o in a.opt:
        k, _, v = o.partition("=")
        out[k.replace("-", "_")] = v if v else True
    return out


def open_loader(tiergnn, a, seeds, fanouts, batch_size, shuffle, strategy=None, **kw):
    strategy = strategy or a.strategy
    if strategy == a.strategy:
        kw.update(strategy_options(a))
    try:
        return tiergnn.Loader(a.dataset, seeds, fanouts=fanouts, batch_size=batch_size,
                              shuffle=shuffle, strategy=strategy, mem=loader_mem(a),
                              seed=a.seed, max_held=a.max_held, **kw)
    except MemoryError as e:
        if a.mem is None or not parse_size(a.torch_mem):
            raise
        sys.exit("train_sage.py: %s\n(the loader's budget is --mem %s less --torch-mem %s: "
                 "give --mem the amount named above plus --torch-mem)" % (e, a.mem, a.torch_mem))


class Timer:
    """The epoch's time and the part of it spent waiting in the loader's next()."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.wait = 0.0

    def batches(self, loader):
        it = iter(loader)
        while True:
            t = time.perf_counter()
            try:
                b = next(it)
            except StopIteration:
                self.wait += time.perf_counter() - t
                return
            self.wait += time.perf_counter() - t
            yield b
            del b  # not held while the next one is taken

    def elapsed(self):
        return time.perf_counter() - self.t0


def train_epoch(model, opt, loader, a, device, timer, prepare=None):
    """One pass over the loader: model(*inputs) on each batch's inputs, where prepare(batch,
    device) -> (inputs, y) (default: x and the blocks' edges, for SAGE above). On CUDA, the
    time between a step's first and last kernel is summed (gpu_busy_s), from CUDA events."""
    prepare = prepare or sage_inputs(a.normalize_features)
    model.train()
    loss_sum, correct, count, nb = 0.0, 0, 0, 0
    events = []
    for batch in timer.batches(loader):
        if device.type == "cuda":
            events.append((torch.cuda.Event(enable_timing=True),
                           torch.cuda.Event(enable_timing=True)))
        inputs, y = prepare(batch, device)
        del batch  # the batch's slot goes back once its arrays (or their copies) are done
        if events:
            events[-1][0].record()
        opt.zero_grad(set_to_none=True)
        out = model(*inputs)
        mask = y >= 0
        n = int(mask.sum())
        # a batch without labels still steps (data-parallel ranks step together)
        loss = F.cross_entropy(out[mask], y[mask]) if n else out.sum() * 0
        loss.backward()
        opt.step()
        if events:
            events[-1][1].record()
        loss_sum += float(loss) * n
        correct += int((out[mask].argmax(1) == y[mask]).sum())
        count += n
        nb += 1
        del inputs, out, loss  # the batch goes back to the loader before the next is taken
    rec = {"batches": nb, "train_loss": loss_sum / max(count, 1),
           "train_acc": correct / max(count, 1)}
    if device.type == "cuda":
        torch.cuda.synchronize()
        rec["gpu_busy_s"] = sum(s.elapsed_time(e) for s, e in events) / 1000.0
    return rec


def eval_seeds(tiergnn, a, split):
    ds = tiergnn.Dataset(a.dataset)
    s = np.asarray(ds.split(split), dtype=np.int64)
    if a.eval_max_nodes and a.eval_max_nodes < len(s):
        rng = np.random.default_rng([a.seed, {"valid": 1, "test": 2}[split]])
        s = np.sort(rng.choice(s, a.eval_max_nodes, replace=False))
    return s


@torch.no_grad()
def evaluate(tiergnn, model, a, device, seeds, prepare=None):
    """Accuracy over seeds, with all neighbours or the training fanouts."""
    prepare = prepare or sage_inputs(a.normalize_features)
    model.eval()
    fan = a.fanouts if a.eval_fanouts == "train" else [-1] * a.layers
    bs = a.eval_batch_size or a.batch_size
    correct = count = 0
    strategy = a.eval_strategy or ("memory" if a.strategy == "memory" else "mmap")
    with open_loader(tiergnn, a, seeds, fan, bs, False, strategy) as loader:
        for batch in loader:
            inputs, y = prepare(batch, device)
            del batch
            out = model(*inputs)
            mask = y >= 0
            correct += int((out[mask].argmax(1) == y[mask]).sum())
            count += int(mask.sum())
            del inputs, out  # the batch goes back before the next is taken
    return correct / max(count, 1)


def report(a, rec):
    if a.json:
        print(json.dumps(rec), flush=True)
        return
    line = ("epoch %d: %.2f s (waiting for batches %.2f s), %d batches, loss %.4f, train acc "
            "%.4f" % (rec["epoch"], rec["time_s"], rec["wait_s"], rec["batches"],
                      rec["train_loss"], rec["train_acc"]))
    if "test_acc" in rec:
        line += ", valid acc %.4f, test acc %.4f" % (rec["valid_acc"], rec["test_acc"])
    print(line, flush=True)


def fit(a, tiergnn, model, device, prepare=None):
    """Trains model for a.epochs on tiergnn's loader and evaluates it (see the module's
    docstring); reports each epoch and returns the summary (best epoch, its accuracies)."""
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    valid_seeds = eval_seeds(tiergnn, a, "valid")
    test_seeds = eval_seeds(tiergnn, a, "test")
    best = {"valid_acc": -1.0}
    loader = None
    try:
        for epoch in range(a.epochs):
            rec = {"epoch": epoch + 1}
            if loader is None:
                t = time.perf_counter()
                loader = open_loader(tiergnn, a, "train", a.fanouts, a.batch_size, True,
                                     num_epochs=a.epochs, epoch=epoch,
                                     max_batches=a.max_batches)
                rec["open_s"] = time.perf_counter() - t
            timer = Timer()
            loader.set_epoch(epoch)
            rec.update(train_epoch(model, opt, loader, a, device, timer, prepare))
            rec["time_s"] = timer.elapsed()
            rec["wait_s"] = timer.wait
            if "gpu_busy_s" in rec:
                rec["gpu_busy_share"] = rec["gpu_busy_s"] / rec["time_s"]
            try:
                st = loader.stats()
                rec["loader"] = {k: st[k] for k in ("io_read_bytes", "cache_hit_ratio", "copy_s")
                                 if k in st}
            except Exception:  # figures are extra: a loader without them still trains
                pass
            last = epoch + 1 == a.epochs
            if last or (a.eval_every and (epoch + 1) % a.eval_every == 0):
                loader.close()
                loader = None
                t = time.perf_counter()
                rec["valid_acc"] = evaluate(tiergnn, model, a, device, valid_seeds, prepare)
                rec["test_acc"] = evaluate(tiergnn, model, a, device, test_seeds, prepare)
                rec["eval_s"] = time.perf_counter() - t
                if rec["valid_acc"] > best["valid_acc"]:
                    best = {"best_epoch": epoch + 1, "valid_acc": rec["valid_acc"],
                            "test_acc": rec["test_acc"]}
            report(a, rec)
    finally:
        if loader is not None:
            loader.close()
    summary = {"summary": True, "best_epoch": best.get("best_epoch"),
               "valid_acc": best["valid_acc"], "test_acc": best.get("test_acc", math.nan)}
    if a.json:
        print(json.dumps(summary), flush=True)
    else:
        print("best epoch %s: valid acc %.4f, test acc %.4f"
              % (summary["best_epoch"], summary["valid_acc"], summary["test_acc"]))
    return summary


def main(argv=None):
    a = parse_args(argv)
    set_malloc_threshold(a.malloc_threshold)
    tiergnn = import_tiergnn()
    device = torch.device(a.device)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    ds = tiergnn.Dataset(a.dataset)
    model = SAGE(ds.feat_dim, a.hidden, ds.num_classes, a.layers, a.dropout,
                 a.input_dropout).to(device)
    return fit(a, tiergnn, model, device)


if __name__ == "__main__":
    main()
