#!/usr/bin/env python3
"""A published row's step with every kernel at the best rate one H100 SXM measured for it, every
link at its line rate and nothing else (docs/validation.md, "Speed of light"): the speed of light
of `pipescope compare` (every kernel at 100 % of peak), tightened by the kernel ceilings that were
measured. On the H100 family: bf16 GEMMs and attention at 0.82 of the bf16 peak (the top of the
range the validation rows' own 428 GEMM shapes reach alone, docs/measurements/h100-gemm-shapes.md)
and FP8 GEMMs at 0.73 of the FP8 peak (the best of the FP8 ladder there, 1450 of 1979 TFLOPS);
memory-bound work at the full HBM bandwidth. Other GPU types keep their peaks (no ceiling was
measured on them).

    python3 docs/measurements/floor_at_kernel_ceilings.py --pipescope build/engine/cli/pipescope \
        --published megatron-core-h100 --row gpt-32b

Each row's plan comes from `compare --published SET --row ID --save-plan`, its hardware is
changed as above, and `simulate --plan` predicts it. Standard library only.
"""
import argparse
import json
import os
import subprocess
import tempfile

H100_FAMILY = ("h100-sxm", "h100-hbm2e-96gb", "h200", "h800")
BF16_CEILING, FP8_CEILING = 0.82, 0.73


def at_ceilings(hardware):
    """The hardware file with its kernels at their measured ceilings and nothing else priced."""
    measured = hardware["name"] in H100_FAMILY
    bf16, fp8 = (BF16_CEILING, FP8_CEILING) if measured else (1.0, 1.0)
    flat = lambda level: [{"flops": 1.0, "efficiency": level}, {"flops": 1e16, "efficiency": level}]
    hardware["gemm_efficiency"] = flat(bf16)
    if hardware.get("peak_fp8_tflops"):
        hardware["gemm_efficiency_fp8"] = flat(fp8)
    else:
        hardware.pop("gemm_efficiency_fp8", None)
    hardware["attention_efficiency"] = bf16
    hardware["memory_efficiency"] = 1.0
    for key in list(hardware):
        if key.endswith("bus_efficiency"):
            hardware[key] = 1.0
        if key.endswith("latency_us"):
            hardware[key] = 0.0
    hardware["collective_gemm_slowdown"] = 0.0
    hardware["layer_overhead_us"] = 0.0
    hardware["moe_layer_host_us"] = 0.0
    hardware.pop("sm_count", None)
    return hardware


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipescope", required=True)
    parser.add_argument("--published", required=True)
    parser.add_argument("--row", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        plan_path = os.path.join(scratch, "plan.json")
        compared = subprocess.run([args.pipescope, "compare", "--published", args.published,
                                   "--row", args.row, "--save-plan", plan_path, "--json"],
                                  capture_output=True, text=True, check=True)
        row = json.loads(compared.stdout)["rows"][0]
        with open(plan_path) as f:
            plan = json.load(f)
        plan["hardware"] = at_ceilings(plan["hardware"])
        if "training" in plan:
            plan["training"]["moe_layer_host_us"] = 0.0
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        simulated = subprocess.run([args.pipescope, "simulate", "--plan", plan_path, "--json"],
                                   capture_output=True, text=True, check=True)
        floor = json.loads(simulated.stdout)["step_time_s"]
    measured = row.get("measured_step_s")
    print(f"{args.published}/{args.row}: predicted {row['predicted_step_s']:.3f} s, "
          f"speed of light {row['speed_of_light_step_s']:.3f} s, "
          f"at the measured kernel ceilings {floor:.3f} s"
          + (f", measured {measured:.3f} s ({measured / floor:.2f}x the last)" if measured else ""))


if __name__ == "__main__":
    main()
