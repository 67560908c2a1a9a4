#!/usr/bin/env python3
"""A differential check of normgrad against PyTorch over random shapes, strides and broadcasts.

special_values_vs_pytorch.py puts special values through each op on fixed, contiguous shapes. This script
puts ordinary values through random LAYOUTS: every input is a base tensor seen through a random chain of
views (transpose, permute, slice with a step, narrow, select, expand, unsqueeze, reshape, flatten), so the
ops meet strides, zero strides, offsets and broadcasts, and each view's backward is checked with the op's.
For each case it:
  1. draws the op, its arguments and its inputs' chains (seeded: --seed);
  2. computes the case with PyTorch, forward and backward (an upstream gradient drawn in the output's shape);
  3. sends the case to build/release/bench/view_sweep (one JSON line), which runs it with normgrad;
  4. compares the output, the gradient of every base tensor, and any state updated in place, within a
     tolerance for the dtype (f64 1e-9, f32 3e-5, bf16 two of its roundings, relative to the tensor's
     largest value), and that both refuse, or both accept, the same cases.

    cmake --build --preset release --target view_sweep
    /tmp/torchenv/bin/python bench/view_sweep_vs_pytorch.py --cases 3000 [--seed 1] [--ops matmul,softmax]

It prints each case that differs (the op, the layouts, the worst element) and a count per op. Exit status 1
if any case differs. PyTorch is needed here only; the tests do not use it.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_DTYPE = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}
# the tolerance, relative to the largest magnitude in the reference tensor (and at least that of 1)
TOL = {"f64": 1e-9, "f32": 3e-5, "bf16": 2 * 2.0**-8, "f16": 2 * 2.0**-11}


# ---- layouts: a base tensor and the chain of views that gives a wanted shape ----------------------------

def factor(n, rng):
    """n = a * b with 1 < a, b (or None)"""
    divs = [d for d in range(2, n) if n % d == 0]
    if not divs:
        return None
    a = rng.choice(divs)
    return a, n // a


def step_back(shape, rng, expand=True):
    """One view that gives `shape`, and the shape before it: (prev_shape, view), or None. expand = False:
    no broadcast views (a norm's x: a group of equal values has no spread, and its gradient is rounding)"""
    nd = len(shape)
    kinds = ["slice", "narrow", "select", "unsqueeze", "reshape_split", "flatten"]
    if expand:
        kinds += ["expand", "expand_lead"]
    if nd >= 2:
        kinds += ["transpose", "transpose", "permute"]
    rng.shuffle(kinds)
    for kind in kinds:
        s = list(shape)
        if kind == "transpose":
            a, b = rng.sample(range(nd), 2)
            s[a], s[b] = s[b], s[a]
            return s, ["transpose", a, b]
        if kind == "permute":
            p = list(range(nd))
            rng.shuffle(p)
            prev = [0] * nd
            for i in range(nd):
                prev[p[i]] = s[i]
            return prev, ["permute", p]
        if kind == "slice" and nd >= 1:
            d = rng.randrange(nd)
            step, start, extra = rng.choice([1, 2, 3]), rng.randrange(3), rng.randrange(3)
            if s[d] == 0:
                continue
            end = start + (s[d] - 1) * step + 1
            s[d] = end + extra
            # the end may run past the last element it takes (a slice clips nothing here: end <= size)
            end = min(end + rng.randrange(step), s[d])
            return s, ["slice", d, start, end, step]
        if kind == "narrow" and nd >= 1:
            d = rng.randrange(nd)
            start = rng.randrange(4)
            n = s[d]
            s[d] = n + start + rng.randrange(3)
            return s, ["narrow", d, start, n]
        if kind == "select":
            d = rng.randrange(nd + 1)
            k = rng.randint(1, 4)
            s.insert(d, k)
            return s, ["select", d, rng.randrange(k)]
        if kind == "expand":
            ds = [d for d in range(nd) if s[d] > 1]
            if not ds:
                continue
            d = rng.choice(ds)
            s[d] = 1
            return s, ["expand", list(shape)]
        if kind == "expand_lead" and nd >= 1:
            # expand adds leading dims
            j = rng.randint(1, nd)
            return s[j:], ["expand", list(shape)]
        if kind == "unsqueeze":
            ones = [d for d in range(nd) if s[d] == 1]
            if not ones:
                continue
            d = rng.choice(ones)
            del s[d]
            return s, ["unsqueeze", d]
        if kind == "reshape_split":
            # the view merges two neighbouring dims of prev... or prev has one dim split in two
            if nd >= 2 and rng.random() < 0.5:
                d = rng.randrange(nd - 1)
                merged = s[:d] + [s[d] * s[d + 1]] + s[d + 2:]
                return merged, ["reshape", list(shape)]
            ds = [d for d in range(nd) if factor(s[d], rng)]
            if not ds:
                continue
            d = rng.choice(ds)
            a, b = factor(s[d], rng)
            return s[:d] + [a, b] + s[d + 1:], ["reshape", list(shape)]
        if kind == "flatten" and nd >= 1:
            ds = [d for d in range(nd) if factor(s[d], rng)]
            if not ds:
                continue
            d = rng.choice(ds)
            a, b = factor(s[d], rng)
            return s[:d] + [a, b] + s[d + 1:], ["flatten", d, d + 1]
    return None


def layout(shape, rng, depth=None, expand=True):
    """(base_shape, views) whose views give `shape`"""
    if depth is None:
        depth = rng.choice([0, 1, 1, 2, 2, 3])
    views = []
    s = list(shape)
    for _ in range(depth):
        st = step_back(s, rng, expand)
        if st is None:
            break
        s, v = st
        views.insert(0, v)
        if math.prod(s) > 200000:  # keep the cases small
            return list(shape), []
    if views and rng.random() < 0.1:
        views.append(["contiguous"])
    return s, views


def torch_view(t, v):
    name = v[0]
    if name == "transpose":
        return t.transpose(v[1], v[2])
    if name == "permute":
        return t.permute(*v[1])
    if name == "slice":
        idx = [slice(None)] * t.dim()
        idx[v[1]] = slice(v[2], v[3], v[4])
        return t[tuple(idx)]
    if name == "narrow":
        return t.narrow(v[1], v[2], v[3])
    if name == "select":
        return t.select(v[1], v[2])
    if name == "expand":
        return t.expand(*v[1])
    if name == "unsqueeze":
        return t.unsqueeze(v[1])
    if name == "squeeze":
        return t.squeeze(v[1])
    if name == "reshape":
        return t.reshape(v[1])
    if name == "flatten":
        return t.flatten(v[1], v[2])
    if name == "contiguous":
        return t.contiguous()
    raise ValueError(name)


# ---- the cases ------------------------------------------------------------------------------------------

EDGE = False  # --edge: dims of size 0, and more 0-d tensors


def rand_shape(rng, nd=None, big=False):
    if nd is None:
        nd = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4] + ([0, 0, 1] if EDGE else []))
    sizes = [1, 2, 3, 4, 5, 7, 8]
    if big:
        sizes += [16, 17, 33, 64, 70]
    if EDGE and rng.random() < 0.5:
        sizes = sizes + [0] * len(sizes)
    return [rng.choice(sizes) for _ in range(nd)]


