#!/usr/bin/env python3
"""step_memory.py - the memory and time of a training step of train_sage.py's model, beyond its
batch: what `--torch-mem` has to cover.

    PYTHONPATH=build/python /usr/bin/python3 bench/python/step_memory.py data/g4m \\
        --layers 3 --hidden 256 --fanouts 10,10,10 --batch-size 1000 --steps 4 --threads 2

Takes --steps batches of the training split from tiergnn's loader (--strategy, default mmap),
keeps a copy of each one's inputs (x, the blocks' edges, y) and closes the loader, so that no
thread of the loader allocates while a step runs. Then, per batch, one step of train_sage.py's
loop (zero_grad, forward, cross-entropy, backward, Adam) with a thread sampling the process's
anonymous resident memory (statm's resident less shared) every --interval seconds: the step's
peak over what was resident just before it (the batch's inputs, the model and Adam's state
included in that base) is its memory. Prints one line per step and the largest; --json: one
JSON object.

--examples DIR imports train_sage.py from DIR instead of python/examples, to measure another
version of the model (e.g. a checkout of main) with the same batches and the same sampling.
--malloc-threshold is train_sage.py's (glibc's M_MMAP_THRESHOLD; 0: glibc's own), set here for
any version of the model.
"""
import argparse
import ctypes
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PAGE = os.sysconf("SC_PAGE_SIZE")


def anon_rss():
    """Anonymous resident bytes of this process: statm's resident less its shared (file) pages,
    so that the features' pages a memmap maps in are not counted."""
    with open("/proc/self/statm") as f:
        v = f.read().split()
    return (int(v[1]) - int(v[2])) * PAGE


class Sampler:
    """The largest anon_rss() seen between start() and stop(), every interval seconds (a thread:
    torch releases the GIL in its kernels, so it samples while they run)."""

    def __init__(self, interval):
        self.interval = interval

    def start(self):
        self.peak = anon_rss()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopping.is_set():
            self.peak = max(self.peak, anon_rss())
            time.sleep(self.interval)

    def stop(self):
        self.stopping.set()
        self.thread.join()
        self.peak = max(self.peak, anon_rss())
        return self.peak


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--examples", default=os.path.join(ROOT, "python", "examples"),
                   help="the directory of the train_sage.py to measure")
    p.add_argument("--strategy", default="mmap", help="the loader's, to take the batches")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--fanouts", default="10,10,10")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--malloc-threshold", default="2M")
    p.add_argument("--interval", type=float, default=0.002, help="seconds between samples")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    sys.path.insert(0, os.path.abspath(a.examples))
    import train_sage as ts
    import tiergnn

    torch = ts.torch
    threshold = ts.parse_size(a.malloc_threshold)
    if threshold:  # train_sage.set_malloc_threshold, for versions without it
        ctypes.CDLL("libc.so.6").mallopt(ctypes.c_int(-3), ctypes.c_int(threshold))
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    fanouts = [int(v) for v in a.fanouts.split(",")]
    ds = tiergnn.Dataset(a.dataset)
    device = torch.device("cpu")

    batches = []
    with tiergnn.Loader(a.dataset, "train", fanouts=fanouts, batch_size=a.batch_size,
                        shuffle=True, strategy=a.strategy, seed=a.seed,
                        max_batches=a.steps) as loader:
        for batch in loader:
            x, edges, y = ts.batch_inputs(batch, device, False)
            batches.append((x.clone(), edges, y))  # the loader's X goes back with the batch
            del batch, x
    model = ts.SAGE(ds.feat_dim, a.hidden, ds.num_classes, a.layers, a.dropout).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    sampler = Sampler(a.interval)
    steps = []
    for i, (x, edges, y) in enumerate(batches):
        base = anon_rss()
        t = time.perf_counter()
        sampler.start()
        opt.zero_grad(set_to_none=True)
        out = model(x, edges)
        mask = y >= 0
        loss = ts.F.cross_entropy(out[mask], y[mask])
        loss.backward()
        opt.step()
        del out, loss
        peak = sampler.stop()
        steps.append({"step": i + 1, "input_rows": int(x.shape[0]),
                      "input_edges": int(edges[0][0].numel()),
                      "x_mib": x.numel() * x.element_size() / 2**20,
                      "peak_over_base_mib": (peak - base) / 2**20,
                      "base_mib": base / 2**20, "time_s": time.perf_counter() - t})
    rec = {"examples": os.path.abspath(a.examples), "malloc_threshold": threshold,
           "steps": steps, "peak_over_base_mib": max(s["peak_over_base_mib"] for s in steps)}
    if a.json:
        print(json.dumps(rec))
        return
    for s in steps:
        print("step %d: %d input rows, %d edges in the input layer, X %.1f MiB: peak %.1f MiB "
              "over the %.1f MiB before it, %.2f s" % (s["step"], s["input_rows"],
                                                      s["input_edges"], s["x_mib"],
                                                      s["peak_over_base_mib"], s["base_mib"],
                                                      s["time_s"]))
    print("largest: %.1f MiB (%s, malloc threshold %s)"
          % (rec["peak_over_base_mib"], rec["examples"], threshold))


if __name__ == "__main__":
    main()
