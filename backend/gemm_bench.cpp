#include "backend/gemm_bench.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <vector>

#include "backend/cpu_speed.h"
#include "engine/calibration.h"
#include "engine/model/gemm_efficiency.h"
#include "engine/model/layer_costs.h"
#include "engine/model/model_setup.h"

namespace pipescope::backend {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool contains(const std::string &text, const char *part) {
  return text.find(part) != std::string::npos;
}

// The fp32 blocked GEMM on one core: sizes up to 1024 (2 GFLOP, about a second at worst), each
// the best of 3 batches of about 50 ms, as nccl-tests times a loop rather than one call.
GemmBenchmark benchmarkCpuGemms() {
  GemmBenchmark benchmark;
  benchmark.device = "cpu: " + cpuModelName() + ", fp32 blocked GEMM on one core";
  for (int n : {128, 256, 512, 1024}) {
    int repetitions = 0;
    const double us = timeCpuGemm(n, 5e4, 3, &repetitions);
    benchmark.rates.push_back(gemmRate(n, "fp32", us, repetitions));
  }
  return benchmark;
}

} // namespace

GemmRate gemmRate(int size, std::string dtype, double us, int repetitions) {
  GemmRate rate;
  rate.size = size;
  rate.dtype = std::move(dtype);
  rate.us = us;
  rate.tflops = us > 0 ? 2.0 * size * size * static_cast<double>(size) / us * 1e-6 : 0.0;
  rate.repetitions = repetitions;
  return rate;
}

double SustainedGemm::tflops() const {
  if (window_tflops.empty()) return 0;
  std::vector<double> settled(window_tflops.begin() +
                                  static_cast<std::ptrdiff_t>(window_tflops.size() / 2),
                              window_tflops.end());
  std::nth_element(settled.begin(),
                   settled.begin() + static_cast<std::ptrdiff_t>(settled.size() / 2),
                   settled.end());
  return settled[settled.size() / 2];
}

double SustainedGemm::fraction_of_ladder() const {
  if (!(ladder_tflops > 0)) return 0;
  return std::min(1.0, tflops() / ladder_tflops);
}

namespace {

double bestOf(const std::vector<GemmRate> &rates) {
  double best = 0;
  for (const auto &rate : rates)
    best = std::max(best, rate.tflops);
  return best;
}

} // namespace

double GemmBenchmark::best_tflops() const {
  return bestOf(rates);
}

double GemmBenchmark::best_fp8_tflops() const {
  return bestOf(fp8_rates);
}

std::optional<std::string> hardwarePresetForGpu(const std::string &gpu_name) {
  const std::string name = lower(gpu_name);
  // The presets' datasheet peaks are those of the SXM parts (H100 SXM5 989, H200 989, A100 SXM4
  // 312 TFLOP/s dense bf16); the PCIe and NVL variants run at other clocks and power.
  if (contains(name, "pcie") || contains(name, "nvl")) return std::nullopt;
  if (contains(name, "h200")) return "h200";
  if (contains(name, "h100")) return "h100-sxm";
  if (contains(name, "a100") && contains(name, "80")) return "a100-80gb";
  return std::nullopt;
}

Result<GemmBenchmark> benchmarkGemms(DeviceKind kind, int local_rank, double sustain_s) {
  GemmBenchmark benchmark;
  if (kind == DeviceKind::Cpu) {
    // One core's fp32 GEMM has no power limit to settle at: nothing is held.
    (void)local_rank;
    (void)sustain_s;
    benchmark = benchmarkCpuGemms();
  } else {
#ifdef PIPESCOPE_HAVE_CUDA
    auto measured = benchmarkCudaGemms(local_rank, sustain_s);
    if (!measured) return measured.error();
    benchmark = std::move(*measured);
#else
    return makeError("--device " + deviceKindName(kind) +
                     ": this pipescope-backend was built without CUDA; use --device cpu");
#endif
  }
  if (!benchmark.gpu_name.empty()) {
    benchmark.datasheet_preset = hardwarePresetForGpu(benchmark.gpu_name);
    if (benchmark.datasheet_preset)
      if (auto spec = loadHardwareSpec(*benchmark.datasheet_preset)) {
        benchmark.datasheet_tflops = spec->peak_tflops;
        benchmark.datasheet_fp8_tflops = spec->peak_fp8_tflops;
      }
  }
  return benchmark;
}

