#!/usr/bin/env python3
"""overhead.py - what tiergnn.Loader costs over the C engine: batches per second with a consumer
that does nothing, every strategy, three ways, each run cold in its own cgroup:

    pass    bench_loader --mode pass: the engine's own training pass, a step that returns at once
    c       bench_loader --mode loader: the C loader (tiergnn/loader.h) drained, each batch
            released as it comes
    python  `for batch in tiergnn.Loader(...): pass` (--touch x / all: also take batch.x /
            batch.x, batch.blocks and batch.adjs)

    PYTHONPATH=build/python /usr/bin/python3 bench/python/overhead.py data/g4m --mem 1200M \\
        --bench-loader build/bench_loader --strategies gnndrive,ginex,diskgnn \\
        --fanouts 10,10,10 --batch-size 1000 --epochs 2 --out runs/overhead

Prints one table (batches/s per epoch; python / c and python / pass) and writes every run's
JSON lines and the table under --out. Each run: membudget --evict DATASET MEM -- ...;
--mem 0 runs without a cgroup or a budget. Python over C within 10% is the goal (issue 30).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STRATEGIES = "memory,mmap,gnndrive,pagraph,ginex,diskgnn,hier,gids"


def default_membudget():
    for p in (os.environ.get("MEMBUDGET", ""), os.path.join(ROOT, "..", "shared", "tools",
                                                            "membudget")):
        if p and os.access(p, os.X_OK):
            return os.path.abspath(p)
    return None


def python_one(a):
    """One Python run: the loader drained, one JSON line per epoch (bench_loader's keys)."""
    if not a.numpy:
        try:
            import torch  # noqa: F401  (the loader hands out tensors, as a trainer gets them)
        except ImportError:
            pass
    import tiergnn

    t0 = time.perf_counter()  # as bench_loader's: from before the open

    kw = {}
    for o in a.opt:
        k, _, v = o.partition("=")
        kw[k.replace("-", "_")] = v if v else True
    if a.max_batches:
        kw["max_batches"] = a.max_batches
    kw["max_held"] = 2  # bench_loader's (tg_loader_opts_default): the same slots, the same budget
    if a.numpy:
        kw["numpy"] = True
    L = tiergnn.Loader(a.dataset, "train", fanouts=[int(f) for f in a.fanouts.split(",")],
                       batch_size=a.batch_size, strategy=a.strategy, mem=a.mem if a.mem != "0"
                       else None, seed=a.seed, num_epochs=a.epochs, threads=a.threads, **kw)
    open_s = time.perf_counter() - t0
    try:
        name = L.info()["strategy"]
    except Exception:  # the figures are extra
        name = a.strategy
    for e in range(a.epochs):
        if e:
            t0 = time.perf_counter()
        L.set_epoch(e)
        n = 0
        for b in L:
            if a.touch != "none":
                b.x
                if a.touch == "all":
                    b.blocks
                    b.adjs
            n += 1
        t = time.perf_counter() - t0
        rec = {"mode": "python", "strategy": name, "epoch": e, "batches": n, "time_s": t,
               "batches_per_s": n / t if t > 0 else 0.0, "open_s": open_s if e == 0 else 0.0}
        try:
            st = L.stats()
            for k in ("copy_s", "wait_s", "stall_s", "io_read_bytes"):
                if k in st:
                    rec[k] = st[k]
        except Exception:
            pass
        print(json.dumps(rec), flush=True)
    L.close()


def run(cmd, mem, dataset, membudget, log):
    if mem != "0" and membudget:
        cmd = [membudget, "--evict", dataset, mem, "--"] + cmd
    with open(log, "w") as err:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    recs = [json.loads(s) for s in p.stdout.splitlines() if s.startswith("{")]
    return p.returncode, recs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--mem", default="1200M", help="cgroup limit and budget of every run (0: none)")
    p.add_argument("--strategies", default=STRATEGIES)
    p.add_argument("--modes", default="pass,c,python")
    p.add_argument("--fanouts", default="10,10,10")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--max-batches", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--opt", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--touch", choices=("none", "x", "all"), default="none")
    p.add_argument("--numpy", action="store_true", help="NumPy arrays, torch not imported")
    p.add_argument("--bench-loader", default=os.path.join(ROOT, "build", "bench_loader"))
    p.add_argument("--membudget", default=default_membudget())
    p.add_argument("--out", default="runs/overhead")
    p.add_argument("--one", choices=("python",), help=argparse.SUPPRESS)
    p.add_argument("--strategy", default="auto", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        return python_one(a)
    os.makedirs(a.out, exist_ok=True)
    common = ["--fanouts", a.fanouts, "--batch-size", str(a.batch_size), "--epochs",
              str(a.epochs), "--seed", str(a.seed), "--threads", str(a.threads)]
    if a.max_batches:
        common += ["--max-batches", str(a.max_batches)]
    for o in a.opt:
        common += ["--opt", o]
    modes = a.modes.split(",")
    if ("pass" in modes or "c" in modes) and not os.access(a.bench_loader, os.X_OK):
        sys.exit("overhead.py: %s not found: build it with `make bench` (-DTG_BENCH=ON)"
                 % a.bench_loader)
    rows = []
    for s in a.strategies.split(","):
        res = {}
        for m in modes:
            if m == "python":
                cmd = [sys.executable, os.path.abspath(__file__), "--one", "python", a.dataset,
                       "--strategy", s, "--touch", a.touch, "--mem", a.mem] + common
                if a.numpy:
                    cmd.append("--numpy")
            else:
                cmd = [a.bench_loader, a.dataset, "--mode", "loader" if m == "c" else "pass",
                       "--strategy", s] + common + (["--mem", a.mem] if a.mem != "0" else [])
            log = os.path.join(a.out, "%s-%s.log" % (s, m))
            rc, recs = run(cmd, a.mem, a.dataset, a.membudget, log)
            with open(os.path.join(a.out, "%s-%s.jsonl" % (s, m)), "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in recs)
            res[m] = recs if rc == 0 and len(recs) == a.epochs else None
            print("%s %s: %s" % (s, m, "ok" if res[m] else "failed (rc %d, see %s)" % (rc, log)),
                  file=sys.stderr, flush=True)
        rows.append((s, res))
    table = format_table(rows, modes, a.epochs)
    print(table)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table + "\n")


def format_table(rows, modes, epochs):
    head = "| strategy | epoch | batches | " + " | ".join("%s batches/s" % m for m in modes)
    extra = []
    if "python" in modes and "c" in modes:
        extra.append("python / c")
    if "python" in modes and "pass" in modes:
        extra.append("python / pass")
    head += "".join(" | " + e for e in extra) + " |"
    out = [head, "|" + "---|" * (3 + len(modes) + len(extra))]
    for s, res in rows:
        for e in range(epochs):
            r = {m: res[m][e] if res.get(m) else None for m in modes}
            nb = next((v["batches"] for v in r.values() if v), "-")
            cells = ["%.2f" % r[m]["batches_per_s"] if r[m] else "failed" for m in modes]
            for x in extra:
                num, den = x.split(" / ")
                if r.get(num) and r.get(den) and r[den]["batches_per_s"] > 0:
                    # time ratio: python's epoch over the reference's (1.10 = 10% slower)
                    cells.append("%.3f" % (r[num]["time_s"] / r[den]["time_s"]))
                else:
                    cells.append("-")
            out.append("| %s | %d | %s | %s |" % (s, e + 1, nb, " | ".join(cells)))
        # all epochs together: a strategy that prepares the next epoch during this one makes a
        # consumer that does nothing wait for it at the next epoch's start, whichever it is
        tot = {m: (sum(r["batches"] for r in res[m]), sum(r["time_s"] for r in res[m]))
               if res.get(m) else None for m in modes}
        cells = ["%.2f" % (tot[m][0] / tot[m][1]) if tot[m] else "failed" for m in modes]
        for x in extra:
            num, den = x.split(" / ")
            cells.append("**%.3f**" % (tot[num][1] / tot[den][1]) if tot.get(num) and tot.get(den)
                         else "-")
        nb = next((t[0] for t in tot.values() if t), "-")
        out.append("| %s | all | %s | %s |" % (s, nb, " | ".join(cells)))
    return "\n".join(out)


if __name__ == "__main__":
    main()
