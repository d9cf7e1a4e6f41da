#!/usr/bin/env python3
"""Writes the per-rank orders of the V-Half and V-Min schedules (Qi et al., Pipeline Parallelism with
Controllable Memory, NeurIPS 2024) as the authors' reference builds them, for a grid of P
(pipeline ranks) and M (microbatches): the test data that tests/engine/test_pytorch_orders.cpp
compares pipescope's v-half and v-min against.

The reference is zbv_greedy.py in sail-sg/zero-bubble-pipeline-parallelism
(megatron/core/pipeline_parallel/zerobubble/scheduler/). It is imported from a checkout, with its
one Megatron import (the ScheduledNode type, used only by create_schedule) stubbed out; the order
comes from PipelineGraph.schedule_from_pattern, which create_schedule calls with unit op times.
Each order is written as PyTorch's schedule CSV, one row per rank, with pipescope's V-shape stage
ids (rank r holds stage r and stage 2P-1-r):
    F -> rF, f -> (2P-1-r)F, B -> (2P-1-r)I, b -> rI, W -> (2P-1-r)W, w -> rW

    python tests/data/zero_bubble/make_v_schedule_orders.py CHECKOUT COMMIT \
        | gzip -9n > tests/data/zero_bubble/v_schedule_orders.json.gz
"""
import importlib.util
import json
import os
import sys
import types

PIPELINE_RANKS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16]
MICROBATCHES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 24, 32]


def load_reference(checkout):
    path = os.path.join(checkout, "megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py")
    graph = types.ModuleType("megatron.core.pipeline_parallel.zerobubble.scheduler.graph")
    graph.ScheduledNode, graph.B, graph.W, graph.F, graph.FuncType = object, "B", "W", "F", object
    for name in ["megatron", "megatron.core", "megatron.core.pipeline_parallel",
                 "megatron.core.pipeline_parallel.zerobubble",
                 "megatron.core.pipeline_parallel.zerobubble.scheduler"]:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules[graph.__name__] = graph
    spec = importlib.util.spec_from_file_location("zbv_greedy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    checkout, commit = sys.argv[1], sys.argv[2]
    reference = load_reference(checkout)
    orders = []
    for memory in ["half", "min"]:
        for pp in PIPELINE_RANKS:
            for microbatches in MICROBATCHES:
                graph = reference.PipelineGraph(pp, microbatches, memory, 1, 1, 1, 0)
                pattern = {"half": graph.stable_pattern_v_half,
                           "min": graph.stable_pattern_v_min}[memory](pp)
                _, _, stage_order = graph.schedule_from_pattern(pattern, microbatches, [1] * 6)
                rows = []
                for rank, ops in enumerate(stage_order):
                    up = 2 * pp - 1 - rank
                    stage = [rank, up, up, rank, up, rank]
                    kind = "FFIIWW"
                    rows.append(",".join(f"{stage[t]}{kind[t]}{m}" for t, m in ops))
                orders.append({"schedule": "v-" + memory, "pp": pp, "microbatches": microbatches,
                               "chunks": 2, "csv": "\n".join(rows) + "\n"})
    json.dump({"format": "pipescope.test.reference_orders", "version": 1,
               "reference": "sail-sg/zero-bubble-pipeline-parallelism@" + commit +
                            " megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py",
               "generator": "tests/data/zero_bubble/make_v_schedule_orders.py",
               "orders": orders}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
