#!/usr/bin/env python3
"""normgrad's optimizers, LR schedules, norm modules and safetensors files against PyTorch and safetensors.

It runs build/release/bench/modules_vs_pytorch (bench/modules_vs_pytorch.cpp says what it writes), does the
same computations with PyTorch from the same data, and compares, in f64, each tensor within --tol (default
1e-9) of the largest magnitude in PyTorch's tensor (integers and bytes: exactly):

  schedules    constant_lr, linear_warmup, cosine_with_warmup (optim/schedule.h) at steps 0..13, against
               the formula of optim/schedule.h written again below, and up to total_steps against
               torch.optim.lr_scheduler's own schedules (LinearLR for the warmup, CosineAnnealingLR after it,
               joined by SequentialLR; past total_steps CosineAnnealingLR rises again, normgrad's stays at
               min_lr, as its header says)
  optim        SGD (plain, momentum, dampening, Nesterov, weight decay), Adam (with and without weight decay;
               normgrad has no amsgrad), AdamW, 5 steps each on 3 parameters with gradients drawn per step,
               the lr set before each step by a schedule (torch: the scheduler above driving the optimizer),
               some with clip_grad_norm_ (its returned norm and the clipped gradients), some with a parameter
               that gets no gradient at one step: after every step the lr, the parameters and the state
               (step, momentum_buffer, exp_avg, exp_avg_sq, by normgrad's state_dict names) against
               torch.optim's
  norms        BatchNorm1d/2d (momentum 0.1 and None = cumulative average, with and without affine and
               running stats), LayerNorm, RMSNorm, GroupNorm, InstanceNorm1d/2d (affine, running stats,
               unbatched): 5 training steps (y = m(x), y.backward(dy), SGD(0.1) on the parameters) then one
               eval step, against torch.nn's module: y, dx, every parameter's gradient, the parameters after
               each step, and every buffer (running_mean, running_var, num_batches_tracked) after each step
  safetensors  a file normgrad wrote (every dtype it writes: F32, F64, F16, BF16, I64; a 0-d and empty tensors,
               a transposed view, rounding ties, overflow, subnormals, +-0, +-inf, NaN) and an
               nn::save_checkpoint of a small TinyLM with its AdamW state, read with the official
               safetensors.torch.load_file: names, dtypes, shapes, bytes, metadata, and the values against
               PyTorch's own rounding of the same doubles; files written by safetensors.torch.save_file
               (every dtype, a 0-d and empty tensors, metadata) read by normgrad (--read); that checkpoint
               re-saved by save_file (a different tensor order) restored by nn::load_checkpoint; and a file
               with a dtype normgrad does not have (I32) refused with an error naming it

    cmake --build --preset release --target modules_vs_pytorch
    /tmp/torchenv/bin/python bench/modules_vs_pytorch.py [--only norms] [--keep DIR] [--verbose]

It prints one line per case, one line per tensor that differs (with its worst element), and a summary.
Exit status 1 if anything differs. Runs in a few seconds. Needs PyTorch and the safetensors package
(/tmp/torchenv/bin/pip install safetensors); the tests need neither.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
from safetensors import safe_open
from safetensors.torch import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i64": torch.int64}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


# ---- comparing ----------------------------------------------------------------------------------------------

def compare(what, got, want, tol):
    """None if got matches want (same shape, same kind; floats within tol * max|want| everywhere, NaN where
    want is NaN; integers exactly), else a line naming the worst element."""
    if got is None:
        return f"{what}: missing on normgrad's side"
    if want is None:
        return f"{what}: normgrad has it, PyTorch does not"
    if tuple(got.shape) != tuple(want.shape):
        return f"{what}: shape {tuple(got.shape)} here, {tuple(want.shape)} in PyTorch"
    if got.dtype.is_floating_point != want.dtype.is_floating_point:
        return f"{what}: dtype {got.dtype} here, {want.dtype} in PyTorch"
    if not want.dtype.is_floating_point:
        if torch.equal(got.to(torch.int64), want.to(torch.int64)):
            return None
        flat = int((got.to(torch.int64) != want.to(torch.int64)).reshape(-1).nonzero()[0])
        return (f"{what}: at flat index {flat} normgrad {got.reshape(-1)[flat].item()} PyTorch "
                f"{want.reshape(-1)[flat].item()}")
    want, got = want.detach().to(torch.float64), got.detach().to(torch.float64)
    finite = torch.isfinite(want)
    scale = want[finite].abs().max().item() if finite.any() else 0.0
    scale = scale if scale > 0 else 1.0  # an all-zero reference: absolute
    err = (got - want).abs()
    err = torch.where(finite, err, torch.where((got == want) | (want.isnan() & got.isnan()), 0.0, math.inf))
    err = torch.where(err.isnan(), math.inf, err)
    if err.numel() and err.max().item() > tol * scale:
        flat = int(err.reshape(-1).argmax())
        index = [int(i) for i in np.unravel_index(flat, tuple(want.shape))] if want.dim() else []
        return (f"{what}: worst at {index} normgrad {got.reshape(-1)[flat].item():.17g} PyTorch "
                f"{want.reshape(-1)[flat].item():.17g}, |diff| {err.reshape(-1)[flat].item():.3g} = "
                f"{err.reshape(-1)[flat].item() / scale:.3g} of max |PyTorch| {scale:.4g}")
    return None


def relative_error(got, want):
    if not want.dtype.is_floating_point:
        return 0.0
    want, got = want.detach().to(torch.float64), got.detach().to(torch.float64)
    finite = torch.isfinite(want) & torch.isfinite(got)
    if not finite.any():
        return 0.0
    scale = want[finite].abs().max().item() or 1.0
    return (got[finite] - want[finite]).abs().max().item() / scale


class Case:
    """The checks of one case: (what, normgrad's, PyTorch's) pairs and lines for other problems."""

    def __init__(self, section, name):
        self.section, self.name = section, name
        self.pairs, self.problems, self.checks = [], [], 0

    def pair(self, what, got, want):
        # a copy: the optimizer and the next step change PyTorch's tensors in place
        self.pairs.append((what, got, None if want is None else want.detach().clone()))

    def expect(self, ok, line):
        self.checks += 1
        if not ok:
            self.problems.append(line)

    def finish(self, tol, verbose):
        lines, worst = list(self.problems), (0.0, "")
        for what, got, want in self.pairs:
            line = compare(what, got, want, tol)
            if line:
                lines.append(line)
                continue
            r = relative_error(got, want)
            if r >= worst[0]:
                worst = (r, what)
            if verbose:
                print(f"    {self.name} {what:48s} {r:.2e}")
        return len(self.pairs) + self.checks, lines, worst


def load_json(path):
    with open(path) as f:
        return json.load(f)


def names_under(tensors, prefix):
    return {k[len(prefix):] for k in tensors if k.startswith(prefix)}


# ---- schedules ----------------------------------------------------------------------------------------------

def schedule_formula(s, c):
    """lr(s) of optim/schedule.h, from its header comment"""
    base, warmup = c["base_lr"], c["warmup_steps"]
    if c["kind"] == "constant":
        return base
    if s < warmup:
        return base * (s + 1) / warmup
    if c["kind"] == "linear_warmup":
        return base
    progress = min(max((s - warmup) / (c["total_steps"] - warmup), 0.0), 1.0)
    return c["min_lr"] + 0.5 * (base - c["min_lr"]) * (1 + math.cos(math.pi * progress))


def torch_scheduler(opt, c):
    """PyTorch's own schedulers for the schedule c, on opt (whose lr is c's base_lr). Returns (scheduler, the
    last step it is expected to match normgrad at)."""
    S = torch.optim.lr_scheduler
    W = c["warmup_steps"]

    def warmup():  # lr(s) = base (s + 1) / W for s < W: LinearLR from 1/W reaching 1 at step W - 1
        if W >= 2:
            return S.LinearLR(opt, start_factor=1.0 / W, end_factor=1.0, total_iters=W - 1)
        return S.ConstantLR(opt, factor=1.0, total_iters=0)  # W = 0 or 1: lr(0) = base already

    if c["kind"] == "constant":
        return S.ConstantLR(opt, factor=1.0, total_iters=0), math.inf
    if c["kind"] == "linear_warmup":
        return warmup(), math.inf
    def cosine():  # from base at step W down to min_lr at total_steps
        return S.CosineAnnealingLR(opt, T_max=c["total_steps"] - W, eta_min=c["min_lr"])

    if W == 0:
        return cosine(), c["total_steps"]
    return S.SequentialLR(opt, [warmup(), cosine()], milestones=[W]), c["total_steps"]


def check_schedules(folder, tol, verbose):
    configs = load_json(os.path.join(folder, "schedules.json"))
    values = load_file(os.path.join(folder, "values.safetensors"))
    cases = []
    for name, c in configs.items():
        case = Case("schedules", name)
        got = values[name]
        steps = got.shape[0]
        formula = torch.tensor([schedule_formula(s, c) for s in range(steps)], dtype=torch.float64)
        case.pair("formula", got, formula)
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=c["base_lr"])
        sched, last = torch_scheduler(opt, c)
        lrs = []
        for s in range(steps):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        n = int(min(steps, last + 1))
        case.pair(f"torch.lr_scheduler[0:{n}]", got[:n], torch.tensor(lrs[:n], dtype=torch.float64))
        cases.append(case)
    return cases


# ---- optimizers ---------------------------------------------------------------------------------------------

def check_optim_case(folder):
    cfg = load_json(os.path.join(folder, "config.json"))
    data = load_file(os.path.join(folder, "data.safetensors"))
    res = load_file(os.path.join(folder, "result.safetensors"))
    case = Case("optim", cfg["name"])
    names = cfg["params"]
    params = {n: data[f"init.{n}"].clone().requires_grad_() for n in names}
    o, kind = cfg["options"], cfg["optimizer"]
    plist = [params[n] for n in names]
    if kind == "SGD":
        opt = torch.optim.SGD(plist, lr=o["lr"], momentum=o["momentum"], dampening=o["dampening"],
                              weight_decay=o["weight_decay"], nesterov=o["nesterov"])
    else:
        cls = torch.optim.Adam if kind == "Adam" else torch.optim.AdamW
        opt = cls(plist, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                  weight_decay=o["weight_decay"], amsgrad=False)
    sched, _ = torch_scheduler(opt, cfg["schedule"])
    taken = {n: 0 for n in names}  # how many updates each parameter has had (torch's SGD keeps no count)

    for s in range(cfg["steps"]):
        step = f"step{s}."
        case.pair(step + "lr", res[step + "lr"], torch.tensor(opt.param_groups[0]["lr"], dtype=torch.float64))
        for n in names:
            g = data.get(f"{step}grad.{n}")
            params[n].grad = None if g is None else g.clone()
            taken[n] += g is not None
        if cfg["clip_max_norm"] is not None:
            norm = torch.nn.utils.clip_grad_norm_(plist, cfg["clip_max_norm"])
            case.pair(step + "clip_norm", res.get(step + "clip_norm"), norm.detach())
            for n in names:
                if params[n].grad is not None:
                    case.pair(f"{step}clipped.{n}", res.get(f"{step}clipped.{n}"), params[n].grad)
        opt.step()
        sched.step()

        for n in names:
            case.pair(f"{step}param.{n}", res[f"{step}param.{n}"], params[n].detach())
        # The state: normgrad's "<p>.<buffer>" against torch's state[p][buffer]; "<p>.step" against torch's
        # "step" (Adam) or the count of updates (SGD keeps none).
        compared = set()
        for n in names:
            st = opt.state.get(params[n], {})
            want_step = int(st["step"]) if "step" in st else taken[n]
            case.pair(f"{step}state.{n}.step", res.get(f"{step}state.{n}.step"), torch.tensor(want_step))
            compared.add(f"{n}.step")
            for b in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
                t = st.get(b)
                if t is not None or f"{step}state.{n}.{b}" in res:
                    case.pair(f"{step}state.{n}.{b}", res.get(f"{step}state.{n}.{b}"), t)
                    compared.add(f"{n}.{b}")
        extra = names_under(res, step + "state.") - compared
        case.expect(not extra, f"{step}state: normgrad has state {sorted(extra)} that torch.optim does not")
    return case


# ---- norm modules -------------------------------------------------------------------------------------------

def torch_norm(m):
    """torch.nn's module for normgrad's description (bench/modules_vs_pytorch.cpp, make_norm)"""
    kind = m["module"]
    if kind in ("BatchNorm1d", "BatchNorm2d", "InstanceNorm1d", "InstanceNorm2d"):
        return getattr(nn, kind)(m["num_features"], eps=m["eps"], momentum=m["momentum"], affine=m["affine"],
                                 track_running_stats=m["track_running_stats"])
    if kind == "LayerNorm":
        return nn.LayerNorm(m["normalized_shape"], eps=m["eps"], elementwise_affine=m["elementwise_affine"],
                            bias=m["bias"])
    if kind == "RMSNorm":
        return nn.RMSNorm(m["dim"], eps=m["eps"], elementwise_affine=m["elementwise_affine"])
    if kind == "GroupNorm":
        return nn.GroupNorm(m["num_groups"], m["num_channels"], eps=m["eps"], affine=m["affine"])
    raise ValueError(f"unknown module {kind}")


def norm_pass(case, module, data, res, when):
    x = data[f"{when}.x"].clone().requires_grad_()
    module.zero_grad(set_to_none=True)
    y = module(x)
    y.backward(data[f"{when}.dy"])
    case.pair(f"{when}.y", res[f"{when}.y"], y.detach())
    case.pair(f"{when}.dx", res[f"{when}.dx"], x.grad)
    for n, p in module.named_parameters():
        case.pair(f"{when}.grad.{n}", res.get(f"{when}.grad.{n}"), p.grad)
    buffers = {n: b for n, b in module.named_buffers() if b is not None}
    for n, b in buffers.items():
        case.pair(f"{when}.buffer.{n}", res.get(f"{when}.buffer.{n}"), b.clone())
    extra = names_under(res, f"{when}.buffer.") - set(buffers)
    case.expect(not extra, f"{when}: normgrad has buffers {sorted(extra)} that torch.nn does not")


def check_norm_case(folder):
    cfg = load_json(os.path.join(folder, "config.json"))
    data = load_file(os.path.join(folder, "data.safetensors"))
    res = load_file(os.path.join(folder, "result.safetensors"))
    case = Case("norms", cfg["name"])
    module = torch_norm(cfg["module"]).to(torch.float64)
    params = dict(module.named_parameters())
    case.expect(set(params) == names_under(data, "init."),
                f"parameters: {sorted(names_under(data, 'init.'))} here, {sorted(params)} in torch.nn")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(data[f"init.{n}"])
    opt = torch.optim.SGD(params.values(), lr=cfg["lr"]) if params else None

    module.train()
    for s in range(cfg["steps"]):
        norm_pass(case, module, data, res, f"step{s}")
        if opt:
            opt.step()
            for n, p in params.items():
                case.pair(f"step{s}.param.{n}", res.get(f"step{s}.param.{n}"), p.detach().clone())
    module.eval()
    norm_pass(case, module, data, res, "eval")
    return case


# ---- safetensors --------------------------------------------------------------------------------------------

def raw_bytes(t):
    """The tensor's bytes as safetensors stores them (row-major, little-endian)"""
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def file_metadata(path):
    with safe_open(path, framework="pt") as f:
        return f.metadata() or {}


