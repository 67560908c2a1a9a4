#!/usr/bin/env python3
"""normgrad against PyTorch eager on the same machine, the same threads and the same shapes.

The brief says normgrad should be faster on a CPU than what its users would otherwise pick, PyTorch eager.
This script measures that claim instead of asserting it. It runs normgrad's own benchmark
(bench/normgrad_bench --json) for a set of entries, then times the PyTorch call a user would write for
each of them, with the same timing rule (one warm-up call, then repeat for at least --min-time seconds and
at least 3 times; the best repetition counts), and prints both with their ratio.

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch      # CPU is enough
    /tmp/torchenv/bin/python bench/pytorch_compare.py --threads 2              # about 2 minutes
    /tmp/torchenv/bin/python bench/pytorch_compare.py --json > cmp.jsonl      # table on stderr
    /tmp/torchenv/bin/python bench/pytorch_compare.py --rounds 3              # best of 3 alternating rounds

What is compared (normgrad side: see bench/normgrad_bench.cpp for each entry):
  matmul/MxKxN/{NN,NT,TN}  f32 GEMM. PyTorch: torch.matmul(a, b, out=c) on transposed views for NT/TN.
  <norm>/RxC/f32/fwd       the norm's forward. PyTorch: F.layer_norm, F.rms_norm, F.batch_norm (training),
                           F.group_norm (32 groups) under torch.no_grad().
  <norm>/RxC/f32/fwd+bwd   forward and backward with dx, dweight (and dbias). PyTorch: autograd, y.backward(dy).
  <norm>/RxC/bf16/...      the same with bf16 x and dy; normgrad's weights are f32, PyTorch's f32 or bf16
                           (both timed, the faster reported).
  add_layer_norm/RxC/...   normgrad's fused residual add + LayerNorm. PyTorch: F.layer_norm(x + a, ...).
  softmax, cross_entropy   torch.softmax(x, -1); F.cross_entropy(logits, targets).backward().
  adam_step                one Adam step over one 4M-element tensor. PyTorch: torch.optim.Adam, both the
                           default implementation and fused=True; the faster one is reported.
  train_step/exp2/*        one exp2 training step (TinyLM 2 x 256, 4 heads, 4x ReLU FFN, RoPE, vocab 65,
                           B 16, T 64, Adam): the same model written as a PyTorch nn.Module, with attention
                           written out (softmax of masked scores) and with F.scaled_dot_product_attention; the
                           faster one is reported.

"speedup" is PyTorch's time over normgrad's: above 1, normgrad is faster.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
import warnings


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bench", default=os.path.join(ROOT, "build", "release", "bench", "normgrad_bench"),
                   help="normgrad's benchmark binary (default: this checkout's release build)")
    p.add_argument("--min-time", type=float, default=0.3, help="seconds of repetitions per entry")
    p.add_argument("--json", action="store_true", help="JSON lines on stdout, the table on stderr")
    p.add_argument("--quick", action="store_true", help="one shape per kind")
    p.add_argument("--filter", default="",
                   help="comma-separated substrings, as normgrad_bench's: compare only entries whose name has one")
    p.add_argument("--rounds", type=int, default=1,
                   help="run both sides this many times, alternating, and keep each side's best (a shared "
                        "machine has slow phases of seconds to minutes; alternating gives both the same odds)")
    return p.parse_args()


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = parse_args()
if not os.path.isfile(ARGS.bench):
    sys.exit(f"pytorch_compare: no benchmark binary at {ARGS.bench}: build it first "
             "(cmake --preset release -G Ninja && cmake --build --preset release), or pass --bench PATH")
os.environ.setdefault("OMP_NUM_THREADS", str(ARGS.threads))

import torch  # noqa: E402  (after OMP_NUM_THREADS is set)
import torch.nn.functional as F  # noqa: E402

# F.rms_norm with a bf16 x and an f32 weight warns that it cannot use its fused kernel; that is the point of
# timing both weight dtypes, so the warning is expected.
warnings.filterwarnings("ignore", message="Mismatch dtype between input and weight")

torch.set_num_threads(ARGS.threads)


def time_it(fn, min_time):
    """The rule of normgrad_bench's time_it: warm up once, repeat >= min_time and >= 3 times, best."""
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < min_time and len(times) < 10000):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[0], times[len(times) // 2]


# ---- the entries ----------------------------------------------------------------------------------------

MATMUL_SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (1024, 256, 768), (1024, 1024, 256), (1024, 256, 1000)]
NORM_SHAPES = [(4096, 1024), (16384, 256), (1024, 4096)]
if ARGS.quick:
    MATMUL_SHAPES = [(1024, 1024, 1024), (1024, 256, 768)]
    NORM_SHAPES = [(4096, 1024)]


