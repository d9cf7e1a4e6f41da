// pipescope-backend run as a person runs it: under mpirun with several ranks on the cpu device.
// Each test makes its plan with the engine API (or the CLI), runs the backend, and checks the
// measured trace: every op of the plan on its rank in the plan's order, no op before the ops it
// depends on (within the reported clock error), and faults and refusals that end the run with
// one clear message instead of a hang.
#include <QtTest>

#include <QElapsedTimer>
#include <QProcess>
#include <QTemporaryDir>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/bubbles.h"
#include "engine/plan_file.h"
#include "engine/run_events.h"
#include "engine/trace_file.h"

using nlohmann::json;
using namespace pipescope;

namespace {

struct BackendRun {
  bool finished = false;
  int exit_code = -1;
  qint64 elapsed_ms = 0;
  std::vector<json> events; ///< stdout, one JSON object per line
  QString out, err;
  bool all_lines_json = true; ///< and every line reads through the run protocol's reader
  std::string protocol_error; ///< the first line the protocol's reader refused, and why

  std::vector<json> ofKind(const std::string &kind) const {
    std::vector<json> found;
    for (const auto &e : events)
      if (e.value("event", "") == kind) found.push_back(e);
    return found;
  }
  QString describe() const {
    return QStringLiteral("exit %1 after %2 ms\nstdout:\n%3\nstderr:\n%4\nprotocol: %5")
        .arg(exit_code)
        .arg(elapsed_ms)
        .arg(out.left(3000), err.left(3000), QString::fromStdString(protocol_error));
  }
};

QStringList mpirun_options;

// A plan with its lowered program, as `pipescope simulate --save-plan` writes it.
void writePlan(const QString &path, const ScheduleRequest &request, Mesh mesh = {},
               std::optional<ModelSetup> model = std::nullopt) {
  Plan plan;
  plan.request = request;
  mesh.pp = request.pp;
  plan.mesh = mesh;
  plan.model = std::move(model);
  auto evaluation = evaluatePlan(plan);
  if (!evaluation) qFatal("plan: %s", evaluation.error().message.c_str());
  auto saved = savePlan(path.toStdString(), plan, &evaluation->program);
  if (!saved) qFatal("save: %s", saved.error().message.c_str());
}

BackendRun runBackend(int ranks, const QStringList &arguments,
                      const std::map<QString, QString> &environment = {}, int timeout_ms = 60000) {
  QProcess process;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const auto &[key, value] : environment)
    env.insert(key, value);
  process.setProcessEnvironment(env);
  // gpu-shared runs every stage in one process: started as the user does (measure.sh), without
  // mpirun, which a GPU machine may not have.
  const bool one_process = ranks == 1 && arguments.contains(QStringLiteral("gpu-shared"));
  QStringList args = mpirun_options;
  args << QStringLiteral("-np") << QString::number(ranks) << QStringLiteral(PIPESCOPE_BACKEND)
       << arguments;
  QElapsedTimer timer;
  timer.start();
  if (one_process)
    process.start(QStringLiteral(PIPESCOPE_BACKEND), arguments);
  else
    process.start(QStringLiteral(PIPESCOPE_MPIEXEC), args);
  BackendRun run;
  run.finished = process.waitForFinished(timeout_ms);
  run.elapsed_ms = timer.elapsed();
  if (!run.finished) {
    process.kill();
    process.waitForFinished(5000);
  }
  run.exit_code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
  run.out = QString::fromUtf8(process.readAllStandardOutput());
  run.err = QString::fromUtf8(process.readAllStandardError());
  for (const QString &line : run.out.split('\n', Qt::SkipEmptyParts)) {
    try {
      run.events.push_back(json::parse(line.toStdString()));
    } catch (const json::exception &) {
      run.all_lines_json = false;
    }
    if (auto read = readRunEventLine(line.toStdString()); !read) {
      run.all_lines_json = false;
      if (run.protocol_error.empty())
        run.protocol_error = read.error().message + " in " + line.left(300).toStdString();
    }
  }
  return run;
}

// Key of a part of the work: 0 = forward, 1 = input gradient (I, or B, or the B of a pair),
// 2 = weight gradient (W, or included in B).
using PartKey = std::tuple<int, int, int, int>; // step, part, stage, microbatch

