#include "engine/run_import.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <istream>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "engine/calibration.h"
#include "engine/json_io.h"
#include "engine/plan_file.h"
#include "engine/trace_matching.h"

namespace pipescope {

using nlohmann::json;

namespace {

/// Largest profiler trace read per rank. The reader streams, so this bounds the reading time
/// (about a minute per 8 GiB at the measured rate, README "Import"), not the memory.
constexpr std::size_t kMaxImportFileBytes = std::size_t{64} << 30;
/// How far two spans on one rank may overlap, or a receive precede its send on one clock, before
/// the import calls it a contradiction: the same slack the trace reader allows (checkTraceOps).
double tolerance(double at_us) {
  return 1e-3 + 1e-9 * std::abs(at_us);
}

std::string shownPath(const std::string &path) {
  return escapeControlCharacters(path);
}

std::string baseName(const std::string &path) {
  return std::filesystem::path(path).filename().string();
}

bool endsWithJson(const std::string &name) {
  return name.ends_with(".json") || name.ends_with(".json.gz");
}

bool isMegatronName(const std::string &name) {
  return name.starts_with("event_times_") && endsWithJson(name);
}

// torchtitan writes rank{r}_trace.json; torch.profiler's tensorboard_trace_handler writes
// {worker}.{timestamp}.pt.trace.json: both say "trace".
bool isProfilerTraceName(const std::string &name) {
  return name.find("trace") != std::string::npos && endsWithJson(name);
}

// The files of a run: the files given, and in each folder given, the profiler traces (or the
// Megatron timer dumps) it holds, sorted by name.
Result<std::vector<std::string>> expandPaths(const std::vector<std::string> &paths,
                                             RunFormat format) {
  std::vector<std::string> files;
  for (const auto &path : paths) {
    std::error_code error;
    if (!std::filesystem::is_directory(path, error)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::string> traces, megatron;
    for (const auto &entry : std::filesystem::directory_iterator(path, error)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_regular_file(error)) continue;
      if (isMegatronName(name)) megatron.push_back(entry.path().string());
      if (isProfilerTraceName(name)) traces.push_back(entry.path().string());
    }
    if (error)
      return makeError("cannot list the folder " + shownPath(path) + ": " + error.message());
    auto &chosen = format == RunFormat::Megatron                   ? megatron
                   : format == RunFormat::Torch || !traces.empty() ? traces
                                                                   : megatron;
    if (chosen.empty())
      return makeError(shownPath(path) +
                       ": the folder holds no profiler traces (*trace*.json or .json.gz, as "
                       "torch.profiler writes them) and no Megatron-LM PP timer dumps "
                       "(event_times_*.json)");
    std::sort(chosen.begin(), chosen.end());
    files.insert(files.end(), chosen.begin(), chosen.end());
  }
  if (files.empty()) return makeError("no files given; name the run's files or its folder");
  return files;
}

// `progress` gets the bytes read so far and returns false to stop (ImportOptions::cancelled).
Result<RankRecording> readTorchFile(const std::string &path,
                                    const std::function<bool(std::size_t)> &progress) {
  ReadLimits limits;
  limits.max_bytes = kMaxImportFileBytes;
  auto file = InputFile::open(path, limits);
  if (!file) return file.error();
  std::istream input(file->get());
  InputFile &source = **file;
  bool cancelled = false;
  auto recording = readKinetoTrace(input, path, [&] {
    cancelled = progress && !progress(source.sourceBytesRead());
    return !cancelled;
  });
  if (cancelled) return makeError(kImportCancelled);
  // Damaged gzip first shows to the parser as bad text: read on to find the real reason.
  if (!recording && source.compressed())
    while (source.error().empty() && input.rdbuf()->sbumpc() != std::char_traits<char>::eof()) {
    }
  // A read that stopped early (size limit, damaged gzip) shows to the parser as a truncated file;
  // the reason is the reader's.
  if (!source.error().empty()) return makeError(source.error());
  if (!recording) {
    // The parser failed where the text ends: say it plainly for a cut-off file.
    if (input.rdbuf()->sgetc() == std::char_traits<char>::eof())
      return makeError(recording.error().message +
                       " (the file ends there: it is truncated; was it copied while the profiler "
                       "was writing it?)");
    return recording.error();
  }
  recording->bytes = source.bytesRead();
  if (progress && !progress(source.sourceBytesRead())) return makeError(kImportCancelled);
  return recording;
}

// "rank3_trace.json" -> 3, for traces without distributedInfo; -1 when the name does not say.
int rankFromName(const std::string &path) {
  const std::string name = baseName(path);
  const auto at = name.find("rank");
  if (at == std::string::npos) return -1;
  std::size_t i = at + 4;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  long long rank = 0;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && rank <= kMaxWorldSize; ++i)
    rank = rank * 10 + (name[i] - '0');
  return rank <= kMaxWorldSize ? static_cast<int>(rank) : -1;
}

// "2, 3, 5-9, 12": ascending values with runs shortened, at most a dozen items.
std::string listText(const std::vector<int> &values) {
  std::string text;
  int items = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::size_t last = i;
    while (last + 1 < values.size() && values[last + 1] == values[last] + 1)
      ++last;
    if (++items > 12) return text + ", ...";
    text += (text.empty() ? "" : ", ") + std::to_string(values[i]);
    if (last > i + 1) {
      text += "-" + std::to_string(values[last]);
      i = last;
    }
  }
  return text;
}

