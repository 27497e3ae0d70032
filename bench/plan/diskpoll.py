#!/usr/bin/env python3
"""diskpoll.py OUT: per run in diskpoll.sh's OUT (workload, strategy), its seconds, and over the
seconds that read more than 5000 blocks a second: the reads per second and the reads in flight
on average (the weighted milliseconds over the milliseconds)."""
import itertools
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: diskpoll.py OUT")
    try:
        rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 9]
    except OSError as e:
        sys.exit("diskpoll.py: %s" % e)
    print("%-10s %-9s %6s %8s %10s %9s" % ("workload", "strategy", "s", "reading", "reads/s", "in flight"))
    for (w, s), g in itertools.groupby(rows, key=lambda r: (r[1], r[2])):
        g = list(g)
        if s == "none" or len(g) < 2:
            continue
        act = []
        for a, b in zip(g, g[1:]):
            dt = float(b[0]) - float(a[0])
            if dt <= 0:
                continue
            rate = (int(b[3]) - int(a[3])) / dt
            depth = (int(b[8]) - int(a[8])) / (dt * 1e3)
            if rate > 5000:
                act.append((rate, depth))
        span = float(g[-1][0]) - float(g[0][0])
        if act:
            print("%-10s %-9s %6.0f %8d %9.1fk %9.2f" % (w, s, span, len(act), sum(x[0] for x in act) / len(act) / 1e3,
                                                   sum(x[1] for x in act) / len(act)))
        else:
            print("%-10s %-9s %6.0f %8d %10s %9s" % (w, s, span, 0, "-", "-"))


if __name__ == "__main__":
    main()