def values(n, rng, kind="normal"):
    if kind == "positive":
        return [abs(rng.gauss(0, 1)) + 0.1 for _ in range(n)]
    if kind == "away0":
        return [(abs(rng.gauss(0, 1)) + 0.5) * rng.choice([-1, 1]) for _ in range(n)]
    return [rng.gauss(0, 1) for _ in range(n)]


def float_input(shape, rng, kind="normal", grad=True, plain=False, dtype=None, expand=True):
    base, views = (list(shape), []) if plain else layout(shape, rng, expand=expand)
    d = {"shape": base, "data": values(math.prod(base), rng, kind), "grad": grad, "views": views}
    if dtype:
        d["dtype"] = dtype
    return d


def int_input(shape, lo, hi, rng, plain=False):
    base, views = (list(shape), []) if plain else layout(shape, rng)
    return {"shape": base, "data": [rng.randrange(lo, hi) for _ in range(math.prod(base))], "int": True,
            "views": views}


def broadcast_shapes(out, rng):
    """a shape that broadcasts to out: some dims 1, some leading dims dropped"""
    s = [1 if rng.random() < 0.3 else n for n in out]
    drop = rng.randint(0, len(s)) if rng.random() < 0.3 else 0
    return s[drop:]


UNARY = {"neg": "normal", "exp": "normal", "log": "positive", "sqrt": "positive", "rsqrt": "positive",
         "abs": "away0", "square": "normal", "relu": "away0", "gelu": "normal", "silu": "normal",
         "sigmoid": "normal", "tanh": "normal"}
SCALAR = ["add_s", "sub_s", "mul_s", "div_s", "rsub_s", "rdiv_s"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]
OPS = (list(UNARY) + ["pow", "clamp"] + SCALAR + ["contiguous", "clone", "reshape", "to"] + BINARY +
       ["sum_all", "mean_all", "sum", "mean", "var", "max", "argmax", "softmax", "log_softmax",
        "causal_softmax", "matmul", "cat", "stack", "index_select", "embedding", "masked_fill",
        "cross_entropy", "layer_norm", "rms_norm", "group_norm", "batch_norm", "add_layer_norm",
        "add_rms_norm", "rope", "fill_", "copy_", "add_", "mul_", "view"])
