// Real runs imported (engine/run_import.h) from the real PyTorch traces in tests/data/torch_runs
// (torch 2.15.0, CPU, gloo; see its README): every action found, P, M, V, placement and the
// family inferred, op times equal to the trace's spans, dependencies within the clock bound
// (also across hosts), calibration reproducing the op times, and Megatron-LM timer dumps
// round-tripping. The expectations are read from the traces themselves (parsed here as whole
// documents, independently of the streaming reader) and from each run's run.json.
#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/calibration.h"
#include "engine/json_io.h"
#include "engine/run_import.h"
#include "engine/trace_file.h"

using namespace pipescope;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kRuns = PIPESCOPE_TORCH_RUNS;

json readJson(const std::string &path) {
  auto text = readTextFile(path);
  if (!text) qFatal("%s", text.error().message.c_str());
  return json::parse(*text);
}

std::vector<std::string> rankFiles(const std::string &run) {
  std::vector<std::string> files;
  for (const auto &entry : fs::directory_iterator(kRuns + "/" + run))
    if (entry.path().filename().string().find("_trace.json") != std::string::npos)
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The runs whose schedules label their actions (1f1b and no-pipeline are refused: test_cli_import).
std::vector<std::string> labelledRuns() {
  return {"gpipe-p2-m4",
          "gpipe-p4-m4",
          "interleaved-1f1b-p2-m4",
          "interleaved-1f1b-p4-m4",
          "looped-bfs-p2-m4",
          "interleaved-zb-p2-m4",
          "zb-v-p2-m4",
          "dualpipev-p2-m4",
          "dualpipev-p4-m8"};
}

ImportedRun importOrDie(const std::vector<std::string> &paths) {
  auto run = importRun(paths);
  if (!run) qFatal("%s", run.error().message.c_str());
  return std::move(*run);
}

bool isActionName(const std::string &name) {
  return name.starts_with("PP:") || name.starts_with("Forward ") || name.starts_with("Backward ");
}

// Each annotation span of a rank's trace, keyed by (ProfilerStep number, name): its duration.
std::map<std::pair<int, std::string>, double> actionSpans(const json &trace) {
  std::vector<std::tuple<double, double, int>> steps;
  for (const auto &e : trace["traceEvents"])
    if (e.value("cat", "") == "user_annotation" && e.value("name", "").starts_with("ProfilerStep#"))
      steps.emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>(),
                         std::stoi(e["name"].get<std::string>().substr(13)));
  std::map<std::pair<int, std::string>, double> spans;
  for (const auto &e : trace["traceEvents"]) {
    if (e.value("cat", "") != "user_annotation" || !isActionName(e.value("name", ""))) continue;
    const double ts = e["ts"].get<double>();
    for (const auto &[start, end, number] : steps)
      if (ts >= start && ts <= end) spans[{number, e["name"].get<std::string>()}] = e["dur"];
  }
  return spans;
}

double medianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The consumer of a transfer: the op on its receiving rank that uses it, in the step of the op
// that produced it (the latest producer before the send).
const TraceOp *consumerOf(const Trace &trace, const TraceTransfer &t) {
  const TraceOp *producer = nullptr;
  for (const auto &op : trace.ops)
    if (op.rank == t.from_rank && op.stage == t.stage && op.microbatch == t.microbatch &&
        (op.kind == OpKind::Forward) != t.gradient && op.kind != OpKind::WeightGrad &&
        op.start_us <= t.start_us && (!producer || op.start_us > producer->start_us))
      producer = &op;
  if (!producer) return nullptr;
  const int stage = t.gradient ? t.stage - 1 : t.stage + 1; // stages are numbered along the route
  for (const auto &op : trace.ops)
    if (op.rank == t.to_rank && op.step == producer->step && op.stage == stage &&
        op.microbatch == t.microbatch && (op.kind == OpKind::Forward) != t.gradient &&
        op.kind != OpKind::WeightGrad)
      return &op;
  return nullptr;
}

void writeText(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

} // namespace