// Returns "" when the trace holds every op of the schedule on its rank in list order, for every
// step, and no op starts before its inputs ended; else the first problem.
std::string checkTrace(const Trace &trace, const Schedule &schedule, int steps) {
  // Each rank's times are within ±clock_error_us of rank 0's clock, so two ranks' times compare
  // within twice that; +1 µs for the timers' own rounding.
  const double tolerance = 2 * trace.clock_error_us + 1.0;
  std::map<std::tuple<int, int>, std::vector<const TraceOp *>> by_rank_step;
  for (const auto &op : trace.ops)
    by_rank_step[{op.step, op.rank}].push_back(&op);
  std::map<PartKey, std::pair<double, int>> ends; // end time and rank
  for (int step = 0; step < steps; ++step)
    for (int r = 0; r < schedule.pp(); ++r) {
      auto records = by_rank_step[{step, r}];
      std::stable_sort(records.begin(), records.end(), [](const TraceOp *a, const TraceOp *b) {
        return a->start_us < b->start_us || (a->start_us == b->start_us && a->index < b->index);
      });
      const auto &ops = schedule.ranks[static_cast<std::size_t>(r)];
      std::size_t at = 0;
      double previous_end = -1e300;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const Op &op = ops[i];
        const int parts = op.kind == OpKind::OverlappedPair ? 2 : 1;
        for (int part = 0; part < parts; ++part, ++at) {
          const std::string where = "step " + std::to_string(step) + " rank " + std::to_string(r) +
                                    " op " + std::to_string(i) + " (" + formatOp(op) + ")";
          if (at >= records.size()) return where + ": missing from the trace";
          const TraceOp &t = *records[at];
          OpKind kind = op.kind;
          int stage = op.stage, microbatch = op.microbatch;
          if (op.kind == OpKind::OverlappedPair) {
            kind = part == 0 ? OpKind::Forward : OpKind::FullBackward;
            if (part == 1) stage = op.backward_stage, microbatch = op.backward_microbatch;
            if (!t.overlapped) return where + ": not marked overlapped";
          }
          if (t.index != static_cast<int>(i) || t.kind != kind || t.stage != stage ||
              t.microbatch != microbatch)
            return where + ": the trace has " + std::string(opKindLetter(t.kind)) +
                   std::to_string(t.stage) + "/" + std::to_string(t.microbatch) + " at index " +
                   std::to_string(t.index) + " in its place";
          if (t.end_us < t.start_us) return where + ": ends before it starts";
          if (part == 0 && t.start_us < previous_end)
            return where + ": starts before the rank's previous op ended";
          if (part == parts - 1) previous_end = t.end_us;
          const int key = kind == OpKind::Forward ? 0 : kind == OpKind::WeightGrad ? 2 : 1;
          ends[{step, key, stage, microbatch}] = {t.end_us, r};
          if (kind == OpKind::FullBackward) ends[{step, 2, stage, microbatch}] = {t.end_us, r};
        }
      }
      if (at != records.size())
        return "step " + std::to_string(step) + " rank " + std::to_string(r) +
               ": more records than ops";
    }
  // Dependencies (DESIGN.md §2): F(s,m) after F(prev,m); I/B(s,m) after F(s,m) and the
  // backward of (next,m); W(s,m) after I(s,m).
  const Placement &placement = schedule.placement;
  for (const auto &t : trace.ops) {
    const auto need = [&](int part, int stage, int microbatch) -> std::string {
      const auto it = ends.find({t.step, part, stage, microbatch});
      if (it == ends.end()) return "a dependency is missing";
      const double slack = it->second.second == t.rank ? 0.0 : tolerance;
      if (t.start_us + slack < it->second.first)
        return std::string(opKindLetter(t.kind)) + std::to_string(t.stage) + "/" +
               std::to_string(t.microbatch) + " on rank " + std::to_string(t.rank) + " step " +
               std::to_string(t.step) + " starts at " + std::to_string(t.start_us) +
               " before its input (part " + std::to_string(part) + " of stage " +
               std::to_string(stage) + ") ends at " + std::to_string(it->second.first);
      return {};
    };
    std::string problem;
    switch (t.kind) {
    case OpKind::Forward:
      if (placement.previousStage(t.stage) >= 0)
        problem = need(0, placement.previousStage(t.stage), t.microbatch);
      break;
    case OpKind::InputGrad:
    case OpKind::FullBackward:
      problem = t.overlapped ? std::string() : need(0, t.stage, t.microbatch);
      if (problem.empty() && placement.nextStage(t.stage) >= 0)
        problem = need(1, placement.nextStage(t.stage), t.microbatch);
      break;
    case OpKind::WeightGrad: problem = need(1, t.stage, t.microbatch); break;
    case OpKind::OverlappedPair: problem = "a pair record in the trace"; break;
    }
    if (!problem.empty()) return problem;
  }
  return {};
}