def check_described(case, loaded, described, where):
    """loaded: {name: torch tensor}; described: normgrad's [{"name", "dtype", "shape", "hex", ...}]. Names,
    dtypes, shapes and bytes must be equal."""
    names = [d["name"] for d in described]
    case.expect(set(names) == set(loaded) and len(names) == len(set(names)),
                f"{where}: names differ: only normgrad's {sorted(set(names) - set(loaded))}, only PyTorch's "
                f"{sorted(set(loaded) - set(names))}")
    for d in described:
        t = loaded.get(d["name"])
        if t is None:
            continue
        what = f"{where} {d['name']}"
        case.expect(DTYPE_NAMES.get(t.dtype) == d["dtype"], f"{what}: dtype {d['dtype']} in normgrad, {t.dtype}")
        case.expect(list(t.shape) == d["shape"], f"{what}: shape {d['shape']} in normgrad, {list(t.shape)}")
        case.expect(raw_bytes(t) == bytes.fromhex(d["hex"]), f"{what}: the bytes differ")


def values_of(t):
    """The tensor's values as floats (NaN compared as NaN, -0 kept) or ints."""
    return t.reshape(-1).tolist() if t.dtype == torch.int64 else t.to(torch.float64).reshape(-1).tolist()


def same_value(a, b):
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


