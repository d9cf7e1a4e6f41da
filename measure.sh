#!/usr/bin/env bash
# Measures this machine against the engine's predictions and writes a Markdown report:
#   1. the device's GEMM ladder (pipescope-backend --gemm-bench), against the datasheet peak
#      where the GPU matches a hardware preset;
#   2. for 1F1B, interleaved 1F1B, ZB-H1, ZB-V and DualPipeV, a plan run on the device, then
#      `pipescope compare --calibrate`: measured against predicted step time, bubble_fraction,
#      bubble_ratio and per-op-kind errors, before and after calibrating the cost model, and a
#      summary of all five against the goals (within 10 % before calibration; within 3 % and
#      1 bubble point after);
#   3. on a GPU, the driver, CUDA, cuBLAS and NCCL versions and whether green contexts split the
#      SMs between the stages (gpu-shared).
# It builds what it needs (Release, no GUI) unless PIPESCOPE_BUILD_DIR already holds the two
# executables. Nothing here needs more than bash, CMake and the backend's own dependencies.
#
# usage: ./measure.sh [--device cpu|gpu-shared|cuda] [--pp P] [--microbatches M] [--steps N]
#                     [--warmup N] [--size-scale X] [--out FILE] [--traces DIR]
#                     [-- simulate options...]
# Options after "--" go to `pipescope simulate` for every plan (e.g. -- --model llama3-8b
# --hardware h100-sxm). The report goes to docs/measurements/<device>.md unless --out says;
# --traces DIR keeps each schedule's plan and measured trace there (for pipescope bubbles, the GUI).
set -euo pipefail
cd "$(dirname "$0")"

device=cpu
pp=""
microbatches=16
steps=10
warmup=2
size_scale=""
out=""
traces=""
simulate_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --pp) pp="$2"; shift 2 ;;
    --microbatches) microbatches="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --size-scale) size_scale="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --traces) traces="$2"; shift 2 ;;
    --) shift; simulate_extra=("$@"); break ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "measure.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$device" in cpu|gpu-shared|cuda) ;; *)
  echo "measure.sh: --device must be cpu, gpu-shared or cuda, not '$device'" >&2; exit 2 ;;
esac
# The cpu device runs one process per rank: more ranks than cores measures contention, not the
# schedule, so it takes at most as many ranks as there are cores.
if [ -z "$pp" ]; then
  pp=4
  if [ "$device" = cpu ] && [ "$(nproc)" -lt 4 ]; then pp=$(nproc); fi
  [ "$pp" -lt 2 ] && pp=2
fi
out="${out:-docs/measurements/$device.md}"

build="${PIPESCOPE_BUILD_DIR:-build-measure}"
cli="$build/engine/cli/pipescope"
backend="$build/backend/pipescope-backend"
if [ ! -x "$cli" ] || [ ! -x "$backend" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPIPESCOPE_BUILD_GUI=OFF \
    -DPIPESCOPE_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target pipescope pipescope-backend
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# How to start P processes: mpirun for cpu and cuda, one process for gpu-shared.
launch=()
if [ "$device" != gpu-shared ]; then
  mpirun_bin="$(command -v mpirun || true)"
  if [ -z "$mpirun_bin" ]; then
    echo "measure.sh: --device $device starts one process per rank with mpirun, which is not on PATH" >&2
    exit 1
  fi
  launch=("$mpirun_bin" -np "$pp")
  if mpirun --version 2>&1 | grep -q "Open MPI"; then
    [ "$(id -u)" -eq 0 ] && launch+=(--allow-run-as-root)
    launch+=(--oversubscribe --mca btl_vader_single_copy_mechanism none)
  fi
fi
if [ "$device" = cuda ]; then
  gpus=$("$backend" --list-devices | sed -n 's/.*"gpus":\([0-9]*\).*/\1/p')
  if [ "${gpus:-0}" -lt "$pp" ]; then
    echo "measure.sh: --device cuda needs $pp GPUs (one per rank) but this machine has ${gpus:-0}; use --device gpu-shared or a smaller --pp" >&2
    exit 1
  fi
fi

# A number (field) or string (text) of a flat JSON event line.
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" | head -n 1; }
text() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" | head -n 1; }
fmt() { awk -v v="$1" -v d="${2:-3}" 'BEGIN { printf "%.*f", d, v }'; }

# The commit measured, and whether the tree differs from it (the report itself aside).
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if git status --porcelain --untracked-files=no -- . ":(exclude)$out" 2>/dev/null | grep -q .; then
  commit="$commit (with uncommitted changes)"
fi
mkdir -p "$(dirname "$out")"
{
  echo "# Measured against predicted: --device $device"
  echo
  echo "Written by \`./measure.sh --device $device\` on $(date -u +%Y-%m-%d) from commit" \
    "$commit on $(uname -n)" \
    "($(nproc) cores). Plans: P=$pp, M=$microbatches${simulate_extra[*]:+, simulate options: ${simulate_extra[*]}}${size_scale:+, --size-scale $size_scale};" \
    "$warmup warm-up and $steps measured steps each."
  echo
  if [ "$device" != cpu ] && command -v nvidia-smi >/dev/null; then
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
      --format=csv,noheader 2>/dev/null | head -n 1) (name, driver, memory, max SM clock, power limit)."
    echo
  fi
  echo "## GEMM throughput"
  echo
} >"$out"