std::string actionText(const PytorchAction &action) {
  if (action.type == PytorchActionType::Compute) return formatOp(action.op);
  return "stage " + std::to_string(action.stage) + " communication";
}

std::string spanText(const RecordedAction &action) {
  return "PP:" + actionText(action.action) + " (" + json(action.start_us).dump() + "-" +
         json(action.end_us).dump() + " us)";
}

/// The (kind, stage, microbatch) parts a compute op covers: one, or two for an overlapped pair.
std::vector<std::tuple<int, int, int>> partsOf(const Op &op) {
  if (op.kind == OpKind::OverlappedPair)
    return {{static_cast<int>(OpKind::Forward), op.stage, op.microbatch},
            {static_cast<int>(OpKind::FullBackward), op.backward_stage, op.backward_microbatch}};
  return {{static_cast<int>(op.kind), op.stage, op.microbatch}};
}

/// One pipeline rank of the run, as imported.
struct PipelineRank {
  RankRecording recording;
  int pipeline_rank = 0;
  std::vector<RecordedAction> compute;  ///< the timing used (GPU or CPU spans), by start
  std::vector<int> compute_steps;       ///< step of each compute action; -1 outside every step
  std::vector<int> communication_steps; ///< step of each communication action
  std::set<int> stages;
  int domain = 0; ///< clock domain (host)
};

// Steps by the profiler's ProfilerStep#N markers: the marker whose span holds the action's start.
int markerStep(const std::vector<RecordedStep> &steps, double at_us) {
  auto it = std::upper_bound(steps.begin(), steps.end(), at_us,
                             [](double t, const RecordedStep &s) { return t < s.start_us; });
  if (it == steps.begin()) return -1;
  --it;
  return at_us <= it->end_us ? it->number : -1;
}

// Assigns every action to a step: by the profiler step markers when the file has them, else by
// the repeat of the action sequence (a compute action seen before in the current step starts the
// next). Communication actions without markers follow their neighbours: a send belongs to the
// step of the compute before it, anything else to the step of the compute after it.
void assignSteps(PipelineRank &rank) {
  auto &steps = rank.recording.steps;
  std::sort(steps.begin(), steps.end(),
            [](const RecordedStep &a, const RecordedStep &b) { return a.start_us < b.start_us; });
  const auto &communication = rank.recording.communication;
  rank.compute_steps.assign(rank.compute.size(), -1);
  rank.communication_steps.assign(communication.size(), -1);
  if (!steps.empty()) {
    for (std::size_t i = 0; i < rank.compute.size(); ++i)
      rank.compute_steps[i] = markerStep(steps, rank.compute[i].start_us);
    for (std::size_t i = 0; i < communication.size(); ++i)
      rank.communication_steps[i] = markerStep(steps, communication[i].start_us);
    return;
  }
  std::set<std::tuple<int, int, int>> seen;
  int step = 0;
  for (std::size_t i = 0; i < rank.compute.size(); ++i) {
    const auto parts = partsOf(rank.compute[i].action.op);
    if (std::any_of(parts.begin(), parts.end(), [&](const auto &p) { return seen.count(p); })) {
      ++step;
      seen.clear();
    }
    seen.insert(parts.begin(), parts.end());
    rank.compute_steps[i] = step;
  }
  for (std::size_t i = 0; i < communication.size(); ++i) {
    const auto &action = communication[i];
    const bool send = action.action.type == PytorchActionType::SendForward ||
                      action.action.type == PytorchActionType::SendBackward ||
                      action.action.type == PytorchActionType::WaitSendForward ||
                      action.action.type == PytorchActionType::WaitSendBackward;
    const auto after =
        std::lower_bound(rank.compute.begin(), rank.compute.end(), action.start_us,
                         [](const RecordedAction &a, double t) { return a.start_us < t; });
    const auto index = static_cast<std::size_t>(after - rank.compute.begin());
    const bool before = index > 0 && (send || index == rank.compute.size());
    if (before || index < rank.compute.size())
      rank.communication_steps[i] = rank.compute_steps[before ? index - 1 : index];
  }
}

// The family whose generated per-rank orders equal these, with its parameters; or nothing.
std::optional<ScheduleRequest> matchFamily(const Schedule &imported) {
  const int pp = imported.pp(), microbatches = imported.microbatches(), chunks = imported.chunks();
  for (const auto &family : scheduleFamilies()) {
    if (family.placement != imported.placement.kind) continue;
    std::vector<int> groups{0};
    if (family.uses_microbatch_group)
      for (int g = 1; g <= std::min(microbatches, 64); ++g)
        groups.push_back(g);
    for (const int group : groups) {
      ScheduleRequest request;
      request.name = family.name;
      request.pp = pp;
      request.microbatches = microbatches;
      request.chunks = chunks;
      request.microbatch_group = group;
      if (!checkScheduleRequest(request)) continue;
      auto generated = generateSchedule(request);
      if (generated && generated->placement.stageCount() == imported.placement.stageCount() &&
          generated->ranks == imported.ranks)
        return request;
    }
  }
  return std::nullopt;
}

