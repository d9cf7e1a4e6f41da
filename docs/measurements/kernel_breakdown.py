#!/usr/bin/env python3
"""GPU time of a PyTorch profiler trace by the cost model's categories.

Reproduces the kernel figures docs/validation.md sets against pipescope's per-layer prediction
("DeepSeek-V3's MoE layers against DeepSeek's kernel profile"): the span of the GPU work, each
stream's busy time, and the kernels' time summed into gemm, attention, memory-bound and
communication, optionally per layer.

    python3 docs/measurements/kernel_breakdown.py train.json --layers 4

train.json is deepseek-ai/profile-data's training profile (commit 4496024; not redistributed
here). Any Chrome-trace JSON written by torch.profiler works (a .gz too); the name patterns below
are those of DeepSeek's kernels (DeepGEMM, FlashAttention, DeepEP) and of cuBLAS and
Transformer Engine, and every kernel they miss counts as memory-bound, which the output says.
Standard library only.
"""
import argparse
import collections
import gzip
import json
import sys

# (category, substrings of the kernel name), first match wins.
CATEGORIES = [
    # DeepGEMM's layout helpers move bytes, whatever their namespace says.
    ("memory-bound", ("grouped_gemm::cuda::utils::",)),
    ("communication", ("dpsk::ep::", "nccl", "hybrid_ep")),
    ("attention", ("flash", "fmha", "cudnn_generated_fort_native_sdpa")),
    ("gemm", ("grouped_gemm::cuda::m_grouped", "fp8_dptp128c", "fp8_ptp128c", "gemm", "cutlass",
              "sm90_xmma", "nvjet")),
]


def category_of(name):
    lowered = name.lower()
    for category, patterns in CATEGORIES:
        if any(pattern.lower() in lowered for pattern in patterns):
            return category
    return "memory-bound"


def busy_time(intervals):
    """Length of the union of [start, end) intervals."""
    total, current = 0.0, None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    if current is not None:
        total += current[1] - current[0]
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="torch.profiler Chrome-trace JSON (or .json.gz)")
    parser.add_argument("--layers", type=int, default=1,
                        help="divide the sums by this many layers (default 1)")
    args = parser.parse_args()
    if args.layers < 1:
        sys.exit("--layers: a positive count of layers, got %d" % args.layers)
    opener = gzip.open if args.trace.endswith(".gz") else open
    try:
        with opener(args.trace, "rt") as handle:
            trace = json.load(handle)
    except (OSError, ValueError) as error:
        sys.exit("%s: not a readable profiler trace (%s)" % (args.trace, error))
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    gpu = [e for e in events
           if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not gpu:
        sys.exit("%s: no GPU kernels (cat kernel/gpu_memcpy/gpu_memset); profile with "
                 "ProfilerActivity.CUDA" % args.trace)
    start = min(e["ts"] for e in gpu)
    end = max(e["ts"] + e["dur"] for e in gpu)
    per_layer = float(args.layers)
    print("GPU span %.0f us (%.0f per layer)" % (end - start, (end - start) / per_layer))
    streams = collections.defaultdict(list)
    for e in gpu:
        streams[e.get("tid")].append((e["ts"], e["ts"] + e["dur"]))
    for stream, intervals in sorted(streams.items(), key=lambda item: str(item[0])):
        print("stream %-6s busy %.0f us (%.0f %% of the span), %d kernels"
              % (stream, busy_time(intervals), 100 * busy_time(intervals) / (end - start),
                 len(intervals)))
    sums = collections.Counter()
    unmatched = collections.Counter()
    for e in gpu:
        category = category_of(e["name"])
        sums[category] += e["dur"]
        if category == "memory-bound":
            unmatched[e["name"].split("<")[0].replace("void ", "")[:60]] += e["dur"]
    print("kernel time by category (us, per layer):")
    for category in ("gemm", "attention", "memory-bound", "communication"):
        print("  %-14s %10.0f %10.0f" % (category, sums[category], sums[category] / per_layer))
    print("memory-bound (no pattern matched), largest first (us per layer):")
    for name, duration in unmatched.most_common(12):
        print("  %8.0f  %s" % (duration / per_layer, name))


if __name__ == "__main__":
    main()