def check_normgrad_file(folder):
    """normgrad.safetensors with the official reader: what normgrad.json says it holds, and each value the
    same as PyTorch's rounding of the same double to that dtype."""
    case = Case("safetensors", "normgrad_written")
    path = os.path.join(folder, "normgrad.safetensors")
    expected = load_json(os.path.join(folder, "normgrad.json"))
    loaded = load_file(path)
    case.expect(file_metadata(path) == expected["metadata"], f"metadata {file_metadata(path)}")
    check_described(case, loaded, expected["tensors"], "load_file")
    for d in expected["tensors"]:
        t = loaded.get(d["name"])
        if t is None:
            continue
        dtype = DTYPES[d["dtype"]]
        if dtype == torch.int64:
            want = torch.tensor(d["source"], dtype=torch.int64)
        else:  # PyTorch's own rounding of the source doubles to the dtype
            want = torch.tensor([float(v) for v in d["source"]], dtype=torch.float64).to(dtype)
        want = want.reshape(d["shape"])
        bad = [i for i, (a, b) in enumerate(zip(values_of(t), values_of(want))) if not same_value(a, b)]
        case.expect(not bad, f"{d['name']}: at flat index {bad[0] if bad else 0} normgrad stored "
                             f"{values_of(t)[bad[0]] if bad else 0!r}, PyTorch rounds "
                             f"{d['source'][bad[0]] if bad else 0} to {values_of(want)[bad[0]] if bad else 0!r}")
    return case


