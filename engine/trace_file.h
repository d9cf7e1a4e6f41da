#pragma once
// Traces (DESIGN.md §6): per-op and per-transfer records of one step, simulated or measured,
// with the plan they came from and their metrics; and the Chrome trace-event export.
#include <cstddef>
#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/evaluation.h"
#include "engine/json_io.h"
#include "engine/plan_file.h"

namespace pipescope {

/// One compute record. An overlapped F&B pair is recorded as its two parts with the same start
/// and end, each marked `overlapped`.
struct TraceOp {
  int rank = 0;
  int step = 0;  ///< training step (0 for a simulation)
  int index = 0; ///< position in the rank's op list
  OpKind kind = OpKind::Forward;
  int stage = 0;
  int microbatch = 0;
  double start_us = 0;
  double end_us = 0;
  int lane = 0; ///< 0 = compute
  bool overlapped = false;

  friend bool operator==(const TraceOp &, const TraceOp &) = default;
};

struct TraceTransfer {
  int from_rank = 0;
  int to_rank = 0;
  int stage = 0; ///< producing stage
  int microbatch = 0;
  bool gradient = false;
  double start_us = 0;
  double end_us = 0;
  double bytes = 0;
};

struct TraceRank {
  double busy_us = 0, idle_us = 0;
  int peak_inflight = 0;
  double peak_inflight_microbatches = 0;
};

struct Trace {
  std::string source = "simulated"; ///< "simulated" or "measured"
  Plan plan;
  std::vector<TraceOp> ops;
  std::vector<TraceTransfer> transfers;
  double makespan_us = 0, bubble_fraction = 0, bubble_ratio = 0;
  std::vector<TraceRank> ranks;
  std::vector<std::string> devices; ///< measured traces: one description per rank
  double clock_error_us = 0;        ///< measured traces: clock alignment error bound
  /// Per rank in-flight activation counter (from the simulator's memory timeline), if any.
  std::vector<std::vector<MemoryPoint>> memory;
};

/// Appends the record(s) of one executed op: one, or for an overlapped F&B pair its two parts
/// with the same start and end, each marked `overlapped`.
void appendTraceOp(std::vector<TraceOp> &ops, int rank, int step, int index, const Op &op,
                   double start_us, double end_us);

/// The simulated trace of an evaluated plan.
Trace traceFromEvaluation(const Plan &plan, const Evaluation &evaluation);

/// Where the streaming writers send their text, piece by piece (an OutputFile, a string...).
using TextSink = std::function<void(std::string_view)>;

/// The trace file's JSON, written record by record (one op or transfer per line), so a trace of
/// millions of ops never exists as one JSON document. `extra_fields` (an object) adds top-level
/// keys, such as the backend's "backend" block.
void streamTrace(const TextSink &write, const Trace &trace,
                 const nlohmann::json &extra_fields = nullptr);
/// The same text as streamTrace(write, traceFromEvaluation(plan, evaluation)), without the copy.
void streamSimulatedTrace(const TextSink &write, const Plan &plan, const Evaluation &evaluation);

/// Most records the trace readers take in each of `ops` and `comms`: one step of the largest
/// schedule pipescope simulates (kMaxScheduleOps), each op as two records in case all are
/// overlapped pairs. At sizeof(TraceOp) = sizeof(TraceTransfer) = 48 bytes that is 3 GiB of
/// records per array, the most a trace pipescope wrote can need.
inline constexpr std::size_t kMaxTraceRecords = 2 * kMaxScheduleOps;
/// Largest trace file read: kMaxTraceRecords records at 128 bytes each (pipescope writes about
/// 110 to 190 per op or comm record, compact or indented). The reader streams, so this bounds the
/// reading time (about a minute per 4 GiB), not the memory.
inline constexpr std::size_t kMaxTraceBytes = kMaxTraceRecords * 128;

/// What the streaming trace reader accepts; tests lower them. `json.max_values` caps only what is
/// built as a document at once (everything but the op and comm records, and the record being
/// read); the records are capped by `max_records` per array.
struct TraceReadLimits {
  JsonLimits json{kMaxTraceBytes, kMaxJsonDepth, kMaxJsonValues};
  std::size_t max_records = kMaxTraceRecords;
};

/// A trace read from a file, and the rest of its document (everything but `ops` and `comms`),
/// for readers of other fields (pipescope-backend's `backend` block).
struct TraceDocument {
  Trace trace;
  nlohmann::json rest;
};

/// Reads a pipescope.trace from a stream in memory bounded by its records (about 48 bytes per op
/// and per comm record), not by a document: `ops` and `comms` are decoded record by record while
/// parsing. Same checks and messages as traceFromJson. Any std::istream (a decompressing one too).
/// Measured (Release, x86-64, glibc; interleaved-1f1b P=64 M=1024 V=8: 1,048,576 ops and
/// 1,046,528 comms, 357 MB indented): parse into a document then convert, 6.3 s and 2.42 GB peak
/// RSS; this reader, 3.3 s and 126 MB (about 60 bytes per record, the vectors and their growth).
/// `pipescope compare` on that file: 6.3 s, 2.45 GB before; 3.8 s, 535 MB after (its own
/// re-simulation is most of that).
Result<TraceDocument> readTraceDocument(std::istream &input, const TraceReadLimits &limits = {});
/// readTraceDocument on a file, opened as readTextFile opens files; errors start with the path.
Result<TraceDocument> loadTraceDocument(const std::string &path,
                                        const TraceReadLimits &limits = {});

/// Chrome trace-event JSON: pid = rank, tid = lane, complete ("X") events, flow arrows from each
/// send to its recv, counter tracks for in-flight activations. Perfetto and chrome://tracing
/// open it (also gzipped).
void streamChromeTrace(const TextSink &write, const Trace &trace);
/// The same text as streamChromeTrace(write, traceFromEvaluation(plan, evaluation)).
void streamSimulatedChromeTrace(const TextSink &write, const Plan &plan,
                                const Evaluation &evaluation);

/// The streamed text parsed back: for small traces and tests.
nlohmann::json traceToJson(const Trace &trace);
nlohmann::json chromeTrace(const Trace &trace);

Result<Trace> traceFromJson(const nlohmann::json &json);
/// Reads a trace file, gzipped or not.
Result<Trace> loadTrace(const std::string &path);
/// Writes through OutputFile (atomic for regular files, gzip for names ending in .gz).
Status saveTrace(const std::string &path, const Trace &trace,
                 const nlohmann::json &extra_fields = nullptr);
Status saveChromeTrace(const std::string &path, const Trace &trace);

} // namespace pipescope
