#!/usr/bin/python3
"""bench_torch.py - PyTorch's half of the comparison (bench/bench_torch.sh runs both halves).

    bench_torch.py check DIR [--aggr coo|csr|index_add]
    bench_torch.py time  DIR [--threads 1] [--passes 3] [--aggr coo|csr|index_add] [--dropout P]
    bench_torch.py summary RESULTS_FILE

DIR is what `bench_torch dump` wrote (bench/bench_torch.c describes the files). The model is the
one tiergnn trains (tiergnn/nn.h), written in plain torch (no PyG / DGL):

    per layer l:  x = dropout(x, p)                    (input of every layer, training only,
                                                        as tiergnn does)
                  h = lin_self(x[:num_dst]) + lin_neigh(mean_{j in N(i)} x_j)
                  h = relu(h)                          (not after the last layer)
    loss = nll_loss(log_softmax(h), y)                 (mean over the seeds)
    optimiser: torch.optim.Adam(lr 1e-3, betas 0.9/0.999, eps 1e-8)

The mean over a block's CSR (indptr, indices) is one sparse (num_dst x num_src) matrix with
values 1/deg times x, in one of three ways (--aggr):

    coo        torch.sparse.mm(coalesced COO, x)   (default)
    csr        torch.sparse_csr_tensor @ x         (columns sorted per row, as torch requires)
    index_add  x[src] gathered per edge, index_add_ into the destinations, / deg

As DGL's SAGEConv does (and tiergnn, by flop count), a layer whose input is wider than its output
multiplies by W_neigh before aggregating (the last layer here: 256 -> 32). The sparse matrices are
built from the dumped CSR once, before timing (a data loader's job, as PyG's loaders hand out
edge_index / SparseTensor); their construction time is printed separately.

check loads tiergnn's initial weights (params.f32: per layer W_self (in x out), W_neigh (in x out),
b (out)) and compares, on batch 0 with dropout 0: the logits (eval), the loss, every gradient, and
the parameters after one Adam step, against what tiergnn computed (ref_*.f32, ref_loss); it exits
1 if any differs by more than float32 rounding can explain.

time sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (torch.set_num_threads does not reach
OpenBLAS, whose pthreads build would otherwise use every core) before importing torch, then
torch.set_num_threads(threads), warms up with one pass over the batches and times --passes passes
of zero_grad + forward + loss + backward + Adam step, printing per pass

    RESULT torch-AGGR[+jemalloc][+passive] THREADS DROPOUT PASS MS_PER_BATCH MEAN_LOSS

(+jemalloc when the process runs with jemalloc preloaded: LD_PRELOAD names libjemalloc;
+passive with OMP_WAIT_POLICY=passive: libgomp's threads sleep instead of spinning when idle).
--dropout overrides the dumped rate (as `bench_torch time --dropout` does).

summary reads RESULT lines (from both programs) and prints min and median per (program, threads,
dropout) and the ratios torch / tiergnn.
"""
import argparse
import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


def parse_meta(d):
    meta = {"batch_list": [], "blocks": {}}
    with open(os.path.join(d, "meta.txt")) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "batch":
                meta["batch_list"].append((int(w[1]), int(w[2]), int(w[3])))
            elif w[0] == "block":
                meta["blocks"][(int(w[1]), int(w[2]))] = tuple(int(v) for v in w[3:6])
            elif w[0] == "fanouts":
                meta["fanouts"] = [int(v) for v in w[1:]]
            elif w[0] in ("dropout", "ref_loss"):
                meta[w[0]] = float(w[1])
            elif w[0] == "model":
                meta[w[0]] = w[1]
            else:
                meta[w[0]] = int(w[1])
    return meta


def load(d, meta, np, which=None):
    """The dumped batches as numpy arrays: list of (X, y, [(indptr, indices, nd, ns)])."""
    out = []
    for k, nn_, ns_ in meta["batch_list"]:
        if which is not None and k not in which:
            continue

        def arr(name, dt, count):
            a = np.fromfile(os.path.join(d, name), dtype=dt)
            if a.size != count:
                sys.exit(f"bench_torch.py: {name} has {a.size} items, meta.txt says {count}")
            return a

        X = arr(f"b{k}_x.f32", "<f4", nn_ * meta["in_dim"]).reshape(nn_, meta["in_dim"])
        y = arr(f"b{k}_y.i32", "<i4", ns_)
        blocks = []
        for l in range(meta["layers"]):
            nd, ns, ne = meta["blocks"][(k, l)]
            ip = arr(f"b{k}_l{l}_indptr.u64", "<u8", nd + 1)
            ix = arr(f"b{k}_l{l}_indices.u32", "<u4", ne)
            blocks.append((ip, ix, nd, ns))
        out.append((X, y, blocks))
    return out