# Where normgrad and PyTorch differ by design: (op, who refuses, the words of the refusal, why). A case that
# differs only so is counted apart, as "known", and listed at the end.
KNOWN = [
    ("group_norm", "PyTorch", "Expected more than 1 value per channel",
     "PyTorch refuses GroupNorm when N * C/G * S = 1 and accepts every other group of one value (y = bias); "
     "normgrad accepts them all"),
    ("group_norm", "PyTorch", "Expected HxW to be greater than 0",
     "an empty feature map: normgrad returns the empty output"),
    ("batch_norm", "normgrad", "expected more than 1 value per channel when training",
     "an empty batch in training: normgrad refuses it as it refuses one value per channel (PyTorch returns "
     "the empty output)"),
    ("mean", "normgrad", "cannot take the mean of an empty set",
     "the mean of no values: an ng::Error in normgrad, NaN in PyTorch"),
    ("mean_all", "normgrad", "cannot take the mean of an empty set", "the same, for the mean of everything"),
    ("var", "normgrad", "needs at least",
     "the variance of too few values: an ng::Error in normgrad, NaN or inf in PyTorch"),
    ("cross_entropy", "value", "0 where PyTorch gives nan",
     "no target counted (every one ignored, or none): the loss is 0 in normgrad (tensor/ops/loss.h), NaN "
     "in PyTorch"),
]
# ops the cases also run in bf16 or f16 (their inputs, outputs and gradients in that dtype)
BF16_OPS = set(UNARY) | set(BINARY) | {"softmax", "log_softmax", "matmul", "layer_norm", "rms_norm",
                                       "group_norm", "batch_norm", "add_layer_norm", "add_rms_norm",
                                       "sum", "mean"}


