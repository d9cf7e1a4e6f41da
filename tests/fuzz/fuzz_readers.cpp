// Fuzz target for every reader of outside input: plan JSON, trace JSON (its matching against its
// plan, and its bubbles explained), custom schedule JSON, PyTorch's schedule CSV, PyTorch
// profiler traces (and the import's inference of the pipeline from them), and Megatron-LM
// launches (scripts, CI model_config.yaml and training logs, predicted when small). Whatever the
// bytes, the readers must return a value or an error — never crash, hang or run away with memory.
// Built with libFuzzer by tests/fuzz/run-fuzzer.sh, and replayed over the seed corpus by the CTest
// suite (replay_main.cpp).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "engine/bubbles.h"
#include "engine/evaluation.h"
#include "engine/model/megatron_args.h"
#include "engine/model/megatron_log.h"
#include "engine/plan_file.h"
#include "engine/pytorch_csv.h"
#include "engine/run_import.h"
#include "engine/trace_file.h"
#include "engine/trace_matching.h"

namespace {

// Simulating what was read exercises lowering and the deadlock detector on hostile schedules;
// the size bound keeps one input cheap.
void simulateIfSmall(const pipescope::Schedule &schedule) {
  if (schedule.opCount() > 20000) return;
  (void)pipescope::evaluateSchedule(schedule, pipescope::Costs{});
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  if (auto json = pipescope::parseJsonLimited(text)) {
    if (auto plan = pipescope::planFromJson(*json)) {
      auto schedule = pipescope::planSchedule(*plan);
      if (schedule) simulateIfSmall(*schedule);
    }
    // Traces: duplicates, impossible ranks and stages, overlaps and non-finite times are refused
    // by the reader; what it accepts is matched against its own plan's schedule.
    if (auto trace = pipescope::traceFromJson(*json)) {
      if (static_cast<long long>(trace->plan.request.pp) * trace->plan.request.microbatches <=
          4096) {
        auto schedule = pipescope::planSchedule(trace->plan);
        // What matches is explained, step by step, as `pipescope bubbles` does.
        if (schedule && pipescope::checkTraceMatchesSchedule(*trace, *schedule) &&
            pipescope::checkOpCoverage(*schedule)) {
          const auto program = pipescope::lowerSchedule(*schedule);
          for (const int step : pipescope::traceSteps(*trace))
            if (auto timeline = pipescope::stepTimelineFromTrace(*trace, *schedule, program, step))
              (void)pipescope::explainBubbles(*schedule, program, *timeline);
        }
      }
    }
  }
  // A profiler trace, read as a stream, then taken as the only rank of a run.
  std::istringstream stream{std::string(text)};
  if (auto recording = pipescope::readKinetoTrace(stream, "fuzz"))
    (void)pipescope::importRecordings({std::move(*recording)});
  // A Megatron-LM launch or log on 8 GPUs (a log's own world size where it gives one); a small
  // one is predicted as `pipescope megatron` does, and a log's step measured.
  pipescope::MegatronTarget target;
  target.gpus = 8;
  std::optional<pipescope::MegatronLog> log;
  (void)pipescope::measuredStep(pipescope::megatronLogIterations(text));
  if (auto launch = pipescope::readMegatronLaunchOrLog(text, target, &log)) {
    if (log) (void)pipescope::measuredStep(log->iterations);
    const auto &c = launch->configuration;
    if (c.setup.model.layers <= 64 && c.request.microbatches <= 64 &&
        c.setup.model.sequence_length <= 65536 && c.setup.model.hidden <= 65536)
      (void)pipescope::predictValidationCase(c);
  }
  if (auto lists = pipescope::parsePytorchCsv(text)) {
    if (auto schedule = pipescope::makeCustomSchedule(std::move(*lists)))
      simulateIfSmall(*schedule);
  }
  return 0;
}
