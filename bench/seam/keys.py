#!/usr/bin/python3
"""Compare the keys of bench.csv and of the JSON epoch lines of two bench runs (before, after):
every key before must exist after (new keys may be added). Usage: keys.py BEFORE_DIR AFTER_DIR"""
import csv, json, os, sys

def keys_of(d):
    with open(os.path.join(d, "bench.csv")) as f:
        header = next(csv.reader(f))
    lines = set()
    for sub in sorted(os.listdir(d)):
        p = os.path.join(d, sub, "bench-stdout.jsonl")
        if not os.path.exists(p):
            continue
        for line in open(p):
            line = line.strip()
            if line.startswith("{"):
                walk(json.loads(line), "", lines)
    return set(header), lines

def walk(o, prefix, out):
    if isinstance(o, dict):
        for k, v in o.items():
            out.add(prefix + k)
            walk(v, prefix + k + ".", out)
    elif isinstance(o, list):
        for v in o:
            walk(v, prefix + "[].", out)

b_csv, b_json = keys_of(sys.argv[1])
a_csv, a_json = keys_of(sys.argv[2])
gone = sorted(b_csv - a_csv) + sorted(b_json - a_json)
print(f"{sys.argv[1]} -> {sys.argv[2]}: csv {len(b_csv)} -> {len(a_csv)} keys, json {len(b_json)} -> {len(a_json)} keys;",
      "added:", sorted((a_csv - b_csv) | (a_json - b_json)) or "none", "; gone:", gone or "none")
sys.exit(1 if gone else 0)