"$backend" --gemm-bench --device "$device" >"$work/gemm.jsonl" 2>&1 || {
  echo "measure.sh: the GEMM benchmark failed:" >&2
  cat "$work/gemm.jsonl" >&2
  exit 1
}
summary=$(grep '"gemm_summary"' "$work/gemm.jsonl")
best=$(echo "$summary" | field best_tflops)
datasheet=$(echo "$summary" | field datasheet_tflops)
{
  echo "$(echo "$summary" | text device)"
  echo
  software=$(echo "$summary" | text software)
  [ -n "$software" ] && { echo; echo "Software: $software."; }
  echo
  # GPU rungs also time cublasGemmEx's default algorithm and every algorithm cuBLASLt proposes:
  # the backend's path (the stages' GEMM, its algorithm tuned per shape) against both.
  if grep -q '"best_algorithm_us"' "$work/gemm.jsonl"; then
    echo "| m = n = k | type | time per GEMM | TFLOP/s | of the best rung | of the datasheet | backend's choice | cublasGemmEx default | cuBLASLt best algorithm | backend / cuBLAS best |"
    echo "| --: | :-- | --: | --: | --: | --: | :-- | --: | --: | --: |"
  else
    echo "| m = n = k | type | time per GEMM | TFLOP/s | of the best |"
    echo "| --: | :-- | --: | --: | --: |"
  fi
  grep '"event":"gemm"' "$work/gemm.jsonl" | while read -r line; do
    row="| $(echo "$line" | field m) | $(echo "$line" | text dtype) |"
    row="$row $(fmt "$(echo "$line" | field us)" 1) us | $(fmt "$(echo "$line" | field tflops)" 3) |"
    row="$row $(fmt "$(awk -v f="$(echo "$line" | field fraction_of_best)" 'BEGIN { print f * 100 }')" 1) % |"
    best_us=$(echo "$line" | field best_algorithm_us)
    if [ -n "$best_us" ]; then
      if [ "$datasheet" != "null" ] && [ -n "$datasheet" ]; then
        row="$row $(fmt "$(awk -v t="$(echo "$line" | field tflops)" -v d="$datasheet" 'BEGIN { print 100 * t / d }')" 1) % |"
      else
        row="$row - |"
      fi
      row="$row $(echo "$line" | text backend_choice) |"
      row="$row $(fmt "$(echo "$line" | field default_algorithm_tflops)" 1) TFLOP/s |"
      row="$row $(fmt "$(echo "$line" | field best_algorithm_tflops)" 1) TFLOP/s ($(echo "$line" | field algorithms_tried) tried) |"
      row="$row $(fmt "$(awk -v f="$(echo "$line" | field fraction_of_best_algorithm)" 'BEGIN { print f * 100 }')" 1) % |"
    fi
    echo "$row"
  done
  echo
  # GPUs with FP8 tensor cores: the FP8 E4M3 ladder (cuBLASLt's best proposal per rung).
  if grep -q '"event":"gemm_fp8"' "$work/gemm.jsonl"; then
    datasheet_fp8=$(echo "$summary" | field datasheet_fp8_tflops)
    echo "| m = n = k | type | time per GEMM | TFLOP/s | of the datasheet's FP8 peak |"
    echo "| --: | :-- | --: | --: | --: |"
    grep '"event":"gemm_fp8"' "$work/gemm.jsonl" | while read -r line; do
      row="| $(echo "$line" | field m) | $(echo "$line" | text dtype) |"
      row="$row $(fmt "$(echo "$line" | field us)" 1) us | $(fmt "$(echo "$line" | field tflops)" 3) |"
      if [ -n "$datasheet_fp8" ] && [ "$datasheet_fp8" != "null" ]; then
        row="$row $(fmt "$(awk -v t="$(echo "$line" | field tflops)" -v d="$datasheet_fp8" 'BEGIN { print 100 * t / d }')" 1) % |"
      else
        row="$row - |"
      fi
      echo "$row"
    done
    echo
  fi
  if [ "$datasheet" != "null" ] && [ -n "$datasheet" ]; then
    echo "Best: $(fmt "$best" 1) TFLOP/s, $(fmt "$(awk -v b="$best" -v d="$datasheet" 'BEGIN { print 100 * b / d }')" 1) %" \
      "of the datasheet's $(fmt "$datasheet" 0) TFLOP/s dense bf16 ($(echo "$summary" | text datasheet_preset) preset)."
  else
    echo "Best: $(fmt "$best" 4) TFLOP/s (no datasheet peak for this device)."
  fi
  # GPUs: the GEMMs beside a resident stand-in collective (the hardware file's
  # collective_gemm_slowdown is their median).
  if grep -q '"event":"gemm_contention"' "$work/gemm.jsonl"; then
    echo
    echo "| m = n = k | resident CTAs | alone | beside them | slower by |"
    echo "| --: | --: | --: | --: | --: |"
    grep '"event":"gemm_contention"' "$work/gemm.jsonl" | while read -r line; do
      echo "| $(echo "$line" | field m) | $(echo "$line" | field resident_ctas) |" \
        "$(fmt "$(echo "$line" | field alone_us)" 1) us | $(fmt "$(echo "$line" | field beside_us)" 1) us |" \
        "$(fmt "$(awk -v f="$(echo "$line" | field slowdown)" 'BEGIN { print 100 * f }')" 1) % |"
    done
    echo
    echo "Beside a resident collective's CTAs the GEMMs run $(fmt "$(awk -v f="$(echo "$summary" | field collective_gemm_slowdown)" 'BEGIN { print 100 * f }')" 1) %" \
      "slower (median): the collective_gemm_slowdown --save-hardware writes."
  fi
  held=$(echo "$summary" | field sustained_tflops)
  if [ -n "$held" ]; then
    echo
    echo "Held: the $(echo "$summary" | field sustained_size)³ GEMM back to back for" \
      "$(fmt "$(echo "$summary" | field sustained_seconds)" 0) s settled at $(fmt "$held" 1) TFLOP/s," \
      "$(fmt "$(awk -v f="$(echo "$summary" | field sustained_fraction_of_ladder)" 'BEGIN { print 100 * f }')" 1) %" \
      "of its ladder rate: the GPU at its power limit, as a training step holds it."
  fi
  echo
  echo "## Schedules"
  echo
  echo "Each run's ops are timed on the device; \`pipescope compare\` brings them to planned time"
  echo "by the run's time factor and compares the median measured step with the prediction, then"
  echo "refits F, B, W per stage and the transfer times (calibration) and predicts again."
  echo "The time factor (device time per planned time) comes, for model plans on GPUs, from the"
  echo "cost model at the shapes the stages run, on the device as its startup GEMM timed it (on"
  echo "gpu-shared in one stage's share of the SMs, with the memory bandwidth shared by the stages);"
  echo "elsewhere from the FLOPs at the startup GEMM's rate. Before calibration the error holds how"
  echo "well that foresaw the run; after, only what per-stage op times and transfer times cannot"
  echo "explain: contention, jitter, stalls."
} >>"$out"

