#!/usr/bin/env python3
"""train_ddp.py - train_sage.py's GraphSAGE with DistributedDataParallel over gloo: K processes
on one machine, each with its own tiergnn.Loader (rank, world_size).

    PYTHONPATH=build/python /usr/bin/python3 python/examples/train_ddp.py data/cora \\
        --world-size 2 --layers 2 --hidden 64 --fanouts 10,10 --batch-size 16 --epochs 30

Every rank's loader yields its share of each epoch's batches by tiergnn's rank rule
(docs/LOADER.md, "The rank rule"): with n batches in the epoch, rank r takes the contiguous
batches [r m, (r + 1) m), m = floor(n / K), so every rank steps m times and DDP's all-reduce
pairs them up; global step s averages the gradients of K batches, K x --batch-size seeds. To
train as one process with batch B does, give each rank --batch-size B / K. The n - K m batches
left over are used by no rank in that epoch (the seed order changes every epoch).

--mem is each rank's loader budget (K of them run at once: under one cgroup give it K x --mem
plus what the models take). Rank 0 evaluates after the last epoch (and every --eval-every
epochs) on the whole valid and test splits, as train_sage.py does, and prints the lines; the
other ranks wait for it. Options are train_sage.py's, plus --world-size and --port.
"""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_sage as ts  # noqa: E402  (the model, the loop's helpers, the flags)

torch = ts.torch


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a, port, result):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    ts.set_malloc_threshold(a.malloc_threshold)  # per process: each rank is an interpreter
    dist.init_process_group("gloo", rank=rank, world_size=a.world_size)
    try:
        tiergnn = ts.import_tiergnn()
        if a.threads:
            torch.set_num_threads(a.threads)
        torch.manual_seed(a.seed)  # DDP also broadcasts rank 0's parameters
        device = torch.device(a.device)
        ds = tiergnn.Dataset(a.dataset)
        model = ts.SAGE(ds.feat_dim, a.hidden, ds.num_classes, a.layers, a.dropout,
                        a.input_dropout).to(device)
        ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.Adam(ddp.parameters(), lr=a.lr, weight_decay=a.weight_decay)
        if rank == 0:
            seeds = {s: ts.eval_seeds(tiergnn, a, s) for s in ("valid", "test")}
        best = {"valid_acc": -1.0}
        loader = None
        for epoch in range(a.epochs):
            rec = {"epoch": epoch + 1, "rank": rank}
            if loader is None:
                t = time.perf_counter()
                loader = ts.open_loader(tiergnn, a, "train", a.fanouts, a.batch_size, True,
                                        num_epochs=a.epochs, epoch=epoch, rank=rank,
                                        world_size=a.world_size, max_batches=a.max_batches)
                rec["open_s"] = time.perf_counter() - t
            timer = ts.Timer()
            loader.set_epoch(epoch)
            rec.update(ts.train_epoch(ddp, opt, loader, a, device, timer))
            rec["time_s"] = timer.elapsed()
            rec["wait_s"] = timer.wait
            last = epoch + 1 == a.epochs
            if last or (a.eval_every and (epoch + 1) % a.eval_every == 0):
                loader.close()
                loader = None
                if rank == 0:
                    t = time.perf_counter()
                    rec["valid_acc"] = ts.evaluate(tiergnn, model, a, device, seeds["valid"])
                    rec["test_acc"] = ts.evaluate(tiergnn, model, a, device, seeds["test"])
                    rec["eval_s"] = time.perf_counter() - t
                    if rec["valid_acc"] > best["valid_acc"]:
                        best = {"best_epoch": epoch + 1, "valid_acc": rec["valid_acc"],
                                "test_acc": rec["test_acc"]}
                dist.barrier()
            if rank == 0:
                ts.report(a, rec)
        if loader is not None:
            loader.close()
        if rank == 0:
            result.update(best)
            summary = {"summary": True, "world_size": a.world_size,
                       "best_epoch": best.get("best_epoch"), "valid_acc": best["valid_acc"],
                       "test_acc": best.get("test_acc")}
            if a.json:
                print(ts.json.dumps(summary), flush=True)
            else:
                print("best epoch %s: valid acc %.4f, test acc %.4f (%d processes)"
                      % (summary["best_epoch"], summary["valid_acc"], summary["test_acc"],
                         a.world_size), flush=True)
    finally:
        dist.destroy_process_group()


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    world, port = 2, 0
    for flag in ("--world-size", "--port"):
        if flag in argv:
            i = argv.index(flag)
            v = int(argv[i + 1])
            del argv[i:i + 2]
            if flag == "--world-size":
                world = v
            else:
                port = v
    a = ts.parse_args(argv)
    a.world_size = world
    if world < 1:
        sys.exit("train_ddp.py: --world-size must be >= 1")
    import torch.multiprocessing as mp

    mgr = mp.Manager()
    result = mgr.dict()
    mp.spawn(worker, args=(a, port or free_port(), result), nprocs=world, join=True)
    return dict(result)


if __name__ == "__main__":
    main()