def build(torch, np, batches, aggr):
    """Torch tensors per batch: X, y, and per block (A, nd) with A the mean matrix."""
    res = []
    for X, y, blocks in batches:
        tb = []
        for ip, ix, nd, ns in blocks:
            deg = np.diff(ip).astype(np.int64)
            w = np.repeat((1.0 / np.maximum(deg, 1)).astype(np.float32), deg)
            if aggr == "csr":
                # torch's CSR wants the columns of a row sorted (the sampler keeps edge order)
                row = np.repeat(np.arange(nd, dtype=np.int64), deg)
                ix = ix[np.lexsort((ix, row))]
                A = torch.sparse_csr_tensor(torch.from_numpy(ip.astype(np.int64)),
                                            torch.from_numpy(ix.astype(np.int64)),
                                            torch.from_numpy(w), size=(nd, ns))
            elif aggr == "coo":
                row = np.repeat(np.arange(nd, dtype=np.int64), deg)
                A = torch.sparse_coo_tensor(
                    torch.from_numpy(np.stack([row, ix.astype(np.int64)])), torch.from_numpy(w),
                    size=(nd, ns)).coalesce()
            else:
                row = torch.from_numpy(np.repeat(np.arange(nd, dtype=np.int64), deg))
                A = (row, torch.from_numpy(ix.astype(np.int64)),
                     torch.from_numpy((1.0 / np.maximum(deg, 1)).astype(np.float32))[:, None])
            tb.append((A, nd))
        res.append((torch.from_numpy(X), torch.from_numpy(y.astype(np.int64)), tb))
    return res


