#pragma once
// Command line of pipescope-backend.
#include <string>

#include "engine/result.h"

namespace pipescope::backend {

enum class DeviceKind { Cpu, Cuda, SharedGpu };

std::string deviceKindName(DeviceKind kind); ///< "cpu", "cuda", "gpu-shared"

struct BackendOptions {
  std::string plan_path;
  std::string trace_path;
  DeviceKind device = DeviceKind::Cpu;
  int warmup_steps = 1;
  int measured_steps = 3;
  /// Model plans: factor on the model's dimensions (hidden, FFN, sequence, vocabulary), so the
  /// FLOPs scale about as its cube. Plans without a model: factor from the plan's microseconds to
  /// the device's. 0 = automatic (cpu: ops of a few milliseconds; GPUs: the plan's own size).
  double size_scale = 0;
  /// A rank that sees no progress for this long reports what it waits for and stops the run.
  double timeout_s = 120;
  bool list_devices = false; ///< print what this build and machine can run, then exit
  bool gemm_bench = false;   ///< time the device's GEMMs over a ladder of sizes, then exit
  /// With gemm_bench on a GPU: seconds the largest GEMM is then held, as training holds it, to
  /// read the rate at the GPU's power limit (0: not held).
  double sustain_s = 30;
  /// With gemm_bench: write a hardware file whose GEMM efficiency curve is the measured ladder.
  std::string save_hardware_path;
  /// The hardware file or preset the saved one starts from (links, memory, peak); empty: the
  /// preset the GPU's name matches.
  std::string base_hardware;
  bool help = false;
};

/// Parses argv; the error names the option and what it accepts.
Result<BackendOptions> parseOptions(int argc, char **argv);
std::string usageText();

} // namespace pipescope::backend
