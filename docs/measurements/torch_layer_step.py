#!/usr/bin/env python3
"""One GPU, eager PyTorch: training steps of a Llama-3-shaped decoder (the llama3-8b preset's
shapes with fewer layers), timed end to end and profiled once, so pipescope's prediction of the
same step can be set beside a measurement, and the GEMM kernels' time inside a training step
beside the same GEMMs timed alone (docs/measurements/gemm_shapes_bench.py).

The model is plain torch.nn: RMSNorm, a fused QKV linear, rotary positions, causal
scaled_dot_product_attention (FlashAttention on Hopper), the output projection, a SwiGLU MLP, an
untied LM head and cross-entropy; bf16 parameters and activations, AdamW (fused) over them, no
recomputation. Random token ids. --master-fp32 steps the optimizer as Megatron-LM's
mixed-precision optimizer does: fp32 main gradients, fp32 master weights and Adam moments, the
bf16 weights copied back after the step (without it AdamW steps the bf16 weights themselves).
--compile runs the model through torch.compile, whose generated kernels fuse the norms, rotary
embeddings, SwiGLU and residual adds as Transformer Engine's fused kernels do in Megatron.

Output: JSON with the step times and, from one profiled step, the GPU time by kernel class and
the GPU's busy fraction; the profiled step's trace as a gzipped Chrome trace.
"""
import argparse
import gzip
import json
import shutil
import time

import torch
import torch.nn.functional as F
from torch import nn


class Layer(nn.Module):
    def __init__(self, hidden, ffn, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.norm1 = nn.RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.norm2 = nn.RMSNorm(hidden)
        self.up = nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, t, h = x.shape
        d = self.head_dim
        q, k, v = self.qkv(self.norm1(x)).split(
            [self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=-1)
        q = q.view(b, t, self.heads, d).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, d).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, d).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.proj(o.transpose(1, 2).reshape(b, t, h))
        gate, up = self.up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Decoder(nn.Module):
    def __init__(self, layers, hidden, ffn, heads, kv_heads, vocab, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(Layer(hidden, ffn, heads, kv_heads) for _ in range(layers))
        self.norm = nn.RMSNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        d = hidden // heads
        inv = 1.0 / (500000.0 ** (torch.arange(0, d, 2).float() / d))
        angles = torch.outer(torch.arange(seq).float(), inv)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens, labels):
        x = self.embed(tokens)
        cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1))


def kernel_class(name):
    lower = name.lower()
    if any(key in lower for key in ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "matmul")):
        if "flash" not in lower and "fmha" not in lower:
            return "gemm"
    if "flash" in lower or "fmha" in lower or "attention" in lower:
        return "attention"
    if "nccl" in lower:
        return "nccl"
    if "adam" in lower or "multi_tensor" in lower:
        return "optimizer"
    return "other"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--microbatch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--master-fp32", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--out", required=True)
    parser.add_argument("--trace", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    hidden, ffn, heads, kv_heads, vocab = 4096, 14336, 32, 8, 128256
    model = Decoder(args.layers, hidden, ffn, heads, kv_heads, vocab, args.seq).cuda().bfloat16()
    params = list(model.parameters())
    if args.master_fp32:
        master = [p.detach().float() for p in params]
        optimizer = torch.optim.AdamW(master, lr=1e-5, fused=True)
    else:
        optimizer = torch.optim.AdamW(params, lr=1e-5, fused=True)
    forward = torch.compile(model) if args.compile else model
    tokens = torch.randint(0, vocab, (args.microbatch, args.seq), device="cuda")
    labels = torch.randint(0, vocab, (args.microbatch, args.seq), device="cuda")

    marks = [torch.cuda.Event(enable_timing=True) for _ in range(4)]

    def step():
        marks[0].record()
        loss = forward(tokens, labels)
        marks[1].record()
        loss.backward()
        marks[2].record()
        if args.master_fp32:
            for p, m in zip(params, master):
                m.grad = p.grad.float()
            optimizer.step()
            with torch.no_grad():
                torch._foreach_copy_(params, master)
            for p in params:
                p.grad = None
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        marks[3].record()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times, phases = [], []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
        phases.append([marks[i].elapsed_time(marks[i + 1]) for i in range(3)])
    peak = torch.cuda.max_memory_allocated() / 2**30
    reserved = torch.cuda.max_memory_reserved() / 2**30
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    raw = args.trace + ".json"
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as source, gzip.open(args.trace, "wb") as target:
        shutil.copyfileobj(source, target)
    trace = json.load(open(raw))
    kernels = [e for e in trace["traceEvents"]
               if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    by_class, gemm_kernels = {}, {}
    for e in kernels:
        c = kernel_class(e["name"])
        by_class[c] = by_class.get(c, 0.0) + e["dur"]
        if c == "gemm":
            gemm_kernels[e["name"][:120]] = gemm_kernels.get(e["name"][:120], 0.0) + e["dur"]
    first = min(e["ts"] for e in kernels)
    last = max(e["ts"] + e["dur"] for e in kernels)
    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "config": dict(layers=args.layers, hidden=hidden, ffn=ffn, heads=heads, kv_heads=kv_heads,
                       vocab=vocab, seq=args.seq, microbatch=args.microbatch,
                       master_fp32=args.master_fp32, compile=args.compile),
        "parameters": sum(p.numel() for p in params),
        "step_ms": times,
        "forward_backward_optimizer_ms": phases,
        "peak_allocated_gib": peak,
        "peak_reserved_gib": reserved,
        "profiled_kernel_us_by_class": by_class,
        "profiled_kernel_span_us": last - first,
        "profiled_kernels": len(kernels),
        "profiled_gemm_kernels_us": dict(sorted(gemm_kernels.items(), key=lambda kv: -kv[1])[:20]),
    }
    json.dump(result, open(args.out, "w"), indent=1)
    print(json.dumps({k: result[k] for k in ("step_ms", "forward_backward_optimizer_ms",
                                              "peak_allocated_gib", "peak_reserved_gib",
                                              "profiled_kernel_us_by_class",
                                              "profiled_kernel_span_us")}))


if __name__ == "__main__":
    main()
