// The run protocol (engine/run_events.h): its writer and reader are inverses for every event and
// for the op record (overlapped pairs, lanes, the measured steps and indices included), trace files
// carry the same op record, and the reader refuses every bad line with a message naming the field.
#include <QtTest>

#include <sstream>

#include "engine/run_events.h"

using namespace pipescope;
using nlohmann::json;

namespace {

// Values that a careless writer would lose: fractions that need every digit, big and tiny
// magnitudes, texts with quotes, backslashes, control characters and non-ASCII letters.
constexpr double kAwkward = 0.1 + 0.2;

std::vector<TraceOp> sampleOps() {
  return {
      {0, 0, 0, OpKind::Forward, 0, 0, 0.0, 1.25, 0, false},
      {1, 3, 7, OpKind::InputGrad, 5, 11, kAwkward, 1e9 + 0.5, 0, false},
      {2, 4, 2, OpKind::WeightGrad, 3, 1, 12.0, 12.0, 2, false}, // a zero-length op on lane 2
      // An overlapped F&B pair: two records, same start and end, both marked.
      {3, 1, 9, OpKind::Forward, 3, 6, 100.5, 140.75, 0, true},
      {3, 1, 9, OpKind::FullBackward, 4, 2, 100.5, 140.75, 0, true},
      {65535, 1 << 20, 123456, OpKind::FullBackward, 1000, 4000000, 1e-7, 9e14, 65536, false},
  };
}

std::vector<RunEvent> sampleEvents() {
  StartEvent start;
  start.device = "cuda";
  start.launch = "srun";
  start.channel = "mpi";
  start.world_size = 64;
  start.plan_path = "/runs/plan \"A\"\\ünï.json";
  start.schedule = "dualpipev";
  start.pp = 8;
  start.microbatches = 32;
  start.virtual_stages = 2;
  start.mesh_dp = 4;
  start.mesh_tp = 2;
  start.mesh_pp = 8;
  start.warmup_steps = 2;
  start.measured_steps = 5;
  start.workload = {{"expected_time_factor", kAwkward}, {"stages", json::array({1, 2})}};
  start.simulated = {1234.5, kAwkward, 0.4285714285714286};

  StepEvent step;
  step.step = 3;
  step.of = 5;
  step.metrics = RunMetrics{4321.125, -0.25, -0.2}; // a pair's parts both count as busy
  step.gradient_sync_us = 17.5;
  step.busy_us = {1.5, kAwkward, 0};
  step.clock_error_us = 0.75;
  step.ops = sampleOps();

  StepEvent ops_only; // a step line without metrics
  ops_only.step = 0;
  ops_only.ops = {sampleOps()[3], sampleOps()[4]};

  DoneEvent done;
  done.trace_path = "measured.json.gz";
  done.steps = 5;
  done.measured = {4000, 0.3, kAwkward};
  done.simulated = {3900, 0.25, 0.33};
  done.expected_makespan_us = 3900 * 1.5;
  done.calibrated = RunMetrics{3990, 0.29, 0.41};
  done.clock_error_us = 2.5;
  done.mean_op_us = 12.25;
  done.throughput = {{"tflops", 1.5}, {"tflops_by_kind", {{"F", 2.0}}}};
  done.timing_overhead_fraction = 0.004;
  DoneEvent uncalibrated = done;
  uncalibrated.calibrated.reset();

  return {CheckEvent{0, "GEMMs and fused kernels against the naive reference", 6.6e-7, true},
          CheckEvent{3, "", 0.5, false},
          start,
          StartEvent{},
          ProgressEvent{"warmup", 1, 2, 1234.5},
          step,
          ops_only,
          WarningEvent{0, "line one\nline \"two\"\t\x01"},
          WarningEvent{},
          ErrorEvent{2, "NCCL timeout", 1},
          ErrorEvent{5, "stopped", -1},
          ErrorEvent{},
          done,
          uncalibrated,
          DoneEvent{}};
}

} // namespace

class TestRunEvents : public QObject {
  Q_OBJECT
private slots:
  void writerAndReaderAreInverses() {
    for (const RunEvent &event : sampleEvents()) {
      const std::string line = runEventLine(event);
      QVERIFY2(line.find('\n') == std::string::npos, line.c_str()); // one line
      auto read = readRunEventLine(line);
      QVERIFY2(read, (line + " -> " + (read ? "" : read.error().message)).c_str());
      QVERIFY2(*read == event, line.c_str());
      QCOMPARE(runEventName(*read), runEventName(event));
      QCOMPARE(json::parse(line)["event"].get<std::string>(), runEventName(event));
      // Reading what was read and writing it again changes nothing.
      QCOMPARE(runEventLine(*read), line);
    }
  }

