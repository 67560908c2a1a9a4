#!/usr/bin/env python3
"""Summarize full runs of bench/normgrad_bench against issue 6's targets: the README's Performance table.

Each row is the range (lowest-highest) of one kind of figure over every matching entry of every run given,
and says whether the target is met in all of those readings, and if not, in how many. The figures are the
benchmark's own ratios to the baselines it measured in the same run; nothing is typed in here but the
targets.

    for i in 1 2 3; do ./build/release/bench/normgrad_bench --json > run$i.jsonl 2> run$i.md; done
    python3 scripts/bench_summary.py run1.jsonl run2.jsonl run3.jsonl
"""
import argparse
import json
import sys

CUBES = ("1024x1024x1024", "2048x2048x2048")
TRAINER_SHAPES = ("1024x256x768", "1024x1024x256", "1024x256x1000")
ROW_SHAPES = ("4096x1024", "16384x256", "1024x4096")


def load(paths):
    entries = []
    for path in paths:
        try:
            with open(path, errors="replace") as f:  # (a file that is not UTF-8 is then not JSON, below)
                for number, line in enumerate(f, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError as e:
                        sys.exit("bench_summary: %s line %d is not JSON (%s): give normgrad_bench --json output"
                                 % (path, number, e.msg))
                    if not isinstance(entry, dict):
                        sys.exit("bench_summary: %s line %d is not a JSON object: give normgrad_bench --json output"
                                 % (path, number))
                    entries.append(entry)
        except OSError as e:
            sys.exit("bench_summary: cannot read %s: %s" % (path, e.strerror))
    return entries


def pick(entries, prefix, shapes=None, threads=2, dtype=None, passes=None, forms=None):
    out = []
    for e in entries:
        name = e.get("name", "")
        if not isinstance(name, str) or not name.startswith(prefix) or e.get("threads") != threads:
            continue
        if shapes is not None and e.get("shape") not in shapes:
            continue
        if dtype is not None and e.get("dtype") != dtype:
            continue
        if passes is not None and e.get("pass") not in passes:
            continue
        if forms is not None and e.get("form") not in forms:
            continue
        out.append(e)
    return out


def span(values, fmt, unit=""):
    """"69.1-77.4%": the lowest and highest value (one value when they are equal), then the unit."""
    if not values:
        return "no entry"
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return (lo if lo == hi else lo + "-" + hi) + unit


def verdict(values, ok):
    if not values:
        return "not measured"
    met = sum(1 for v in values if ok(v))
    if met == len(values):
        return "met"
    return "%d of %d readings" % (met, len(values))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="normgrad_bench --json outputs (one per run)")
    args = ap.parse_args()
    entries = load(args.runs)
    if not any(e.get("bench") == "matmul" for e in entries):
        sys.exit("bench_summary: no matmul entry in %s: not normgrad_bench --json output?" % ", ".join(args.runs))

    rows = []

    def ratio_row(what, sel, target):
        values = [100 * e["ratio"] for e in sel if isinstance(e.get("ratio"), (int, float))]
        rows.append((what, span(values, "{:.1f}", "%"), "%g%%: %s" % (target, verdict(values, lambda v: v >= target))))

    ratio_row("matmul 1024^3 / 2048^3, NN / NT / TN", pick(entries, "matmul/", CUBES), 70)
    ratio_row("the same, 1 thread (NN)", pick(entries, "matmul/", CUBES, threads=1), 70)
    ratio_row("matmul at the trainer's shapes, all forms", pick(entries, "matmul/", TRAINER_SHAPES), 50)
    scal = [e["scaling"] for e in pick(entries, "matmul/", threads=1) if isinstance(e.get("scaling"), (int, float))]
    rows.append(("matmul 1 -> 2 threads (NN, every shape)", span(scal, "{:.2f}", "x"),
                 "1.8x: " + verdict(scal, lambda v: v >= 1.8)))
    for norm, label in (("layer_norm/", "LayerNorm"), ("rms_norm/", "RMSNorm"), ("group_norm/", "GroupNorm (N, C)"),
                        ("batch_norm/", "BatchNorm")):
        for dtype in ("f32", "bf16"):
            ratio_row("%s %s fwd" % (label, dtype), pick(entries, norm, ROW_SHAPES, dtype=dtype, passes=("fwd",)), 85)
            ratio_row("%s %s fwd+bwd" % (label, dtype),
                      pick(entries, norm, ROW_SHAPES, dtype=dtype, passes=("fwd+bwd",)), 70)
    ratio_row("GroupNorm on (16, 256, 32, 32), f32 and bf16 fwd",
              pick(entries, "group_norm/16x256x32x32", passes=("fwd",)), 85)
    ratio_row("softmax fwd", pick(entries, "softmax/"), 70)
    ratio_row("cross-entropy fwd+bwd", pick(entries, "cross_entropy/"), 70)
    ratio_row("Adam step", pick(entries, "adam_step/"), 70)
    steps = [e["ms_per_step"] for e in pick(entries, "train_step/") if isinstance(e.get("ms_per_step"), (int, float))]
    rows.append(("exp2 training step, the four configs (ms)", span(steps, "{:.1f}", " ms"),
                 "100 ms: " + verdict(steps, lambda v: v <= 100)))
    scal = [e["scaling"] for e in pick(entries, "train_step/", threads=1) if isinstance(e.get("scaling"), (int, float))]
    rows.append(("exp2 step 1 -> 2 threads", span(scal, "{:.2f}", "x"), "1.8x: " + verdict(scal, lambda v: v >= 1.8)))
    copies = [e["gbps"] for e in entries if e.get("name") == "copy/16MiB" and isinstance(e.get("gbps"), (int, float))]
    peaks = [e["gflops"] for e in entries
             if e.get("name") == "peak_fma/f32" and e.get("threads") == 1 and isinstance(e.get("gflops"), (int, float))]

    print("%d run(s): the 16 MiB copy %s GB/s, the peak FMA loop %s GFLOP/s per thread\n" %
          (len(args.runs), span(copies, "{:.1f}"), span(peaks, "{:.0f}")))
    print("| what | figure (ratio to the run's own baseline) | target (issue 6) |")
    print("|---|---|---|")
    for what, fig, target in rows:
        print("| %s | %s | %s |" % (what, fig, target))


if __name__ == "__main__":
    main()