def make_case(op, rng):
    """(dtype, args, inputs); the inputs' final shapes fit the op"""
    dt = rng.choice(["f64", "f64", "f32"])
    if op in BF16_OPS and rng.random() < 0.25:
        dt = rng.choice(["bf16", "bf16", "f16"])
    big = rng.random() < 0.4
    # large: shapes past the fast kernels' short-row and small-matrix paths (the GEMM's packed panels, the
    # norms' (N, C) batches and wide rows, the row ops' SIMD loops)
    large = rng.random() < 0.12
    a = {}
    if op in UNARY:
        return dt, a, [float_input(rand_shape(rng, big=big), rng, UNARY[op])]
    if op == "pow":
        a["p"] = rng.choice([2.0, 3.0, -1.0, 0.5, 1.5, -0.5])
        kind = "positive" if a["p"] != int(a["p"]) else "away0"
        return dt, a, [float_input(rand_shape(rng, big=big), rng, kind)]
    if op == "clamp":
        a["lo"], a["hi"] = -0.5, rng.choice([0.7, 2.0])
        return dt, a, [float_input(rand_shape(rng, big=big), rng, "normal")]
    if op in SCALAR:
        a["s"] = rng.choice([1.5, -2.0, 0.25])
        kind = "away0" if op == "rdiv_s" else "normal"
        return dt, a, [float_input(rand_shape(rng, big=big), rng, kind)]
    if op in ("contiguous", "clone"):
        return dt, a, [float_input(rand_shape(rng, big=big), rng)]
    if op == "reshape":
        s = rand_shape(rng, nd=rng.choice([2, 3, 4]))
        n = math.prod(s)
        f = factor(n, rng)
        a["shape"] = [f[0], -1] if f else [-1]
        return dt, a, [float_input(s, rng)]
    if op == "to":
        src = rng.choice(["f32", "f64", "bf16", "f16"])
        a["dtype"] = rng.choice([t for t in ["f32", "f64", "bf16", "f16"] if t != src])
        return src, a, [float_input(rand_shape(rng, big=big), rng)]
    if op in BINARY:
        out = rand_shape(rng, nd=rng.choice([1, 2, 3, 4]), big=big)
        sa, sb = broadcast_shapes(out, rng), broadcast_shapes(out, rng)
        if rng.random() < 0.5:
            sa = out
        kb = "away0" if op == "div" else "normal"
        return dt, a, [float_input(sa, rng), float_input(sb, rng, kb)]
    if op in ("sum_all", "mean_all"):
        return dt, a, [float_input(rand_shape(rng, big=big), rng)]
    if op in ("sum", "mean", "var"):
        s = rand_shape(rng, nd=rng.choice([1, 2, 3, 4]), big=big)
        nd = len(s)
        k = rng.randint(1, nd)
        dims = rng.sample(range(nd), k)
        dims = [d - nd if rng.random() < 0.3 else d for d in dims]
        a["dims"], a["keepdim"] = dims, rng.random() < 0.5
        if op == "var":
            a["unbiased"] = rng.random() < 0.5
            if math.prod(s[d] for d in dims) < 2:
                s[dims[0]] = 3
        return dt, a, [float_input(s, rng)]
    if op in ("max", "argmax", "softmax", "log_softmax"):
        s = rand_shape(rng, nd=rng.choice([1, 2, 3, 4]), big=big)
        if large:
            s = [rng.choice([3, 16]), rng.choice([257, 1000, 4100])]
        d = rng.randrange(len(s))
        a["dim"] = d - len(s) if rng.random() < 0.3 else d
        if op in ("max", "argmax"):
            a["keepdim"] = rng.random() < 0.5
        return dt, a, [float_input(s, rng)]
    if op == "causal_softmax":
        T = rng.choice([1, 2, 5, 8, 17, 33])
        s = rand_shape(rng, nd=rng.choice([0, 1, 2])) + [T, T]
        return dt, a, [float_input(s, rng)]
    if op == "matmul":
        M, N, K = (rng.choice([1, 2, 3, 5, 8, 17, 33, 64, 70]) for _ in range(3))
        if large:
            M, N, K = (rng.choice([96, 130, 257, 300]) for _ in range(3))
        form = rng.choice(["vv", "mv", "vm", "mm", "mm", "bmm", "bmm"])
        if form == "vv":
            sa, sb = [K], [K]
        elif form == "mv":
            sa, sb = [M, K], [K]
        elif form == "vm":
            sa, sb = [K], [K, N]
        elif form == "mm":
            sa, sb = [M, K], [K, N]
        else:
            batch = rand_shape(rng, nd=rng.choice([1, 2])) if not large else [rng.choice([1, 2])]
            ba, bb = broadcast_shapes(batch, rng), broadcast_shapes(batch, rng)
            sa, sb = ba + [M, K], bb + [K, N]
            if rng.random() < 0.2:
                sb = [K, N]
        return dt, a, [float_input(sa, rng), float_input(sb, rng)]
    if op in ("cat", "stack"):
        s = rand_shape(rng, nd=rng.choice([1, 2, 3]), big=big)
        nd = len(s)
        d = rng.randrange(nd + (1 if op == "stack" else 0))
        ins = []
        for _ in range(rng.randint(1, 4)):
            si = list(s)
            if op == "cat":
                si[d] = rng.choice([1, 2, 3, 5])
            ins.append(float_input(si, rng, grad=rng.random() < 0.8))
        a["dim"] = d
        return dt, a, ins
    if op == "index_select":
        s = rand_shape(rng, nd=rng.choice([1, 2, 3]), big=big)
        d = rng.randrange(len(s))
        a["dim"] = d
        k = rng.randint(1, 6) if s[d] > 0 else 0
        return dt, a, [float_input(s, rng), int_input([k], 0, max(1, s[d]), rng)]
    if op == "embedding":
        V, C = rng.choice([3, 10, 50]), rng.choice([1, 4, 16, 33])
        ids = rand_shape(rng, nd=rng.choice([1, 2]))
        return dt, a, [float_input([V, C], rng), int_input(ids, 0, V, rng)]
    if op == "masked_fill":
        s = rand_shape(rng, nd=rng.choice([1, 2, 3]), big=big)
        a["value"] = rng.choice([0.0, -1e9, 2.5])
        return dt, a, [float_input(s, rng), int_input(broadcast_shapes(s, rng), 0, 2, rng)]
    if op == "cross_entropy":
        lead = rand_shape(rng, nd=rng.choice([1, 2]))
        V = rng.choice([2, 5, 17, 70]) if not large else rng.choice([1000, 4100])
        # the ignored target: -100 (PyTorch's default), or a class id itself (then that class is skipped)
        a["ignore_index"] = ign = rng.choice([-100, -100, -1, 0, 1])
        t = int_input(lead, 0, V, rng)
        n = math.prod(t["shape"])
        for i in range(n):
            if rng.random() < 0.15:
                t["data"][i] = ign
        if t["data"]:
            t["data"][0] = V - 1  # not all ignored (where normgrad's convention differs); V - 1 >= 1 is no ign
        if t["views"]:  # the kept target must be one the views keep: keep every target then
            t["data"] = [rng.randrange(V) for _ in range(n)]
        return dt, a, [float_input(lead + [V], rng), t]
    if op in ("layer_norm", "add_layer_norm"):
        s = rand_shape(rng, nd=rng.choice([1, 2, 3]), big=True)
        if large:
            s = [rng.choice([3, 16, 40]), rng.choice([256, 1000, 1024, 4100])]
        k = rng.randint(1, min(2, len(s)))
        if math.prod(s[len(s) - k:]) == 1:
            s[-1] = 3  # LayerNorm over one value: y = bias, and its gradient 0 is all rounding (x - mean) * rstd
        ns = s[len(s) - k:]
        a["normalized_shape"], a["eps"] = ns, 1e-5
        ins = [float_input(s, rng, expand=False)]
        if op == "add_layer_norm":
            a["alpha"] = rng.choice([1.0, 0.5])
            ins.append(float_input(s, rng, expand=False))
        if rng.random() < 0.7:
            wdt = "f32" if dt in ("bf16", "f16") and rng.random() < 0.5 else None
            ins += [float_input(ns, rng, dtype=wdt), float_input(ns, rng, dtype=wdt)]
        return dt, a, ins
    if op in ("rms_norm", "add_rms_norm"):
        s = rand_shape(rng, nd=rng.choice([1, 2, 3]), big=True)
        if large:
            s = [rng.choice([3, 16, 40]), rng.choice([256, 1000, 1024, 4100])]
        a["eps"] = 1e-5
        ins = [float_input(s, rng, expand=False)]
        if op == "add_rms_norm":
            a["alpha"] = rng.choice([1.0, 0.5])
            ins.append(float_input(s, rng, expand=False))
        if rng.random() < 0.7:
            ins.append(float_input(s[-1:], rng))
        return dt, a, ins
    if op == "group_norm":
        N = rng.choice([1, 2, 3, 8])
        G = rng.choice([1, 2, 4])
        C = G * rng.choice([1, 2, 3, 8, 16])
        sp = rand_shape(rng, nd=rng.choice([0, 0, 1, 2]))
        if large:  # the (N, C) batches (groups of 2 to 64), the pairs path for bf16, and feature maps
            G = rng.choice([4, 8, 32])
            C = G * rng.choice([2, 8, 16, 32, 64])
            N = rng.choice([8, 40])
            sp = rng.choice([[], [], [16], [7, 9]])
        s = [N, C] + sp
        a["groups"], a["eps"] = G, 1e-5
        ins = [float_input(s, rng, expand=False)]
        if rng.random() < 0.7:
            ins += [float_input([C], rng), float_input([C], rng)]
        return dt, a, ins
    if op == "batch_norm":
        N = rng.choice([2, 3, 8, 33])
        C = rng.choice([1, 3, 16, 70])
        sp = rand_shape(rng, nd=rng.choice([0, 0, 1, 2]))
        if large:  # BatchNorm's chunked statistics and wide rows
            N, C, sp = rng.choice([(600, 64, []), (130, 2100, []), (40, 32, [64]), (2, 8, [1000])])
        a["training"] = rng.random() < 0.7
        a["momentum"], a["eps"] = rng.choice([0.1, 0.5]), 1e-5
        rm = {"shape": [C], "data": values(C, rng), "grad": False}
        rv = {"shape": [C], "data": values(C, rng, "positive"), "grad": False}
        ins = [float_input([N, C] + sp, rng, expand=False), rm, rv]
        if rng.random() < 0.7:
            ins += [float_input([C], rng), float_input([C], rng)]
        return dt, a, ins
    if op in ("fill_", "copy_", "add_", "mul_"):
        # a write through a view of a base; copy_ and add_ read a source that may be another view of the
        # SAME base (alias), overlapping the destination or not
        s = rand_shape(rng, nd=rng.choice([1, 2, 3]), big=big)
        dst = float_input(s, rng, grad=False)
        if op == "fill_":
            a["value"] = rng.choice([0.0, 2.5, -1.0])
            return dt, a, [dst]
        if op == "mul_":
            a["s"] = rng.choice([0.5, -3.0])
            return dt, a, [dst]
        if op == "add_":
            a["alpha"] = rng.choice([1.0, -0.5])
        src_shape = broadcast_shapes(s, rng) if rng.random() < 0.4 else s
        src = float_input(src_shape, rng, grad=False)
        if rng.random() < 0.5:
            # the source: a view of the destination's base with the source's shape, if one fits
            base = dst["shape"]
            if math.prod(base) >= math.prod(src_shape):
                src = {"alias": 0, "shape": base, "grad": False,
                       "views": [["flatten", 0, -1]] if len(base) > 0 else [["unsqueeze", 0]]}
                n = math.prod(src_shape)
                start = rng.randrange(math.prod(base) - n + 1)
                src["views"] += [["narrow", 0, start, n], ["reshape", list(src_shape)]]
        return dt, a, [dst, src]
    if op == "view":
        s = rand_shape(rng, nd=rng.choice([2, 3, 4]))
        n = math.prod(s)
        f = factor(n, rng)
        a["shape"] = [f[0], -1] if f else [-1]
        return dt, a, [float_input(s, rng, grad=rng.random() < 0.5)]
    if op == "rope":
        B, T, NH = rng.choice([1, 2]), rng.choice([1, 3, 8]), rng.choice([1, 2])
        HS = rng.choice([2, 8, 16, 34])
        a["theta"] = rng.choice([10000.0, 1e6])
        return dt, a, [float_input([B, T, NH, HS], rng)]
    raise ValueError(op)