  void opRecordsRoundTrip() {
    for (const TraceOp &op : sampleOps()) {
      std::string text;
      appendTraceOpRecord(text, op);
      const json record = json::parse(text);
      QCOMPARE(record, traceOpRecord(op));
      QCOMPARE(record.contains("overlapped"), op.overlapped); // written only when set
      auto read = readTraceOpRecord(record, "/ops/0");
      QVERIFY2(read, text.c_str());
      QVERIFY2(*read == op, text.c_str());
    }
    // Absent optional fields keep the caller's defaults (a step line's records take its step).
    TraceOp defaults;
    defaults.step = 4;
    defaults.index = -1;
    auto minimal = readTraceOpRecord(
        json::parse(R"({"rank":1,"kind":"W","stage":2,"microbatch":3,"start_us":1,"end_us":2})"),
        "/ops/0", defaults);
    QVERIFY(minimal);
    QCOMPARE(minimal->step, 4);
    QCOMPARE(minimal->index, -1);
    QCOMPARE(minimal->lane, 0);
    QVERIFY(!minimal->overlapped);
    QCOMPARE(minimal->kind, OpKind::WeightGrad);
  }

  void traceFilesCarryTheSameOpRecords() {
    Trace trace;
    trace.source = "measured";
    trace.plan.request = {"1f1b", 4, 8, 1, 0};
    trace.plan.mesh.pp = 4;
    trace.ops = {sampleOps()[0], sampleOps()[3], sampleOps()[4]};
    trace.ops[1].stage = trace.ops[2].stage = 3;
    trace.ops[1].microbatch = trace.ops[2].microbatch = 1;
    std::string text;
    streamTrace([&](std::string_view piece) { text += piece; }, trace);
    // Each op line of the file is the protocol's record.
    for (const TraceOp &op : trace.ops) {
      std::string record;
      appendTraceOpRecord(record, op);
      QVERIFY2(text.find(record) != std::string::npos, record.c_str());
    }
    std::istringstream input(text);
    auto document = readTraceDocument(input);
    QVERIFY2(document, document ? "" : document.error().message.c_str());
    QVERIFY(document->trace.ops == trace.ops);
  }