def torch_matmul(M, K, N, form):
    # normgrad stores A as (M, K) or, transposed, (K, M); B as (K, N) or (N, K). Same here, as views.
    a = torch.randn(K, M).t() if form[0] == "T" else torch.randn(M, K)
    b = torch.randn(N, K).t() if form[1] == "T" else torch.randn(K, N)
    c = torch.empty(M, N)
    return lambda: torch.matmul(a, b, out=c)


def rms_norm(x, w, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w  # torch < 2.4


def norm_call(norm, x, w, b):
    if norm == "layer_norm":
        return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
    if norm == "rms_norm":
        return rms_norm(x, w, 1e-5)
    if norm == "batch_norm":
        return F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)
    return F.group_norm(x, 32, w, b, 1e-5)


def torch_norm(norm, rows, cols, passes, dtype="f32", param_dtype="f32"):
    g = torch.Generator().manual_seed(1)
    dt = torch.bfloat16 if dtype == "bf16" else torch.float32
    pdt = torch.bfloat16 if param_dtype == "bf16" else torch.float32
    x = torch.randn(rows, cols, generator=g).to(dt)
    dy = torch.randn(rows, cols, generator=g).to(dt)
    w = torch.ones(cols, dtype=pdt)
    b = torch.zeros(cols, dtype=pdt)
    if passes == "fwd":
        def fwd():
            with torch.no_grad():
                norm_call(norm, x, w, b)
        return fwd
    xg, wg, bg = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()

    def fwd_bwd():
        xg.grad = wg.grad = bg.grad = None
        norm_call(norm, xg, wg, bg).backward(dy)
    return fwd_bwd


def torch_norm_spatial(norm, passes, dtype="f32", param_dtype="f32"):
    """F.group_norm (32 groups) or F.batch_norm (training) on a (16, 256, 32, 32) feature map."""
    g = torch.Generator().manual_seed(3)
    dt = torch.bfloat16 if dtype == "bf16" else torch.float32
    pdt = torch.bfloat16 if param_dtype == "bf16" else torch.float32
    x = torch.randn(16, 256, 32, 32, generator=g).to(dt)
    dy = torch.randn(16, 256, 32, 32, generator=g).to(dt)
    w, b = torch.ones(256, dtype=pdt), torch.zeros(256, dtype=pdt)
    if passes == "fwd":
        def fwd():
            with torch.no_grad():
                norm_call(norm, x, w, b)
        return fwd
    xg, wg, bg = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()

    def fwd_bwd():
        xg.grad = wg.grad = bg.grad = None
        norm_call(norm, xg, wg, bg).backward(dy)
    return fwd_bwd


def torch_add_layer_norm(rows, cols, passes):
    g = torch.Generator().manual_seed(3)
    x, a, dy = (torch.randn(rows, cols, generator=g) for _ in range(3))
    w, b = torch.ones(cols), torch.zeros(cols)
    if passes == "fwd":
        def fwd():
            with torch.no_grad():
                F.layer_norm(x + a, (cols,), w, b, 1e-5)
        return fwd
    xg, ag = x.clone().requires_grad_(), a.clone().requires_grad_()

    def fwd_bwd():
        xg.grad = ag.grad = None
        F.layer_norm(xg + ag, (cols,), w, b, 1e-5).backward(dy)
    return fwd_bwd


def torch_softmax(rows, cols):
    x = torch.randn(rows, cols)

    def fn():
        with torch.no_grad():
            torch.softmax(x, -1)
    return fn


def torch_cross_entropy(rows, cols):
    logits = torch.randn(rows, cols).requires_grad_()
    targets = torch.tensor([(r * 7919) % cols for r in range(rows)])

    def fn():
        logits.grad = None
        F.cross_entropy(logits, targets).backward()
    return fn


def torch_adam(rows, cols, fused):
    p = torch.randn(rows, cols).requires_grad_()
    p.grad = torch.randn(rows, cols)
    opt = torch.optim.Adam([p], lr=1e-3, fused=fused) if fused else torch.optim.Adam([p], lr=1e-3)
    return opt.step


# ---- the exp2 model in PyTorch --------------------------------------------------------------------------


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def make_norm(kind, dim):
    return RMSNorm(dim) if kind == "rmsnorm" else torch.nn.LayerNorm(dim, eps=1e-5)


def rope_tables(T, hs, theta=1e6):
    inv = 1.0 / theta ** (torch.arange(0, hs, 2, dtype=torch.float32) / hs)
    ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)  # (T, HS/2)
    return torch.cos(ang), torch.sin(ang)


