#!/usr/bin/env python3
"""One GPU, one tensor-parallel rank's share of a transformer layer, forward and backward, at
several microbatch sizes: how much of MLPerf's per-GPU gain from microbatch 1 to 2 (GPT-3 175B,
TP 4, sequence 2048, FP8: 13-15 % more tokens/s per GPU in NVIDIA's v3.1-v4.1 submissions,
docs/validation.md) the GPU's own kernels account for.

The layer is GPT-3's (LayerNorm, fused QKV, causal attention, output projection, GeLU MLP of 4h)
as Megatron-Core with Transformer Engine runs it on one TP rank under sequence parallelism and
`--tp-comm-overlap`: norms, dropout and residual adds over the rank's s/tp tokens, the four
GEMMs in FP8 (e4m3 operands through torch._scaled_mm, bf16 out; fast accumulation in the
forward, as TE's recipe) over all s tokens, attention in bf16 (scaled_dot_product_attention,
FlashAttention on Hopper). Under userbuffers ring exchange the GEMMs next to a TP collective run
as tp chunks of s/tp rows (the forward of QKV, projection, MLP up and down; the input-gradient
GEMMs of the projection and MLP down): `--chunks` times both ways. The collectives themselves
are not run (one GPU). The memory-bound kernels are PyTorch's generic ones (a cast, a
cast-transpose copy, layer_norm, gelu, dropout-add), not TE's fused ones: their per-token cost
hardly depends on the microbatch, which is the point.

Each kernel group is timed alone, captured `reps` times into a CUDA graph and replayed (no host
gaps), with CUDA events; the sums are the GPU's work per layer. The whole layer is also run
eagerly, forward then backward, back to back, to show the host's launch gaps at that size.

Output: JSON with, per (microbatch, chunks), each group's µs per call and the sums per token.
Results and what they say: docs/measurements/h100-microbatch-scaling.md.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

E4M3 = torch.float8_e4m3fn
BF16 = torch.bfloat16


def graph_time_us(call, reps=20, rounds=3, capture=True):
    """µs per call of `call` replayed from a CUDA graph of `reps` calls (eager if capture fails
    or is not asked for: autograd's backward is timed eagerly, its kernels being long enough
    for the host to stay ahead)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    mode = "graph"
    try:
        if not capture:
            raise RuntimeError("eager")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(reps):
                call()
        run = graph.replay
    except Exception:  # noqa: BLE001 - some kernels refuse capture: time them eagerly
        mode = "eager"
        torch.cuda.synchronize()

        def run():
            for _ in range(reps):
                call()
    run()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(rounds):
        start.record()
        run()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) * 1e3 / reps)
    return best, mode