summary_rows=()
green=""
for schedule in 1f1b interleaved-1f1b zb-h1 zb-v dualpipev; do
  plan="$work/$schedule.plan.json"
  trace="$work/$schedule.trace.json"
  chunks=()
  # Two chunks per rank: interleaved's loop placement; ZB-V and DualPipeV place theirs in a V.
  [ "$schedule" = interleaved-1f1b ] && chunks=(--virtual-stages 2)
  "$cli" simulate --schedule "$schedule" --pp "$pp" --microbatches "$microbatches" \
    "${chunks[@]}" "${simulate_extra[@]}" --save-plan "$plan" >/dev/null
  args=(--plan "$plan" --trace "$trace" --device "$device" --warmup "$warmup" --steps "$steps")
  [ -n "$size_scale" ] && args+=(--size-scale "$size_scale")
  echo "measure.sh: running $schedule on --device $device" >&2
  if ! "${launch[@]}" "$backend" "${args[@]}" >"$work/$schedule.jsonl" 2>"$work/$schedule.err"; then
    {
      echo
      echo "### $schedule: the run failed"
      echo
      echo '```'
      grep '"error"' "$work/$schedule.jsonl" | head -n 3 || tail -n 5 "$work/$schedule.err"
      echo '```'
    } >>"$out"
    summary_rows+=("| $schedule | the run failed | | | | |")
    continue
  fi
  if [ -n "$traces" ]; then
    mkdir -p "$traces"
    cp "$plan" "$trace" "$traces/"
  fi
  done_line=$(grep '"event":"done"' "$work/$schedule.jsonl")
  throughput=$(echo "$done_line" | sed -n 's/.*"throughput":{\([^}]*}[^}]*\)}.*/\1/p')
  {
    echo
    echo "### $schedule"
    echo
    "$cli" compare --measured "$trace" --calibrate --markdown
    echo
    echo "Achieved $(fmt "$(echo "$throughput" | field tflops)" 4) TFLOP/s over the ops' time," \
      "$(fmt "$(awk -v f="$(echo "$throughput" | field fraction_of_gemm_reference)" 'BEGIN { print 100 * f }')" 1) %" \
      "of the startup GEMM rate ($(fmt "$(echo "$throughput" | field gemm_reference_tflops)" 4) TFLOP/s);" \
      "timing overhead $(fmt "$(awk -v f="$(echo "$done_line" | field timing_overhead_fraction)" 'BEGIN { print 100 * f }')" 4) % of a mean op;" \
      "clock error bound $(fmt "$(echo "$done_line" | field clock_error_us)" 1) us."
  } >>"$out"
  # The goals' numbers: step time error, bubble_fraction and bubble_ratio differences. The JSON's
  # keys are sorted: "calibrated" (after) comes before "comparison" (before).
  "$cli" compare --measured "$trace" --calibrate --json >"$work/$schedule.compare.json"
  values() { grep -o "\"$1\": [^,]*" "$work/$schedule.compare.json" | sed 's/.*: //' | sed -n "$2p"; }
  pct() { fmt "$(awk -v f="$1" 'BEGIN { print 100 * f }')" "${2:-1}"; }
  overhead=$(echo "$done_line" | field timing_overhead_fraction)
  summary_rows+=("| $schedule | $(pct "$(values makespan_relative_error 2)") % | $(pct "$(values bubble_fraction_difference 2)") / $(pct "$(values bubble_ratio_difference 2)") | $(pct "$(values makespan_relative_error 1)") % | $(pct "$(values bubble_fraction_difference 1)") / $(pct "$(values bubble_ratio_difference 1)") | $(pct "$overhead" 3) % |")
  if [ -z "$green" ]; then
    green=$( (grep -o '"gpu-shared: [^"]*"' "$trace" || true) | head -n 1 | tr -d '"')
  fi
done
{
  echo
  echo "## Summary against the goals"
  echo
  echo "Goals: step time within 10 % before calibration; within 3 % and 1 bubble point after."
  echo "Bubble columns: measured minus predicted, in points, bubble_fraction / bubble_ratio."
  echo
  echo "| schedule | step error before | bubble pts before | step error after | bubble pts after | timing overhead (of a mean op) |"
  echo "| :-- | --: | --: | --: | --: | --: |"
  for row in "${summary_rows[@]}"; do echo "$row"; done
  if [ -n "$green" ]; then
    echo
    echo "SM partitions: ${green#gpu-shared: }"
  fi
} >>"$out"
echo "measure.sh: wrote $out" >&2