std::optional<double> GemmBenchmark::collective_gemm_slowdown() const {
  if (contention.empty()) return std::nullopt;
  std::vector<double> slowdowns;
  for (const auto &sample : contention)
    slowdowns.push_back(sample.slowdown());
  return std::clamp(median(std::move(slowdowns)), 0.0, 1.0);
}

namespace {

// A ladder's rates, each scaled by `scale`, as an efficiency curve over `peak` (checked).
Result<std::vector<GemmEfficiencyPoint>> ladderCurve(const std::vector<GemmRate> &rates,
                                                     double scale, double peak,
                                                     const std::string &pointer) {
  std::vector<int> sizes;
  std::vector<double> tflops;
  for (const auto &rate : rates) {
    sizes.push_back(rate.size);
    tflops.push_back(rate.tflops * scale);
  }
  auto curve = curveFromSquareLadder(sizes, tflops, peak);
  if (auto status = checkGemmCurve(curve, pointer); !status) return status.error();
  return curve;
}

} // namespace

nlohmann::json savedAgainstBaseFields(const GemmBenchmark &benchmark, const HardwareSpec &saved,
                                      const HardwareSpec &base) {
  if (benchmark.gpu_name.empty() || saved.gemm_efficiency.empty()) return nlohmann::json::object();
  const double flops = saved.gemm_efficiency.back().flops;
  const double saved_efficiency = gemmEfficiency(gemmHardwareOf(saved), flops);
  const double base_efficiency = gemmEfficiency(gemmHardwareOf(base), flops);
  const double change =
      base_efficiency > 0 ? 100.0 * (saved_efficiency / base_efficiency - 1) : 0.0;
  char note[640];
  std::snprintf(note, sizeof note,
                "the saved curve is this GPU's GEMMs alone at its power limit: %.2f of peak at "
                "%.3g FLOPs, where the base '%s' prices %.2f (a preset: the level GEMMs reach "
                "inside training at scale, with what a step spends beyond its kernels), so plans "
                "priced with the file run such GEMMs %.0f %% %s. Set GPUs side by side with it; "
                "pipescope calibrate fits the level to your own runs",
                saved_efficiency, flops, base.name.c_str(), base_efficiency, std::abs(change),
                change >= 0 ? "faster" : "slower");
  return {{"largest_gemm_flops", flops},
          {"saved_efficiency", saved_efficiency},
          {"base_efficiency", base_efficiency},
          {"note", note}};
}

