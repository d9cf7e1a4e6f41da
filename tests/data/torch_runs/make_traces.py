"""Real PyTorch pipeline runs, profiled, for pipescope's import tests.

Run under torchrun on the CPU (gloo), one process per pipeline rank:

    torchrun --nproc-per-node P make_traces.py --schedule NAME --microbatches M --out DIR

Each rank builds its stages of a small MLP (one Linear + ReLU per virtual stage), runs
torch.distributed.pipelining's schedule for a few steps under torch.profiler, and writes
rank{r}_trace.json the way torchtitan does (export_chrome_trace from on_trace_ready), so the
files have the exact shapes a real training job produces: PP:<action> user annotations (or
"Forward i" / "Backward i" for the single-stage GPipe), ProfilerStep#N markers, distributedInfo.
make_traces.sh runs every schedule and gzips the outputs.
"""

import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules

# Schedule name (as pipescope names it) -> (PyTorch class name, V, placement).
SCHEDULES = {
    "gpipe": ("ScheduleGPipe", 1, "loop"),
    "1f1b": ("Schedule1F1B", 1, "loop"),
    "interleaved-1f1b": ("ScheduleInterleaved1F1B", 2, "loop"),
    "looped-bfs": ("ScheduleLoopedBFS", 2, "loop"),
    "interleaved-zb": ("ScheduleInterleavedZeroBubble", 2, "loop"),
    "zb-v": ("ScheduleZBVZeroBubble", 2, "v-shape"),
    "dualpipev": ("ScheduleDualPipeV", 2, "v-shape"),
}

WIDTH = 32  # features of every Linear: tiny, so the files stay small
BATCH = 4  # rows per microbatch


def stage_ids(rank, pp, chunks, placement):
    """The virtual stages rank `rank` holds (DESIGN.md §2 placements)."""
    if placement == "v-shape":
        return [rank, 2 * pp - 1 - rank]
    return [rank + k * pp for k in range(chunks)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--schedule",
        required=True,
        choices=sorted(SCHEDULES) + ["none"],
        help="none: the same MLP trained without pipelining (a trace with no pipeline)",
    )
    parser.add_argument("--microbatches", type=int, required=True)
    parser.add_argument("--steps", type=int, default=2, help="profiled steps")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    class_name, chunks, placement = SCHEDULES.get(args.schedule, ("none", 1, "loop"))
    schedule_class = getattr(schedules, class_name, None)
    if schedule_class is None and args.schedule != "none":
        raise SystemExit(f"this torch ({torch.__version__}) has no {class_name}")

    dist.init_process_group("gloo")
    rank, pp = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    device = torch.device("cpu")
    num_stages = pp * chunks
    my_stages = stage_ids(rank, pp, chunks, placement)
    stages = []
    if args.schedule == "none":
        my_stages = []
    for s in my_stages:
        module = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU())
        # Static shapes: the stages skip runtime shape inference, which needs numpy for its
        # object exchange.
        example = torch.empty(BATCH, WIDTH)
        stages.append(
            PipelineStage(
                module,
                s,
                num_stages,
                device,
                input_args=example,
                output_args=example,
                input_grads=example,
                output_grads=example,
            )
        )

    loss_fn = nn.MSELoss()
    plain = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU())
    if args.schedule == "none":
        schedule = None
    elif chunks == 1:
        schedule = schedule_class(stages[0], args.microbatches, loss_fn=loss_fn)
    else:
        schedule = schedule_class(stages, args.microbatches, loss_fn=loss_fn)
    first = 0 in my_stages
    last = num_stages - 1 in my_stages

    os.makedirs(args.out, exist_ok=True)

    def trace_handler(prof):
        prof.export_chrome_trace(os.path.join(args.out, f"rank{rank}_trace.json"))

    # torchtitan's profiling schedule shape: wait, warm up, then `steps` active steps.
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=args.steps, repeat=1),
        on_trace_ready=trace_handler,
    ) as prof:
        for _ in range(2 + args.steps):
            x = torch.randn(BATCH * args.microbatches, WIDTH)
            y = torch.randn(BATCH * args.microbatches, WIDTH)
            kwargs = {}
            if last:
                kwargs["target"] = y
                kwargs["losses"] = []
            if schedule is None:
                loss_fn(plain(x), y).backward()
            elif first:
                schedule.step(x, **kwargs)
            else:
                schedule.step(**kwargs)
            prof.step()

    if rank == 0:
        with open(os.path.join(args.out, "run.json"), "w") as f:
            json.dump(
                {
                    "torch": torch.__version__,
                    "schedule_class": class_name,
                    "schedule": args.schedule,
                    "pp": pp,
                    "virtual_stages": chunks,
                    "placement": placement,
                    "microbatches": args.microbatches,
                    "profiled_steps": args.steps,
                    "backend": "gloo",
                },
                f,
                indent=1,
            )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
