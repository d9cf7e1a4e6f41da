#!/usr/bin/env python3
"""Times, on one GPU through PyTorch (cuBLAS / cuBLASLt), every GEMM shape pipescope prices for a
set of validation rows, so the hardware curve's efficiency at the shapes that matter can be set
beside a measurement (docs/validation.md, "The H100 curve at the rows' own GEMM shapes").

Input: a JSON list of {"m", "n", "k", "batch", "fp8"} (C[m x n] = A[m x k] . B[k x n], `batch`
identical GEMMs in one batched call; fp8: e4m3 operands through torch._scaled_mm with bf16 out,
else bf16 with fp32 accumulation). Output: the same list with "us" (one call, the best of the
timed batches) and "tflops", plus a square ladder in both precisions and the device's description.

Random operands (zeros draw less power and let the clocks run higher than in training); each
shape is warmed up, then timed with CUDA events in batches of at least ~5 ms, three batches, the
best kept (as pipescope-backend --gemm-bench does).
"""
import argparse
import json
import sys
import time

import torch


def make_call(m, n, k, batch, fp8):
    device = "cuda"
    if fp8:
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        # _scaled_mm wants its second operand column-major.
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device, dtype=torch.float32)
        if batch == 1:
            return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        # No batched FP8 call in PyTorch: `batch` GEMMs one after another.
        return lambda: [torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                        for _ in range(batch)]
    if batch == 1:
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b)
    a = torch.randn(batch, m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(batch, k, n, device=device, dtype=torch.bfloat16)
    return lambda: torch.bmm(a, b)


def time_call(call, flops):
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    # Repetitions for a batch of about 5 ms at a guessed 500 TFLOP/s, at least 3, at most 2000.
    reps = int(min(2000, max(3, 5e-3 / max(flops / 500e12, 1e-7))))
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        start.record()
        for _ in range(reps):
            call()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) * 1e3 / reps)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", help="JSON list of shapes")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    shapes = json.load(open(args.shapes))
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    result = {
        "device": props.name,
        "sm_count": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cublas": str(torch.backends.cuda.preferred_blas_library())
        if hasattr(torch.backends.cuda, "preferred_blas_library") else "",
        "date": time.strftime("%Y-%m-%d"),
        "ladder": [],
        "shapes": [],
    }
    for fp8 in (False, True):
        for size in (512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384):
            flops = 2.0 * size ** 3
            us = time_call(make_call(size, size, size, 1, fp8), flops)
            result["ladder"].append({"size": size, "fp8": fp8, "us": us, "tflops": flops / us / 1e6})
            torch.cuda.empty_cache()
    print("ladder:", [(r["size"], r["fp8"], round(r["tflops"])) for r in result["ladder"]], flush=True)
    started = time.time()
    for i, shape in enumerate(shapes):
        m, n, k = (max(1, int(round(shape[key]))) for key in ("m", "n", "k"))
        batch = max(1, int(round(shape.get("batch", 1))))
        fp8 = bool(shape.get("fp8", False))
        flops = 2.0 * m * n * k * batch
        entry = dict(shape, m=m, n=n, k=k, batch=batch)
        try:
            us = time_call(make_call(m, n, k, batch, fp8), flops)
            entry.update(us=us, tflops=flops / us / 1e6)
        except Exception as error:  # noqa: BLE001 - one shape's failure is reported, not fatal
            entry["error"] = str(error)[:200]
        result["shapes"].append(entry)
        torch.cuda.empty_cache()
        if i % 50 == 0:
            print(f"{i}/{len(shapes)} {time.time() - started:.0f} s", flush=True)
    json.dump(result, open(args.out, "w"), indent=1)
    errors = sum(1 for s in result["shapes"] if "error" in s)
    print(f"{len(shapes)} shapes, {errors} failed, {time.time() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