Result<HardwareSpec> hardwareFromBenchmark(const GemmBenchmark &benchmark, HardwareSpec base) {
  if (benchmark.rates.empty()) return makeError("the GEMM ladder measured nothing");
  const double best = benchmark.best_tflops();
  const bool on_cpu = benchmark.gpu_name.empty();
  HardwareSpec hw = std::move(base);
  hw.peak_tflops = on_cpu ? best : std::max(hw.peak_tflops, best);
  // A training step holds the GPU at its power limit: the ladder's short batches scaled to the
  // rate the held GEMM settled at.
  const double held =
      !on_cpu && benchmark.sustained ? benchmark.sustained->fraction_of_ladder() : 0;
  const double scale = held > 0 ? held : 1.0;
  auto curve = ladderCurve(benchmark.rates, scale, hw.peak_tflops, "/gemm_efficiency");
  if (!curve)
    return makeError("the measured ladder does not make a curve: " + curve.error().message);
  hw.gemm_efficiency = std::move(*curve);
  const std::string dtype = benchmark.rates.front().dtype;
  hw.gemm_efficiency_source =
      "pipescope-backend --gemm-bench on " + benchmark.device + ": square " + dtype +
      " GEMMs, best " + std::to_string(best) + " TFLOP/s, efficiency over " +
      (on_cpu ? std::string("the best measured rate (cpu: peak_tflops is that rate)")
              : "the peak of " + std::to_string(hw.peak_tflops) + " TFLOP/s") +
      "; each point carries the best rate up to its size" +
      (held > 0 ? "; every rate scaled by " + std::to_string(held) + ", the " +
                      std::to_string(benchmark.sustained->size) + "^3 GEMM's rate held for " +
                      std::to_string(static_cast<int>(benchmark.sustained->seconds)) +
                      " s over its ladder rate (the GPU at its power limit, as in training)"
                : std::string());
  if (benchmark.fp8_rates.empty()) {
    // No FP8 ladder: the device has no FP8 tensor cores (a GPU with them always runs one). The
    // base's FP8 peak and curve would price FP8 plans on a device that cannot run them; an FP8
    // plan on this file is refused instead, naming the field.
    hw.peak_fp8_tflops = 0;
    hw.gemm_efficiency_fp8.clear();
    hw.gemm_efficiency_fp8_source.clear();
  } else { // only a GPU runs an FP8 ladder
    if (!(hw.peak_fp8_tflops > 0))
      return makeError("the GPU ran an FP8 ladder but the base hardware '" + hw.name +
                       "' has no peak_fp8_tflops to read it against; give --hardware a file "
                       "with the GPU's dense FP8 peak");
    const double best_fp8 = benchmark.best_fp8_tflops();
    hw.peak_fp8_tflops = std::max(hw.peak_fp8_tflops, best_fp8);
    auto fp8_curve =
        ladderCurve(benchmark.fp8_rates, scale, hw.peak_fp8_tflops, "/gemm_efficiency_fp8");
    if (!fp8_curve)
      return makeError("the measured FP8 ladder does not make a curve: " +
                       fp8_curve.error().message);
    hw.gemm_efficiency_fp8 = std::move(*fp8_curve);
    hw.gemm_efficiency_fp8_source =
        "pipescope-backend --gemm-bench on " + benchmark.device +
        ": square FP8 E4M3 GEMMs (bf16 out, cuBLASLt's best proposal), best " +
        std::to_string(best_fp8) + " TFLOP/s, efficiency over the FP8 peak of " +
        std::to_string(hw.peak_fp8_tflops) +
        " TFLOP/s; each point carries the best rate up to its size" +
        (held > 0 ? "; every rate scaled by " + std::to_string(held) +
                        ", the bf16 GEMM's held rate over its ladder rate (one power limit)"
                  : std::string());
  }
  if (on_cpu) {
    hw.name = "cpu-measured";
    hw.efficiency = hw.gemm_efficiency.back().efficiency;
    hw.collective_gemm_slowdown = 0; // no collective kernels share the cpu's cores
  } else {
    if (const auto slowdown = benchmark.collective_gemm_slowdown()) {
      hw.collective_gemm_slowdown = *slowdown;
      char figure[32];
      std::snprintf(figure, sizeof figure, "%.3f", *slowdown);
      hw.notes += std::string(hw.notes.empty() ? "" : " ") + "collective_gemm_slowdown " + figure +
                  ": pipescope-backend --gemm-bench on " + benchmark.device +
                  ", the median slowdown of " + std::to_string(benchmark.contention.size()) +
                  " bf16 GEMMs timed beside resident stand-in collective CTAs, one per SM "
                  "(gemm_contention events).";
    }
    hw.name = hw.name + "-measured";
    // The SMs a MoE dispatcher's kernels take are priced as a share of this GPU's own.
    if (benchmark.sm_count > 0) hw.sm_count = benchmark.sm_count;
  }
  return hw;
}

namespace {

// One rung's event: its shape, time and rate, and its rate over the best of its ladder.
nlohmann::json rungEvent(const char *name, const GemmRate &rate, double best) {
  return {{"event", name},
          {"m", rate.size},
          {"n", rate.size},
          {"k", rate.size},
          {"dtype", rate.dtype},
          {"us", rate.us},
          {"repetitions", rate.repetitions},
          {"tflops", rate.tflops},
          {"fraction_of_best", best > 0 ? rate.tflops / best : 0.0}};
}

} // namespace