class TestRunImport : public QObject {
  Q_OBJECT

private slots:
  void everyActionOfEveryRankFound_data() {
    QTest::addColumn<QString>("run");
    for (const auto &run : labelledRuns())
      QTest::newRow(run.c_str()) << QString::fromStdString(run);
  }
  void everyActionOfEveryRankFound() {
    QFETCH(QString, run);
    std::size_t total = 0;
    for (const auto &path : rankFiles(run.toStdString())) {
      const json trace = readJson(path);
      std::size_t expected = 0;
      for (const auto &e : trace["traceEvents"])
        if (e.value("ph", "") == "X" && e.value("cat", "") == "user_annotation" &&
            isActionName(e.value("name", "")))
          ++expected;
      QVERIFY(expected > 0);
      auto file = InputFile::open(path);
      QVERIFY(file.ok());
      std::istream input(file->get());
      auto recording = readKinetoTrace(input, path);
      QVERIFY2(recording.ok(), recording.ok() ? "" : recording.error().message.c_str());
      QCOMPARE(recording->cpu_compute.size() + recording->communication.size(), expected);
      QCOMPARE(recording->rank, trace["distributedInfo"]["rank"].get<int>());
      QCOMPARE(recording->world_size, trace["distributedInfo"]["world_size"].get<int>());
      QCOMPARE(recording->host, trace["host_name"].get<std::string>());
      QCOMPARE(recording->steps.size(), std::size_t{2});
      total += expected;
    }
    const ImportedRun imported = importOrDie({kRuns + "/" + run.toStdString()});
    QCOMPARE(imported.summary.actions, total);
  }

  void scheduleInferred_data() { everyActionOfEveryRankFound_data(); }
  void scheduleInferred() {
    QFETCH(QString, run);
    const json info = readJson(kRuns + "/" + run.toStdString() + "/run.json");
    const ImportedRun imported = importOrDie({kRuns + "/" + run.toStdString()});
    const ImportSummary &s = imported.summary;
    QCOMPARE(s.pp, info["pp"].get<int>());
    QCOMPARE(s.microbatches, info["microbatches"].get<int>());
    QCOMPARE(s.virtual_stages, info["virtual_stages"].get<int>());
    QCOMPARE(s.placement, info["placement"].get<std::string>());
    QCOMPARE(s.steps, (std::vector<int>{2, 3}));
    QCOMPARE(s.timing, std::string("cpu"));
    QCOMPARE(s.hosts, 1);
    QCOMPARE(s.clock_error_us, 0.0);
    // The family when pipescope generates PyTorch's per-rank order for it (interleaved 1F1B at
    // M = P included: Megatron-LM's order there is PyTorch's since November 2024); custom for any
    // family this engine does not generate.
    const std::string family = info["schedule"];
    const std::string expected = findScheduleFamily(family) ? family : std::string("custom");
    QCOMPARE(s.schedule["name"].get<std::string>(), expected);
    if (expected != "custom") {
      QCOMPARE(s.schedule["pp"].get<int>(), s.pp);
      QCOMPARE(s.schedule["microbatches"].get<int>(), s.microbatches);
      QCOMPARE(imported.trace.plan.request.name, expected);
    } else {
      QVERIFY(imported.trace.plan.custom.has_value());
    }
    // Every compute action of the profiled steps is an op record (an overlapped pair two).
    std::size_t records = 0;
    for (const auto &path : rankFiles(run.toStdString()))
      for (const auto &[step_and_name, duration] : actionSpans(readJson(path))) {
        const std::string &name = step_and_name.second;
        const auto action =
            name.starts_with("PP:") ? parsePytorchAction(name.substr(3)) : PytorchAction{};
        QVERIFY(action.has_value());
        if (action->type == PytorchActionType::Compute)
          records += action->op.kind == OpKind::OverlappedPair ? 2 : 1;
      }
    QCOMPARE(s.ops, records);
    QCOMPARE(imported.trace.ops.size(), records);
  }

