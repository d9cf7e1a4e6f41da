#include "backend/options.h"

#include <cmath>
#include <cstdlib>
#include <string_view>

namespace pipescope::backend {

std::string deviceKindName(DeviceKind kind) {
  switch (kind) {
  case DeviceKind::Cpu: return "cpu";
  case DeviceKind::Cuda: return "cuda";
  case DeviceKind::SharedGpu: return "gpu-shared";
  }
  return "cpu";
}

std::string usageText() {
  return R"(usage: pipescope-backend --plan FILE --trace OUT [options]

Runs the lowered program of a pipescope plan (from `pipescope simulate --save-plan FILE` or the
GUI) on real devices and writes the measured pipescope.trace. Progress, warnings and errors
stream to stdout as JSON lines.

  --plan FILE          the plan; it must hold its lowered program ("program")
  --trace OUT          the measured trace, rewritten after every measured step
  --device KIND        cpu (default): MPI ranks and fp32 GEMMs on the CPU
                       cuda: one rank per GPU, NCCL between ranks, bf16 cuBLAS GEMMs
                       gpu-shared: all pipeline stages on one GPU, a stream and an SM share each
  --warmup N           warm-up steps, not recorded (default 1)
  --steps N            measured steps (default 3)
  --size-scale X       model plans: scale of the model's dimensions (hidden, FFN, sequence,
                       vocabulary; FLOPs about X^3); plans without a model: device microseconds
                       per planned microsecond. Default: automatic (cpu: ops of a few ms)
  --timeout S          a rank that makes no progress for S seconds stops the run (default 120)
  --list-devices       print what this build and machine can run, then exit
  --gemm-bench         time the device's GEMMs (cuda, gpu-shared: cuBLAS bf16; cpu: fp32) over
                       square sizes, against the datasheet peak where the GPU matches a
                       hardware preset; needs no plan. On a GPU it also times the 4096^3 and
                       8192^3 GEMMs beside 2, 4 and 8 resident CTAs of a stand-in collective
                       (what an overlapped NCCL collective costs the GEMMs beside it). Under
                       mpirun every process times its own
  --sustain S          with --gemm-bench on a GPU: then hold the 8192^3 GEMM for S seconds (default
                       30; 0: skip), as a training run holds the GPU, and report the rate at
                       the power limit beside the ladder's (an H100 SXM's clocks fall within
                       seconds under a GEMM load at 700 W)
  --save-hardware FILE with --gemm-bench: write a pipescope.hardware file whose GEMM efficiency
                       curve is the measured ladder (efficiency = achieved / datasheet peak,
                       carried up the ladder so it never falls with size; on a GPU scaled by
                       the held rate over the ladder's at that size), so the planner prices
                       GEMMs as this GPU runs them in training, and whose
                       collective_gemm_slowdown is the median slowdown beside the resident CTAs.
                       Links, memory and peak come from the preset the GPU matches, or from
                       --hardware
  --hardware NAME|FILE with --save-hardware: the hardware file or preset to start from (needed
                       when the GPU matches no preset; on the cpu device the peak becomes the
                       best measured rate)
  --help

Launch one process per rank of the plan's mesh (dp x tp x pp):
  mpirun -np N pipescope-backend ...      srun -n N pipescope-backend ...
  torchrun --nproc-per-node N --no-python pipescope-backend ... (cuda)

Exit codes (every error is also a JSON "error" event on stdout):
  0  the run completed and the trace is written
  1  a runtime fault: a rank died, stalled past --timeout or failed its device; the device, MPI
     or the torchrun rendezvous could not start; an internal error. Steps already measured stay
     in the trace
  2  bad usage or bad input, with the reason on stderr too: an unknown option or value, a plan
     that cannot be read or evaluated, a plan without its lowered program, a launch whose
     process count does not match the plan's mesh, a --trace path that cannot be written
)";
}

namespace {

Result<double> parseNumber(std::string_view option, const std::string &text, double min,
                           double max) {
  char *end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < min ||
      value > max)
    return makeError(std::string(option) + ": expected a number from " + std::to_string(min) +
                     " to " + std::to_string(max) + ", got '" + text + "'");
  return value;
}

Result<int> parseCount(std::string_view option, const std::string &text, int min, int max) {
  auto value = parseNumber(option, text, min, max);
  if (!value) return value.error();
  if (*value != std::floor(*value))
    return makeError(std::string(option) + ": expected a whole number, got '" + text + "'");
  return static_cast<int>(*value);
}

} // namespace

Result<BackendOptions> parseOptions(int argc, char **argv) {
  BackendOptions options;
  bool sustain_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      return options;
    }
    if (arg == "--list-devices") {
      options.list_devices = true;
      continue;
    }
    if (arg == "--gemm-bench") {
      options.gemm_bench = true;
      continue;
    }
    if (i + 1 >= argc)
      return makeError(std::string(arg) + ": unknown option or missing value; see --help");
    const std::string value = argv[++i];
    if (arg == "--plan") {
      options.plan_path = value;
    } else if (arg == "--trace") {
      options.trace_path = value;
    } else if (arg == "--device") {
      if (value == "cpu")
        options.device = DeviceKind::Cpu;
      else if (value == "cuda")
        options.device = DeviceKind::Cuda;
      else if (value == "gpu-shared")
        options.device = DeviceKind::SharedGpu;
      else
        return makeError("--device: expected cpu, cuda or gpu-shared, got '" + value + "'");
    } else if (arg == "--warmup") {
      auto n = parseCount(arg, value, 0, 1000);
      if (!n) return n.error();
      options.warmup_steps = *n;
    } else if (arg == "--steps") {
      auto n = parseCount(arg, value, 1, 100000);
      if (!n) return n.error();
      options.measured_steps = *n;
    } else if (arg == "--size-scale") {
      auto x = parseNumber(arg, value, 1e-6, 1e6);
      if (!x) return x.error();
      options.size_scale = *x;
    } else if (arg == "--sustain") {
      auto x = parseNumber(arg, value, 0, 3600);
      if (!x) return x.error();
      options.sustain_s = *x;
      sustain_given = true;
    } else if (arg == "--save-hardware") {
      options.save_hardware_path = value;
    } else if (arg == "--hardware") {
      options.base_hardware = value;
    } else if (arg == "--timeout") {
      auto x = parseNumber(arg, value, 0.1, 1e6);
      if (!x) return x.error();
      options.timeout_s = *x;
    } else {
      return makeError(std::string(arg) + ": unknown option; see --help");
    }
  }
  if (sustain_given && !options.gemm_bench)
    return makeError("--sustain: holds --gemm-bench's largest GEMM; add --gemm-bench");
  if (!options.save_hardware_path.empty() && !options.gemm_bench)
    return makeError("--save-hardware: writes the curve --gemm-bench measures; add --gemm-bench");
  if (!options.base_hardware.empty() && options.save_hardware_path.empty())
    return makeError("--hardware: is the base of the file --save-hardware writes; add "
                     "--gemm-bench --save-hardware FILE");
  if (options.list_devices || options.gemm_bench) return options;
  if (options.plan_path.empty())
    return makeError("--plan: missing; give the plan to run (pipescope simulate ... "
                     "--save-plan FILE writes one)");
  if (options.trace_path.empty())
    return makeError("--trace: missing; give the path of the measured trace to write");
  return options;
}

} // namespace pipescope::backend