def exactly_in(values, dt):
    """values made exactly representable in dt (bf16/f16; others unchanged). PyTorch converts f64 to bf16 and
    f16 through f32, rounding twice; normgrad rounds once (to nearest even). Near a tie the two differ by one
    unit (1.3164062532 is 1.3125 in PyTorch's bf16, 1.3203125 in normgrad's), so the sweep, which is about
    the ops and not about that conversion, gives both sides values that need no rounding."""
    if dt not in ("bf16", "f16"):
        return values
    return torch.tensor(values, dtype=torch.float64).to(TORCH_DTYPE[dt]).double().tolist()


def representable(ins, dt):
    """Every float input's data made exactly representable in its dtype (exactly_in), in place."""
    for spec in ins:
        if "alias" not in spec and not spec.get("int") and spec.get("data"):
            spec["data"] = exactly_in(spec["data"], spec.get("dtype", dt))


def torch_leaf(spec, dt, leaves=None):
    if "alias" in spec:
        return leaves[spec["alias"]]
    if spec.get("int"):
        return torch.tensor(spec["data"], dtype=torch.int64).reshape(spec["shape"])
    d = TORCH_DTYPE[spec.get("dtype", dt)]
    t = torch.tensor(spec["data"], dtype=torch.float64).reshape(spec["shape"]).to(d)
    if spec.get("grad"):
        t.requires_grad_(True)
    return t


def rope_torch(x, theta):
    B, T, NH, HS = x.shape
    h = HS // 2
    i = torch.arange(h, dtype=torch.float64)
    w = theta ** (-2.0 * i / HS)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * w[None, :]
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def round_h(h):
    """h rounded to the case's half dtype (torch_op.round_to), in the f64 reference; else h"""
    r = getattr(torch_op, "round_to", None)
    return h.to(r).to(h.dtype) if r is not None and h.dtype == torch.float64 else h