class Rank:
    """One TP rank's tensors for a microbatch of `b` sequences."""

    def __init__(self, hidden, heads, ffn, tp, seq, b):
        dev = "cuda"
        self.h, self.tp, self.seq, self.b = hidden, tp, seq, b
        self.heads = heads // tp
        self.head_dim = hidden // heads
        self.qkv_n = 3 * hidden // tp
        self.attn_k = hidden // tp
        self.ffn = ffn // tp
        self.tokens = seq * b
        self.sp_tokens = self.tokens // tp
        t, h = self.tokens, hidden

        def fp8(rows, cols):
            return torch.randn(rows, cols, device=dev, dtype=BF16).to(E4M3)

        self.one = torch.ones((), device=dev, dtype=torch.float32)
        # Weights as [out, in] row-major: _scaled_mm takes their transpose, column-major.
        self.w = {"qkv": fp8(self.qkv_n, h), "proj": fp8(h, self.attn_k),
                  "fc1": fp8(self.ffn, h), "fc2": fp8(h, self.ffn)}
        # Their transposes for the input-gradient GEMMs (TE keeps both casts).
        self.wt = {name: w.t().contiguous() for name, w in self.w.items()}
        self.x_sp = torch.randn(self.sp_tokens, h, device=dev, dtype=BF16)
        self.ln_w = torch.ones(h, device=dev, dtype=BF16)
        self.ln_b = torch.zeros(h, device=dev, dtype=BF16)
        # GEMM inputs (row-major [tokens, in]) and output gradients, already FP8.
        self.a = {"qkv": fp8(t, h), "proj": fp8(t, self.attn_k), "fc1": fp8(t, h),
                  "fc2": fp8(t, self.ffn)}
        self.dy = {"qkv": fp8(t, self.qkv_n), "proj": fp8(t, h), "fc1": fp8(t, self.ffn),
                   "fc2": fp8(t, h)}
        # Transposed casts for the weight-gradient GEMMs: [in, tokens] and [out, tokens].
        self.a_t = {k: v.t().contiguous() for k, v in self.a.items()}
        self.dy_t = {k: v.t().contiguous() for k, v in self.dy.items()}
        self.wide = torch.randn(t, self.ffn, device=dev, dtype=BF16)
        self.attn_out = torch.randn(t, self.attn_k, device=dev, dtype=BF16)
        self.q = torch.randn(b, self.heads, seq, self.head_dim, device=dev, dtype=BF16,
                             requires_grad=True)
        self.k = torch.randn_like(self.q, requires_grad=True)
        self.v = torch.randn_like(self.q, requires_grad=True)
        self.dout = torch.randn_like(self.q)
        for leaf in (self.q, self.k, self.v):
            leaf.grad = torch.zeros_like(leaf)

    def gemm(self, a, bt, fast):
        return torch._scaled_mm(a, bt.t(), scale_a=self.one, scale_b=self.one, out_dtype=BF16,
                                use_fast_accum=fast)

    def chunked(self, a, bt, chunks, fast):
        rows = a.shape[0] // chunks
        return [self.gemm(a[i * rows:(i + 1) * rows], bt, fast) for i in range(chunks)]

    def groups(self, chunks):
        """(name, pass, kind, call) for every kernel group of the layer."""
        ring = {"qkv": chunks, "proj": chunks, "fc1": chunks, "fc2": chunks}
        ring_dgrad = {"qkv": 1, "proj": chunks, "fc1": 1, "fc2": chunks}
        out = []
        for name in ("qkv", "proj", "fc1", "fc2"):
            out.append((f"{name} fprop", "F", "gemm",
                        lambda n=name: self.chunked(self.a[n], self.w[n], ring[n], True)))
            out.append((f"{name} dgrad", "B", "gemm",
                        lambda n=name: self.chunked(self.dy[n], self.wt[n], ring_dgrad[n], False)))
            # Weight gradient [out, in] = dY^T . X: inner dimension the tokens.
            out.append((f"{name} wgrad", "B", "gemm",
                        lambda n=name: self.gemm(self.dy_t[n], self.a_t[n], False)))

        def attention_fwd():
            with torch.no_grad():
                return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)

        def attention_fwd_bwd():
            o = F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)
            o.backward(self.dout)

        out.append(("attention fwd", "F", "attention", attention_fwd))
        out.append(("attention fwd+bwd", "FB", "attention", attention_fwd_bwd))
        sp, t, h = self.x_sp, self.tokens, self.h
        cast_sp = torch.empty(self.sp_tokens, h, device="cuda", dtype=E4M3)
        cast_wide = torch.empty(t, self.ffn, device="cuda", dtype=E4M3)
        cast_attn = torch.empty(t, self.attn_k, device="cuda", dtype=E4M3)
        cast_t_h = torch.empty(h, t, device="cuda", dtype=E4M3)
        big_h = torch.randn(t, h, device="cuda", dtype=BF16)
        cast_t_wide = torch.empty(self.ffn, t, device="cuda", dtype=E4M3)
        cast_t_qkv = torch.empty(self.qkv_n, t, device="cuda", dtype=E4M3)
        qkv_grad = torch.randn(t, self.qkv_n, device="cuda", dtype=BF16)
        mask = torch.rand(self.sp_tokens, h, device="cuda") > 0.1

        def layer_norm_cast():  # TE: layernorm_fwd_fp8, twice a layer
            cast_sp.copy_(F.layer_norm(sp, (h,), self.ln_w, self.ln_b))

        def dropout_add():  # bias-dropout-add, twice a layer
            return sp + sp * mask

        def gelu_cast():
            cast_wide.copy_(F.gelu(self.wide, approximate="tanh"))

        def attn_out_cast():
            cast_attn.copy_(self.attn_out)

        def layer_norm_bwd():  # ~ read x, dy, write dx: three [s/tp, h] passes, twice a layer
            return sp * sp + sp

        def dgelu_cast_transpose():
            cast_t_wide.copy_((self.wide * self.wide).t())

        def cast_transpose_h():  # output gradients of proj and fc2 (all-gathered), [s, h]
            cast_t_h.copy_(big_h.t())

        def cast_transpose_qkv():
            cast_t_qkv.copy_(qkv_grad.t())

        for name, passes, call, count in (
                ("layernorm+cast", "F", layer_norm_cast, 2), ("dropout+add", "F", dropout_add, 2),
                ("gelu+cast", "F", gelu_cast, 1), ("attention out cast", "F", attn_out_cast, 1),
                ("layernorm bwd", "B", layer_norm_bwd, 2),
                ("dgelu+cast-transpose", "B", dgelu_cast_transpose, 1),
                ("grad cast-transpose [s,h]", "B", cast_transpose_h, 2),
                ("grad cast-transpose qkv", "B", cast_transpose_qkv, 1)):
            out.append((name, passes, "memory", call, count))
        return [g if len(g) == 5 else g + (1,) for g in out]

    def eager_layer(self, chunks):
        """The layer's kernels in order, forward then backward, launched eagerly."""
        calls = [g[3] for g in self.groups(chunks) if g[0] != "attention fwd"
                 for _ in range(g[4])]
        return lambda: [c() for c in calls]