def apply_rope(x, cos, sin):  # x: (B, NH, T, HS), rotate-half pairing as in MiniMind
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(torch.nn.Module):
    def __init__(self, dim, heads, position, norm, sdpa):
        super().__init__()
        self.heads, self.position, self.sdpa = heads, position, sdpa
        self.q_proj = torch.nn.Linear(dim, dim, bias=False)
        self.k_proj = torch.nn.Linear(dim, dim, bias=False)
        self.v_proj = torch.nn.Linear(dim, dim, bias=False)
        self.o_proj = torch.nn.Linear(dim, dim, bias=False)
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.down = torch.nn.Linear(4 * dim, dim)
        if position != "none":
            self.norm1, self.norm2 = make_norm(norm, dim), make_norm(norm, dim)

    def attention(self, x, cos, sin):
        B, T, C = x.shape
        hs = C // self.heads
        q, k, v = (p(x).view(B, T, self.heads, hs).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            y = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, C))

    def ffn(self, x):
        return self.down(F.relu(self.up(x)))

    def forward(self, x, cos, sin):
        if self.position == "pre":
            x = x + self.attention(self.norm1(x), cos, sin)
            return x + self.ffn(self.norm2(x))
        if self.position == "post":
            x = self.norm1(x + self.attention(x, cos, sin))
            return self.norm2(x + self.ffn(x))
        x = x + self.attention(x, cos, sin)
        return x + self.ffn(x)


