#!/usr/bin/env python3
"""Reproduces the fit of the H100 family's two GEMM levels (docs/validation.md, "How the H100
levels are set"): the BF16 curve's level, then the FP8 curve's factor over it.

1. BF16: the curve keeps its shape (SHAPE below, efficiency over GEMM size: tile and wave
   quantization, docs/cost-model.md) and is scaled by one level k, chosen in steps of 0.01 to
   minimize the mean |error| of the rows whose step is that level's alone (BF16_FIT_ROWS: no
   pipeline bubble, a DP sync that hides; Megatron-Core r0.8 on H100).
2. FP8: the BF16 curve at k times one factor f, each point at twice its FLOPs (the FP8 peak over
   the BF16 one: a GEMM that does its FLOPs twice as fast loses the same time below the plateau,
   so it reaches an efficiency at twice the work; on one H100 the rows' FP8 GEMMs run at
   0.88-0.94 of the BF16 efficiency at half their FLOPs, docs/measurements/h100-gemm-shapes.md),
   f chosen in steps of 0.01 up to 1 to minimize
   the mean |error| of the four dense Llama rows of Megatron-Bridge's FP8 table (FP8_FIT_ROWS).
   Not above 1: the best FP8 GEMMs published for this die reach the share of their peak the best
   BF16 GEMMs reach, not more (DeepGEMM "up to 1550 TFLOPS on H800", 0.78 of 1979; cuBLAS BF16
   765 TFLOPS, 0.77 of 989, measured here: docs/measurements/gpu-shared-h100.md), and in training
   FP8 adds the scaling work BF16 has not; DeepSeek's kernel profile times its FP8 GEMMs slower
   than the curve, not faster (docs/validation.md).

Every other timed row is held out of both. As a check that chooses nothing, the script then
sweeps the factor around its fit on NeMo 24.07's held-out FP8 table (HELD_OUT_FP8_SET). With
--write the presets of the H100 family (h100-sxm, h200, h800 and h100-hbm2e-96gb: one GPU die,
one curve) get the chosen curves; run fit_moe_host.py after it, as the MoE layers' host time is
fitted over these curves.

    python3 docs/measurements/fit_h100_levels.py --pipescope build/engine/cli/pipescope [--write]

Standard library only.
"""
import argparse
import copy
import glob
import json
import os
import subprocess
import tempfile

# The BF16 curve's shape: GEMM size (the cube root of m·n·k, docs/cost-model.md) and the relative
# efficiency there, 1 at the plateau. The levels below 2048 follow tile and wave quantization on
# 132 SMs; these are the estimates the curve was set with before its level was fitted.
SHAPE = [(512, 0.12 / 0.7), (1024, 0.3 / 0.7), (2048, 0.5 / 0.7), (4096, 0.62 / 0.7),
         (8192, 0.67 / 0.7), (16384, 1.0)]
BF16_FIT_ROWS = {("megatron-core-h100", "gpt-1.7b"), ("megatron-core-h100", "gpt-7.1b"),
                 ("megatron-core-h100", "gpt-177b-strong-96")}
FP8_FIT_ROWS = {("megatron-bridge-h100", row) for row in
                ("llama3-70b-gbs128", "llama3-70b-gbs256", "llama3.1-405b-gbs512",
                 "llama3.1-405b-gbs1536")}
HELD_OUT_FP8_SET = "nemo-h100"
FAMILY = ("h100-sxm", "h200", "h800", "h100-hbm2e-96gb")
PRESETS = "resources/presets/hardware"


def steps(low, high):
    """low, low + 0.01, ..., high."""
    return [round(low + 0.01 * i, 2) for i in range(int(round((high - low) / 0.01)) + 1)]


def curve(level):
    return [{"size": size, "efficiency": round(level * relative, 4)} for size, relative in SHAPE]


def fp8_curve(level, speedup):
    """The FP8 curve: the BF16 shape at `speedup` (FP8 peak / BF16 peak) times its FLOPs, as
    fp8CurveFromBf16 in engine/model/layer_costs.cpp reads a hardware without one (a GEMM that
    does its FLOPs twice as fast loses the same time below the plateau), at `level`."""
    return [{"flops": round(2 * size ** 3 * speedup), "efficiency": round(level * relative, 4)}
            for size, relative in SHAPE]