json scheduleJson(const std::optional<ScheduleRequest> &family, const Schedule &schedule) {
  if (!family) return {{"name", "custom"}};
  json out{{"name", family->name},
           {"pp", family->pp},
           {"microbatches", family->microbatches},
           {"virtual_stages", schedule.chunks()}};
  const auto *info = findScheduleFamily(family->name);
  if (info && info->uses_microbatch_group)
    out["microbatch_group"] = family->microbatch_group == 0 ? family->pp : family->microbatch_group;
  return out;
}

/// One "consumer cannot finish before its producer's send started" constraint between ranks.
struct ClockConstraint {
  int producer_domain, consumer_domain;
  double producer_us, consumer_us; ///< on one time base, before the hosts' offsets
};
/// Names constraint i (the consumer op and its producer) for messages; built only on failure.
using DescribeConstraint = std::function<std::string(std::size_t)>;

/// Offsets per clock domain (added to that domain's times) and the bound on their error.
struct ClockAlignment {
  std::vector<double> offset_us;
  double error_us = 0;
};

// Ranks on one host share a clock. Across hosts, each pair of hosts that exchange data gets the
// offset in the middle of what its send/receive pairs allow (o_consumer - o_producer >=
// producer_send - consumer_done in both directions), and the half-width of that window is its
// error; hosts further from the first host add up the errors along the path.
Result<ClockAlignment> alignClocks(int domains, const std::vector<ClockConstraint> &constraints,
                                   const std::vector<std::string> &domain_names,
                                   const DescribeConstraint &describe) {
  ClockAlignment alignment;
  alignment.offset_us.assign(static_cast<std::size_t>(domains), 0.0);
  const double none = -std::numeric_limits<double>::infinity();
  // lower[a][b]: least o_b - o_a; the most demanding constraint, and what it was.
  std::vector<std::vector<double>> lower(
      static_cast<std::size_t>(domains),
      std::vector<double>(static_cast<std::size_t>(domains), none));
  std::vector<std::vector<std::size_t>> why(
      static_cast<std::size_t>(domains),
      std::vector<std::size_t>(static_cast<std::size_t>(domains), 0));
  for (std::size_t i = 0; i < constraints.size(); ++i) {
    const ClockConstraint &c = constraints[i];
    const auto a = static_cast<std::size_t>(c.producer_domain),
               b = static_cast<std::size_t>(c.consumer_domain);
    const double needed = c.producer_us - c.consumer_us;
    if (a == b) {
      if (needed > tolerance(c.producer_us))
        return makeError(describe(i) + " finished " + json(needed).dump() +
                         " us before its input was sent, on the one clock of host '" +
                         escapeControlCharacters(domain_names[a]) +
                         "': these files are not of one run (or not of one step); give the "
                         "files that one run wrote for every rank");
      continue;
    }
    if (needed > lower[a][b]) {
      lower[a][b] = needed;
      why[a][b] = i;
    }
  }
  std::vector<double> error(static_cast<std::size_t>(domains), -1);
  error[0] = 0;
  std::vector<std::size_t> queue{0};
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const std::size_t a = queue[head];
    for (std::size_t b = 0; b < static_cast<std::size_t>(domains); ++b) {
      if (error[b] >= 0 || (lower[a][b] == none && lower[b][a] == none)) continue;
      if (lower[a][b] == none || lower[b][a] == none)
        return makeError("hosts '" + escapeControlCharacters(domain_names[a]) + "' and '" +
                         escapeControlCharacters(domain_names[b]) +
                         "' exchange data in one direction only in these files, so their clocks "
                         "cannot be aligned; import whole training steps (forward and backward)");
      // o_b - o_a in [lower[a][b], -lower[b][a]].
      const double low = lower[a][b], high = -lower[b][a];
      if (low > high + tolerance(low))
        return makeError(
            "no clock offset between hosts '" + escapeControlCharacters(domain_names[a]) +
            "' and '" + escapeControlCharacters(domain_names[b]) +
            "' lets every receive follow its send (" + describe(why[a][b]) + " and " +
            describe(why[b][a]) + " contradict each other): these files are not of one run");
      alignment.offset_us[b] = alignment.offset_us[a] + (low + high) / 2;
      error[b] = error[a] + std::max(0.0, high - low) / 2;
      queue.push_back(b);
    }
  }
  for (std::size_t d = 0; d < static_cast<std::size_t>(domains); ++d) {
    if (error[d] < 0)
      return makeError("host '" + escapeControlCharacters(domain_names[d]) +
                       "' exchanges no data with the other hosts in these files, so its clock "
                       "cannot be aligned; give the files of one pipeline");
    alignment.error_us = std::max(alignment.error_us, error[d]);
  }
  return alignment;
}

std::string describeRank(const PipelineRank &rank) {
  return "rank " + std::to_string(rank.pipeline_rank) + " (" + shownPath(rank.recording.path) + ")";
}

} // namespace

