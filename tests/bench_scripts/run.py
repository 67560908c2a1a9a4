#!/usr/bin/env python3
"""scripts/bench_ab.py and scripts/bench_summary.py on fabricated input (ctest: BenchScripts.BadInputAndMedians).

Stand-ins for normgrad_bench (small shell scripts that print given lines) check that bad input is named rather
than a traceback, and that bench_ab's median of an even count is the mean of the middle two.

    python3 tests/bench_scripts/run.py scripts    # the folder holding the two scripts
"""
import os
import subprocess
import sys
import tempfile

scripts = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "scripts")
failures = []


def run(script, *args):
    res = subprocess.run([sys.executable, os.path.join(scripts, script), *args], capture_output=True, text=True)
    return res.returncode, res.stdout + res.stderr


def check(what, script, args, rc, want):
    got_rc, out = run(script, *args)
    ok = (rc is None or got_rc == rc) and want in out and "Traceback" not in out
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failures.append(what)
        print("  status %d (wanted %s), output:\n  %s" % (got_rc, rc, out.strip().replace("\n", "\n  ")))


with tempfile.TemporaryDirectory() as tmp:
    def fake(name, *lines):
        """A stand-in for normgrad_bench that prints these lines, whatever its arguments."""
        data = os.path.join(tmp, name + ".out")
        with open(data, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write('#!/bin/sh\ncat "%s"\n' % data)
        os.chmod(path, 0o755)
        return path

    def row(ms, name="a/1", threads=2):
        return '{"name": "%s", "threads": %d, "seconds": %r}' % (name, threads, ms / 1e3)

    ab = ["--filter", "a", "--rounds", "1", "--min-time", "0.01"]
    # bench_ab: the statistics
    check("bench_ab: median of an even count", "bench_ab.py", ab + [fake("even", *[row(x) for x in (4, 1, 3, 2)])],
          0, "best 1.000 median 2.500 ms")
    check("bench_ab: median of an odd count", "bench_ab.py", ab + [fake("odd", *[row(x) for x in (10, 1, 2)])],
          0, "best 1.000 median 2.000 ms")
    check("bench_ab: rows at other thread counts and the baselines left out", "bench_ab.py",
          ab + [fake("mixed", row(5), row(1, threads=1), row(0.5, name="copy/16MiB"), "", row(7))],
          0, "best 5.000 median 6.000 ms")
    # bench_ab: bad input, named
    check("bench_ab: output that is not JSON", "bench_ab.py", ab + [fake("notjson", row(1), "hello")],
          1, "line 2 of")
    check("bench_ab: JSON that is not an object", "bench_ab.py", ab + [fake("notobj", "[1, 2]")],
          1, "is not a JSON object")
    check("bench_ab: seconds that are not a number", "bench_ab.py",
          ab + [fake("strsec", '{"name": "a/1", "threads": 2, "seconds": "x"}')], 1, "no number of seconds")
    check("bench_ab: no output", "bench_ab.py", ab + [fake("silent")], 1, "no entry matched")
    garbage = os.path.join(tmp, "garbage")
    with open(garbage, "w") as f:
        f.write("not a program")
    os.chmod(garbage, 0o755)
    check("bench_ab: a file that cannot be run", "bench_ab.py", ab + [garbage], 1, "cannot run")
    check("bench_ab: a missing file", "bench_ab.py", ab + [os.path.join(tmp, "missing")], 1,
          "is not an executable file")
    check("bench_ab: --rounds 0", "bench_ab.py", ["--filter", "a", "--rounds", "0", fake("zero", row(1))], 2,
          "--rounds must be at least 1")

    # bench_summary: bad input, named
    def jsonl(name, *lines):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    check("bench_summary: a missing file", "bench_summary.py", [os.path.join(tmp, "missing.jsonl")], 1,
          "cannot read")
    check("bench_summary: an empty file", "bench_summary.py", [jsonl("empty.jsonl")], 1, "no matmul entry")
    check("bench_summary: an entry whose name is not a string", "bench_summary.py",
          [jsonl("nullname.jsonl", '{"bench": "matmul", "name": null, "threads": 2, "ratio": 0.8}')], 0,
          "| matmul 1024^3 / 2048^3, NN / NT / TN | no entry | 70%: not measured |")
    check("bench_summary: the range and the count of readings that meet the target", "bench_summary.py",
          [jsonl("two.jsonl", *['{"bench": "matmul", "name": "matmul/1024x1024x1024/NN", "threads": 2, '
                                '"shape": "1024x1024x1024", "ratio": %s}' % r for r in ("0.65", "0.75")])], 0,
          "| matmul 1024^3 / 2048^3, NN / NT / TN | 65.0-75.0% | 70%: 1 of 2 readings |")

print("bench scripts: %s" % ("%d failure(s)" % len(failures) if failures else "ok"))
sys.exit(1 if failures else 0)