def make_model(torch, meta, aggr):
    nn = torch.nn
    F = torch.nn.functional

    def aggregate(A, nd, x):
        if aggr == "index_add":
            row, col, inv = A
            out = x.new_zeros((nd, x.shape[1])).index_add_(0, row, x.index_select(0, col))
            return out * inv
        return torch.sparse.mm(A, x) if aggr == "coo" else A @ x

    class SAGEConv(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.lin_self = nn.Linear(i, o, bias=True)
            self.lin_neigh = nn.Linear(i, o, bias=False)
            self.lin_before = i > o  # DGL's rule; tiergnn decides by flop count, same here

        def forward(self, A, nd, x):
            if self.lin_before:
                neigh = aggregate(A, nd, self.lin_neigh(x))
            else:
                neigh = self.lin_neigh(aggregate(A, nd, x))
            return self.lin_self(x[:nd]) + neigh

    class SAGE(nn.Module):
        def __init__(self):
            super().__init__()
            L = meta["layers"]
            dims = [meta["in_dim"]] + [meta["hidden"]] * (L - 1) + [meta["classes"]]
            self.layers = nn.ModuleList(SAGEConv(dims[l], dims[l + 1]) for l in range(L))
            self.p = meta["dropout"]

        def forward(self, blocks, x):
            for l, (conv, (A, nd)) in enumerate(zip(self.layers, blocks)):
                x = F.dropout(x, self.p, self.training)
                x = conv(A, nd, x)
                if l < len(self.layers) - 1:
                    x = F.relu(x)
            return x

    return SAGE()


def set_params(torch, np, model, flat):
    """tiergnn's flat block -> the torch model (Linear keeps weight as (out, in))."""
    off = 0
    with torch.no_grad():
        for conv in model.layers:
            o, i = conv.lin_self.weight.shape
            for lin in (conv.lin_self, conv.lin_neigh):
                lin.weight.copy_(torch.from_numpy(flat[off:off + i * o].reshape(i, o).T.copy()))
                off += i * o
            conv.lin_self.bias.copy_(torch.from_numpy(flat[off:off + o].copy()))
            off += o
    assert off == flat.size, (off, flat.size)


def get_flat(np, model, grad):
    parts = []
    for conv in model.layers:
        for t in (conv.lin_self.weight, conv.lin_neigh.weight):
            t = t.grad if grad else t
            parts.append(t.detach().numpy().T.ravel())
        b = conv.lin_self.bias.grad if grad else conv.lin_self.bias
        parts.append(b.detach().numpy())
    return np.concatenate(parts)


def cmd_check(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    d = a.dir
    meta = parse_meta(d)
    (X, y, blocks), = build(torch, np, load(d, meta, np, which={0}), a.aggr)
    ns, C = len(y), meta["classes"]
    p0 = np.fromfile(os.path.join(d, "params.f32"), dtype="<f4")
    ref_logits = np.fromfile(os.path.join(d, "ref_logits.f32"), dtype="<f4").reshape(ns, C)
    ref_grads = np.fromfile(os.path.join(d, "ref_grads.f32"), dtype="<f4")
    ref_step = np.fromfile(os.path.join(d, "ref_params_step.f32"), dtype="<f4")
    meta["dropout"] = 0.0
    model = make_model(torch, meta, a.aggr)
    set_params(torch, np, model, p0)
    back = get_flat(np, model, False)
    assert np.array_equal(back, p0), "parameter layout does not round-trip"
    model.eval()
    with torch.no_grad():
        logits = model(blocks, X).numpy()
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    opt.zero_grad()
    loss = F.nll_loss(F.log_softmax(model(blocks, X), dim=-1), y, ignore_index=-1)
    loss.backward()
    grads = get_flat(np, model, True)
    opt.step()
    step = get_flat(np, model, False)

    def rel(x, r):
        return float(np.max(np.abs(x - r)) / max(float(np.max(np.abs(r))), 1e-30))

    dl = abs(float(loss) - meta["ref_loss"])
    dlog = float(np.max(np.abs(logits - ref_logits)))
    dg = float(np.max(np.abs(grads - ref_grads)))
    ds = float(np.max(np.abs(step - ref_step)))
    print(f"check ({a.aggr}), batch 0, tiergnn's initial weights, dropout 0:")
    print(f"  loss: torch {float(loss):.7f}  tiergnn {meta['ref_loss']:.7f}  |diff| {dl:.2e}")
    print(f"  logits (eval): max |diff| {dlog:.2e} (max |logit| {np.max(np.abs(ref_logits)):.3f})")
    print(f"  gradients: max |diff| {dg:.2e} (relative to max |grad|: {rel(grads, ref_grads):.2e})")
    print(f"  parameters after one Adam step: max |diff| {ds:.2e}")
    # Adam's first step moves every parameter by ~lr * sign(g); a gradient entry that is ~0 in
    # both may flip sign through rounding and move the parameter by up to 2 lr: allowed.
    ok = dl < 1e-4 and dlog < 1e-3 and rel(grads, ref_grads) < 1e-3 and ds <= 2.5e-3
    print("  " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


def cmd_time(a):
    n = str(a.threads)
    os.environ["OMP_NUM_THREADS"] = n
    os.environ["OPENBLAS_NUM_THREADS"] = n
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    d = a.dir
    meta = parse_meta(d)
    if a.dropout is not None:
        meta["dropout"] = a.dropout
    label = f"torch-{a.aggr}"
    if "jemalloc" in os.environ.get("LD_PRELOAD", ""):
        label += "+jemalloc"
    if os.environ.get("OMP_WAIT_POLICY", "").lower() == "passive":
        label += "+passive"
    raw = load(d, meta, np)
    t0 = time.perf_counter()
    batches = build(torch, np, raw, a.aggr)
    tb = (time.perf_counter() - t0) / len(batches)
    model = make_model(torch, meta, a.aggr)
    set_params(torch, np, model, np.fromfile(os.path.join(d, "params.f32"), dtype="<f4"))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(X, y, blocks):
        opt.zero_grad(set_to_none=True)
        loss = F.nll_loss(F.log_softmax(model(blocks, X), dim=-1), y, ignore_index=-1)
        loss.backward()
        opt.step()
        return float(loss)

    for X, y, blocks in batches:  # warm-up
        step(X, y, blocks)
    per = []
    for p in range(a.passes):
        t, ls = 0.0, 0.0
        for X, y, blocks in batches:
            t0 = time.perf_counter()
            ls += step(X, y, blocks)
            t += time.perf_counter() - t0
        per.append(t / len(batches))
        print(f"RESULT {label} {a.threads} {meta['dropout']:g} {p} {per[-1] * 1e3:.3f} "
              f"{ls / len(batches):.6f}", flush=True)
    print(f"torch {torch.__version__} ({label}), {torch.get_num_threads()} thread(s), "
          f"dropout {meta['dropout']:g}, "
          f"{len(batches)} batches x {a.passes} passes: train step per batch min "
          f"{min(per) * 1e3:.1f} ms, median {statistics.median(per) * 1e3:.1f} ms "
          f"(building the sparse matrices, untimed: {tb * 1e3:.1f} ms per batch)")
    return 0


def cmd_summary(a):
    res = {}
    with open(a.file) as f:
        for line in f:
            w = line.split()
            if len(w) >= 6 and w[0] == "RESULT":
                res.setdefault((w[1], int(w[2]), float(w[3])), []).append(float(w[5]))
    if not res:
        sys.exit("bench_torch.py: no RESULT lines in " + a.file)
    key = lambda kv: (kv[0][2] == 0, kv[0][1], kv[0][0] != "tiergnn", kv[0][0])
    print(f"{'program':<34} {'threads':>7} {'dropout':>7} {'passes':>6} {'min ms':>9} "
          f"{'median ms':>9} {'ratio min':>9} {'ratio med':>9}")
    for (prog, th, dp), v in sorted(res.items(), key=key):
        base = res.get(("tiergnn", th, dp))
        r = (f"{min(v) / min(base):>8.2f}x {statistics.median(v) / statistics.median(base):>8.2f}x"
             if base else "")
        print(f"{prog:<34} {th:>7} {dp:>7g} {len(v):>6} {min(v):>9.1f} "
              f"{statistics.median(v):>9.1f} {r}")
    print("ratio = this program's time / tiergnn's at the same threads and dropout "
          "(> 1: tiergnn is faster)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--aggr", choices=("coo", "csr", "index_add"), default="coo")
    t = sub.add_parser("time")
    t.add_argument("dir")
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--passes", type=int, default=3)
    t.add_argument("--aggr", choices=("coo", "csr", "index_add"), default="coo")
    t.add_argument("--dropout", type=float, default=None)
    s = sub.add_parser("summary")
    s.add_argument("file")
    a = ap.parse_args()
    return {"check": cmd_check, "time": cmd_time, "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