class TinyLM(torch.nn.Module):
    def __init__(self, position, norm, sdpa, vocab=65, dim=256, layers=2, heads=4, T=64):
        super().__init__()
        self.tok_emb = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, heads, position, norm, sdpa) for _ in range(layers))
        # a final norm for Pre-LN only, as exp2 (and normgrad's exp2_model, bench/exp2_step.h)
        self.norm = make_norm(norm, dim) if position == "pre" else None
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)
        cos, sin = rope_tables(T, dim // heads)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, tokens, targets):
        h = self.tok_emb(tokens)
        for blk in self.blocks:
            h = blk(h, self.cos, self.sin)
        if self.norm is not None:
            h = self.norm(h)
        logits = self.lm_head(h)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def torch_train_step(position, norm, sdpa):
    torch.manual_seed(1)
    model = TinyLM(position, norm, sdpa)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    B, T = 16, 64
    tok = torch.tensor([(i * 2654435761) % 65 for i in range(B * T)]).view(B, T)
    tgt = torch.roll(tok.view(-1), -1).view(B, T)

    def step():
        loss = model(tok, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad()
    step()  # Adam's moment buffers
    return step


# ---- run both and compare -------------------------------------------------------------------------------


def entries():
    """(normgrad entry name, [(PyTorch variant, its callable factory)])."""
    out = []
    for M, K, N in MATMUL_SHAPES:
        for form in ("NN", "NT", "TN"):
            out.append((f"matmul/{M}x{K}x{N}/{form}", [("torch.matmul", lambda M=M, K=K, N=N, f=form: torch_matmul(M, K, N, f))]))
    for norm in ("layer_norm", "rms_norm", "batch_norm", "group_norm"):
        for rows, cols in NORM_SHAPES:
            for passes in ("fwd", "fwd+bwd"):
                out.append((f"{norm}/{rows}x{cols}/f32/{passes}",
                            [("F." + norm, lambda n=norm, r=rows, c=cols, p=passes: torch_norm(n, r, c, p))]))
                # bf16 x; normgrad keeps f32 weights (as MiniMind's mixed precision does). PyTorch accepts
                # that mix but may leave its fused kernel for it (F.rms_norm does), so bf16 weights too.
                out.append((f"{norm}/{rows}x{cols}/bf16/{passes}", [
                    ("F." + norm + " (f32 weight)",
                     lambda n=norm, r=rows, c=cols, p=passes: torch_norm(n, r, c, p, "bf16", "f32")),
                    ("F." + norm + " (bf16 weight)",
                     lambda n=norm, r=rows, c=cols, p=passes: torch_norm(n, r, c, p, "bf16", "bf16"))]))
    for norm in ("group_norm", "batch_norm"):
        for passes in ("fwd", "fwd+bwd"):
            out.append((f"{norm}/16x256x32x32/f32/{passes}",
                        [("F." + norm, lambda n=norm, p=passes: torch_norm_spatial(n, p))]))
            out.append((f"{norm}/16x256x32x32/bf16/{passes}", [
                ("F." + norm + " (f32 weight)", lambda n=norm, p=passes: torch_norm_spatial(n, p, "bf16", "f32")),
                ("F." + norm + " (bf16 weight)",
                 lambda n=norm, p=passes: torch_norm_spatial(n, p, "bf16", "bf16"))]))
    for rows, cols in NORM_SHAPES[:2]:
        for passes in ("fwd", "fwd+bwd"):
            out.append((f"add_layer_norm/{rows}x{cols}/f32/{passes}",
                        [("F.layer_norm(x + a)",
                          lambda r=rows, c=cols, p=passes: torch_add_layer_norm(r, c, p))]))
    for rows, cols in [(4096, 1024), (1024, 4096)][: 1 if ARGS.quick else 2]:
        out.append((f"softmax/{rows}x{cols}/f32/fwd", [("torch.softmax", lambda r=rows, c=cols: torch_softmax(r, c))]))
        out.append((f"cross_entropy/{rows}x{cols}/f32/fwd+bwd",
                    [("F.cross_entropy", lambda r=rows, c=cols: torch_cross_entropy(r, c))]))
        out.append((f"adam_step/{rows}x{cols}/f32", [("Adam", lambda r=rows, c=cols: torch_adam(r, c, False)),
                                                     ("Adam(fused=True)", lambda r=rows, c=cols: torch_adam(r, c, True))]))
    for name, pos, norm in (("nonorm", "none", "layernorm"), ("postln_layernorm", "post", "layernorm"),
                            ("preln_layernorm", "pre", "layernorm"), ("preln_rmsnorm", "pre", "rmsnorm")):
        out.append((f"train_step/exp2/{name}", [
            ("explicit attention", lambda p=pos, n=norm: torch_train_step(p, n, False)),
            ("scaled_dot_product_attention", lambda p=pos, n=norm: torch_train_step(p, n, True))]))
    return out


def run_normgrad(names):
    cmd = [ARGS.bench, "--json", "--threads", str(ARGS.threads), "--min-time", str(ARGS.min_time),
           "--filter", ",".join(names)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"pytorch_compare: {' '.join(cmd)} failed with status {res.returncode}:\n{res.stderr}")
    rows = {}
    for line in res.stdout.splitlines():
        row = json.loads(line)
        if row.get("threads") == ARGS.threads and row.get("name") in names:
            rows.setdefault(row["name"], row)  # the first row at the main thread count
    return rows


def main():
    table = entries()
    if ARGS.filter:
        wanted = [w for w in ARGS.filter.split(",") if w]
        table = [(n, v) for n, v in table if any(w in n for w in wanted)]
        if not table:
            sys.exit(f"pytorch_compare: no entry matches --filter {ARGS.filter}")
    names = [n for n, _ in table]
    say = (lambda s: print(s, file=sys.stderr)) if ARGS.json else print
    say(f"PyTorch {torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"MKL {torch.backends.mkl.is_available()}, mkldnn {torch.backends.mkldnn.is_available()}), "
        f"{ARGS.threads} threads; normgrad: {ARGS.bench}")
    # Each round: normgrad's benchmark for every entry, then PyTorch for every entry. Per entry and side the
    # best time over the rounds counts.
    ng_best_of = {}
    torch_best_of = {}
    for rnd in range(max(1, ARGS.rounds)):
        # (normgrad_bench repeats the training steps for at least 1 s, as time_it below does here.)
        for name, row in run_normgrad(names).items():
            ng_best_of[name] = min(ng_best_of.get(name, math.inf), row["seconds"])
        for name, variants in table:
            if name not in ng_best_of:
                continue
            for label, factory in variants:
                fn = factory()
                t_best, t_median = time_it(fn, max(ARGS.min_time, 1.0) if name.startswith("train_step") else ARGS.min_time)
                if name not in torch_best_of or t_best < torch_best_of[name][1]:
                    torch_best_of[name] = (label, t_best, t_median)
                del fn
        if ARGS.rounds > 1:
            say(f"round {rnd + 1} of {ARGS.rounds} done")
    say(f"{'entry':44} {'normgrad':>11} {'PyTorch':>11}  {'speedup':>7}  PyTorch variant")
    speedups = []
    for name, variants in table:
        if name not in ng_best_of:
            say(f"{name:44} (normgrad_bench has no such entry)")
            continue
        ng_best = ng_best_of[name]
        label, t_best, t_median = torch_best_of[name]
        speedup = t_best / ng_best
        speedups.append((name, speedup))
        say(f"{name:44} {ng_best * 1e3:9.3f}ms {t_best * 1e3:9.3f}ms  {speedup:6.2f}x  {label}")
        if ARGS.json:
            print(json.dumps({"name": name, "threads": ARGS.threads, "normgrad_seconds": ng_best,
                              "torch_seconds": t_best, "torch_median": t_median, "torch_variant": label,
                              "torch_version": torch.__version__, "speedup": speedup,
                              "rounds": max(1, ARGS.rounds)}), flush=True)
    slower = [n for n, s in speedups if s < 1]
    geo = math.exp(sum(math.log(s) for _, s in speedups) / len(speedups))
    say(f"normgrad faster on {len(speedups) - len(slower)} of {len(speedups)} entries, geometric mean speedup "
        f"{geo:.2f}x; slower on: {', '.join(slower) if slower else 'none'}")


if __name__ == "__main__":
    main()