ModelSetup tinyModel() {
  ModelSetup setup;
  setup.model.name = "tiny";
  setup.model.layers = 4;
  setup.model.hidden = 64;
  setup.model.ffn_hidden = 160;
  setup.model.heads = 4;
  setup.model.kv_heads = 2;
  setup.model.vocab = 512;
  setup.model.sequence_length = 64;
  setup.model.microbatch_size = 1;
  return setup;
}

// GPUs this machine's backend sees (0 without CUDA or a driver).
/// A run that failed after its first measured step: it never said "done", and its trace keeps
/// that step alone, a valid step of the schedule (the partial trace is not lost).
void checkOnlyTheFirstStepKept(const BackendRun &run, const QString &trace,
                               const ScheduleRequest &request) {
  QVERIFY(run.ofKind("done").empty());
  auto loaded = loadTrace(trace.toStdString());
  QVERIFY2(loaded, qPrintable(run.describe()));
  const std::string problem = checkTrace(*loaded, *generateSchedule(request), 1);
  QVERIFY2(problem.empty(), problem.c_str());
  for (const auto &op : loaded->ops)
    QCOMPARE(op.step, 0);
}

int gpuCount() {
  QProcess list;
  list.start(QStringLiteral(PIPESCOPE_BACKEND), {QStringLiteral("--list-devices")});
  if (!list.waitForFinished(30000)) return 0;
  try {
    return json::parse(list.readAllStandardOutput().toStdString()).value("gpus", 0);
  } catch (const json::exception &) {
    return 0;
  }
}

} // namespace

class TestBackendRuns : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString path(const QString &name) const { return dir_.filePath(name); }

  // Runs a plan without a model on a device and checks the run and its trace (see the file's
  // header). tp > 1 makes a mesh with tensor parallelism (cuda only).
  void runAndCheck(const QString &name, int pp, int microbatches, int chunks, const QString &device,
                   int tp) {
    ScheduleRequest request;
    request.name = name.toStdString();
    request.pp = pp;
    request.microbatches = microbatches;
    request.chunks = chunks;
    Mesh mesh;
    mesh.tp = tp;
    const QString tag =
        device + QStringLiteral("-") + name + QStringLiteral("-tp") + QString::number(tp);
    const QString plan = path(tag + QStringLiteral(".plan")),
                  trace = path(tag + QStringLiteral(".trace"));
    writePlan(plan, request, mesh);
    const int steps = 2;
    QStringList args{"--plan",   plan,  "--trace", trace, "--steps", QString::number(steps),
                     "--device", device};
    if (device == QStringLiteral("cpu"))
      args << "--size-scale"
           << "600";
    const int processes = device == QStringLiteral("gpu-shared") ? 1 : pp * tp;
    const BackendRun run = runBackend(processes, args);
    QVERIFY2(run.finished, qPrintable(run.describe()));
    QVERIFY2(run.exit_code == 0, qPrintable(run.describe()));
    QVERIFY2(run.all_lines_json, qPrintable(run.describe()));
    QCOMPARE(run.ofKind("step").size(), std::size_t(steps));
    QCOMPARE(run.ofKind("done").size(), std::size_t(1));
    QCOMPARE(run.ofKind("error").size(), std::size_t(0));
    // Achieved throughput of the measured ops, per kind the schedule has.
    const json throughput = run.ofKind("done")[0]["throughput"];
    QVERIFY2(throughput["tflops"].get<double>() > 0, throughput.dump().c_str());
    QVERIFY(throughput["gemm_reference_tflops"].get<double>() > 0);
    QVERIFY(throughput["tflops_by_kind"].contains("forward"));

    auto loaded = loadTrace(trace.toStdString());
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    QCOMPARE(loaded->source, std::string("measured"));
    QCOMPARE(loaded->devices.size(),
             std::size_t(device == QStringLiteral("gpu-shared") ? pp : pp * tp));
    QVERIFY(loaded->clock_error_us >= 0 && loaded->clock_error_us < 10000);
    QVERIFY(loaded->makespan_us > 0);
    auto schedule = generateSchedule(request);
    QVERIFY(schedule);
    const std::string problem = checkTrace(*loaded, *schedule, steps);
    QVERIFY2(problem.empty(), problem.c_str());
    // Every idle microsecond of every measured step has a cause, and the critical path spans the
    // step (engine/bubbles.h).
    const LoweredProgram program = lowerSchedule(*schedule);
    for (const int step : traceSteps(*loaded)) {
      auto timeline = stepTimelineFromTrace(*loaded, *schedule, program, step);
      QVERIFY2(timeline, timeline ? "" : timeline.error().message.c_str());
      auto bubbles = explainBubbles(*schedule, program, *timeline);
      QVERIFY2(bubbles, bubbles ? "" : bubbles.error().message.c_str());
      const double makespan = bubbles->makespanUs(), eps = 1e-9 * makespan;
      for (const auto &rank : bubbles->ranks) {
        double causes = 0;
        for (const double c : rank.cause_us)
          causes += c;
        QVERIFY(std::abs(causes - (makespan - rank.busy_us)) <= eps);
      }
      double path = 0;
      for (const double k : bubbles->critical_path.kind_us)
        path += k;
      QVERIFY(std::abs(path - makespan) <= eps);
    }
    // The live step lines carry the same ops as the file.
    std::size_t streamed = 0;
    for (const auto &step : run.ofKind("step"))
      streamed += step["ops"].size();
    QCOMPARE(streamed, loaded->ops.size());
  }

