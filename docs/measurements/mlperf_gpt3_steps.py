#!/usr/bin/env python3
"""Reproduces the measured step times of resources/validation/mlperf-training-h100.json
(docs/validation.md, "MLPerf Training GPT-3 175B on DGX H100").

NVIDIA's MLPerf Training result files log no throughput, so the step is read off the MLLOG lines:
a training block runs from `block_start` to `block_stop` (between two evaluations) over
`epoch_count` tokens, i.e. epoch_count / (global_batch_size × max_sequence_length) steps. Per
result file the median block's seconds per step (the first block holds the slow first step and
falls out of the median), per system the median of its result files, with their spread.

    python3 docs/measurements/mlperf_gpt3_steps.py CHECKOUT [CHECKOUT ...]

CHECKOUT is a git checkout or bare clone of mlcommons/training_results_v3.1 or _v4.0 (the rows
were read at d06288b2bd and 6fe954378e). Standard library only.
"""
import json
import re
import statistics
import subprocess
import sys

RESULT = re.compile(r"^NVIDIA/results/([^/]+)/gpt3/result_\d+\.txt$")


def git(checkout, *args):
    return subprocess.run(["git", "-C", checkout, *args], capture_output=True, text=True,
                          check=True).stdout


def mllog_events(text):
    for line in text.splitlines():
        if line.startswith(":::MLLOG "):
            yield json.loads(line[len(":::MLLOG "):])


def seconds_per_step(events):
    """(global batch, gradient accumulation, median block's seconds per step) of one run."""
    first, blocks, start = {}, [], None
    for event in events:
        first.setdefault(event["key"], event)
        if event["key"] == "block_start":
            start = event
        elif event["key"] == "block_stop" and start is not None:
            tokens = event["metadata"]["epoch_count"]
            blocks.append(((event["time_ms"] - start["time_ms"]) / 1000, tokens))
            start = None
    gbs = first["global_batch_size"]["value"]
    seq = first["max_sequence_length"]["value"]
    per_step = [seconds / (tokens / (gbs * seq)) for seconds, tokens in blocks]
    return gbs, first["gradient_accumulation_steps"]["value"], statistics.median(per_step)


def main(checkouts):
    for checkout in checkouts:
        commit = git(checkout, "rev-parse", "HEAD").strip()
        systems = {}
        for path in git(checkout, "ls-tree", "-r", "--name-only", "HEAD").splitlines():
            match = RESULT.match(path)
            if match:
                events = mllog_events(git(checkout, "show", "HEAD:" + path))
                systems.setdefault(match.group(1), []).append(seconds_per_step(events))
        print(f"{checkout} at {commit}")
        for system, runs in sorted(systems.items()):
            steps = [step for _, _, step in runs]
            gbs, ga, _ = runs[0]
            print(f"  {system:32s} GBS {gbs:5d}  GA {ga:4d}  {statistics.median(steps):8.4f} s a step"
                  f"  (runs {min(steps):.4f}-{max(steps):.4f}, {len(steps)} files)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