std::vector<nlohmann::json> gemmBenchmarkEvents(const GemmBenchmark &benchmark) {
  std::vector<nlohmann::json> events;
  const double best = benchmark.best_tflops();
  for (const auto &rate : benchmark.rates) {
    nlohmann::json event = rungEvent("gemm", rate, best);
    if (!rate.backend_choice.empty()) event["backend_choice"] = rate.backend_choice;
    if (rate.default_algorithm_us > 0) {
      event["default_algorithm_us"] = rate.default_algorithm_us;
      event["default_algorithm_tflops"] =
          gemmRate(rate.size, rate.dtype, rate.default_algorithm_us, 1).tflops;
    }
    if (rate.best_algorithm_us > 0) {
      // The backend's path (tuned per shape) against cuBLAS's best algorithm.
      event["best_algorithm_us"] = rate.best_algorithm_us;
      event["best_algorithm_tflops"] =
          gemmRate(rate.size, rate.dtype, rate.best_algorithm_us, 1).tflops;
      event["fraction_of_best_algorithm"] = rate.best_algorithm_us / rate.us;
      event["algorithms_tried"] = rate.algorithms_tried;
    }
    events.push_back(std::move(event));
  }
  for (const auto &sample : benchmark.contention)
    events.push_back({{"event", "gemm_contention"},
                      {"m", sample.size},
                      {"n", sample.size},
                      {"k", sample.size},
                      {"dtype", "bf16"},
                      {"resident_ctas", sample.resident_ctas},
                      {"alone_us", sample.alone_us},
                      {"beside_us", sample.beside_us},
                      {"slowdown", sample.slowdown()}});
  // FP8 rungs as events of their own, so a reader of the bf16 ladder's "gemm" events is not
  // handed a second ladder in another precision.
  const double best_fp8 = benchmark.best_fp8_tflops();
  for (const auto &rate : benchmark.fp8_rates) {
    nlohmann::json event = rungEvent("gemm_fp8", rate, best_fp8);
    if (rate.algorithms_tried > 0) event["algorithms_tried"] = rate.algorithms_tried;
    events.push_back(std::move(event));
  }
  nlohmann::json summary = {{"event", "gemm_summary"},     {"device", benchmark.device},
                            {"best_tflops", best},         {"datasheet_preset", nullptr},
                            {"datasheet_tflops", nullptr}, {"fraction_of_datasheet", nullptr}};
  if (!benchmark.software.empty()) summary["software"] = benchmark.software;
  if (benchmark.sustained && !benchmark.sustained->window_tflops.empty()) {
    const auto &held = *benchmark.sustained;
    summary["sustained_size"] = held.size;
    summary["sustained_seconds"] = held.seconds;
    summary["sustained_tflops"] = held.tflops();
    summary["sustained_fraction_of_ladder"] = held.fraction_of_ladder();
    summary["sustained_window_tflops"] = held.window_tflops;
  }
  if (benchmark.sm_count > 0) summary["sm_count"] = benchmark.sm_count;
  if (const auto slowdown = benchmark.collective_gemm_slowdown())
    summary["collective_gemm_slowdown"] = *slowdown;
  if (benchmark.datasheet_tflops > 0) {
    summary["datasheet_preset"] = *benchmark.datasheet_preset;
    summary["datasheet_tflops"] = benchmark.datasheet_tflops;
    summary["fraction_of_datasheet"] = best / benchmark.datasheet_tflops;
  }
  if (best_fp8 > 0) {
    summary["best_fp8_tflops"] = best_fp8;
    if (benchmark.datasheet_fp8_tflops > 0) {
      summary["datasheet_fp8_tflops"] = benchmark.datasheet_fp8_tflops;
      summary["fp8_fraction_of_datasheet"] = best_fp8 / benchmark.datasheet_fp8_tflops;
    }
  }
  events.push_back(std::move(summary));
  return events;
}

} // namespace pipescope::backend