def check_checkpoint_file(folder):
    """checkpoint.safetensors with the official reader: every name nn/checkpoint.h lists, dtypes, bytes,
    metadata."""
    case = Case("safetensors", "checkpoint_written")
    path = os.path.join(folder, "checkpoint.safetensors")
    expected = load_json(os.path.join(folder, "checkpoint.json"))
    loaded = load_file(path)
    meta = file_metadata(path)
    check_described(case, loaded, expected["tensors"], "load_file")
    for key in ("format", "run"):
        case.expect(meta.get(key) == expected["metadata"][key],
                    f"metadata {key}: {meta.get(key)!r}, expected {expected['metadata'][key]!r}")
    case.expect(json.loads(meta.get("config", "null")) == json.loads(expected["metadata"]["config"]),
                "metadata config differs from the model's config")
    case.expect(meta.get("optimizer") == expected["optimizer"], f"metadata optimizer {meta.get('optimizer')!r}")
    case.expect(json.loads(meta.get("optimizer_hyperparameters", "null")) == expected["hyperparameters"],
                f"metadata optimizer_hyperparameters {meta.get('optimizer_hyperparameters')!r}, expected "
                f"{expected['hyperparameters']}")
    dtypes = {DTYPE_NAMES[t.dtype] for t in loaded.values()}
    case.expect(dtypes == {"f32", "f64", "i64"}, f"dtypes {sorted(dtypes)}, expected f32, f64 (lr), i64")
    return case