Result<ImportedRun> importRecordings(std::vector<RankRecording> recordings,
                                     const ImportOptions &options) {
  if (recordings.empty()) return makeError("no files given; name the run's files or its folder");
  const bool megatron = recordings.front().pipeline_rank >= 0;
  // Megatron: the timeline tool plots the pipeline of TPxCPxDP replica 0; so does the import.
  if (megatron) {
    const bool has_first = std::any_of(recordings.begin(), recordings.end(),
                                       [](const RankRecording &r) { return r.replica == 0; });
    if (has_first) std::erase_if(recordings, [](const RankRecording &r) { return r.replica != 0; });
  }

  // Who is who: each file one rank of one run.
  std::vector<PipelineRank> ranks;
  for (auto &recording : recordings) {
    PipelineRank rank;
    if (!megatron && recording.rank < 0) recording.rank = rankFromName(recording.path);
    if (!megatron && recording.rank < 0)
      return makeError(shownPath(recording.path) +
                       ": the file names no rank (no distributedInfo.rank, and the name is not "
                       "rank{r}_trace.json); name it as torchtitan does");
    rank.recording = std::move(recording);
    ranks.push_back(std::move(rank));
  }
  const auto order_key = [megatron](const PipelineRank &r) {
    return megatron ? r.recording.pipeline_rank : r.recording.rank;
  };
  std::sort(ranks.begin(), ranks.end(), [&](const PipelineRank &a, const PipelineRank &b) {
    return order_key(a) < order_key(b);
  });
  for (std::size_t i = 1; i < ranks.size(); ++i)
    if (order_key(ranks[i]) == order_key(ranks[i - 1]))
      return makeError(shownPath(ranks[i - 1].recording.path) + " and " +
                       shownPath(ranks[i].recording.path) + " are both " +
                       (megatron ? "pipeline rank " : "rank ") +
                       std::to_string(order_key(ranks[i])) + "; give one file per rank of one run");
  for (const auto &rank : ranks) {
    const auto &first = ranks.front().recording;
    const auto &r = rank.recording;
    if (r.world_size != first.world_size || r.pipeline_size != first.pipeline_size ||
        r.virtual_size != first.virtual_size)
      return makeError(
          shownPath(first.path) + " and " + shownPath(r.path) + " are from two different runs: " +
          (megatron ? "one names PP" + std::to_string(first.pipeline_size) + "_VPP" +
                          std::to_string(first.virtual_size) + ", the other PP" +
                          std::to_string(r.pipeline_size) + "_VPP" + std::to_string(r.virtual_size)
                    : "one has world size " + std::to_string(first.world_size) + ", the other " +
                          std::to_string(r.world_size)) +
          "; give the files of one run");
  }

  // Which spans time the ops: GPU annotations when every rank has them.
  const bool gpu = std::all_of(ranks.begin(), ranks.end(), [](const PipelineRank &r) {
    return !r.recording.gpu_compute.empty();
  });
  const bool labels = std::any_of(ranks.begin(), ranks.end(), [](const PipelineRank &r) {
    return r.recording.single_stage_labels;
  });
  std::size_t action_count = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    auto &rank = ranks[i];
    const auto &r = rank.recording;
    rank.compute = gpu ? r.gpu_compute : r.cpu_compute;
    action_count += r.cpu_compute.size() + r.communication.size();
    if (rank.compute.empty())
      return makeError(
          shownPath(r.path) + ": no pipeline actions: none of its " + std::to_string(r.events) +
          " events is a PP:<action> annotation or a \"Forward i\" / \"Backward i\" label (it has " +
          std::to_string(r.cpu_ops) + " CPU ops, " + std::to_string(r.steps.size()) +
          " profiler steps). A program without torch.distributed.pipelining records none, and "
          "so does PyTorch's Schedule1F1B (as of 2.15); profile ScheduleGPipe or a multi-stage "
          "schedule class, which label every action");
    if (labels) {
      if (!r.single_stage_labels)
        return makeError(shownPath(r.path) + " has PP:<action> annotations but other files have "
                                             "ScheduleGPipe's Forward i / Backward i labels: give "
                                             "the files of one run");
      // Single-stage schedules: the stage is the rank's place in the pipeline.
      for (auto &action : rank.compute)
        action.action.op.stage = static_cast<int>(i);
    }
    std::stable_sort(
        rank.compute.begin(), rank.compute.end(),
        [](const RecordedAction &a, const RecordedAction &b) { return a.start_us < b.start_us; });
    for (const auto &action : rank.compute)
      for (const auto &[kind, stage, microbatch] : partsOf(action.action.op))
        rank.stages.insert(stage);
  }

  // A missing rank: the world is larger than the files and some stage has no file. (A world
  // larger than the files is fine when they hold one whole pipeline of a data-parallel job.)
  int stage_count = 0;
  for (const auto &rank : ranks) {
    stage_count = std::max(stage_count, *rank.stages.rbegin() + 1);
    for (const auto &c : rank.recording.communication) {
      // A send forward or a receive backward means the next stage exists (stages are numbered
      // along the route in every placement torch generates).
      const bool next = c.action.type == PytorchActionType::SendForward ||
                        c.action.type == PytorchActionType::ReceiveBackward;
      stage_count = std::max(stage_count, c.action.stage + (next ? 2 : 1));
    }
  }
  std::set<int> held;
  for (const auto &rank : ranks)
    held.insert(rank.stages.begin(), rank.stages.end());
  std::vector<int> unheld;
  for (int s = 0; s < stage_count && unheld.size() < 16; ++s)
    if (!held.count(s)) unheld.push_back(s);
  const int expected_ranks =
      megatron ? ranks.front().recording.pipeline_size : ranks.front().recording.world_size;
  std::vector<int> missing;
  if (expected_ranks > static_cast<int>(ranks.size())) {
    std::set<int> present;
    for (const auto &rank : ranks)
      present.insert(order_key(rank));
    for (int r = 0; r < expected_ranks && missing.size() < 16; ++r)
      if (!present.count(r)) missing.push_back(r);
  }
  if (!missing.empty() && (!unheld.empty() || labels || megatron))
    return makeError(
        std::string(missing.size() == 1 ? "rank " : "ranks ") + listText(missing) + " of the " +
        std::to_string(expected_ranks) +
        (megatron ? " pipeline ranks (the names say PP" + std::to_string(expected_ranks) + ")"
                  : " ranks (distributedInfo.world_size)") +
        (missing.size() == 1 ? " is" : " are") + " missing" +
        (unheld.empty() ? std::string()
                        : ": no file runs stage" + std::string(unheld.size() > 1 ? "s " : " ") +
                              listText(unheld)) +
        "; give every rank's file");
  if (!unheld.empty())
    return makeError("no file runs stage" + std::string(unheld.size() > 1 ? "s " : " ") +
                     listText(unheld) + " of the " + std::to_string(stage_count) +
                     " the actions name; give every rank's file of the pipeline");

  // Placement: stage s of a loop on rank s mod P, or the V-shape (s < P on s, else 2P-1-s).
  const int pp = static_cast<int>(ranks.size());
  if (stage_count % pp != 0)
    return makeError("the actions name " + std::to_string(stage_count) + " stages on " +
                     std::to_string(pp) +
                     " ranks, not the same number on each; give every rank's file of one pipeline");
  const int chunks = stage_count / pp;
  std::map<int, const PipelineRank *> by_first_stage;
  for (auto &rank : ranks) {
    rank.pipeline_rank = megatron ? rank.recording.pipeline_rank : *rank.stages.begin();
    if (rank.pipeline_rank >= pp)
      return makeError(describeRank(rank) + " runs stages from " +
                       std::to_string(rank.pipeline_rank) + " up, but there are " +
                       std::to_string(pp) + " ranks: give every rank's file of one pipeline");
    if (const auto [it, fresh] = by_first_stage.emplace(rank.pipeline_rank, &rank); !fresh)
      return makeError(shownPath(it->second->recording.path) + " and " +
                       shownPath(rank.recording.path) + " both run stage " +
                       std::to_string(rank.pipeline_rank) +
                       ": the files hold more than one pipeline (data-parallel replicas?); give "
                       "the files of one pipeline");
  }
  const auto holds = [&](PlacementKind kind) {
    return std::all_of(ranks.begin(), ranks.end(), [&](const PipelineRank &rank) {
      std::set<int> expected;
      const int r = rank.pipeline_rank;
      if (kind == PlacementKind::Loop)
        for (int k = 0; k < chunks; ++k)
          expected.insert(r + k * pp);
      else
        expected = {r, 2 * pp - 1 - r};
      return rank.stages == expected;
    });
  };
  PlacementKind placement_kind = PlacementKind::Loop;
  if (!holds(PlacementKind::Loop)) {
    if (chunks == 2 && holds(PlacementKind::VShape)) {
      placement_kind = PlacementKind::VShape;
    } else {
      std::string held_text;
      for (const auto &rank : ranks)
        held_text += (held_text.empty() ? "" : "; ") + describeRank(rank) + " runs stages " +
                     listText(std::vector<int>(rank.stages.begin(), rank.stages.end()));
      return makeError("the stages on the ranks follow neither the loop placement (stage s on "
                       "rank s mod P) nor the V-shape: " +
                       held_text);
    }
  }
  std::sort(ranks.begin(), ranks.end(), [](const PipelineRank &a, const PipelineRank &b) {
    return a.pipeline_rank < b.pipeline_rank;
  });

  // Steps, and the same steps on every rank.
  std::vector<int> steps;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    auto &rank = ranks[i];
    assignSteps(rank);
    std::set<int> numbers(rank.compute_steps.begin(), rank.compute_steps.end());
    numbers.erase(-1);
    std::vector<int> these(numbers.begin(), numbers.end());
    if (these.empty())
      return makeError(describeRank(rank) + ": none of its pipeline actions lies inside a "
                                            "profiler step (ProfilerStep#N)");
    if (i == 0) steps = these;
    if (these != steps)
      return makeError(describeRank(ranks.front()) + " holds steps " + listText(steps) + " but " +
                       describeRank(rank) + " holds steps " + listText(these) +
                       ": the files are not of the same profiled steps of one run");
  }
  if (options.step) {
    if (std::find(steps.begin(), steps.end(), *options.step) == steps.end())
      return makeError("--step " + std::to_string(*options.step) + ": the files hold step" +
                       (steps.size() > 1 ? "s " : " ") + listText(steps) +
                       (ranks.front().recording.steps.empty()
                            ? " (numbered from 0 by the repeat of the actions)"
                            : " (the profiler's step numbers)"));
    steps = {*options.step};
  }

  // Per step and rank: the ops in order, each once, one at a time.
  std::map<std::pair<int, int>, std::vector<const RecordedAction *>> step_ops; // (step, rank)
  for (const auto &rank : ranks) {
    for (const int step : steps) {
      auto &list = step_ops[{step, rank.pipeline_rank}];
      std::map<std::tuple<int, int, int>, const RecordedAction *> seen;
      for (std::size_t i = 0; i < rank.compute.size(); ++i) {
        if (rank.compute_steps[i] != step) continue;
        const RecordedAction &action = rank.compute[i];
        for (const auto &part : partsOf(action.action.op))
          if (const auto [it, fresh] = seen.emplace(part, &action); !fresh)
            return makeError(describeRank(rank) + ", step " + std::to_string(step) + ": " +
                             spanText(action) + " repeats " + spanText(*it->second) +
                             "; a step runs each action once");
        if (!list.empty() && action.start_us < list.back()->end_us - tolerance(action.start_us))
          return makeError(describeRank(rank) + ", step " + std::to_string(step) + ": " +
                           spanText(*list.back()) + " and " + spanText(action) +
                           " overlap; a rank runs one pipeline action at a time");
        list.push_back(&action);
      }
    }
  }

  // The schedule: the first imported step's orders.
  std::vector<std::vector<Op>> orders(static_cast<std::size_t>(pp));
  for (const auto &rank : ranks)
    for (const auto *action : step_ops[{steps.front(), rank.pipeline_rank}])
      orders[static_cast<std::size_t>(rank.pipeline_rank)].push_back(action->action.op);
  const std::string placement_name(placementName(placement_kind));
  auto schedule = makeCustomSchedule(orders, &placement_name);
  if (!schedule)
    return makeError("the actions of step " + std::to_string(steps.front()) +
                     " are not a whole schedule: " + schedule.error().message);
  if (auto status = checkOpCoverage(*schedule); !status)
    return makeError("the actions of step " + std::to_string(steps.front()) +
                     " are not a whole schedule: " + status.error().message);
  const auto family = matchFamily(*schedule);

  // Clocks: one per host (Megatron's dumps do not name hosts: one clock, as the patch writes).
  std::vector<std::string> domain_names;
  for (auto &rank : ranks) {
    const std::string host = megatron ? std::string("(timer dumps)") : rank.recording.host;
    auto it = std::find(domain_names.begin(), domain_names.end(), host);
    rank.domain = static_cast<int>(it - domain_names.begin());
    if (it == domain_names.end()) domain_names.push_back(host);
  }
  const Placement &placement = schedule->placement;
  // Where each op part ran and when, and when each send started, per step.
  struct Span {
    int rank;
    double start_us, end_us;
  };
  std::map<std::tuple<int, int, int, int>, Span> part_spans; // step, kind, stage, microbatch
  std::map<std::tuple<int, bool, int, int>, Span> sends;     // step, gradient, stage, microbatch
  for (const auto &rank : ranks) {
    for (const int step : steps)
      for (const auto *action : step_ops[{step, rank.pipeline_rank}])
        for (const auto &[kind, stage, microbatch] : partsOf(action->action.op))
          part_spans[{step, kind, stage, microbatch}] = {rank.pipeline_rank, action->start_us,
                                                         action->end_us};
    const auto &communication = rank.recording.communication;
    for (std::size_t i = 0; i < communication.size(); ++i) {
      const auto &c = communication[i];
      const bool forward = c.action.type == PytorchActionType::SendForward;
      if (!forward && c.action.type != PytorchActionType::SendBackward) continue;
      if (std::find(steps.begin(), steps.end(), rank.communication_steps[i]) == steps.end())
        continue;
      sends.emplace(
          std::tuple(rank.communication_steps[i], !forward, c.action.stage, c.action.microbatch),
          Span{rank.pipeline_rank, c.start_us, c.end_us});
    }
  }
  const auto &rank_of = [&](int pipeline_rank) -> const PipelineRank & {
    return ranks[static_cast<std::size_t>(pipeline_rank)];
  };
  // Each file's times count from its own base: bring them onto the first file's base (whole
  // seconds apart, so exact).
  const double common_base = ranks.front().recording.time_base_us;
  const auto on_common_base = [&](int pipeline_rank, double us) {
    return us + (rank_of(pipeline_rank).recording.time_base_us - common_base);
  };
  std::vector<ClockConstraint> constraints;
  struct Dependency {
    int step;
    bool gradient;
    int producer_stage, microbatch;
    Span producer, consumer;
    const Span *send;
  };
  std::vector<Dependency> dependencies;
  for (const auto &[key, consumer] : part_spans) {
    const auto [step, kind, stage, microbatch] = key;
    const bool forward = kind == static_cast<int>(OpKind::Forward);
    if (kind == static_cast<int>(OpKind::WeightGrad)) continue;
    const int producer_stage =
        forward ? placement.previousStage(stage) : placement.nextStage(stage);
    if (producer_stage < 0) continue;
    const Span *producer = nullptr;
    for (const auto producer_kind :
         forward ? std::vector<OpKind>{OpKind::Forward}
                 : std::vector<OpKind>{OpKind::InputGrad, OpKind::FullBackward})
      if (auto it =
              part_spans.find({step, static_cast<int>(producer_kind), producer_stage, microbatch});
          it != part_spans.end())
        producer = &it->second;
    if (!producer || producer->rank == consumer.rank) continue;
    auto send = sends.find({step, !forward, producer_stage, microbatch});
    dependencies.push_back({step, !forward, producer_stage, microbatch, *producer, consumer,
                            send != sends.end() ? &send->second : nullptr});
  }
  for (const auto &d : dependencies) {
    // A receive cannot complete before its send started; without send annotations (GPipe's
    // labels, Megatron's timers) the send lies somewhere in the producing span, so before its
    // start nothing was sent. It completes before the consumer ends: CPU spans include the wait,
    // and a GPU span ends after its inputs arrived too (its start would be a tighter bound, but
    // the device clock's mapping onto the host clock is not exact enough to refuse files by).
    const double sent =
        on_common_base(d.producer.rank, d.send ? d.send->start_us : d.producer.start_us);
    const double received = on_common_base(d.consumer.rank, d.consumer.end_us);
    constraints.push_back(
        {rank_of(d.producer.rank).domain, rank_of(d.consumer.rank).domain, sent, received});
  }
  const auto describe = [&](std::size_t i) {
    const Dependency &d = dependencies[i];
    return describeRank(rank_of(d.consumer.rank)) + "'s " + (d.gradient ? "backward" : "forward") +
           " of microbatch " + std::to_string(d.microbatch) + " in step " + std::to_string(d.step) +
           " (input from stage " + std::to_string(d.producer_stage) + " on " +
           describeRank(rank_of(d.producer.rank)) + ")";
  };
  auto clocks =
      alignClocks(static_cast<int>(domain_names.size()), constraints, domain_names, describe);
  if (!clocks) return clocks.error();
  const auto aligned = [&](int pipeline_rank, double us) {
    return on_common_base(pipeline_rank, us) +
           clocks->offset_us[static_cast<std::size_t>(rank_of(pipeline_rank).domain)];
  };
  double origin_us = std::numeric_limits<double>::infinity();
  for (const auto &[key, span] : part_spans)
    origin_us = std::min(origin_us, aligned(span.rank, span.start_us));

  // The trace.
  ImportedRun run;
  Trace &trace = run.trace;
  trace.source = "measured";
  for (const int step : steps)
    for (const auto &rank : ranks) {
      int index = 0;
      for (const auto *action : step_ops[{step, rank.pipeline_rank}])
        appendTraceOp(trace.ops, rank.pipeline_rank, step, index++, action->action.op,
                      aligned(rank.pipeline_rank, action->start_us) - origin_us,
                      aligned(rank.pipeline_rank, action->end_us) - origin_us);
    }
  for (const auto &d : dependencies) {
    if (!d.send) continue;
    const double start = aligned(d.producer.rank, d.send->start_us) - origin_us;
    // The trace records when the send was posted, not when the data arrived: the transfer is
    // drawn to the consuming op's start, the latest it can have arrived on the GPU.
    const double end = std::max(start, aligned(d.consumer.rank, d.consumer.start_us) - origin_us);
    trace.transfers.push_back({d.producer.rank, d.consumer.rank, d.producer_stage, d.microbatch,
                               d.gradient, start, end, 0});
  }
  trace.clock_error_us = clocks->error_us;
  for (const auto &rank : ranks)
    trace.devices.push_back(
        "rank " + std::to_string(rank.recording.rank) +
        (rank.recording.host.empty() ? "" : " on " + rank.recording.host) +
        (rank.recording.backend.empty() ? "" : " (" + rank.recording.backend + ")"));

  Plan &plan = trace.plan;
  plan.request.pp = pp;
  plan.request.microbatches = schedule->microbatches();
  plan.request.chunks = chunks;
  plan.mesh.pp = pp;
  if (family) {
    plan.request = *family;
  } else {
    plan.request.name = "custom";
    plan.custom = *schedule;
  }
  if (auto status = checkTraceMatchesSchedule(trace, *schedule); !status)
    return makeError("the steps differ: " + status.error().message);
  // The plan's costs are the run's own median op times, so `compare` shows how far the run is
  // from its ideal schedule with those op times (no slowdown between ranks fitted into them).
  auto current = planCosts(plan, schedule->placement);
  if (!current) return current.error();
  auto costs = calibrateCosts(*schedule, trace, *current, false);
  if (!costs) return makeError("cannot derive op times from the run: " + costs.error().message);
  plan.costs = *costs;

  // Metrics of the median step (by makespan), as compare reports it.
  auto step_metrics = traceStepMetrics(trace);
  std::sort(
      step_metrics.begin(), step_metrics.end(),
      [](const StepMetrics &a, const StepMetrics &b) { return a.makespan_us < b.makespan_us; });
  const StepMetrics &median = step_metrics[step_metrics.size() / 2];
  trace.makespan_us = median.makespan_us;
  trace.bubble_fraction = median.bubble_fraction;
  trace.bubble_ratio = median.bubble_ratio;
  trace.ranks.assign(static_cast<std::size_t>(pp), {});
  for (const auto &op : trace.ops)
    if (op.step == median.step && !(op.overlapped && op.kind == OpKind::FullBackward))
      trace.ranks[static_cast<std::size_t>(op.rank)].busy_us += op.end_us - op.start_us;
  for (auto &r : trace.ranks)
    r.idle_us = trace.makespan_us - r.busy_us;

  // What the summary and the origin block say.
  ImportSummary &summary = run.summary;
  summary.format = megatron ? "megatron" : "torch";
  summary.pp = pp;
  summary.microbatches = schedule->microbatches();
  summary.virtual_stages = chunks;
  summary.placement = placement_name;
  summary.schedule = scheduleJson(family, *schedule);
  summary.steps = steps;
  summary.ops = trace.ops.size();
  summary.actions = action_count;
  summary.timing = gpu ? "gpu" : "cpu";
  summary.clock_error_us = clocks->error_us;
  summary.hosts = static_cast<int>(domain_names.size());

  json files = json::array(), rank_blocks = json::array();
  for (const auto &rank : ranks) {
    files.push_back(rank.recording.path);
    json block{{"file", rank.recording.path},
               {"rank", rank.recording.rank},
               {"pipeline_rank", rank.pipeline_rank},
               {"stages", std::vector<int>(rank.stages.begin(), rank.stages.end())}};
    if (!megatron) {
      block["host"] = rank.recording.host;
      block["clock_offset_us"] = clocks->offset_us[static_cast<std::size_t>(rank.domain)];
    }
    rank_blocks.push_back(std::move(block));
  }
  run.origin = {
      {"tool", megatron ? "Megatron-LM PP timers" : "PyTorch profiler (Kineto)"},
      {"version", nullptr},
      {"format", summary.format},
      {"files", std::move(files)},
      {"ranks", std::move(rank_blocks)},
      {"steps", steps},
      {"schedule", summary.schedule},
      {"timing", megatron ? "timer start/end (milliseconds) per forward and backward"
                 : gpu    ? "gpu_user_annotation spans (device time)"
                          : "user_annotation spans on the CPU (they include waiting for inputs)"},
      {"clock",
       {{"hosts", summary.hosts},
        {"error_us", clocks->error_us},
        {"method", summary.hosts > 1 ? "offsets per host from send/receive pairs (a receive "
                                       "cannot complete before its send started)"
                                     : "one shared clock"}}},
      {"transfers",
       megatron || labels ? "none recorded" : "from each send's start to the consuming op's start"},
      {"costs", "the run's median op times per stage"}};
  if (!megatron) {
    const auto &backend = ranks.front().recording.backend;
    if (!backend.empty()) run.origin["backend"] = backend;
  }
  return run;
}