  void opDurationsEqualTheSpans_data() { everyActionOfEveryRankFound_data(); }
  void opDurationsEqualTheSpans() {
    QFETCH(QString, run);
    const ImportedRun imported = importOrDie({kRuns + "/" + run.toStdString()});
    std::map<int, std::map<std::pair<int, std::string>, double>> spans; // by pipeline rank
    for (const auto &block : imported.origin["ranks"])
      spans[block["pipeline_rank"].get<int>()] = actionSpans(readJson(block["file"]));
    const auto &ops = imported.trace.ops;
    const bool labels = run.startsWith(QStringLiteral("gpipe"));
    int checked = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const TraceOp &op = ops[i];
      std::string name;
      if (op.overlapped && op.kind == OpKind::FullBackward) continue; // checked with its pair
      if (op.overlapped)
        name = "PP:" + formatOp(overlappedOp(op.stage, op.microbatch, ops[i + 1].stage,
                                             ops[i + 1].microbatch));
      else if (labels)
        name =
            (op.kind == OpKind::Forward ? "Forward " : "Backward ") + std::to_string(op.microbatch);
      else
        name = "PP:" + formatOp(Op{op.stage, op.microbatch, -1, -1, op.kind});
      const auto &rank = spans[op.rank];
      const auto it = rank.find({op.step, name});
      QVERIFY2(it != rank.end(), name.c_str());
      QVERIFY(std::abs((op.end_us - op.start_us) - it->second) <= 1e-6 * it->second + 1e-6);
      ++checked;
    }
    QVERIFY(checked > 0);
  }

  void dependenciesHoldWithinTheClockBound_data() { everyActionOfEveryRankFound_data(); }
  void dependenciesHoldWithinTheClockBound() {
    QFETCH(QString, run);
    const ImportedRun imported = importOrDie({kRuns + "/" + run.toStdString()});
    const Trace &trace = imported.trace;
    if (!run.startsWith(QStringLiteral("gpipe"))) QVERIFY(!trace.transfers.empty());
    for (const auto &t : trace.transfers) {
      const TraceOp *consumer = consumerOf(trace, t);
      QVERIFY(consumer);
      QVERIFY(t.start_us <= consumer->end_us + trace.clock_error_us + 1e-6);
    }
  }

  // Rank 1 of a run moved to another host whose clock runs 5 s ahead: the import aligns it from
  // the send/receive pairs, reports a bound that holds the true offset, and every dependency
  // holds within it.
  void clocksAlignedAcrossHosts() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const double skew_us = 5e6;
    for (const auto &path : rankFiles("zb-v-p2-m4")) {
      json trace = readJson(path);
      if (trace["distributedInfo"]["rank"] == 1) {
        trace["host_name"] = "other-host";
        for (auto &e : trace["traceEvents"])
          if (e.contains("ts")) e["ts"] = e["ts"].get<double>() + skew_us;
      }
      writeText(dir.filePath(QString::fromStdString(fs::path(path).stem().string())).toStdString(),
                trace.dump());
    }
    const ImportedRun imported = importOrDie({dir.path().toStdString()});
    const Trace &trace = imported.trace;
    QCOMPARE(imported.summary.hosts, 2);
    QVERIFY(trace.clock_error_us > 0);
    QVERIFY(trace.clock_error_us < 0.05 * skew_us);
    const double offset = imported.origin["ranks"][1]["clock_offset_us"];
    QVERIFY(std::abs(offset + skew_us) <= trace.clock_error_us + 1e-6);
    for (const auto &t : trace.transfers) {
      const TraceOp *consumer = consumerOf(trace, t);
      QVERIFY(consumer);
      QVERIFY(t.start_us <= consumer->end_us + trace.clock_error_us + 1e-6);
    }
    // The op times do not change with the alignment.
    const ImportedRun same_host = importOrDie({kRuns + "/zb-v-p2-m4"});
    QCOMPARE(trace.ops.size(), same_host.trace.ops.size());
    for (std::size_t i = 0; i < trace.ops.size(); ++i)
      QVERIFY(std::abs((trace.ops[i].end_us - trace.ops[i].start_us) -
                       (same_host.trace.ops[i].end_us - same_host.trace.ops[i].start_us)) < 1e-3);
  }

  // On GPUs Kineto also records each PP:<action> as a gpu_user_annotation span on the device's
  // stream (no GPU run is committed: the spans are added here to a real CPU trace, each compute
  // action's device span the second half of its CPU span, after any wait for its input). Those
  // spans then time the ops.
  void gpuSpansTimeTheOps() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    std::map<std::pair<int, std::string>, double> device_durations; // (rank, name) per step 2
    for (const auto &path : rankFiles("interleaved-1f1b-p2-m4")) {
      json trace = readJson(path);
      const int rank = trace["distributedInfo"]["rank"];
      json added = json::array();
      for (const auto &e : trace["traceEvents"]) {
        const std::string name = e.value("name", "");
        const auto action = name.starts_with("PP:") ? parsePytorchAction(name.substr(3))
                                                    : std::optional<PytorchAction>();
        if (e.value("cat", "") != "user_annotation" || !action ||
            action->type != PytorchActionType::Compute)
          continue;
        json device = e;
        device["cat"] = "gpu_user_annotation";
        device["pid"] = 0;
        device["tid"] = 7;
        device["ts"] = e["ts"].get<double>() + 0.5 * e["dur"].get<double>();
        device["dur"] = 0.5 * e["dur"].get<double>();
        device_durations[{rank, name}] = device["dur"]; // the last step's (step 3)
        added.push_back(std::move(device));
      }
      for (auto &e : added)
        trace["traceEvents"].push_back(std::move(e));
      writeText(dir.filePath(QString::fromStdString(fs::path(path).stem().string())).toStdString(),
                trace.dump());
    }
    ImportOptions last_step;
    last_step.step = 3;
    auto imported = importRun({dir.path().toStdString()}, last_step);
    QVERIFY2(imported.ok(), imported.ok() ? "" : imported.error().message.c_str());
    QCOMPARE(imported->summary.timing, std::string("gpu"));
    QCOMPARE(imported->origin["timing"].get<std::string>(),
             std::string("gpu_user_annotation spans (device time)"));
    for (const auto &op : imported->trace.ops) {
      const std::string name = "PP:" + formatOp(Op{op.stage, op.microbatch, -1, -1, op.kind});
      const double expected = device_durations.at({op.rank, name});
      QVERIFY(std::abs((op.end_us - op.start_us) - expected) <= 1e-6 * expected + 1e-6);
    }
  }

  // The plan stored with an imported trace predicts each stage's op times as the run's medians,
  // and calibration without the slowdown fit refits to the same (these runs share two cores, so
  // compare's calibration also fits how they slow each other down, and its per-stage times are
  // then the steady state's).
  void calibrationReproducesTheOpTimes_data() {
    QTest::addColumn<QString>("run");
    for (const char *run :
         {"gpipe-p4-m4", "interleaved-1f1b-p2-m4", "zb-v-p2-m4", "interleaved-zb-p2-m4"})
      QTest::newRow(run) << QString::fromLatin1(run);
  }
  void calibrationReproducesTheOpTimes() {
    QFETCH(QString, run);
    const ImportedRun imported = importOrDie({kRuns + "/" + run.toStdString()});
    const Trace &measured = imported.trace;
    std::map<std::pair<int, OpKind>, std::vector<double>> durations;
    for (const auto &op : measured.ops)
      durations[{op.stage, op.kind}].push_back(op.end_us - op.start_us);
    auto evaluation = evaluatePlan(measured.plan);
    QVERIFY2(evaluation.ok(), evaluation.ok() ? "" : evaluation.error().message.c_str());
    const Trace predicted = traceFromEvaluation(measured.plan, *evaluation);
    for (const auto &op : predicted.ops) {
      const double expected = medianOf(durations[{op.stage, op.kind}]);
      QVERIFY(std::abs((op.end_us - op.start_us) - expected) <= 1e-6 * expected + 1e-6);
    }
    auto costs = planCosts(measured.plan, evaluation->schedule.placement);
    QVERIFY(costs.ok());
    auto refit = calibrateCosts(evaluation->schedule, measured, *costs, false);
    QVERIFY(refit.ok());
    QVERIFY(refit->concurrency_slowdown.empty());
    for (std::size_t s = 0; s < refit->stage_overrides.size(); ++s)
      QVERIFY(std::abs(refit->stage_overrides[s].forward_us -
                       medianOf(durations[{static_cast<int>(s), OpKind::Forward}])) < 1e-6);
  }

  // Cancel (the explorer's button) stops the import with an error saying so, before the next file
  // and inside one; progress reaches the total when nothing cancels it.
  void cancelStopsTheImport() {
    const std::vector<std::string> paths = {kRuns + "/gpipe-p4-m4"};
    ImportOptions options;
    std::size_t last_done = 0, last_total = 0;
    options.progress = [&](std::size_t done, std::size_t total) {
      last_done = done;
      last_total = total;
    };
    QVERIFY(importRun(paths, options).ok());
    QVERIFY(last_total > 0);
    QCOMPARE(last_done, last_total);

    int polls = 0;
    options.cancelled = [&polls] { return ++polls > 2; };
    auto cancelled = importRun(paths, options);
    QVERIFY(!cancelled.ok());
    QCOMPARE(cancelled.error().message, std::string(kImportCancelled));
    QVERIFY(last_done < last_total);

    options.cancelled = [] { return true; };
    auto at_once = importRun(paths, options);
    QVERIFY(!at_once.ok());
    QCOMPARE(at_once.error().message, std::string(kImportCancelled));
  }

  // Inside one file the reader polls every 65,536 events (false: stop): a trace of 140,000 stops at
  // the second poll when that one says so, and reads to its end when none does.
  void cancelStopsInsideAFile() {
    std::string text = R"({"traceEvents":[)";
    for (int i = 0; i < 140000; ++i)
      text += (i ? "," : "") + std::string(R"({"ph":"X","cat":"cpu_op","name":"aten::mm","ts":)") +
              std::to_string(i) + R"(,"dur":1})";
    text += "]}";
    int polls = 0;
    std::istringstream input(text);
    auto stopped = readKinetoTrace(input, "long.json", [&polls] { return ++polls < 2; });
    QVERIFY(!stopped.ok());
    QVERIFY2(stopped.error().message.find(kImportCancelled) != std::string::npos,
             stopped.error().message.c_str());
    QCOMPARE(polls, 2);
    std::istringstream again(text);
    auto read = readKinetoTrace(again, "long.json", [] { return true; });
    QVERIFY(read.ok());
    QCOMPARE(read->events, std::size_t{140000});
  }

  // What an imported trace is written as loads back equal, and exports to Chrome trace events.
  void savedTraceLoadsBackAndExports() {
    QTemporaryDir dir;
    const ImportedRun imported = importOrDie({kRuns + "/dualpipev-p2-m4"});
    const std::string path = dir.filePath(QStringLiteral("measured.json.gz")).toStdString();
    QVERIFY(saveImportedRun(path, imported).ok());
    auto loaded = loadTraceDocument(path);
    QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().message.c_str());
    QCOMPARE(loaded->trace.source, std::string("measured"));
    QCOMPARE(loaded->trace.ops.size(), imported.trace.ops.size());
    QCOMPARE(loaded->rest["origin"]["tool"].get<std::string>(),
             std::string("PyTorch profiler (Kineto)"));
    QCOMPARE(loaded->rest["origin"]["files"].size(), std::size_t{2});
    std::size_t overlapped = 0;
    for (const auto &op : loaded->trace.ops)
      overlapped += op.overlapped ? 1 : 0;
    QVERIFY(overlapped > 0);
    const json chrome = chromeTrace(loaded->trace);
    std::size_t complete = 0;
    for (const auto &e : chrome["traceEvents"])
      complete += e["ph"] == "X" ? 1 : 0;
    QCOMPARE(complete, loaded->trace.ops.size() + loaded->trace.transfers.size());
  }

  // A run written as Megatron-LM's PP timer dumps (names and keys as the PP timeline tool reads
  // them, times in milliseconds) imports back to the same ops, stages and family.
  void megatronDumpsRoundTrip_data() {
    QTest::addColumn<QString>("run");
    QTest::newRow("V=1") << QStringLiteral("gpipe-p4-m4");
    QTest::newRow("V=2") << QStringLiteral("interleaved-1f1b-p2-m4");
  }
  void megatronDumpsRoundTrip() {
    QFETCH(QString, run);
    ImportOptions one_step;
    one_step.step = 3;
    auto source = importRun({kRuns + "/" + run.toStdString()}, one_step);
    QVERIFY(source.ok());
    const Trace &trace = source->trace;
    const int pp = source->summary.pp, chunks = source->summary.virtual_stages;
    QTemporaryDir dir;
    for (int r = 0; r < pp; ++r) {
      json dump = json::object();
      for (const auto &op : trace.ops) {
        if (op.rank != r) continue;
        const std::string key = std::string(op.kind == OpKind::Forward ? "forward-" : "backward-") +
                                (chunks > 1 ? std::to_string(op.stage / pp) + "-" : "") +
                                std::to_string(op.microbatch);
        dump[key + "-start"] = op.start_us / 1000;
        dump[key + "-end"] = op.end_us / 1000;
      }
      dump["iteration-time"] = 1.0; // other timers are not ops
      const std::string name = "event_times_PP" + std::to_string(pp) + "_VPP" +
                               std::to_string(chunks) + "_TPxCPxDP_rank_0_pp_rank_" +
                               std::to_string(r) + "_rank_" + std::to_string(r) + ".json";
      writeText(dir.filePath(QString::fromStdString(name)).toStdString(), dump.dump());
      // A replica's file beside it: the import takes replica 0's pipeline, as the tool does.
      writeText(
          dir.filePath(QString::fromStdString("event_times_PP" + std::to_string(pp) + "_VPP" +
                                              std::to_string(chunks) + "_TPxCPxDP_rank_1_pp_rank_" +
                                              std::to_string(r) + "_rank_9.json"))
              .toStdString(),
          "{}");
    }
    const ImportedRun back = importOrDie({dir.path().toStdString()});
    QCOMPARE(back.summary.format, std::string("megatron"));
    QCOMPARE(back.summary.pp, pp);
    QCOMPARE(back.summary.virtual_stages, chunks);
    QCOMPARE(back.summary.microbatches, source->summary.microbatches);
    QCOMPARE(back.summary.schedule, source->summary.schedule);
    QCOMPARE(back.trace.ops.size(), trace.ops.size());
    for (std::size_t i = 0; i < trace.ops.size(); ++i) {
      const TraceOp &a = trace.ops[i], &b = back.trace.ops[i];
      QCOMPARE(std::tuple(a.rank, a.kind, a.stage, a.microbatch, a.index),
               std::tuple(b.rank, b.kind, b.stage, b.microbatch, b.index));
      QVERIFY(std::abs(a.start_us - b.start_us) < 1e-6 && std::abs(a.end_us - b.end_us) < 1e-6);
    }
  }

  void megatronNamesMustSayTheRanks() {
    QTemporaryDir dir;
    const std::string path = dir.filePath(QStringLiteral("timers.json")).toStdString();
    writeText(path, R"({"forward-0-start": 1, "forward-0-end": 2})");
    auto recording = readMegatronTimers(path);
    QVERIFY(!recording.ok());
    QVERIFY(recording.error().message.find("pp_rank_{p}") != std::string::npos);
    const std::string named =
        dir.filePath(QStringLiteral("event_times_PP2_VPP1_TPxCPxDP_rank_0_pp_rank_0_rank_0.json"))
            .toStdString();
    writeText(named, R"({"forward-0-start": 1})");
    recording = readMegatronTimers(named);
    QVERIFY(!recording.ok());
    QVERIFY(recording.error().message.find("/forward-0-end: missing") != std::string::npos);
  }

  void actionGrammar() {
    const auto send = parsePytorchAction("3SEND_F1");
    QVERIFY(send && send->type == PytorchActionType::SendForward && send->stage == 3 &&
            send->microbatch == 1);
    const auto wait = parsePytorchAction("2WAIT_SEND_B0");
    QVERIFY(wait && wait->type == PytorchActionType::WaitSendBackward);
    const auto unshard = parsePytorchAction("0UNSHARD");
    QVERIFY(unshard && unshard->type == PytorchActionType::Unshard && unshard->microbatch == -1);
    const auto reduce = parsePytorchAction("0WAIT_REDUCE_GRAD");
    QVERIFY(reduce && reduce->type == PytorchActionType::WaitReduceGradient);
    const auto pair = parsePytorchAction("(0F7;7B3)OVERLAP_F_B");
    QVERIFY(pair && pair->type == PytorchActionType::Compute &&
            pair->op == overlappedOp(0, 7, 7, 3));
    QVERIFY(!parsePytorchAction("3SEND_X1"));
    QVERIFY(!parsePytorchAction("SEND_F1"));
    QVERIFY(!parsePytorchAction("1RECV_B-2"));
  }
};

QTEST_GUILESS_MAIN(TestRunImport)
#include "test_run_import.moc"