def run_read(binary, path, tmp, checkpoint=False):
    dump = os.path.join(tmp, os.path.basename(path) + ".json")
    command = [binary, "--read", path, "--dump", dump] + (["--checkpoint"] if checkpoint else [])
    run = subprocess.run(command, capture_output=True, text=True)
    return run, (load_json(dump) if run.returncode == 0 else None)


def torch_written_tensors():
    """Every dtype normgrad reads, from save_file: specials, random values, a 0-d and empty tensors."""
    g = torch.Generator().manual_seed(5)
    specials = torch.tensor([0.0, -0.0, 1.0, -2.5, 1e-7, 6e-8, 1e-40, 65504.0, 3.0e38, math.inf, -math.inf,
                             math.nan], dtype=torch.float64)
    return {
        "f32.matrix": torch.randn(3, 4, generator=g, dtype=torch.float32),
        "f32.specials": specials.to(torch.float32),
        "f64.specials": specials,
        "f64.cube": torch.randn(2, 3, 2, generator=g, dtype=torch.float64),
        "f16.specials": specials.to(torch.float16),
        "f16.matrix": torch.randn(4, 3, generator=g).to(torch.float16),
        "bf16.specials": specials.to(torch.bfloat16),
        "bf16.matrix": torch.randn(2, 5, generator=g).to(torch.bfloat16),
        "i64.values": torch.tensor([0, -1, 2**63 - 1, -2**63, 2**53 + 1, 77], dtype=torch.int64),
        "f64.scalar": torch.tensor(2.75, dtype=torch.float64),
        "i64.scalar": torch.tensor(-9, dtype=torch.int64),
        "f32.empty": torch.zeros(0, 3, dtype=torch.float32),
        "bf16.empty": torch.zeros(2, 0, dtype=torch.bfloat16),
        "i64.empty": torch.zeros(0, dtype=torch.int64),
    }