def torch_op(op, a, ins, dt):
    F = torch.nn.functional
    x = ins[0]
    opt = lambda i: ins[i] if i < len(ins) else None
    if op in ("neg", "exp", "log", "sqrt", "rsqrt", "abs", "square", "relu", "sigmoid", "tanh"):
        return getattr(torch, op)(x)
    if op == "gelu":
        return F.gelu(x, approximate="tanh")
    if op == "silu":
        return F.silu(x)
    if op == "pow":
        return torch.pow(x, a["p"])
    if op == "clamp":
        return torch.clamp(x, a["lo"], a["hi"])
    s = a.get("s")
    if op == "add_s":
        return x + s
    if op == "sub_s":
        return x - s
    if op == "mul_s":
        return x * s
    if op == "div_s":
        return x / s
    if op == "rsub_s":
        return s - x
    if op == "rdiv_s":
        return s / x
    if op == "contiguous":
        return x.contiguous()
    if op == "clone":
        return x.clone()
    if op == "reshape":
        return x.reshape(a["shape"])
    if op == "to":
        return x.to(TORCH_DTYPE[a["dtype"]])
    if op in ("add", "sub", "mul", "div", "maximum", "minimum"):
        return getattr(torch, op)(ins[0], ins[1])
    if op == "sum_all":
        return x.sum()
    if op == "mean_all":
        return x.mean()
    if op == "sum":
        return x.sum(dim=a["dims"], keepdim=a["keepdim"])
    if op == "mean":
        return x.mean(dim=a["dims"], keepdim=a["keepdim"])
    if op == "var":
        return x.var(dim=a["dims"], unbiased=a["unbiased"], keepdim=a["keepdim"])
    if op == "max":
        return x.max(dim=a["dim"], keepdim=a["keepdim"]).values
    if op == "argmax":
        return x.argmax(dim=a["dim"], keepdim=a["keepdim"])
    if op == "softmax":
        return torch.softmax(x, a["dim"])
    if op == "log_softmax":
        return torch.log_softmax(x, a["dim"])
    if op == "causal_softmax":
        T = x.shape[-1]
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        return torch.softmax(x.masked_fill(mask, float("-inf")), -1)
    if op == "matmul":
        return torch.matmul(ins[0], ins[1])
    if op == "cat":
        return torch.cat(ins, a["dim"])
    if op == "stack":
        return torch.stack(ins, a["dim"])
    if op == "index_select":
        return torch.index_select(x, a["dim"], ins[1])
    if op == "embedding":
        return F.embedding(ins[1], ins[0])
    if op == "masked_fill":
        return x.masked_fill(ins[1] != 0, a["value"])
    if op == "cross_entropy":
        V = x.shape[-1]
        return F.cross_entropy(x.reshape(-1, V), ins[1].reshape(-1), ignore_index=a["ignore_index"])
    if op == "layer_norm":
        w, b = opt(1), opt(2)
        if w is not None and w.dtype != x.dtype:  # normgrad takes f32 weights for a bf16 x
            return F.layer_norm(x.float(), a["normalized_shape"], w, b, a["eps"]).to(x.dtype)
        return F.layer_norm(x, a["normalized_shape"], w, b, a["eps"])
    # the fused add + norm rounds h as the unfused ops do (nn/norms/add_norm.h): alpha * x rounded to x's
    # dtype, then + a, rounded; the f64 reference of an f16/bf16 case does the same (round_h)
    if op == "add_layer_norm":
        h = round_h(round_h(a["alpha"] * x) + ins[1])
        w, b = opt(2), opt(3)
        if w is not None and w.dtype != x.dtype:
            return F.layer_norm(h.float(), a["normalized_shape"], w, b, a["eps"]).to(x.dtype)
        return F.layer_norm(h, a["normalized_shape"], w, b, a["eps"])
    if op == "rms_norm":
        return F.rms_norm(x, (x.shape[-1],), opt(1), a["eps"])
    if op == "add_rms_norm":
        return F.rms_norm(round_h(round_h(a["alpha"] * x) + ins[1]), (x.shape[-1],), opt(2), 1e-5)
    if op == "group_norm":
        return F.group_norm(x, a["groups"], opt(1), opt(2), a["eps"])
    if op == "batch_norm":
        rm, rv = ins[1].clone(), ins[2].clone()
        # weight and bias contiguous: PyTorch 2.15's CPU batch_norm reads a weight of stride 0 (an expanded
        # view) wrongly, and its dx comes back as garbage (values like 6.9e-310) in every channel but the
        # first. The contiguous copy is the same weight, and its gradient flows back through the copy.
        w, b = opt(3), opt(4)
        w = w.contiguous() if w is not None else None
        b = b.contiguous() if b is not None else None
        y = F.batch_norm(x, rm, rv, w, b, a["training"], a["momentum"], a["eps"])
        torch_op.extra = [rm, rv]
        return y
    if op == "fill_":
        return x.fill_(a["value"])
    # copy_ and add_ from a source that may share memory with x: the reference reads a clone of it, which is
    # normgrad's rule (and NumPy's): the result is as if the source were read in full before any write.
    # (PyTorch itself refuses the overlaps it can see, and computes the others in its own order.)
    if op == "copy_":
        return x.copy_(ins[1].clone())
    if op == "add_":
        return x.add_(ins[1].clone(), alpha=a["alpha"])
    if op == "mul_":
        return x.mul_(a["s"])
    if op == "view":
        return x.view(a["shape"])
    if op == "rope":
        return rope_torch(x, a["theta"])
    raise ValueError(op)