private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    QProcess version;
    version.start(QStringLiteral(PIPESCOPE_MPIEXEC), {QStringLiteral("--version")});
    if (!version.waitForFinished(30000)) {
      // The cpu-device runs need it and will fail; the gpu-shared rows run without it.
      qWarning("%s does not run here: only the gpu-shared runs can pass", PIPESCOPE_MPIEXEC);
      return;
    }
    const QString text = QString::fromUtf8(version.readAllStandardOutput());
    if (text.contains(QStringLiteral("Open MPI")) || text.contains(QStringLiteral("OpenRTE")) ||
        text.contains(QStringLiteral("open-mpi.org"))) {
      // The CI machine has 2 cores and runs as root; containers forbid the single-copy transport.
      mpirun_options << QStringLiteral("--oversubscribe") << QStringLiteral("--mca")
                     << QStringLiteral("btl_vader_single_copy_mechanism") << QStringLiteral("none");
      if (geteuid() == 0) mpirun_options << QStringLiteral("--allow-run-as-root");
    }
  }

  void runsEveryScheduleFamily_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("microbatches");
    QTest::addColumn<int>("chunks");
    QTest::newRow("gpipe P=2 M=4") << "gpipe" << 2 << 4 << 1;
    QTest::newRow("1f1b P=4 M=8") << "1f1b" << 4 << 8 << 1;
    QTest::newRow("interleaved-1f1b P=2 V=2 M=4") << "interleaved-1f1b" << 2 << 4 << 2;
    QTest::newRow("zb-h1 P=3 M=6") << "zb-h1" << 3 << 6 << 1;
    QTest::newRow("dualpipe P=2 M=4") << "dualpipe" << 2 << 4 << 1;
    QTest::newRow("zb-v P=2 M=4") << "zb-v" << 2 << 4 << 2;
    QTest::newRow("dualpipev P=2 M=4") << "dualpipev" << 2 << 4 << 2;
  }

  void runsEveryScheduleFamily() {
    QFETCH(QString, name);
    QFETCH(int, pp);
    QFETCH(int, microbatches);
    QFETCH(int, chunks);
    runAndCheck(name, pp, microbatches, chunks, QStringLiteral("cpu"), 1);
  }

  // The GPU devices, where this machine has GPUs (skipped elsewhere): the same checks of the
  // trace for gpu-shared (one process, every stage on GPU 0; dualpipe exercises the two-stream
  // F&B pairs) and for cuda (one rank per GPU; the last row needs 4 GPUs and runs the pairs'
  // backward TP all-reduces on the second TP communicator).
  void runsOnGpus_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("microbatches");
    QTest::addColumn<int>("chunks");
    QTest::addColumn<int>("tp");
    for (const char *device : {"gpu-shared", "cuda"}) {
      const QString d = QString::fromLatin1(device);
      QTest::newRow(qPrintable(d + " 1f1b P=4 M=8")) << d << "1f1b" << 4 << 8 << 1 << 1;
      QTest::newRow(qPrintable(d + " interleaved P=2 V=2 M=8"))
          << d << "interleaved-1f1b" << 2 << 8 << 2 << 1;
      QTest::newRow(qPrintable(d + " zb-h1 P=4 M=8")) << d << "zb-h1" << 4 << 8 << 1 << 1;
      QTest::newRow(qPrintable(d + " dualpipe P=4 M=8")) << d << "dualpipe" << 4 << 8 << 1 << 1;
    }
    QTest::newRow("cuda dualpipe P=2 tp=2 M=4") << "cuda"
                                                << "dualpipe" << 2 << 4 << 1 << 2;
  }

  void runsOnGpus() {
    QFETCH(QString, device);
    QFETCH(QString, name);
    QFETCH(int, pp);
    QFETCH(int, microbatches);
    QFETCH(int, chunks);
    QFETCH(int, tp);
    const int gpus = gpuCount();
    if (gpus == 0) QSKIP("no CUDA GPU on this machine");
    const int needed = device == QStringLiteral("cuda") ? pp * tp : 1;
    if (gpus < needed) QSKIP(qPrintable(QStringLiteral("needs %1 GPUs").arg(needed)));
    runAndCheck(name, pp, microbatches, chunks, device, tp);
  }

  // A model plan with tensor parallelism: real layer shapes and TP all-reduces inside layers.
  void runsAModelWithTensorParallelism() {
    ScheduleRequest request;
    request.name = "1f1b";
    request.pp = 2;
    request.microbatches = 4;
    Mesh mesh;
    mesh.tp = 2;
    const QString plan = path("tp.plan"), trace = path("tp.trace");
    writePlan(plan, request, mesh, tinyModel());
    const BackendRun run =
        runBackend(4, {"--plan", plan, "--trace", trace, "--steps", "1", "--size-scale", "1"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.describe()));
    const auto start = run.ofKind("start");
    QCOMPARE(start.size(), std::size_t(1));
    QCOMPARE(start[0]["workload"]["from_model"].get<bool>(), true);
    QCOMPARE(start[0]["workload"]["stages"][0]["heads"].get<int>(), 2); // 4 heads over tp = 2
    auto loaded = loadTrace(trace.toStdString());
    QVERIFY(loaded);
    QCOMPARE(loaded->devices.size(), std::size_t(4));
    const std::string problem = checkTrace(*loaded, *generateSchedule(request), 1);
    QVERIFY2(problem.empty(), problem.c_str());
  }

  // Data parallelism: two pipeline replicas and the gradient all-reduce at the end of the step.
  void runsDataParallelReplicas() {
    ScheduleRequest request;
    request.name = "zb-h1";
    request.pp = 2;
    request.microbatches = 4;
    Mesh mesh;
    mesh.dp = 2;
    const QString plan = path("dp.plan"), trace = path("dp.trace");
    writePlan(plan, request, mesh);
    const BackendRun run =
        runBackend(4, {"--plan", plan, "--trace", trace, "--steps", "1", "--size-scale", "500"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.describe()));
    const auto steps = run.ofKind("step");
    QCOMPARE(steps.size(), std::size_t(1));
    QVERIFY(steps[0]["gradient_sync_us"].get<double>() > 0);
    auto loaded = loadTrace(trace.toStdString());
    QVERIFY(loaded);
    const std::string problem = checkTrace(*loaded, *generateSchedule(request), 1);
    QVERIFY2(problem.empty(), problem.c_str());
  }

  // `pipescope simulate --save-plan` writes a plan the backend runs as it is.
  void runsThePlanTheCliSaves() {
    const QString plan = path("cli.plan"), trace = path("cli.trace");
    QProcess cli;
    cli.start(QStringLiteral(PIPESCOPE_CLI),
              {"simulate", "--schedule", "interleaved-1f1b", "--pp", "2", "--virtual-stages", "2",
               "--microbatches", "4", "--save-plan", plan});
    QVERIFY(cli.waitForFinished(30000));
    QCOMPARE(cli.exitCode(), 0);
    const BackendRun run =
        runBackend(2, {"--plan", plan, "--trace", trace, "--steps", "1", "--size-scale", "500"});
    QVERIFY2(run.exit_code == 0, qPrintable(run.describe()));
    QCOMPARE(run.ofKind("done").size(), std::size_t(1));
    // ...and `pipescope bubbles` explains the measured step.
    cli.start(QStringLiteral(PIPESCOPE_CLI), {"bubbles", trace, "--json"});
    QVERIFY(cli.waitForFinished(30000));
    QCOMPARE(cli.exitCode(), 0);
    const json bubbles = json::parse(cli.readAllStandardOutput().toStdString());
    QCOMPARE(bubbles["source"].get<std::string>(), std::string("measured"));
    QCOMPARE(bubbles["ranks"].size(), std::size_t(2));
    QVERIFY(!bubbles["critical_path"].empty());
  }

  void refusesAMalformedPlan() {
    const QString plan = path("bad.plan");
    QFile file(plan);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("{\"format\": \"pipescope.plan\", \"version\": 1, \"schedule\": {\"name\": 3}}");
    file.close();
    const BackendRun run = runBackend(2, {"--plan", plan, "--trace", path("bad.trace")});
    QVERIFY2(run.finished && run.exit_code != 0, qPrintable(run.describe()));
    const auto errors = run.ofKind("error");
    QCOMPARE(errors.size(), std::size_t(1));
    QVERIFY2(errors[0]["message"].get<std::string>().find("/schedule/name") != std::string::npos,
             errors[0].dump().c_str());
    QVERIFY(!QFile::exists(path("bad.trace")));
  }

  void refusesAPlanWithoutItsProgram() {
    Plan plan;
    plan.request.pp = 2;
    plan.request.microbatches = 4;
    plan.mesh.pp = 2;
    QVERIFY(savePlan(path("bare.plan").toStdString(), plan)); // no program
    const BackendRun run = runBackend(2, {"--plan", path("bare.plan"), "--trace", path("x")});
    QVERIFY2(run.finished && run.exit_code != 0, qPrintable(run.describe()));
    const auto errors = run.ofKind("error");
    QCOMPARE(errors.size(), std::size_t(1));
    QVERIFY(errors[0]["message"].get<std::string>().find("--save-plan") != std::string::npos);
  }

  void refusesAMeshTheLaunchDoesNotMatch() {
    ScheduleRequest request;
    request.pp = 4;
    request.microbatches = 4;
    writePlan(path("four.plan"), request);
    const BackendRun run = runBackend(2, {"--plan", path("four.plan"), "--trace", path("x")});
    QVERIFY2(run.finished && run.exit_code != 0, qPrintable(run.describe()));
    const auto errors = run.ofKind("error");
    QCOMPARE(errors.size(), std::size_t(1));
    const std::string message = errors[0]["message"];
    QVERIFY2(message.find("needs 4 processes") != std::string::npos &&
                 message.find("started 2") != std::string::npos,
             message.c_str());
  }

  // Bad input and bad usage end with exit 2 (runtime faults keep 1), the reason as one line on
  // stderr for the person and as the JSON error event on stdout for the programs that follow.
  void badInputExitsTwo_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<QString>("plan"); // written by the test: bad, bare, four, cp, ep
    QTest::addColumn<QStringList>("extra");
    QTest::addColumn<QString>("expected");
    QTest::newRow("bad plan") << 2 << "bad" << QStringList{} << "/schedule/name";
    QTest::newRow("plan without program") << 2 << "bare" << QStringList{} << "--save-plan";
    QTest::newRow("launch/mesh mismatch") << 2 << "four" << QStringList{} << "needs 4 processes";
    QTest::newRow("context parallelism")
        << 2 << "cp" << QStringList{}
        << "runs dense pipeline plans without context or expert parallelism";
    QTest::newRow("expert parallelism")
        << 2 << "ep" << QStringList{} << "set the mesh's cp and ep to 1";
    QTest::newRow("unknown option") << 2 << "four" << QStringList{"--stpes", "3"} << "--stpes";
    QTest::newRow("bad value") << 1 << "four" << QStringList{"--steps", "0"} << "--steps";
    QTest::newRow("unwritable trace")
        << 4 << "four" << QStringList{"--trace", "/nonexistent/dir/t.trace"} << "cannot write";
  }
  void badInputExitsTwo() {
    QFETCH(int, ranks);
    QFETCH(QString, plan);
    QFETCH(QStringList, extra);
    QFETCH(QString, expected);
    const QString file = path(QStringLiteral("exit2-") + plan + QStringLiteral(".plan"));
    if (plan == "bad") {
      QFile bad(file);
      QVERIFY(bad.open(QIODevice::WriteOnly));
      bad.write(R"({"format": "pipescope.plan", "version": 1, "schedule": {"name": 3}})");
    } else if (plan == "bare") {
      Plan bare;
      bare.request.pp = 2;
      bare.request.microbatches = 4;
      bare.mesh.pp = 2;
      QVERIFY(savePlan(file.toStdString(), bare)); // no program
    } else if (plan == "cp" || plan == "ep") {
      // Explicit costs: the mesh alone carries the CP or EP the backend cannot run.
      ScheduleRequest request;
      request.pp = 2;
      request.microbatches = 4;
      Mesh mesh;
      mesh.dp = 2;
      (plan == "cp" ? mesh.cp : mesh.ep) = 2;
      writePlan(file, request, mesh);
    } else {
      ScheduleRequest request;
      request.pp = 4;
      request.microbatches = 4;
      writePlan(file, request);
    }
    const QString trace = path(QStringLiteral("exit2.trace"));
    QStringList args{"--plan", file, "--trace", trace};
    args << extra; // a later --trace replaces the first
    const BackendRun run = runBackend(ranks, args);
    QVERIFY2(run.finished && run.exit_code == 2, qPrintable(run.describe()));
    // stderr: the reason once, on one line of its own (mpirun adds its own notes around it).
    const QStringList lines = run.err.split('\n');
    const auto ours = std::count_if(lines.begin(), lines.end(), [](const QString &line) {
      return line.startsWith(QStringLiteral("pipescope-backend: "));
    });
    QVERIFY2(ours == 1, qPrintable(run.describe()));
    for (const QString &line : lines)
      if (line.startsWith(QStringLiteral("pipescope-backend: ")))
        QVERIFY2(line.contains(expected), qPrintable(run.describe()));
    // stdout: the JSON error event with the same reason, from rank 0.
    bool found = false;
    for (const auto &error : run.ofKind("error"))
      found = found || (error["rank"] == 0 && error["message"].get<std::string>().find(
                                                  expected.toStdString()) != std::string::npos);
    QVERIFY2(found, qPrintable(run.describe()));
    QVERIFY(!QFile::exists(trace));
  }

  void refusesAMissingGpu() {
    QProcess list;
    list.start(QStringLiteral(PIPESCOPE_BACKEND), {QStringLiteral("--list-devices")});
    QVERIFY(list.waitForFinished(30000));
    const json devices = json::parse(list.readAllStandardOutput().toStdString());
    if (devices.value("gpus", 0) > 0) QSKIP("this machine has a GPU");
    ScheduleRequest request;
    request.pp = 1;
    request.microbatches = 2;
    writePlan(path("one.plan"), request);
    for (const QStringList &args :
         {QStringList{"--plan", path("one.plan"), "--trace", path("x"), "--device", "cuda"},
          QStringList{"--gemm-bench", "--device", "cuda"}}) {
      const BackendRun run = runBackend(1, args);
      QVERIFY2(run.finished && run.exit_code != 0, qPrintable(run.describe()));
      const auto errors = run.ofKind("error");
      QCOMPARE(errors.size(), std::size_t(1));
      const std::string message = errors[0]["message"];
      QVERIFY2(message.find("GPU") != std::string::npos ||
                   message.find("without CUDA") != std::string::npos,
               message.c_str());
    }
  }

  // The GEMM ladder on the cpu device: one event per size, ascending, a summary whose best rate
  // is the best rung, and no FP8 ladder. (Rates are measured, so only their consistency is
  // checked.)
  void gemmBenchmarkReportsEverySize() {
    const BackendRun run = runBackend(1, {"--gemm-bench"});
    QVERIFY2(run.finished && run.exit_code == 0, qPrintable(run.describe()));
    const auto rungs = run.ofKind("gemm");
    QVERIFY2(rungs.size() >= 3, qPrintable(run.describe()));
    double best = 0;
    int previous = 0;
    for (const auto &rung : rungs) {
      QVERIFY(rung["m"].get<int>() > previous);
      previous = rung["m"].get<int>();
      QCOMPARE(rung["dtype"].get<std::string>(), std::string("fp32"));
      QVERIFY(rung["tflops"].get<double>() > 0 && rung["us"].get<double>() > 0);
      best = std::max(best, rung["tflops"].get<double>());
    }
    const auto summary = run.ofKind("gemm_summary");
    QCOMPARE(summary.size(), std::size_t(1));
    QCOMPARE(summary[0]["best_tflops"].get<double>(), best);
    QVERIFY(summary[0]["datasheet_tflops"].is_null()); // no datasheet for a CPU
    // No FP8 tensor cores on a CPU: no FP8 ladder.
    QVERIFY(run.ofKind("gemm_fp8").empty());
    QVERIFY(!summary[0].contains("best_fp8_tflops"));
  }

  void refusesAnUnknownOption() {
    const BackendRun run = runBackend(2, {"--plan", "p", "--trace", "t", "--stpes", "3"});
    QVERIFY(run.finished && run.exit_code != 0);
    const auto errors = run.ofKind("error");
    QCOMPARE(errors.size(), std::size_t(1));
    QVERIFY(errors[0]["message"].get<std::string>().find("--stpes") != std::string::npos);
  }

  // A rank killed in the middle of the run ends the whole run with the error reported and a
  // non-zero exit, not a hang; the steps already measured stay in the trace.
  void aKilledRankEndsTheRun() {
    ScheduleRequest request;
    request.pp = 4;
    request.microbatches = 8;
    writePlan(path("kill.plan"), request);
    const QString trace = path("kill.trace");
    // Rank 1 runs 16 ops a step: 1 warm-up step, 1 measured step, then 5 ops into the next.
    const BackendRun run = runBackend(
        4, {"--plan", path("kill.plan"), "--trace", trace, "--steps", "3", "--size-scale", "500"},
        {{"PIPESCOPE_BACKEND_TEST_KILL_RANK", "1"}, {"PIPESCOPE_BACKEND_TEST_AFTER_OPS", "37"}});
    QVERIFY2(run.finished, qPrintable(run.describe()));
    QVERIFY2(run.exit_code != 0, qPrintable(run.describe()));
    QVERIFY2(run.elapsed_ms < 30000, qPrintable(run.describe()));
    const auto errors = run.ofKind("error");
    QVERIFY2(!errors.empty(), qPrintable(run.describe()));
    QVERIFY(errors[0]["rank"].is_number_integer());
    checkOnlyTheFirstStepKept(run, trace, request);
  }

  // A rank that hangs: the others see no progress within --timeout, say what they wait for, and
  // stop the run.
  void aHungRankEndsTheRun() {
    ScheduleRequest request;
    request.pp = 3;
    request.microbatches = 4;
    writePlan(path("hang.plan"), request);
    const BackendRun run = runBackend(
        3,
        {"--plan", path("hang.plan"), "--trace", path("hang.trace"), "--size-scale", "500",
         "--timeout", "2"},
        {{"PIPESCOPE_BACKEND_TEST_HANG_RANK", "2"}, {"PIPESCOPE_BACKEND_TEST_AFTER_OPS", "12"}});
    QVERIFY2(run.finished, qPrintable(run.describe()));
    QVERIFY2(run.exit_code != 0, qPrintable(run.describe()));
    QVERIFY2(run.elapsed_ms < 30000, qPrintable(run.describe()));
    bool timed_out = false;
    for (const auto &error : run.ofKind("error"))
      timed_out |= error["message"].get<std::string>().find("no progress") != std::string::npos;
    QVERIFY2(timed_out, qPrintable(run.describe()));
  }

  // gpu-shared runs a thread per pipeline rank: a stage thread that dies mid-run, or hangs, ends
  // the run within --timeout (plus the runner's grace) with that stage named as the cause, and
  // the steps measured before stay in the trace. Skipped without a GPU.
  void aFailedStageThreadEndsASharedGpuRun_data() {
    QTest::addColumn<QString>("fault");
    QTest::addColumn<QString>("expected");
    QTest::newRow("killed") << "PIPESCOPE_BACKEND_TEST_KILL_RANK"
                            << "pipeline rank 1's stage thread ended in the middle of a step";
    QTest::newRow("hung") << "PIPESCOPE_BACKEND_TEST_HANG_RANK"
                          << "pipeline rank 1's stage thread made no progress";
  }
  void aFailedStageThreadEndsASharedGpuRun() {
    QFETCH(QString, fault);
    QFETCH(QString, expected);
    if (gpuCount() == 0) QSKIP("no CUDA GPU on this machine");
    ScheduleRequest request;
    request.pp = 4;
    request.microbatches = 8;
    const QString plan = path("thread-fault.plan"),
                  trace = path("thread-fault-" + fault + ".trace");
    writePlan(plan, request);
    // Rank 1 runs 16 ops a step: 1 warm-up step, 1 measured step, then 5 ops into the next.
    const BackendRun run = runBackend(1,
                                      {"--plan", plan, "--trace", trace, "--device", "gpu-shared",
                                       "--steps", "3", "--timeout", "3"},
                                      {{fault, "1"}, {"PIPESCOPE_BACKEND_TEST_AFTER_OPS", "37"}});
    QVERIFY2(run.finished, qPrintable(run.describe()));
    QVERIFY2(run.exit_code == 1, qPrintable(run.describe()));
    QVERIFY2(run.elapsed_ms < 30000, qPrintable(run.describe()));
    const auto errors = run.ofKind("error");
    QVERIFY2(errors.size() == 1, qPrintable(run.describe()));
    QVERIFY2(errors[0]["message"].get<std::string>().find(expected.toStdString()) !=
                 std::string::npos,
             qPrintable(run.describe()));
    checkOnlyTheFirstStepKept(run, trace, request);
  }
};

QTEST_GUILESS_MAIN(TestBackendRuns)
#include "test_backend_runs.moc"