def check_torch_written(binary, tmp):
    case = Case("safetensors", "torch_written")
    tensors = torch_written_tensors()
    metadata = {"writer": "torch", "note": "safetensors.torch.save_file"}
    path = os.path.join(tmp, "torch_written.safetensors")
    save_file(tensors, path, metadata=metadata)
    run, dump = run_read(binary, path, tmp)
    case.expect(run.returncode == 0, f"normgrad could not read it: {run.stderr.strip()}")
    if dump is None:
        return case
    case.expect(dump["metadata"] == metadata, f"metadata {dump['metadata']}, expected {metadata}")
    check_described(case, tensors, dump["tensors"], "--read")
    for d in dump["tensors"]:
        t = tensors.get(d["name"])
        if t is None:
            continue
        got = [v if isinstance(v, int) else float(v) for v in d["values"]]
        bad = [i for i, (a, b) in enumerate(zip(got, values_of(t))) if not same_value(a, b)]
        case.expect(not bad and len(got) == t.numel(),
                    f"{d['name']}: values differ, first at {bad[:1]}: normgrad {got[bad[0]] if bad else None} "
                    f"PyTorch {values_of(t)[bad[0]] if bad else None}")
    return case


def check_resaved_checkpoint(binary, folder, tmp):
    """normgrad's checkpoint, read and written again by safetensors (sorted its own way), restored by
    nn::load_checkpoint into a fresh TinyLM + AdamW: their state must be the original's, bit for bit."""
    case = Case("safetensors", "checkpoint_resaved")
    original = os.path.join(folder, "checkpoint.safetensors")
    path = os.path.join(tmp, "checkpoint_resaved.safetensors")
    save_file(load_file(original), path, metadata=file_metadata(original))
    run, dump = run_read(binary, path, tmp, checkpoint=True)
    case.expect(run.returncode == 0, f"nn::load_checkpoint failed: {run.stderr.strip()}")
    if dump is None:
        return case
    expected = load_json(os.path.join(folder, "checkpoint.json"))
    want = {d["name"]: d for d in expected["tensors"]}
    got = {d["name"]: d for d in dump["tensors"]}
    case.expect(set(got) == set(want), f"names differ: {sorted(set(got) ^ set(want))}")
    for name in sorted(set(got) & set(want)):
        case.expect(all(got[name][k] == want[name][k] for k in ("dtype", "shape", "hex")),
                    f"{name}: restored {got[name]['dtype']} {got[name]['shape']}, saved {want[name]['dtype']} "
                    f"{want[name]['shape']}, or the bytes differ")
    # load_checkpoint hands back the whole __metadata__ (optimizer and its hyperparameters too)
    for key, value in expected["metadata"].items():
        case.expect(dump["metadata"].get(key) == value, f"metadata {key}: {dump['metadata'].get(key)!r}, "
                                                        f"expected {value!r}")
    return case


