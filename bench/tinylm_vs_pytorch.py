#!/usr/bin/env python3
"""normgrad's TinyLM against an independent PyTorch model of the same documented architecture, end to end.

The other checks here hold single ops to PyTorch (special_values_vs_pytorch.py, view_sweep_vs_pytorch.py).
This one checks the whole language model: nn::TinyLM as nn/tinylm.h, nn/block.h, nn/attention.h, nn/ffn.h,
nn/rope.h, docs/model.md and docs/attention.md describe it, written again below in plain PyTorch (embedding,
learned positions or RoPE in the rotate_half layout, QK-norm before RoPE, GQA by repeating each key/value head
for NH/NKV consecutive query heads, causal softmax of q k^T / sqrt(HS), SwiGLU or MLP, blocks by norm
position, DeepNorm's alpha = (2N)^(1/4) on the residual, final norm, tied or untied head, mean cross-entropy
over the targets that are not -100).

It runs build/release/bench/tinylm_vs_pytorch, which writes, for each of its configs (MiniMind; Post-LN with
LayerNorm; no norm at all; DeepNorm; Pre-LN with a GELU MLP and biases; learned positions + unmasked
attention + MQA + Post-LN RMSNorm), the model's initial f64 parameters, a batch, and what normgrad computed:
the logits, the loss, every parameter's gradient, and the parameters after 3 steps of
clip_grad_norm_(1.0) + AdamW(lr 1e-2, weight decay 0.1). This script loads the same parameters into its
PyTorch model, does the same with torch.optim.AdamW and torch.nn.utils.clip_grad_norm_, and compares:
  init     the initial parameters against the documented init (nn.Linear's U(+-1/sqrt(in)), N(0, 1)
           embeddings, U(+-1/sqrt(C)) for a tied one, norms at ones and zeros, DeepNorm's beta = (8N)^(-1/4)
           on v_proj, o_proj and the FFN): bounds only, the values themselves are loaded, not redrawn;
  logits, loss, grad.<name> (every parameter), and for each of the 3 steps the loss and the gradient norm
           before clipping; after.<name> (every parameter after the 3 steps) and update.<name> (its change);
each within --tol (default 1e-9) of the largest magnitude in PyTorch's tensor (all in f64).

    cmake --build --preset release --target tinylm_vs_pytorch
    /tmp/torchenv/bin/python bench/tinylm_vs_pytorch.py [--only minimind] [--keep DIR] [--verbose]

It prints one line per config, one line per tensor that differs (with its worst element), and a summary.
Exit status 1 if any tensor differs. Runs in a few seconds. PyTorch is needed here only; the tests do not use
it, and the safetensors files are read without the safetensors package (the format: io/safetensors.h).
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = ("init", "data", "forward", "grads", "steps", "trained")


# ---- reading normgrad's files ---------------------------------------------------------------------------

def load_safetensors(path):
    """{name: tensor}: 8 bytes of header length (u64 little-endian), the JSON header, then the raw data."""
    dtypes = {"F64": np.float64, "F32": np.float32, "I64": np.int64}
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    buffer = data[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        array = np.frombuffer(buffer[begin:end], dtype=dtypes[entry["dtype"]]).reshape(entry["shape"])
        out[name] = torch.from_numpy(array.copy())
    return out


# ---- the model, from the documentation --------------------------------------------------------------------

class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight, over the last dim (nn/norms/rms_norm.h)"""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(kind, dim, eps):
    return nn.LayerNorm(dim, eps=eps) if kind == "layernorm" else RMSNorm(dim, eps)