  void refusesBadLinesNamingTheField_data() {
    QTest::addColumn<QString>("line");
    QTest::addColumn<QString>("message");
    const auto row = [](const char *name, const char *line, const char *message) {
      QTest::newRow(name) << QString::fromUtf8(line) << QString::fromUtf8(message);
    };
    row("not json", R"({"event":)", "");
    row("not an object", R"([1,2])", "the document: expected an object, got an array");
    row("no event", R"({"step":1})", "/event: missing; expected a string");
    row("event not a string", R"({"event":3})", "/event: expected a string, got an integer");
    row("start without device",
        R"({"event":"start","world_size":2,"warmup_steps":0,)"
        R"("measured_steps":1})",
        "/device: missing");
    row("start world size 0",
        R"({"event":"start","device":"cpu","world_size":0,)"
        R"("warmup_steps":0,"measured_steps":1})",
        "/world_size: expected an integer between 1");
    row("start bad time factor",
        R"({"event":"start","device":"cpu","world_size":1,)"
        R"("warmup_steps":0,"measured_steps":1,)"
        R"("workload":{"expected_time_factor":"big"}})",
        "/workload/expected_time_factor: expected a number, got a string");
    row("start bad mesh",
        R"({"event":"start","device":"cpu","world_size":1,"warmup_steps":0,)"
        R"("measured_steps":1,"mesh":{"dp":0}})",
        "/mesh/dp: expected an integer between 1");
    row("start bad simulated",
        R"({"event":"start","device":"cpu","world_size":1,)"
        R"("warmup_steps":0,"measured_steps":1,"simulated":[]})",
        "/simulated: expected an object, got an array");
    row("progress step text", R"({"event":"progress","phase":"warmup","step":"1"})",
        "/step: expected an integer, got a string");
    row("progress without phase", R"({"event":"progress","step":1})", "/phase: missing");
    row("step without step", R"({"event":"step","ops":[]})", "/step: missing");
    row("step negative", R"({"event":"step","step":-1,"ops":[]})",
        "/step: expected an integer between 0");
    row("step without ops", R"({"event":"step","step":2})", "/ops: missing; expected an array");
    row("step ops not array", R"({"event":"step","step":2,"ops":7})",
        "/ops: expected an array, got an integer");
    row("step half metrics", R"({"event":"step","step":2,"makespan_us":3,"ops":[]})",
        "/bubble_fraction: missing");
    row("step busy text", R"({"event":"step","step":0,"busy_us":[1,"x"],"ops":[]})",
        "/busy_us/1: expected a number between 0");
    row("op kind",
        R"({"event":"step","step":0,"ops":[{"rank":0,"kind":"X","stage":0,)"
        R"("microbatch":0,"start_us":0,"end_us":1}]})",
        "/ops/0/kind: expected one of F, I, W, B, got \"X\"");
    row("op backwards",
        R"({"event":"step","step":0,"ops":[{"rank":0,"kind":"F","stage":0,)"
        R"("microbatch":0,"start_us":3,"end_us":2}]})",
        "/ops/0/end_us: ends before it starts");
    row("op rank",
        R"({"event":"step","step":0,"ops":[{"rank":-1,"kind":"F","stage":0,)"
        R"("microbatch":0,"start_us":0,"end_us":1}]})",
        "/ops/0/rank: expected an integer between 0");
    row("op not object", R"({"event":"step","step":0,"ops":[5]})",
        "/ops/0: expected an object, got an integer");
    row("op lane",
        R"({"event":"step","step":0,"ops":[{"rank":0,"kind":"F","stage":0,)"
        R"("microbatch":0,"start_us":0,"end_us":1,"lane":1.5}]})",
        "/ops/0/lane: expected an integer, got a number (1.5)");
    row("op overlapped",
        R"({"event":"step","step":0,"ops":[{"rank":0,"kind":"F","stage":0,)"
        R"("microbatch":0,"start_us":0,"end_us":1,"overlapped":1}]})",
        "/ops/0/overlapped: expected true or false");
    row("error rank", R"({"event":"error","rank":"x","message":"m"})",
        "/rank: expected an integer, got a string");
    row("error waiting for", R"({"event":"error","rank":1,"waiting_for_rank":-2})",
        "/waiting_for_rank: expected an integer between 0");
    row("warning message", R"({"event":"warning","message":7})",
        "/message: expected a string, got an integer");
    row("check ok", R"({"event":"check","ok":"yes"})", "/ok: expected true or false");
    row("done without trace", R"({"event":"done"})", "/trace: missing; expected a string");
    row("done bad measured",
        R"({"event":"done","trace":"t","measured":{"makespan_us":-1,)"
        R"("bubble_fraction":0,"bubble_ratio":0}})",
        "/measured/makespan_us: expected a number between 0");
    row("done bad calibrated", R"({"event":"done","trace":"t","calibrated":{"makespan_us":1}})",
        "/calibrated/bubble_fraction: missing");
    row("done bad expected",
        R"({"event":"done","trace":"t","simulated":{"makespan_us":1,)"
        R"("bubble_fraction":0,"bubble_ratio":0,"expected_makespan_us":"x"}})",
        "/simulated/expected_makespan_us: expected a number");
  }

  void refusesBadLinesNamingTheField() {
    QFETCH(QString, line);
    QFETCH(QString, message);
    const auto read = readRunEventLine(line.toStdString());
    QVERIFY(!read);
    QVERIFY2(read.error().message.find(message.toStdString()) != std::string::npos,
             read.error().message.c_str());
  }

  void skipsBadOpRecordsOnlyWhenAsked() {
    const std::string line =
        R"({"event":"step","step":1,"ops":[{"rank":0,"kind":"F","stage":0,"microbatch":0,)"
        R"("start_us":0,"end_us":1},{"rank":0,"kind":"Q","stage":0,"microbatch":0,"start_us":0,)"
        R"("end_us":1},7]})";
    QVERIFY(!readRunEventLine(line));
    auto kept = readRunEventLine(line, OpRecords::SkipBad);
    QVERIFY(kept);
    const auto &step = std::get<StepEvent>(*kept);
    QCOMPARE(step.ops.size(), std::size_t{1});
    QCOMPARE(step.ops[0].step, 1); // the record's step defaults to the line's
    QCOMPARE(step.skipped_ops, std::size_t{2});
    QVERIFY(step.first_skipped);
    QVERIFY2(step.first_skipped->message.starts_with("/ops/1/kind:"),
             step.first_skipped->message.c_str());
  }

  void unknownEventsAreKeptByName() {
    auto read = readRunEventLine(R"({"event":"gemm_summary","best_tflops":3.5})");
    QVERIFY(read);
    QVERIFY(std::holds_alternative<UnknownEvent>(*read));
    QCOMPARE(runEventName(*read), std::string("gemm_summary"));
    // Fields a reader does not know are ignored: a newer backend's extras do not stop it.
    auto extended = readRunEventLine(R"({"event":"warning","rank":1,"message":"m","hint":{}})");
    QVERIFY(extended);
    QVERIFY(std::get<WarningEvent>(*extended) == (WarningEvent{1, "m"}));
  }
};

QTEST_APPLESS_MAIN(TestRunEvents)
#include "test_run_events.moc"