def check_refused_dtype(binary, tmp):
    """A dtype normgrad does not have is an error naming it, not garbage."""
    case = Case("safetensors", "unsupported_dtype")
    path = os.path.join(tmp, "torch_i32.safetensors")
    save_file({"ok": torch.ones(2), "counts": torch.arange(3, dtype=torch.int32)}, path)
    run, _ = run_read(binary, path, tmp)
    case.expect(run.returncode == 1 and "I32" in run.stderr and "counts" in run.stderr,
                f"expected exit 1 and an error naming 'counts' and I32, got exit {run.returncode}: "
                f"{run.stderr.strip()!r}")
    return case


# ---- main ---------------------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "bench", "modules_vs_pytorch"))
    parser.add_argument("--only", default="", choices=["", "schedules", "optim", "norms", "safetensors"],
                        help="run only this section")
    parser.add_argument("--keep", default="", help="write normgrad's files here and keep them (default: a "
                        "temporary folder)")
    parser.add_argument("--tol", type=float, default=1e-9, help="relative to each tensor's largest magnitude")
    parser.add_argument("--verbose", action="store_true", help="print every tensor's relative error")
    args = parser.parse_args()
    if not os.path.isfile(args.binary):
        sys.exit(f"modules_vs_pytorch: no program at {args.binary}; build it with "
                 "cmake --build --preset release --target modules_vs_pytorch, or pass --binary")
    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or os.path.join(tmp, "out")
        command = [args.binary, "--out", out] + (["--only", args.only] if args.only else [])
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"modules_vs_pytorch: {' '.join(command)} failed (exit {run.returncode}):\n{run.stderr}")
        index = load_json(os.path.join(out, "index.json"))
        cases = []
        if "schedules" in index:
            cases += check_schedules(os.path.join(out, "schedules"), args.tol, args.verbose)
        for name in index.get("optim", []):
            cases.append(check_optim_case(os.path.join(out, "optim", name)))
        for name in index.get("norms", []):
            cases.append(check_norm_case(os.path.join(out, "norms", name)))
        if "safetensors" in index:
            folder = os.path.join(out, "safetensors")
            cases += [check_normgrad_file(folder), check_checkpoint_file(folder),
                      check_torch_written(args.binary, tmp), check_resaved_checkpoint(args.binary, folder, tmp),
                      check_refused_dtype(args.binary, tmp)]

        compared, differ, bad_cases = 0, 0, 0
        for case in cases:
            n, lines, worst = case.finish(args.tol, args.verbose)
            compared += n
            differ += len(lines)
            bad_cases += bool(lines)
            status = f"{len(lines)} of {n} differ" if lines else f"all {n} agree"
            detail = f"worst relative error {worst[0]:.1e} ({worst[1]})" if worst[1] else "exact checks"
            print(f"{case.section:11s} {case.name:34s} {status:17s} {detail}")
            for line in lines:
                print(f"  {case.name} {line}")

    print(f"{len(cases)} cases, {compared} checks (tensors within {args.tol:g} of each tensor's largest "
          f"magnitude in f64; integers, bytes, names and metadata exactly): {differ} differ, in {bad_cases} "
          f"cases (torch {torch.__version__}, safetensors {__import__('safetensors').__version__})")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