def errors(pipescope, sets, hardware_file, wanted):
    """{(set, row): step error} of the rows `wanted`, predicted on `hardware_file`."""
    found = {}
    with tempfile.TemporaryDirectory() as scratch:
        for path in sets:
            name = os.path.basename(path)[: -len(".json")]
            if not any(set_name == name for set_name, _ in wanted):
                continue
            with open(path) as f:
                data = json.load(f)
            data["rows"] = [row for row in data["rows"] if (name, row["id"]) in wanted]
            for row in data["rows"]:
                row["hardware"] = hardware_file
            trial = os.path.join(scratch, name + ".json")
            with open(trial, "w") as f:
                json.dump(data, f)
            out = subprocess.run([pipescope, "compare", "--published", trial, "--json"],
                                 capture_output=True, text=True, check=True).stdout
            for row in json.loads(out)["rows"]:
                found[(name, row["id"])] = row["step_error"]
    return found


def with_curves(preset, bf16_level, fp8_factor):
    hardware = copy.deepcopy(preset)
    hardware["gemm_efficiency"] = curve(bf16_level)
    if "gemm_efficiency_fp8" in hardware:
        speedup = hardware["peak_fp8_tflops"] / hardware["peak_tflops"]
        hardware["gemm_efficiency_fp8"] = fp8_curve(bf16_level * fp8_factor, speedup)
    return hardware


def fit(pipescope, sets, preset, rows, levels, make):
    """The candidate with the lowest mean |error| over `rows`, printing each."""
    best = None
    with tempfile.TemporaryDirectory() as scratch:
        hardware_file = os.path.join(scratch, "h100.json")
        for value in levels:
            with open(hardware_file, "w") as f:
                json.dump(make(value), f)
            found = errors(pipescope, sets, hardware_file, rows)
            mean = sum(abs(e) for e in found.values()) / len(found)
            cells = "  ".join(f"{row} {100 * e:+.1f} %" for (_, row), e in sorted(found.items()))
            print(f"  {value:.2f}: mean {100 * mean:4.1f} %   {cells}")
            if best is None or mean < best[1]:
                best = (value, mean)
    return best


def write_preset(path, hardware):
    """A hardware preset written as the shipped ones are (2-space JSON, a final newline)."""
    with open(path, "w") as f:
        json.dump(hardware, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print("wrote", path)


def fit_arguments(doc, write_help):
    """The fit scripts' command line: --pipescope, --sets and --write."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--pipescope", default="build/engine/cli/pipescope")
    parser.add_argument("--sets", default="resources/validation")
    parser.add_argument("--write", action="store_true", help=write_help)
    return parser.parse_args()


def main():
    args = fit_arguments(__doc__, "write the fitted curves into the H100 family's presets")
    sets = sorted(glob.glob(os.path.join(args.sets, "*.json")))
    with open(os.path.join(PRESETS, "h100-sxm.json")) as f:
        preset = json.load(f)

    print("BF16 level k (the plateau's efficiency), rows", sorted(r for _, r in BF16_FIT_ROWS))
    k, k_mean = fit(args.pipescope, sets, preset, BF16_FIT_ROWS, steps(0.50, 0.75),
                    lambda level: with_curves(preset, level, 0.8))
    print(f"lowest mean: k = {k:.2f} ({100 * k_mean:.1f} %)\n")
    print("FP8 factor f over the BF16 curve at k, rows", sorted(r for _, r in FP8_FIT_ROWS))
    f, f_mean = fit(args.pipescope, sets, preset, FP8_FIT_ROWS, steps(0.70, 1.00),
                    lambda factor: with_curves(preset, k, factor))
    print(f"lowest mean: f = {f:.2f} ({100 * f_mean:.1f} %): the largest FP8 GEMMs at "
          f"{k * f:.3f} of the FP8 peak\n")

    # A check, never used to choose: the held-out FP8 table of another container (NeMo 24.07,
    # delayed scaling, other models) at factors around f.
    held_out = os.path.join(args.sets, HELD_OUT_FP8_SET + ".json")
    with open(held_out) as fh:
        rows = {(HELD_OUT_FP8_SET, row["id"]) for row in json.load(fh)["rows"]}
    print("held out:", HELD_OUT_FP8_SET, "at factors around f")
    near = [round(f + d, 2) for d in (-0.10, -0.05, 0.0, 0.05, 0.10)]
    g, g_mean = fit(args.pipescope, sets, preset, rows, near,
                    lambda factor: with_curves(preset, k, factor))
    print(f"its own lowest mean among them: {g:.2f} ({100 * g_mean:.1f} %)")

    if args.write:
        for name in FAMILY:
            path = os.path.join(PRESETS, name + ".json")
            with open(path) as fh:
                text = json.load(fh)
            write_preset(path, with_curves(text, k, f))


if __name__ == "__main__":
    main()
