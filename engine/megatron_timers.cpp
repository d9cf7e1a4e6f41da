// Megatron-LM per-microbatch pipeline timer dumps, in the shape the community's PP timeline tool
// reads them (Victarry/PP-Schedule-Visualization, examples/megatron-lm/plot.py, with its
// Megatron-LM patch enabled by ENABLE_PP_TIMER): one JSON object per rank, written to
//   event_times_PP{P}_VPP{V}_TPxCPxDP_rank_{r}_pp_rank_{p}_rank_{g}.json
// whose keys are "forward-{mb}-start" / "forward-{mb}-end" / "backward-{mb}-..." (V = 1) or
// "forward-{chunk}-{mb}-start" ... (V > 1), each a time in milliseconds. Chunk c of pipeline rank p
// is virtual stage c·P + p, as Megatron interleaves (plot.py: stage_id = pp_size * chunk +
// pp_rank). Megatron's backward is the full backward (B).
#include <charconv>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "engine/json_io.h"
#include "engine/run_import.h"
#include "engine/schedule.h"

namespace pipescope {

namespace {

// Parses the non-negative integer that `text` starts with; moves `text` past it.
bool takeNumber(std::string_view &text, int &value) {
  auto [after, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || after == text.data() || value < 0) return false;
  text.remove_prefix(static_cast<std::size_t>(after - text.data()));
  return true;
}

// The integer after the first `marker` in `name`, or -1.
int numberAfterMarker(std::string_view name, std::string_view marker) {
  const auto at = name.find(marker);
  if (at == std::string_view::npos) return -1;
  std::string_view rest = name.substr(at + marker.size());
  int value = -1;
  return takeNumber(rest, value) ? value : -1;
}

std::string baseName(const std::string &path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

Result<RankRecording> readMegatronTimers(const std::string &path) {
  const std::string where = escapeControlCharacters(path) + ": ";
  const std::string name = baseName(path);
  RankRecording recording;
  recording.path = path;
  recording.pipeline_size = numberAfterMarker(name, "event_times_PP");
  recording.virtual_size = numberAfterMarker(name, "_VPP");
  recording.replica = numberAfterMarker(name, "TPxCPxDP_rank_");
  recording.pipeline_rank = numberAfterMarker(name, "_pp_rank_");
  const auto last_rank = name.rfind("_rank_");
  if (last_rank != std::string::npos && last_rank > name.find("_pp_rank_"))
    recording.rank = numberAfterMarker(name.substr(last_rank), "_rank_");
  if (recording.pipeline_size < 1 || recording.virtual_size < 1 || recording.pipeline_rank < 0 ||
      recording.pipeline_rank >= recording.pipeline_size || recording.replica < 0)
    return makeError(where +
                     "the name does not say the pipeline rank; Megatron-LM's PP timer writes "
                     "event_times_PP{P}_VPP{V}_TPxCPxDP_rank_{r}_pp_rank_{p}_rank_{g}.json, and "
                     "that name gives P, V and the ranks: keep the names it wrote");
  if (recording.pipeline_size > kMaxPipelineRanks || recording.virtual_size > kMaxChunks)
    return makeError(where + "P or V in the name is beyond pipescope's limits (P <= " +
                     std::to_string(kMaxPipelineRanks) + ", V <= " + std::to_string(kMaxChunks) +
                     ")");
  auto text = readTextFile(path);
  if (!text) return text.error();
  recording.bytes = text->size();
  auto parsed = parseJsonLimited(*text);
  if (!parsed) return makeError(where + parsed.error().message);
  if (!parsed->is_object())
    return makeError(where + "expected one JSON object of \"forward-{mb}-start\": milliseconds "
                             "keys, as Megatron-LM's PP timer writes");
  const int pp = recording.pipeline_size, chunks = recording.virtual_size;
  // (kind, stage, microbatch) -> start, end in microseconds; -1 until seen.
  std::map<std::tuple<int, int, int>, std::pair<double, double>> spans;
  for (const auto &[key, value] : parsed->items()) {
    const bool forward = key.starts_with("forward-");
    if (!forward && !key.starts_with("backward-")) continue; // other timers are not ops
    const std::string at = "/" + key;
    std::string_view rest = std::string_view(key).substr(forward ? 8 : 9);
    int chunk = 0, microbatch = 0;
    if (chunks > 1 && (!takeNumber(rest, chunk) || !rest.starts_with("-")))
      return makeError(where + at + ": expected " + (forward ? "forward" : "backward") +
                       "-{chunk}-{microbatch}-start or -end (the name says VPP" +
                       std::to_string(chunks) + ")");
    if (chunks > 1) rest.remove_prefix(1);
    if (!takeNumber(rest, microbatch) || (rest != "-start" && rest != "-end"))
      return makeError(where + at + ": expected " + (forward ? "forward" : "backward") +
                       (chunks > 1 ? "-{chunk}" : "") +
                       "-{microbatch}-start or -end (the name says VPP" + std::to_string(chunks) +
                       ")");
    if (chunk >= chunks)
      return makeError(where + at + ": chunk " + std::to_string(chunk) +
                       " is not below the name's VPP" + std::to_string(chunks));
    if (microbatch >= kMaxMicrobatches)
      return makeError(where + at + ": microbatch beyond pipescope's limit of " +
                       std::to_string(kMaxMicrobatches));
    if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1e15)
      return makeError(where + at + ": expected a time in milliseconds (a non-negative number)");
    const int stage = chunk * pp + recording.pipeline_rank;
    auto &span = spans.try_emplace({forward ? 0 : 1, stage, microbatch}, -1.0, -1.0).first->second;
    (rest == "-start" ? span.first : span.second) = value.get<double>() * 1000.0;
  }
  for (const auto &[identity, span] : spans) {
    const auto [backward, stage, microbatch] = identity;
    const std::string key =
        std::string(backward ? "backward-" : "forward-") +
        (chunks > 1 ? std::to_string((stage - recording.pipeline_rank) / pp) + "-" : "") +
        std::to_string(microbatch);
    if (span.first < 0 || span.second < 0)
      return makeError(where + "/" + key + (span.first < 0 ? "-start" : "-end") +
                       ": missing; every op has a start and an end");
    if (span.second < span.first)
      return makeError(where + "/" + key + "-end: ends before it starts");
    const Op op = backward ? fullBackwardOp(stage, microbatch) : forwardOp(stage, microbatch);
    recording.cpu_compute.push_back(
        {{PytorchActionType::Compute, op, 0, -1}, span.first, span.second});
  }
  return recording;
}

} // namespace pipescope
