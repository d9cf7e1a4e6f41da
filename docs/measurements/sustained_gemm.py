#!/usr/bin/env python3
"""One GPU, back-to-back 8192^3 bf16 GEMMs for a while: the throughput of each one-second window
beside the SM clock, power draw and temperature NVML reports, to see whether a GEMM-bound load
held for as long as a training run holds it keeps the clocks that a short benchmark sees
(docs/measurements/h100-gemm-shapes.md)."""
import argparse
import json
import time

import pynvml
import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    flops = 2.0 * n ** 3
    windows = []
    started = time.time()
    while time.time() - started < args.seconds:
        count = 0
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        window_start = time.time()
        while time.time() - window_start < 1.0:
            for _ in range(50):
                torch.matmul(a, b, out=c)
            count += 50
            # Keep the host within 50 GEMMs (~70 ms) of the GPU, so a window is about a second.
            torch.cuda.current_stream().synchronize()
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        windows.append({
            "t_s": round(time.time() - started, 2),
            "tflops": flops * count / (ms * 1e-3) / 1e12,
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
            "temperature_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            "throttle_reasons": pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
            if hasattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons") else None,
        })
    result = {
        "device": torch.cuda.get_device_name(0),
        "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1e3,
        "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "size": n,
        "windows": windows,
    }
    json.dump(result, open(args.out, "w"), indent=1)
    for w in windows[:: max(1, len(windows) // 10)]:
        print(w)


if __name__ == "__main__":
    main()