def measure(hidden, heads, ffn, tp, seq, b, chunks):
    rank = Rank(hidden, heads, ffn, tp, seq, b)
    rows, totals = [], {}
    for name, passes, kind, call, count in rank.groups(chunks):
        us, mode = graph_time_us(call, capture=kind != "attention")
        rows.append({"group": name, "pass": passes, "kind": kind, "count": count,
                     "us": us, "mode": mode})
    by = {r["group"]: r for r in rows}
    attn_f = by["attention fwd"]["us"]
    attn_b = by["attention fwd+bwd"]["us"] - attn_f
    for r in rows:
        if r["kind"] == "attention":
            continue
        key = f"{r['kind']} {r['pass']}"
        totals[key] = totals.get(key, 0.0) + r["us"] * r["count"]
    totals["attention F"], totals["attention B"] = attn_f, attn_b
    gpu_us = sum(totals.values())
    eager = rank.eager_layer(chunks)
    for _ in range(3):
        eager()
    torch.cuda.synchronize()
    started = time.perf_counter()
    reps = 10
    for _ in range(reps):
        eager()
    torch.cuda.synchronize()
    eager_us = (time.perf_counter() - started) * 1e6 / reps
    tokens = rank.tokens
    result = {"microbatch": b, "chunks": chunks, "tokens": tokens, "groups": rows,
              "us": totals, "gpu_us": gpu_us, "gpu_ns_per_token": gpu_us * 1e3 / tokens,
              "eager_us": eager_us, "eager_ns_per_token": eager_us * 1e3 / tokens}
    del rank
    torch.cuda.empty_cache()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=12288)
    parser.add_argument("--heads", type=int, default=96)
    parser.add_argument("--ffn", type=int, default=4 * 12288)
    parser.add_argument("--tp", type=int, default=4)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--microbatches", default="1,2,4")
    parser.add_argument("--chunks", default="1,4")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    result = {"device": props.name, "sm_count": props.multi_processor_count,
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "date": time.strftime("%Y-%m-%d"),
              "layer": {k: getattr(args, k) for k in ("hidden", "heads", "ffn", "tp", "seq")},
              "runs": []}
    for chunks in (int(c) for c in args.chunks.split(",")):
        for b in (int(m) for m in args.microbatches.split(",")):
            try:
                run = measure(args.hidden, args.heads, args.ffn, args.tp, args.seq, b, chunks)
            except Exception as error:  # noqa: BLE001 - report and go on to the next size
                run = {"microbatch": b, "chunks": chunks, "error": repr(error)[:300]}
            result["runs"].append(run)
            json.dump(result, open(args.out, "w"), indent=1)
            if "error" in run:
                print(f"b={b} chunks={chunks}: {run['error']}", flush=True)
                continue
            parts = " ".join(f"{k}={v:.0f}" for k, v in sorted(run["us"].items()))
            print(f"b={b} chunks={chunks}: gpu {run['gpu_us']:.0f} us "
                  f"({run['gpu_ns_per_token']:.1f} ns/token), eager {run['eager_us']:.0f} us "
                  f"({run['eager_ns_per_token']:.1f} ns/token) | {parts}", flush=True)


if __name__ == "__main__":
    main()
