#!/usr/bin/env python3
"""How the shipped predictions' step errors go with the rows' layouts (docs/validation.md, "Where
it stands"): for each timed row of every shipped validation set (the set-aside row left out),
its signed step error from `pipescope compare --published all --json` beside features of its
configuration, and the Pearson correlation of the error with each feature over the rows.

A term the cost model lacks that grows with one of these (the microbatch's tokens, the pipeline's
bubble, the data-parallel size, ...) shows as a correlation; errors that come from each source's
software and unpublished settings show as none.

    python3 docs/measurements/residuals_by_feature.py --pipescope build/engine/cli/pipescope

Standard library only.
"""
import argparse
import glob
import json
import math
import os
import subprocess


def features(row):
    """The row's configuration as numbers (counts that span decades as their logarithm)."""
    model, mesh, training = row["model"], row["mesh"], row.get("training", {})
    schedule = row["schedule"]
    tp, cp, pp = mesh.get("tp", 1), mesh.get("cp", 1), mesh.get("pp", 1)
    v, m = schedule.get("virtual_stages", 1), schedule.get("microbatches", 1)
    tokens = model.get("microbatch_size", 1) * model["sequence_length"] / cp
    return {
        "microbatch size": model.get("microbatch_size", 1),
        "log tokens a microbatch": math.log(tokens),
        "hidden / TP": model["hidden"] / tp,
        "TP": tp,
        "PP": pp,
        "V (chunks a rank)": v,
        "log microbatches": math.log(m),
        "log DP": math.log(mesh.get("dp", 1)),
        "FP8 GEMMs": 1 if training.get("gemm_precision") == "fp8" else 0,
        "MoE": 1 if model.get("experts", 0) else 0,
        "fp32 gradients": 1 if training.get("fp32_gradients") else 0,
        "full recomputation": 1 if training.get("recompute") == "full" else 0,
        "bubble (P-1)/(V M)": (pp - 1) / (v * m),
    }


def correlation(xs, ys):
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    if sx == 0 or sy == 0:
        return float("nan")
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / (sx * sy)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipescope", default="build/engine/cli/pipescope")
    parser.add_argument("--sets", default="resources/validation")
    args = parser.parse_args()
    out = subprocess.run([args.pipescope, "compare", "--published", "all", "--json"],
                         capture_output=True, text=True, check=True).stdout
    compared = json.loads(out)
    aside = {(row["set"], row["id"]) for row in compared["set_aside"]}
    errors = {(row["set"], row["id"]): row["step_error"] for row in compared["rows"]
              if row.get("step_error") is not None and (row["set"], row["id"]) not in aside}
    table = []
    for path in sorted(glob.glob(os.path.join(args.sets, "*.json"))):
        name = os.path.basename(path)[: -len(".json")]
        with open(path) as f:
            for row in json.load(f)["rows"]:
                if (name, row["id"]) in errors:
                    table.append((errors[(name, row["id"])], features(row)))
    errs = [e for e, _ in table]
    print(f"{len(table)} timed rows, mean |error| "
          f"{100 * sum(abs(e) for e in errs) / len(errs):.1f} %; correlation of the signed "
          f"error with:")
    for feature in table[0][1]:
        r = correlation([f[feature] for _, f in table], errs)
        print(f"  {feature:26s} {r:+.2f}")


if __name__ == "__main__":
    main()
