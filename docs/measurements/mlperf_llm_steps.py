#!/usr/bin/env python3
"""Reproduces the measured step times of resources/validation/mlperf-training-h100.json and
mlperf-training-h200.json (docs/validation.md, "MLPerf Training on DGX H100 and H200").

MLPerf Training result files log no step time that covers the whole step, so it is read off the
MLLOG lines: a training block runs from `block_start` to `block_stop` (between two
evaluations). GPT-3 (gpt3) counts tokens: a block is its `epoch_count` tokens over
global_batch_size × max_sequence_length steps. Llama 3.1 405B (llama31_405b) counts samples,
and its block lines carry the count at the block's start, not the block's length, so a block is
the difference between two consecutive `eval_accuracy` sample counts over global_batch_size
steps. Per result file the median block's seconds per step (the first block holds the slow
first step and falls out of the median), per system the median of its result files and their
spread.

Where a round's logs also carry the step time NeMo measures itself (`tracked_stats` lines with
`train_step_timing`, v3.1, or `train_step_time`, v5.0: the training step between its timer's
start and stop, outside the training loop's own work), the script prints their median too, and
the wall-clock gap between two consecutive such lines in a block: a check that the block-based
figure is a step's time and not a block's overhead spread over its steps.

    python3 docs/measurements/mlperf_llm_steps.py CHECKOUT [CHECKOUT ...]

CHECKOUT is a git checkout or bare clone of mlcommons/training_results_v3.1, _v4.0, _v4.1 or
_v5.0 (the rows were read at d06288b2bd, 6fe954378e, b87b9e396f and 0fdc28f013). Standard
library only.
"""
import json
import re
import statistics
import subprocess
import sys

RESULT = re.compile(r"^(NVIDIA|Nebius)/results/([^/]+)/(gpt3|llama31_405b)/result_\d+\.txt$")
# The DGX H100 systems (NVIDIA's Eos) and Nebius's H200 ones, as their SYSJSON says; not the
# B200 and GB200 systems of the same rounds.
H100_OR_H200 = re.compile(r"^(eos|eos-dfw)_n\d+_ngc|^nebius_soperator_8xH200_")


def git(checkout, *args):
    return subprocess.run(["git", "-C", checkout, *args], capture_output=True, text=True,
                          check=True).stdout


def mllog_events(text):
    for line in text.splitlines():
        if ":::MLLOG " in line:  # some rounds prefix the rank ("0: :::MLLOG ...")
            yield json.loads(line.split(":::MLLOG ", 1)[1])


STEP_TIMERS = ("train_step_timing", "train_step_time")


def seconds_per_step(events, benchmark):
    """(global batch, gradient accumulation, median block's seconds per step, median logged step
    time or None, median wall-clock gap between logged steps or None) of one run; the logged
    figures from every block but the first."""
    first, blocks, start, evaluated = {}, [], None, []
    logged, gaps, previous = [], [], None
    for event in events:
        first.setdefault(event["key"], event)
        if event["key"] == "block_start":
            start, previous = event, None
        elif event["key"] == "block_stop" and start is not None:
            blocks.append(((event["time_ms"] - start["time_ms"]) / 1000, event["metadata"]))
            start = None
        elif (event["key"] == "tracked_stats" and start is not None and blocks
              and "throughput" not in event["value"]):  # not v5.0's block summary line
            timer = next((event["value"][k] for k in STEP_TIMERS if k in event["value"]), None)
            if timer is not None:
                logged.append(timer)
                if previous is not None:
                    gaps.append((event["time_ms"] - previous) / 1000)
                previous = event["time_ms"]
        elif event["key"] == "eval_accuracy":
            evaluated.append(event["metadata"]["samples_count"] if benchmark != "gpt3" else 0)
    gbs = first["global_batch_size"]["value"]
    seq = first["max_sequence_length"]["value"]
    per_step = []
    for i, (seconds, metadata) in enumerate(blocks):
        if benchmark == "gpt3":
            steps = metadata["epoch_count"] / (gbs * seq)
        elif i < len(evaluated):
            steps = (evaluated[i] - (evaluated[i - 1] if i else 0)) / gbs
        else:
            break
        per_step.append(seconds / steps)
    median = lambda values: statistics.median(values) if values else None
    return (gbs, first["gradient_accumulation_steps"]["value"], statistics.median(per_step),
            median(logged), median(gaps))


def main(checkouts):
    for checkout in checkouts:
        commit = git(checkout, "rev-parse", "HEAD").strip()
        systems = {}
        for path in git(checkout, "ls-tree", "-r", "--name-only", "HEAD").splitlines():
            match = RESULT.match(path)
            if match:
                if not H100_OR_H200.match(match.group(2)):
                    continue
                events = mllog_events(git(checkout, "show", "HEAD:" + path))
                key = f"{match.group(1)}/{match.group(2)}/{match.group(3)}"
                systems.setdefault(key, []).append(seconds_per_step(events, match.group(3)))
        print(f"{checkout} at {commit}")
        for system, runs in sorted(systems.items()):
            steps = [run[2] for run in runs]
            gbs, ga = runs[0][:2]
            line = (f"  {system:58s} GBS {gbs:5d}  GA {ga:4.0f}  {statistics.median(steps):8.4f} s a step"
                    f"  (runs {min(steps):.4f}-{max(steps):.4f}, {len(steps)} files)")
            logged = [run[3] for run in runs if run[3] is not None]
            gaps = [run[4] for run in runs if run[4] is not None]
            if logged:
                line += f"; NeMo's step timer {statistics.median(logged):.4f} s"
            if gaps:
                line += f", {statistics.median(gaps):.4f} s between its lines"
            print(line)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