def rotate_half(x):
    """(x1, x2) -> (-x2, x1), the halves of the last dim (Llama's layout, not the interleaved one)"""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_cos_sin(T, HS, theta):
    """cos(t w_i), sin(t w_i) for w_i = theta^(-2i/HS), i < HS/2, repeated over both halves: (T, HS)"""
    w = theta ** (-torch.arange(0, HS, 2, dtype=torch.float64) / HS)
    angles = torch.outer(torch.arange(T, dtype=torch.float64), w)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        C, NH = c["dim"], c["n_heads"]
        self.NH, self.NKV, self.HS = NH, c["n_kv_heads"] or NH, C // NH
        self.causal, self.rope, self.theta = c["causal"], c["position"] == "rope", c["rope_theta"]
        bias = c["attn_bias"]
        self.q_proj = nn.Linear(C, self.NH * self.HS, bias=bias)
        self.k_proj = nn.Linear(C, self.NKV * self.HS, bias=bias)
        self.v_proj = nn.Linear(C, self.NKV * self.HS, bias=bias)
        self.o_proj = nn.Linear(self.NH * self.HS, C, bias=bias)
        self.qk_norm = c["qk_norm"]
        if self.qk_norm:  # an RMSNorm over each head vector (HS), with the model's norm_eps
            self.q_norm = RMSNorm(self.HS, c["norm_eps"])
            self.k_norm = RMSNorm(self.HS, c["norm_eps"])

    def forward(self, x):
        B, T, _ = x.shape
        NH, NKV, HS = self.NH, self.NKV, self.HS
        q = self.q_proj(x).view(B, T, NH, HS)
        k = self.k_proj(x).view(B, T, NKV, HS)
        v = self.v_proj(x).view(B, T, NKV, HS)
        if self.qk_norm:  # QK-norm first, then RoPE on the normalized vectors
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope:
            cos, sin = rope_cos_sin(T, HS, self.theta)
            cos, sin = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)  # (T, 1, HS)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, HS)
        # GQA: query head h reads key/value head h // (NH / NKV)
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        att = q @ k.transpose(-2, -1) / math.sqrt(HS)  # (B, NH, T, T)
        if self.causal:
            future = torch.ones(T, T, dtype=torch.bool).triu(1)
            att = att.masked_fill(future, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, NH * HS)
        return self.o_proj(y)


def ffn_hidden(c):
    if c["ffn_hidden"] > 0:
        return c["ffn_hidden"]
    if c["ffn"] == "swiglu":
        return 64 * math.ceil(c["dim"] * math.pi / 64)  # the default rule, 64 ceil(C pi / 64)
    return 4 * c["dim"]


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        C, H = c["dim"], ffn_hidden(c)
        self.kind = c["ffn"]
        if self.kind == "swiglu":  # no biases
            self.gate_proj = nn.Linear(C, H, bias=False)
            self.up_proj = nn.Linear(C, H, bias=False)
            self.down_proj = nn.Linear(H, C, bias=False)
        else:
            self.fc1 = nn.Linear(C, H, bias=c["ffn_bias"])
            self.fc2 = nn.Linear(H, C, bias=c["ffn_bias"])
            self.gelu = c["activation"] == "gelu"

    def forward(self, x):
        if self.kind == "swiglu":
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        h = self.fc1(x)
        h = F.gelu(h, approximate="tanh") if self.gelu else F.relu(h)
        return self.fc2(h)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.position = c["norm_position"]
        self.alpha = (2 * c["n_layers"]) ** 0.25  # DeepNorm
        if self.position != "none":
            self.norm1 = make_norm(c["norm"], c["dim"], c["norm_eps"])
        self.attn = Attention(c)
        if self.position != "none":
            self.norm2 = make_norm(c["norm"], c["dim"], c["norm_eps"])
        self.ffn = FeedForward(c)

    def forward(self, x):
        if self.position == "none":
            x = x + self.attn(x)
            return x + self.ffn(x)
        if self.position == "pre":
            x = x + self.attn(self.norm1(x))
            return x + self.ffn(self.norm2(x))
        a = self.alpha if self.position == "deepnorm" else 1.0
        x = self.norm1(a * x + self.attn(x))
        return self.norm2(a * x + self.ffn(x))


class TinyLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok_emb = nn.Embedding(c["vocab_size"], c["dim"])
        if c["position"] == "learned":
            self.pos_emb = nn.Embedding(c["max_seq_len"], c["dim"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        # final_norm null: a norm after the last block for Pre-LN only (nn/tinylm.h, has_final_norm)
        self.final_norm = c["final_norm"] if c["final_norm"] is not None else c["norm_position"] == "pre"
        if self.final_norm:
            self.norm = make_norm(c["norm"], c["dim"], c["norm_eps"])
        if not c["tie_weights"]:
            self.lm_head = nn.Linear(c["dim"], c["vocab_size"], bias=False)

    def forward(self, tokens):
        h = self.tok_emb(tokens)
        if self.c["position"] == "learned":
            h = h + self.pos_emb(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            h = block(h)
        if self.final_norm:
            h = self.norm(h)
        if self.c["tie_weights"]:  # the head is the embedding matrix: logits = h E^T
            return h @ self.tok_emb.weight.T
        return self.lm_head(h)


# ---- the documented initialization (bounds only) ---------------------------------------------------------

def init_problems(c, params):
    """Each parameter against its documented init distribution; returns [(name, message)]."""
    problems = []
    C, N = c["dim"], c["n_layers"]
    beta = (8 * N) ** -0.25 if c["norm_position"] == "deepnorm" else 1.0
    for name, p in params.items():
        leaf = name.split(".")
        a = p.abs().max().item()
        if name == "tok_emb.weight" and c["tie_weights"]:
            lo, hi, what = 0.8 / math.sqrt(C), 1 / math.sqrt(C), "U(+-1/sqrt(C)) (tied)"
        elif leaf[0] in ("tok_emb", "pos_emb"):
            std = p.std().item()
            if not 0.85 < std < 1.15:
                problems.append((name, f"std {std:.4f}, expected N(0, 1)"))
            continue
        elif leaf[-2] in ("norm", "norm1", "norm2", "q_norm", "k_norm"):
            want = 1.0 if leaf[-1] == "weight" else 0.0
            if not torch.all(p == want):
                problems.append((name, f"expected all {want:g}"))
            continue
        else:  # a Linear's weight or bias: U(+-1/sqrt(in)), times beta where DeepNorm scales it
            module = leaf[-2]
            fan_in = params[".".join(leaf[:-1] + ["weight"])].shape[1]
            scaled = module in ("v_proj", "o_proj", "fc1", "fc2", "gate_proj", "up_proj", "down_proj")
            bound = (beta if scaled else 1.0) / math.sqrt(fan_in)
            what = f"U(+-{bound:.4g})" + (" (DeepNorm's beta)" if scaled and beta != 1 else "")
            lo, hi = 0.8 * bound, bound  # the largest of >= 32 uniform draws is near the bound
        if not lo <= a <= hi * (1 + 1e-12):
            problems.append((name, f"max |value| {a:.6g}, expected {what}: within [{lo:.4g}, {hi:.4g}]"))
    return problems


# ---- the comparison -------------------------------------------------------------------------------------

def compare(what, got, want, tol):
    """None if got is within tol * max|want| of want everywhere, else a line naming the worst element."""
    if tuple(got.shape) != tuple(want.shape):
        return f"{what}: shape {tuple(got.shape)} here, {tuple(want.shape)} in PyTorch"
    want, got = want.detach().to(torch.float64), got.detach().to(torch.float64)
    scale = want.abs().max().item() if want.numel() else 0.0
    scale = scale if scale > 0 else 1.0  # an all-zero reference: absolute
    err = (got - want).abs()
    if not torch.isfinite(got).all() or err.max().item() > tol * scale:
        err = torch.where(torch.isfinite(err), err, torch.full_like(err, math.inf))
        flat = int(err.reshape(-1).argmax())
        index = list(np.unravel_index(flat, tuple(want.shape))) if want.dim() else []
        index = [int(i) for i in index]
        return (f"{what}: worst at {index} normgrad {got.reshape(-1)[flat].item():.17g} PyTorch "
                f"{want.reshape(-1)[flat].item():.17g}, |diff| {err.reshape(-1)[flat].item():.3g} = "
                f"{err.reshape(-1)[flat].item() / scale:.3g} of max |PyTorch| {scale:.4g}")
    return None


def relative_error(got, want):
    scale = want.abs().max().item() or 1.0
    return ((got.to(torch.float64) - want.to(torch.float64)).abs().max().item()) / scale


def check_config(folder, tol, verbose):
    """Compare one config. Returns (number of checks, a line per difference, (worst relative error among
    the tensors that agree, its name), PyTorch's loss at each step)."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    c = cfg["model"]
    files = {s: load_safetensors(os.path.join(folder, s + ".safetensors")) for s in STEPS}
    init, tokens, targets = files["init"], files["data"]["tokens"], files["data"]["targets"]

    model = TinyLM(c).to(torch.float64)
    model.load_state_dict(init, strict=True)  # names and shapes must be exactly normgrad's
    names = {name for name, _ in model.named_parameters()}
    for kind in ("grads", "trained"):
        if set(files[kind]) != names:
            odd = sorted(set(files[kind]) ^ names)
            return 0, [f"{kind}.safetensors: names {odd} are in one model only"], (0.0, ""), [math.nan]
    opt_cfg = cfg["adamw"]
    opt = torch.optim.AdamW(model.parameters(), lr=opt_cfg["lr"], betas=(opt_cfg["beta1"], opt_cfg["beta2"]),
                            eps=opt_cfg["eps"], weight_decay=opt_cfg["weight_decay"])

    pairs = []  # (what, normgrad's, PyTorch's)
    losses, norms = [], []
    for step in range(cfg["steps"]):
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        if step == 0:
            pairs.append(("logits", files["forward"]["logits"], logits))
            pairs.append(("loss", files["forward"]["loss"], loss))
            for name, p in model.named_parameters():
                pairs.append((f"grad.{name}", files["grads"][name], p.grad.clone()))
        losses.append(loss.item())
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip_max_norm"]).item())
        opt.step()
    for i in range(cfg["steps"]):
        loss_i, norm_i = (torch.tensor(v[i], dtype=torch.float64) for v in (losses, norms))
        pairs.append((f"step{i + 1}.loss", files["steps"]["loss"][i], loss_i))
        pairs.append((f"step{i + 1}.grad_norm", files["steps"]["grad_norm"][i], norm_i))
    for name, p in model.named_parameters():
        pairs.append((f"after.{name}", files["trained"][name], p.detach()))
        pairs.append((f"update.{name}", files["trained"][name] - init[name], p.detach() - init[name]))

    lines = [f"init.{name}: {message}" for name, message in init_problems(c, init)]
    worst = (0.0, "")
    for what, got, want in pairs:
        line = compare(what, got, want, tol)
        if line:
            lines.append(line)
        elif tuple(got.shape) == tuple(want.shape):
            r = relative_error(got, want)
            if r >= worst[0]:
                worst = (r, what)
            if verbose:
                print(f"    {what:44s} {r:.2e}")
    return len(pairs) + len(init), lines, worst, losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "bench", "tinylm_vs_pytorch"))
    parser.add_argument("--only", default="", help="run only the config of this name")
    parser.add_argument("--keep", default="", help="write normgrad's files here and keep them (default: a "
                        "temporary folder)")
    parser.add_argument("--tol", type=float, default=1e-9, help="relative to each tensor's largest magnitude")
    parser.add_argument("--verbose", action="store_true", help="print every tensor's relative error")
    args = parser.parse_args()
    if not os.path.isfile(args.binary):
        sys.exit(f"tinylm_vs_pytorch: no program at {args.binary}; build it with "
                 "cmake --build --preset release --target tinylm_vs_pytorch, or pass --binary")
    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or tmp
        command = [args.binary, "--out", out] + (["--only", args.only] if args.only else [])
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"tinylm_vs_pytorch: {' '.join(command)} failed (exit {run.returncode}):\n{run.stderr}")
        with open(os.path.join(out, "index.json")) as f:
            names = json.load(f)["configs"]
        compared, differ, bad_configs = 0, 0, 0
        for name in names:
            if args.verbose:
                print(f"{name}: relative error of each tensor")
            n, lines, worst, losses = check_config(os.path.join(out, name), args.tol, args.verbose)
            compared += n
            differ += len(lines)
            bad_configs += bool(lines)
            status = f"{len(lines)} of {n} differ" if lines else f"all {n} agree"
            print(f"{name:22s} {status:18s} worst relative error {worst[0]:.1e} ({worst[1]}); "
                  f"loss {losses[0]:.6f} -> {losses[-1]:.6f}")
            for line in lines:
                print(f"  {name} {line}")

    print(f"{len(names)} configs, {compared} checks (init bounds, and tensors within {args.tol:g} of each "
          f"tensor's largest magnitude, f64): {differ} differ, in {bad_configs} configs (torch {torch.__version__})")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
