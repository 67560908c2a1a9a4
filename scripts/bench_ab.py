#!/usr/bin/env python3
"""Compare two (or more) builds of normgrad_bench in alternating runs.

On a shared machine the same benchmark entry moves by 10-40% from one minute to the next, so a "before"
run followed by an "after" run mostly measures the machine. This runs the binaries in turn, ROUNDS times,
and reports each entry's best and median time per binary: a change is real when the best and the median
agree across the alternation. Every before/after in docs/performance.md since 2026-11-24 was taken this way.

    cp build/release/bench/normgrad_bench /tmp/bench_old     # before the change
    ... change, rebuild ...
    cp build/release/bench/normgrad_bench /tmp/bench_new
    python3 scripts/bench_ab.py --filter layer_norm/4096x1024/f32 --threads 1 --rounds 4 \\
        /tmp/bench_old /tmp/bench_new

Entries are those of normgrad_bench --filter (comma-separated substrings); only rows at --threads count.
"""
import argparse
import collections
import json
import os
import shlex
import statistics
import subprocess
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("binaries", nargs="+", help="normgrad_bench binaries to compare")
    p.add_argument("--filter", required=True, help="normgrad_bench --filter (comma-separated substrings)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-time", type=float, default=0.15, help="seconds of repetitions per entry and run")
    p.add_argument("--bench-args", default="", help="more arguments for every run, e.g. '--norm-mean 4'")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    # A bare name ("normgrad_bench") is a file here, not one to look up on PATH, as subprocess would.
    args.binaries = [os.path.abspath(b) for b in args.binaries]
    for b in args.binaries:
        if not os.path.isfile(b) or not os.access(b, os.X_OK):
            sys.exit(f"bench_ab: {b} is not an executable file")

    # entry -> the binary's place on the command line -> [ms]. By place, not path: the same binary twice is
    # an A/A run (how large a difference the machine alone makes), and must stay two columns.
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in range(args.rounds):
        for i, b in enumerate(args.binaries):
            cmd = [b, "--json", "--filter", args.filter, "--threads", str(args.threads),
                   "--min-time", str(args.min_time)] + shlex.split(args.bench_args)
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
            except OSError as e:
                sys.exit(f"bench_ab: cannot run {b}: {e.strerror}")
            if res.returncode != 0:
                sys.exit(f"bench_ab: {' '.join(cmd)} failed with status {res.returncode}:\n{res.stderr}")
            for number, line in enumerate(res.stdout.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    sys.exit(f"bench_ab: line {number} of {b}'s output is not JSON ({e.msg}): is it normgrad_bench?")
                if not isinstance(row, dict):
                    sys.exit(f"bench_ab: line {number} of {b}'s output is not a JSON object: is it normgrad_bench?")
                name = row.get("name", "")
                if row.get("threads") != args.threads or "seconds" not in row:
                    continue
                if not isinstance(name, str) or isinstance(row["seconds"], bool) \
                        or not isinstance(row["seconds"], (int, float)):
                    sys.exit(f"bench_ab: line {number} of {b}'s output has no entry name or no number of seconds")
                if name.startswith(("copy/", "peak_fma/", "bench/", "round_trip/")):  # the baselines
                    continue
                times[name][i].append(row["seconds"] * 1e3)
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)

    if not times:
        sys.exit(f"bench_ab: no entry matched --filter {args.filter!r} at {args.threads} threads")
    # Columns by file name where those differ, else by place and path (old/normgrad_bench, new/normgrad_bench).
    names = [os.path.basename(b) for b in args.binaries]
    labels = names if len(set(names)) == len(names) else [f"[{i + 1}] {b}" for i, b in enumerate(args.binaries)]
    width = max(len(n) for n in times)
    for name, per_bin in times.items():
        cells = []
        for i in range(len(args.binaries)):
            v = per_bin.get(i, [])
            # (the median of an even count is the mean of the middle two, not the upper one)
            cells.append(f"{labels[i]}: best {min(v):.3f} median {statistics.median(v):.3f} ms" if v
                         else f"{labels[i]}: -")
        print(f"{name:{width}s}  " + "   ".join(cells))


if __name__ == "__main__":
    main()
