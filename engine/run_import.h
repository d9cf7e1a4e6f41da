#pragma once
// Real training runs from other tools, imported into a measured trace (DESIGN.md §6): PyTorch
// profiler (Kineto) Chrome traces, one per rank, whose PP:<action> annotations name the schedule's
// actions; and Megatron-LM per-microbatch pipeline timer dumps. The stages, V, placement,
// microbatches and the schedule family are inferred from the actions; big files are stream-parsed.
#include <cstddef>
#include <functional>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/pytorch_csv.h"
#include "engine/result.h"
#include "engine/trace_file.h"

namespace pipescope {

enum class RunFormat {
  Auto,     ///< by the files' names and content
  Torch,    ///< PyTorch profiler (Kineto) Chrome traces
  Megatron, ///< Megatron-LM PP timer dumps (event_times_*.json)
};

/// One action recorded on one rank, in that rank's clock (microseconds).
struct RecordedAction {
  PytorchAction action;
  double start_us = 0;
  double end_us = 0;
};

/// A profiler step marker (Kineto's ProfilerStep#N span).
struct RecordedStep {
  int number = 0;
  double start_us = 0;
  double end_us = 0;
};

/// What one rank's file holds, as read (before any inference across ranks).
struct RankRecording {
  std::string path;
  int rank = -1;       ///< global rank (distributedInfo), -1 when the file does not say
  int world_size = -1; ///< -1 when the file does not say
  /// Megatron dumps name their pipeline rank and P, V in the file name; -1 otherwise.
  int pipeline_rank = -1, pipeline_size = -1, virtual_size = -1;
  /// Megatron dumps: the TPxCPxDP rank in the file name (one pipeline is replica 0); -1 otherwise.
  int replica = -1;
  std::string host; ///< ranks with the same host share a clock
  /// Action and step times are microseconds after this (a whole second of the file's clock), so
  /// that a span's end minus its start is its recorded duration to the last digit: profiler
  /// timestamps are ~1e12 us, where a double resolves only about 0.5 ns.
  double time_base_us = 0;
  std::string backend; ///< process group backend (distributedInfo), e.g. "nccl", "gloo"
  /// Compute actions from CPU annotations (user_annotation), and from GPU annotations
  /// (gpu_user_annotation) when the trace has them.
  std::vector<RecordedAction> cpu_compute, gpu_compute;
  /// Communication and resharding actions (CPU), for transfers and clock alignment.
  std::vector<RecordedAction> communication;
  std::vector<RecordedStep> steps;
  /// The single-stage GPipe labels "Forward i" / "Backward i" (stage filled in from the rank).
  bool single_stage_labels = false;
  std::size_t events = 0, cpu_ops = 0, kernels = 0; ///< what the file had, for messages
  std::size_t bytes = 0;                            ///< text read (after inflating)
};

/// Bytes read so far and in all (an estimate when files are gzipped), for progress displays.
using ImportProgress = std::function<void(std::size_t done, std::size_t total)>;

/// Reads one Kineto Chrome trace from a stream, event by event (nlohmann/json SAX): memory holds
/// the recorded actions and the small top-level fields, never the event list. `path` names the
/// file in errors. `on_progress` is called every few thousand events; when it returns false the
/// read stops and the error says it was cancelled.
Result<RankRecording> readKinetoTrace(std::istream &input, const std::string &path,
                                      const std::function<bool()> &on_progress = {});
/// Reads one Megatron-LM PP timer dump: a JSON object of "forward-{mb}-start" (V = 1) or
/// "forward-{chunk}-{mb}-start" (V > 1) keys, "-end" and "backward-..." alike, in milliseconds;
/// the file name event_times_PP{P}_VPP{V}_..._pp_rank_{p}_rank_{g}.json gives P, V and the ranks.
Result<RankRecording> readMegatronTimers(const std::string &path);

struct ImportOptions {
  RunFormat format = RunFormat::Auto;
  std::optional<int> step; ///< one profiled step (its ProfilerStep number), or all
  ImportProgress progress; ///< called as the files are read
  /// Polled as the files are read (every few thousand events) and between them: once it returns
  /// true, the import stops with kImportCancelled as its error (the explorer's Cancel button).
  std::function<bool()> cancelled;
};

/// The error message of an import stopped by ImportOptions::cancelled.
inline constexpr const char *kImportCancelled = "the import was cancelled";

/// What `pipescope import --json` prints about an imported run.
// nlohmann::json's destructor checks its invariants with assertions, not exceptions, which
// clang-tidy cannot see through.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ImportSummary {
  std::string format; ///< "torch" or "megatron"
  int pp = 0, microbatches = 0, virtual_stages = 0;
  std::string placement;     ///< "loop" or "v-shape"
  nlohmann::json schedule;   ///< {"name": family, "pp", ...} or {"name": "custom"}
  std::vector<int> steps;    ///< the imported steps (profiler step numbers, else 0, 1, ...)
  std::size_t ops = 0;       ///< op records written (an overlapped pair counts twice)
  std::size_t actions = 0;   ///< PyTorch actions read, compute and communication
  std::string timing;        ///< "gpu" (gpu_user_annotation spans) or "cpu"
  double clock_error_us = 0; ///< bound on the cross-host clock alignment error
  int hosts = 1;
};

/// A run brought in: the measured trace, its `origin` block and the summary.
struct ImportedRun {
  Trace trace;
  nlohmann::json origin;
  ImportSummary summary;
};

/// Reads the files (or folders of them) of one run and builds its measured trace. The error names
/// the file and what it lacks or contradicts.
Result<ImportedRun> importRun(const std::vector<std::string> &paths,
                              const ImportOptions &options = {});

/// The imported run builds from recordings already read (what importRun does after reading).
Result<ImportedRun> importRecordings(std::vector<RankRecording> recordings,
                                     const ImportOptions &options = {});

/// Writes the run as a pipescope.trace with its `origin` block (through OutputFile).
Status saveImportedRun(const std::string &path, const ImportedRun &run);

/// The summary as `pipescope import --json` prints it.
nlohmann::json importSummaryJson(const ImportSummary &summary);

} // namespace pipescope