def as_list(t):
    return [float(v) for v in t.detach().double().reshape(-1).tolist()]


def decode(vals):
    return [float(v) if not isinstance(v, str) else float(v) for v in vals]


def compare(ref, got, dt, what):
    """(worst error relative to the tensor's scale, description), or (inf, description) where the two
    disagree on a value that is not finite or on the count"""
    if len(ref) != len(got):
        return math.inf, f"{what}: {len(got)} values, expected {len(ref)}"
    finite = [abs(r) for r in ref if math.isfinite(r)]
    scale = max([1.0] + finite)
    worst, wi = 0.0, -1
    for i, (r, g) in enumerate(zip(ref, got)):
        if not (math.isfinite(r) and math.isfinite(g)):
            if not (r == g or (math.isnan(r) and math.isnan(g))):
                return math.inf, f"{what}[{i}]: {g} where PyTorch gives {r}"
            continue
        e = abs(r - g) / scale
        if e > worst:
            worst, wi = e, i
    if wi < 0:
        return 0.0, ""
    return worst, f"{what}[{wi}]: {got[wi]!r} where PyTorch (f64) gives {ref[wi]!r} ({worst:.2e} of {scale:.3g})"


def judge(ref, got, dt, what, low=None, fan=1.0):
    """None where normgrad's values pass, else what is wrong. low: the same values from PyTorch in the case's
    own dtype (f32/bf16); normgrad passes where its error is within the tolerance, or at most twice
    PyTorch's own. fan: how many values a gradient sums (an expanded input's): in bf16 each was rounded, so
    the tolerance grows with their number."""
    err, desc = compare(ref, got, dt, what)
    if err <= TOL[dt] * (fan if dt in ("bf16", "f16") else 1.0):
        return None
    if low is not None and err < math.inf:
        lerr, _ = compare(ref, low, dt, what)
        if err <= 2 * lerr:
            return None
        desc += f"; PyTorch in {dt}: {lerr:.2e}"
    return desc


