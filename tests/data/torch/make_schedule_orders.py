#!/usr/bin/env python3
"""Writes the per-rank schedule orders that torch.distributed.pipelining generates, for a grid of
P (pipeline ranks), M (microbatches) and V (stages per rank), as the test data that
tests/engine/test_pytorch_orders.cpp compares pipescope's generators against.

Each order is PyTorch's own schedule CSV, exactly as the schedule's _dump_csv writes its
pipeline_order (one row per rank, empty cells for the idle steps PyTorch pads in). The schedules
are constructed, never run: the stage stand-ins below carry only the attributes the constructors
read (PyTorch's own test_schedule.py does the same with its MockPipelineStage), and no process
group is needed because pipeline_order is computed in __init__.

Run with a PyTorch that has torch.distributed.pipelining (CI has no torch, so the output is
committed):
    python tests/data/torch/make_schedule_orders.py > tests/data/torch/schedule_orders.json
    gzip -9n tests/data/torch/schedule_orders.json
"""
import csv
import io
import json
import sys

import torch
from torch.distributed.pipelining import schedules

# pipescope name -> (PyTorch class, placement, stages per rank to try)
FAMILIES = {
    "gpipe": ("ScheduleGPipe", "single", [1]),
    "interleaved-1f1b": ("ScheduleInterleaved1F1B", "loop", [2, 3, 4]),
    "interleaved-zb": ("ScheduleInterleavedZeroBubble", "loop", [2, 3, 4]),
    "looped-bfs": ("ScheduleLoopedBFS", "loop", [2, 3, 4]),
    "zb-v": ("ScheduleZBVZeroBubble", "v", [2]),
    "dualpipev": ("ScheduleDualPipeV", "v", [2]),
}
PIPELINE_RANKS = [1, 2, 3, 4, 5, 6, 8]
MICROBATCHES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 18, 24]


class StageStandIn:
    """What the schedule constructors read from a _PipelineStageBase: rank, group size, stage
    index and count, and the module (None: not compiled)."""

    def __init__(self, pp, stage_count, stage_index):
        self.group_size = pp
        self.group_rank = 0
        self.num_stages = stage_count
        self.stage_index = stage_index
        self.is_first = stage_index == 0
        self.is_last = stage_index == stage_count - 1
        self.submod = None
        self.stage_index_to_group_rank = {}
        self.p2p_per_edge = False
        self.device = torch.device("cpu")


def loss(output, target):
    return output


def make(class_name, placement, pp, chunks, microbatches):
    cls = getattr(schedules, class_name)
    if placement == "single":
        return cls(StageStandIn(pp, pp, 0), microbatches, loss_fn=loss)
    stage_count = pp * chunks
    # Rank 0's stages: 0, P, 2P, ... in the loop placement; 0 and 2P-1 in the V-shape.
    indices = [0, stage_count - 1] if placement == "v" else range(0, stage_count, pp)
    return cls([StageStandIn(pp, stage_count, i) for i in indices], microbatches, loss_fn=loss)


def dump_csv(schedule):
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    for rank in schedule.pipeline_order:
        writer.writerow(schedule.pipeline_order[rank])
    return text.getvalue()


def main():
    entries, refused = [], []
    for name, (class_name, placement, chunk_list) in FAMILIES.items():
        for pp in PIPELINE_RANKS:
            for chunks in chunk_list:
                for microbatches in MICROBATCHES:
                    point = {"schedule": name, "pytorch_class": class_name, "pp": pp,
                             "microbatches": microbatches, "chunks": chunks}
                    try:
                        schedule = make(class_name, placement, pp, chunks, microbatches)
                    except (ValueError, AssertionError, RuntimeError) as error:
                        refused.append({**point, "error": str(error).splitlines()[0]})
                        continue
                    entries.append({**point, "csv": dump_csv(schedule)})
    json.dump({"format": "pipescope.test.pytorch_orders", "version": 1,
               "torch_version": torch.__version__,
               "generator": "tests/data/torch/make_schedule_orders.py",
               "orders": entries, "refused_by_pytorch": refused},
              sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
