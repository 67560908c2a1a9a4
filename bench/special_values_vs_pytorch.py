#!/usr/bin/env python3
"""normgrad against PyTorch on special and extreme values: where do the two give different numbers?

Runs bench/special_values (build it first: cmake --build --preset release --target special_values), computes
every case it printed with PyTorch (the same op, dtype and input; forward and gradient), and prints each
case where the two differ beyond rounding, then a count. Exit status 0 whatever it finds: the differences
are for a person to judge (see "Known differences" below).

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch      # CPU is enough
    /tmp/torchenv/bin/python bench/special_values_vs_pytorch.py
    /tmp/torchenv/bin/python bench/special_values_vs_pytorch.py --binary path/to/special_values

Known differences (PyTorch 2.15, 2026-11-28: 128 of 3126 cases), each a convention, a case where normgrad
is right and PyTorch is not, or rounding:
  pow(-inf, 0.5): inf here (C's pow), NaN in PyTorch (sqrt); pow(-0, 0.5)'s gradient: the sign of inf.
  clamp's gradient at its bounds: 1 here, 0 in PyTorch.
  maximum / minimum's gradient when one side is NaN: here the other side gets it, in PyTorch both.
  cross_entropy with a +inf logit off the target: inf here, NaN in PyTorch.
  layer_norm / rms_norm of a row whose squares overflow float (a value 1e20 or 3e38): the right values here
  (nn/norms/wide_stats.h), 0 or NaN in PyTorch.
  softmax / log_softmax / layer_norm gradients that are zero up to rounding (~1e-18 in f64): the last bits.
"""
import argparse
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

UNARY = {
    'exp': torch.exp, 'log': torch.log, 'sqrt': torch.sqrt, 'rsqrt': torch.rsqrt, 'abs': torch.abs,
    'square': torch.square, 'relu': torch.relu, 'gelu': lambda x: F.gelu(x, approximate='tanh'),
    'silu': F.silu, 'sigmoid': torch.sigmoid, 'tanh': torch.tanh, 'neg': torch.neg,
    'pow0.5': lambda x: torch.pow(x, 0.5), 'pow2': lambda x: torch.pow(x, 2.0), 'pow3': lambda x: torch.pow(x, 3.0),
    'pow-1': lambda x: torch.pow(x, -1.0), 'pow0': lambda x: torch.pow(x, 0.0),
    'clamp': lambda x: torch.clamp(x, -1.0, 1.0), 'add1': lambda x: x + 1.0, 'mul2': lambda x: x * 2.0,
    'rdiv1': lambda x: 1.0 / x,
}
BINARY = {'add': torch.add, 'sub': torch.sub, 'mul': torch.mul, 'div': torch.div, 'maximum': torch.maximum,
          'minimum': torch.minimum}
ROW = {
    'sum': lambda t: t.sum(), 'mean': lambda t: t.mean(), 'var': lambda t: t.var(1), 'max': lambda t: t.max(1).values,
    'softmax': lambda t: F.softmax(t, -1), 'log_softmax': lambda t: F.log_softmax(t, -1),
    'cross_entropy_t7': lambda t: F.cross_entropy(t, torch.tensor([7])),
    'cross_entropy_t0': lambda t: F.cross_entropy(t, torch.tensor([0])),
    'layer_norm': lambda t: F.layer_norm(t, (40,)), 'rms_norm': lambda t: F.rms_norm(t, (40,), eps=1e-5),
}


def close(a, b, dtype):
    """Equal up to rounding: NaN with NaN, inf with the same inf, else a relative and a tiny absolute bound."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    rel, tiny = (2e-5, 1e-30) if dtype == 'f32' else (1e-12, 1e-300)
    return abs(a - b) <= rel * max(abs(a), abs(b)) + tiny


def row_values(s):
    r = [0.1 * i - 2 for i in range(40)]
    r[7] = s
    return r


def torch_case(kind, op, dtype, vals):
    """The PyTorch numbers for one output line (all but its leading inputs)."""
    tdt = torch.float32 if dtype == 'f32' else torch.float64
    if kind == 'unary':
        x = torch.tensor([vals[0]], dtype=tdt, requires_grad=True)
        y = UNARY[op](x)
        y.backward(torch.ones_like(y))
        return [y.item(), x.grad.item()]
    if kind == 'binary':
        a = torch.tensor([vals[0]], dtype=tdt, requires_grad=True)
        b = torch.tensor([vals[1]], dtype=tdt, requires_grad=True)
        y = BINARY[op](a, b)
        y.backward(torch.ones_like(y))
        return [y.item(), a.grad.item(), b.grad.item()]
    x = torch.tensor([row_values(vals[0])], dtype=tdt, requires_grad=True)
    y = ROW[op](x)
    out = y.detach().reshape(-1).tolist()
    y.sum().backward()
    picked = [out[0]] + ([out[7]] if len(out) > 7 else [])
    return picked + [x.grad[0, 7].item(), x.grad[0, 0].item()]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--binary', default=os.path.join(here, '..', 'build', 'release', 'bench', 'special_values'))
    args = parser.parse_args()
    if not os.path.isfile(args.binary):
        sys.exit(f"special_values_vs_pytorch: no program at {args.binary}; build it with "
                 "cmake --build --preset release --target special_values, or pass --binary")
    torch.set_num_threads(1)
    lines = subprocess.run([args.binary], check=True, capture_output=True, text=True).stdout.splitlines()
    differ = 0
    for line in lines:
        p = line.split()
        if p[0] == 'argmax':
            dtype, s, got = p[1], float(p[2]), float(p[3])
            tdt = torch.float32 if dtype == 'f32' else torch.float64
            want = float(torch.tensor([row_values(s)], dtype=tdt).argmax(1).item())
            if got != want:
                differ += 1
                print(f"argmax {dtype} x7={s:.5g}: normgrad {got:g}, PyTorch {want:g}")
            continue
        kind, op, dtype = p[0], p[1], p[2]
        vals = [float(v) for v in p[3:]]
        n_in = {'unary': 1, 'binary': 2, 'row': 1}[kind]
        got = vals[n_in:]
        want = torch_case(kind, op, dtype, vals[:n_in])
        if len(got) != len(want) or not all(close(g, w, dtype) for g, w in zip(got, want)):
            differ += 1
            inputs = ' '.join(f'{v:.5g}' for v in vals[:n_in])
            print(f"{kind} {op} {dtype} ({inputs}): normgrad {[f'{v:.5g}' for v in got]}, "
                  f"PyTorch {[f'{v:.5g}' for v in want]}")
    print(f"{differ} of {len(lines)} cases differ (torch {torch.__version__})")


if __name__ == '__main__':
    main()
