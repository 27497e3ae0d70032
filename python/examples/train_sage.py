#!/usr/bin/env python3
"""train_sage.py - GraphSAGE in plain PyTorch (no PyG) on tiergnn's out-of-core loader.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/train_sage.py data/cora \\
        --layers 2 --hidden 64 --fanouts 10,10 --batch-size 32 --epochs 30
    membudget --evict data/g4m 2G -- /usr/bin/python3 python/examples/train_sage.py data/g4m \\
        --strategy diskgnn --mem 2G --torch-mem 600M --layers 3 --hidden 256 \\
        --fanouts 10,10,10 --batch-size 1000 --epochs 2 --eval-every 0 --eval-fanouts train \\
        --eval-max-nodes 5000

`--mem` is the whole process's: the loader gets it less `--torch-mem`, what the model's
activations and torch's allocator take beside it (on the CPU, a step of the shared bench's
3 x 256 model on 1000 seeds peaks at about 600 MiB; on a GPU they are in the GPU's memory).

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


class MeanAggr(torch.autograd.Function):
    """out[i] = mean over the edges (s, i) of h[s], by index_add_ over chunks of edges, so that
    no E x F message matrix is held (a layer's blocks on a large graph have millions of edges):
    backward scatters the same way. 0 for a destination without edges."""

    CHUNK = 1 << 16  # edges per index_add_: 32 MiB of 128-wide messages

    @staticmethod
    def forward(ctx, h, src, dst, inv_deg, num_dst):
        out = h.new_zeros((num_dst, h.shape[1]))
        for s in range(0, src.numel(), MeanAggr.CHUNK):
            e = s + MeanAggr.CHUNK
            out.index_add_(0, dst[s:e], h.index_select(0, src[s:e]))
        out.mul_(inv_deg.unsqueeze(1))
        ctx.save_for_backward(src, dst, inv_deg)
        ctx.num_src = h.shape[0]
        return out

    @staticmethod
    def backward(ctx, g):
        src, dst, inv_deg = ctx.saved_tensors
        g = g * inv_deg.unsqueeze(1)
        gh = g.new_zeros((ctx.num_src, g.shape[1]))
        for s in range(0, src.numel(), MeanAggr.CHUNK):
            e = s + MeanAggr.CHUNK
            gh.index_add_(0, src[s:e], g.index_select(0, dst[s:e]))
        return gh, None, None, None, None


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


def dropout(x, p, training):
    """F.dropout, but on an input that needs no gradient (the batch's features: the largest
    matrix of a step) the mask is drawn a block of rows at a time, so that no second matrix of
    x's size is held for it."""
    if not training or p == 0 or x.requires_grad:
        return F.dropout(x, p, training)
    out = torch.empty_like(x)
    rows = max(1, (1 << 22) // max(x.shape[1], 1))
    for s in range(0, x.shape[0], rows):
        c = x[s:s + rows]
        torch.mul(c, torch.rand_like(c) >= p, out=out[s:s + rows])
    return out.mul_(1.0 / (1.0 - p))


class SAGELayer(torch.nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.lin_self = torch.nn.Linear(fin, fout, bias=True)
        self.lin_neigh = torch.nn.Linear(fin, fout, bias=False)
        for lin in (self.lin_self, self.lin_neigh):
            torch.nn.init.xavier_uniform_(lin.weight)  # Glorot, as tiergnn's nn
        torch.nn.init.zeros_(self.lin_self.bias)

    def forward(self, h, edges):
        src, dst, inv, num_dst = edges
        if self.lin_neigh.out_features < self.lin_neigh.in_features:  # narrower: transform first
            agg = MeanAggr.apply(self.lin_neigh(h), src, dst, inv, num_dst)
        else:
            agg = self.lin_neigh(MeanAggr.apply(h, src, dst, inv, num_dst))
        # a copy of the destinations' rows: lin_self saves its input for backward, and a view
        # would keep the whole of h (the layer's sources: several times larger) alive; the sum
        # in place (neither addend is saved for backward), one output matrix fewer at a time
        return self.lin_self(h[:num_dst].clone()).add_(agg)


class SAGE(torch.nn.Module):
    def __init__(self, fin, hidden, fout, layers, dropout=0.5, input_dropout=None):
        super().__init__()
        dims = [fin] + [hidden] * (layers - 1) + [fout]
        self.layers = torch.nn.ModuleList(SAGELayer(a, b) for a, b in zip(dims, dims[1:]))
        self.dropout = dropout
        self.input_dropout = dropout if input_dropout is None else input_dropout

    def forward(self, x, edges):
        h = x
        for l, layer in enumerate(self.layers):
            h = dropout(h, self.input_dropout if l == 0 else self.dropout, self.training)
            h = layer(h, edges[l])
            if l < len(self.layers) - 1:
                h = F.relu(h, inplace=True)
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