Result<ImportedRun> importRun(const std::vector<std::string> &paths, const ImportOptions &options) {
  auto files = expandPaths(paths, options.format);
  if (!files) return files.error();
  RunFormat format = options.format;
  if (format == RunFormat::Auto)
    format = std::all_of(files->begin(), files->end(),
                         [](const std::string &f) { return isMegatronName(baseName(f)); })
                 ? RunFormat::Megatron
                 : RunFormat::Torch;
  std::size_t total = 0, done = 0;
  for (const auto &file : *files) {
    std::error_code error;
    const auto size = std::filesystem::file_size(file, error);
    if (!error) total += size;
  }
  const auto cancelled = [&options] { return options.cancelled && options.cancelled(); };
  std::vector<RankRecording> recordings;
  for (const auto &file : *files) {
    if (cancelled()) return makeError(kImportCancelled);
    auto recording = format == RunFormat::Megatron ? readMegatronTimers(file)
                                                   : readTorchFile(file, [&](std::size_t bytes) {
                                                       if (options.progress)
                                                         options.progress(done + bytes, total);
                                                       return !cancelled();
                                                     });
    if (!recording) return recording.error();
    std::error_code error;
    const auto size = std::filesystem::file_size(file, error);
    done += error ? 0 : size;
    if (options.progress) options.progress(done, total);
    recordings.push_back(std::move(*recording));
  }
  if (cancelled()) return makeError(kImportCancelled);
  auto run = importRecordings(std::move(recordings), options);
  if (!run) return run.error();
  run->origin["files"] = *files;
  return run;
}

Status saveImportedRun(const std::string &path, const ImportedRun &run) {
  return saveTrace(path, run.trace, json{{"origin", run.origin}});
}

json importSummaryJson(const ImportSummary &summary) {
  return {{"format", summary.format},
          {"pp", summary.pp},
          {"microbatches", summary.microbatches},
          {"virtual_stages", summary.virtual_stages},
          {"placement", summary.placement},
          {"schedule", summary.schedule},
          {"steps", summary.steps},
          {"ops", summary.ops},
          {"actions", summary.actions},
          {"timing", summary.timing},
          {"hosts", summary.hosts},
          {"clock_error_us", summary.clock_error_us}};
}

} // namespace pipescope