def run_torch(op, a, ins, dt, exact, dy_l, rng):
    """The case with PyTorch: exact = True in f64 on the inputs rounded to their dtype (the reference; draws
    the upstream gradient dy_l when dy_l is None), else in the inputs' own dtypes. Returns a dict: error (or
    None), shape, y, grads (per input, or None), extra (state updated in place), dy (the upstream gradient
    used)."""
    out = {"error": None, "shape": None, "y": None, "grads": [], "extra": [], "dy": dy_l}
    torch_op.extra = []
    torch_op.round_to = TORCH_DTYPE[dt] if exact and dt in ("bf16", "f16") else None
    try:
        leaves = []
        for s in ins:
            if "alias" in s:
                leaves.append(leaves[s["alias"]])
                continue
            t = torch_leaf(s, dt)
            if exact and t.is_floating_point():
                t = t.detach().double().requires_grad_(bool(s.get("grad")))
            leaves.append(t)
        views = []
        for leaf, s in zip(leaves, ins):
            t = leaf
            for v in s.get("views", []):
                t = torch_view(t, v)
            views.append(t)
        y = torch_op(op, a, views, "f64" if exact else dt)
        if op.endswith("_"):
            y = leaves[0]  # an in-place op: what it wrote, seen through the base
        if y.requires_grad:
            out_dt = a["dtype"] if op == "to" else dt
            if out["dy"] is None:
                out["dy"] = exactly_in([rng.gauss(0, 1) for _ in range(y.numel())], out_dt)
            # the upstream gradient as normgrad gets it: in the output's dtype
            dy = torch.tensor(out["dy"], dtype=torch.float64).to(TORCH_DTYPE[out_dt]).reshape(y.shape)
            y.backward(dy.to(y.dtype))
    except (RuntimeError, ValueError, IndexError) as e:
        out["error"] = str(e).split("\n")[0]
        return out
    out["shape"] = list(y.shape)
    out["y"] = as_list(y)
    out["grads"] = [as_list(t.grad) if t.grad is not None else None for t in leaves]
    # how many of the op's input values each base value feeds (> 1 through expand): its gradient sums them.
    # Counted from the view's zero strides, since the ratio of sizes misses a chain that first selects and
    # then expands ([7] -> slice -> narrow to 1 value -> expand to 7: one base value feeds 7, the ratio is 1).
    out["fan"] = [max(1.0, v.numel() / max(1, l.numel()),
                      float(math.prod(n for n, st in zip(v.shape, v.stride()) if st == 0)))
                  for l, v in zip(leaves, views)]
    out["extra"] = [as_list(e) for e in torch_op.extra]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", default="", help="comma-separated ops (default: all)")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/release/bench/view_sweep"))
    ap.add_argument("--show", type=int, default=40, help="print at most this many differing cases")
    ap.add_argument("--dump", default="", help="write each differing case to DIR/case_ID.json")
    ap.add_argument("--edge", action="store_true", help="draw dims of size 0 and more 0-d tensors")
    ap.add_argument("--save-cases", default="", help="also write every case (one JSON line each) to FILE, "
                    "to replay through view_sweep alone (e.g. at another thread count)")
    args = ap.parse_args()
    global EDGE
    EDGE = args.edge
    ops = args.ops.split(",") if args.ops else OPS
    for op in ops:
        if op not in OPS:
            sys.exit(f"unknown op {op!r}; known: {','.join(OPS)}")
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    proc = subprocess.Popen([args.binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    counts, bad, known, shown = {}, {}, {}, 0
    saved = open(args.save_cases, "w") if args.save_cases else None
    for cid in range(args.cases):
        op = ops[cid % len(ops)]
        dt, a, ins = make_case(op, rng)
        representable(ins, dt)
        case = {"id": cid, "dtype": dt, "op": op, "args": a, "inputs": ins}
        # PyTorch, in f64 on the inputs as normgrad gets them (rounded to their dtype): the reference. (PyTorch
        # in f32 or bf16 has its own roundings, which can be further from the exact result than normgrad's.)
        out_dt = a["dtype"] if op == "to" else dt
        ref = run_torch(op, a, ins, dt, True, None, rng)
        if ref["dy"] is not None:
            case["dy"] = ref["dy"]
        low = None
        if ref["error"] is None and "f64" not in (dt, out_dt) or dt != out_dt:
            low = run_torch(op, a, ins, dt, False, ref["dy"], rng)
            if low["error"] is not None:
                low = None
        if saved is not None:
            saved.write(json.dumps(case) + "\n")
        # normgrad
        proc.stdin.write(json.dumps(case) + "\n")
        proc.stdin.flush()
        ans = json.loads(proc.stdout.readline())
        counts[op] = counts.get(op, 0) + 1
        problems = []
        refusal = {"PyTorch": ref["error"] if "error" not in ans else None,
                   "normgrad": ans.get("error") if ref["error"] is None else None}
        if any(op == k_op and refusal.get(who) and k_msg in refusal[who] for k_op, who, k_msg, _ in KNOWN):
            known[op] = known.get(op, 0) + 1
        elif ref["error"] is not None or "error" in ans:
            if ref["error"] is None:
                problems.append(f"normgrad refuses: {ans['error']}")
            elif "error" not in ans:
                problems.append(f"PyTorch refuses ({ref['error']}), normgrad accepts")
        elif list(ans["shape"]) != list(ref["shape"]):
            problems.append(f"shape {ans['shape']}, PyTorch {ref['shape']}")
        else:
            lowv = lambda k, i=None: None if low is None else (low[k] if i is None else low[k][i])
            problems.append(judge(ref["y"], decode(ans["y"]), out_dt, "y", lowv("y")))
            for i, spec in enumerate(ins):
                if not spec.get("grad") or spec.get("int"):
                    continue
                g, rg = ans["grads"][i], ref["grads"][i]
                if rg is None:
                    if g is not None and any(decode(g)):
                        problems.append(f"grad {i}: PyTorch has none")
                elif g is None:
                    problems.append(f"grad {i}: normgrad has none")
                else:
                    problems.append(judge(rg, decode(g), spec.get("dtype", dt), f"grad {i}", lowv("grads", i),
                                          ref["fan"][i]))
            for j, e in enumerate(ref["extra"]):
                problems.append(judge(e, decode(ans["extra"][j]), dt, f"state {j}", lowv("extra", j)))
            problems = [p for p in problems if p]
        if problems and op == "cross_entropy" and problems[0] == "y[0]: 0.0 where PyTorch gives nan" \
                and all(p.startswith("grad") for p in problems[1:]):
            known[op] = known.get(op, 0) + 1  # (the "value" entry of KNOWN)
            problems = []
        if problems:
            bad[op] = bad.get(op, 0) + 1
            if args.dump:
                os.makedirs(args.dump, exist_ok=True)
                with open(os.path.join(args.dump, f"case_{cid}.json"), "w") as f:
                    f.write(json.dumps(case) + "\n")
            if shown < args.show:
                shown += 1
                lay = "; ".join(f"{s['shape']}{''.join(str(v) for v in s.get('views', []))}" for s in ins)
                print(f"case {cid} {op} {dt} {a} inputs {lay}:\n    " + "\n    ".join(problems))
    proc.stdin.close()
    proc.wait()
    if saved is not None:
        saved.close()
    total = sum(counts.values())
    nbad = sum(bad.values())
    print(f"\n{total} cases, {nbad} differ, {sum(known.values())} where a known convention differs")
    for op in ops:
        if op in counts:
            k = f"  {known[op]:4d} known" if op in known else ""
            print(f"  {op:16s} {counts[op]:5d} cases  {bad.get(op, 0):4d} differ{k}")
    if known:
        print("\nknown conventions:")
        for k_op, who, k_msg, why in KNOWN:
            if k_op in known:
                print(f"  {k_op}: {why}")
    sys.exit(1 if nbad else 0)


if __name__ == "__main__":
    main()
