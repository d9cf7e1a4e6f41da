// The backend's protocol as the explorer reads and writes it, without a window: the output parser
// on the backend's own lines and on broken ones, chunks split into lines at any byte, the
// progress count, how errors are formatted, and the launch templates a run expands.
#include <QStringList>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "engine/run_events.h"
#include "gui/backend_output_parser.h"
#include "gui/run/backend_process.h"
#include "gui/run/measurement.h"
#include "tests/gui/window_test_support.h"

using namespace pipescope;
using namespace pipescope::gui;
using namespace pipescope::gui::testing;
using nlohmann::json;

namespace {

// The values a launch template is expanded with: paths with spaces, 16 ranks of 4 stages on
// nodes of 8 GPUs.
LaunchValues launchValues() {
  LaunchValues values;
  values.backend = QStringLiteral("/opt/pipe scope/pipescope-backend");
  values.plan = QStringLiteral("/tmp/run 1/plan.json");
  values.trace = QStringLiteral("/tmp/run 1/trace.json");
  values.world = 16;
  values.pp = 4;
  values.gpus_per_node = 8;
  values.warmup = 2;
  values.steps = 5;
  return values;
}

} // namespace

class TestRunProtocol : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() { useTestSettings("test_gui_run_protocol"); }

  // --- the output parser -------------------------------------------------------------------

  void parsesTheBackendsLines() {
    // Lines as the backend prints them: through the protocol's writer (engine/run_events.h).
    const auto parse = [](const RunEvent &event) {
      return BackendOutputParser::parseLine(QByteArray::fromStdString(runEventLine(event)));
    };
    StartEvent started;
    started.device = "cpu";
    started.launch = "mpirun";
    started.channel = "mpi";
    started.world_size = 2;
    started.plan_path = "p.json";
    started.schedule = "1f1b";
    started.pp = started.mesh_pp = 2;
    started.microbatches = 4;
    started.warmup_steps = 1;
    started.measured_steps = 3;
    started.workload = {{"expected_time_factor", 2500}, {"stages", json::array()}};
    started.simulated = {10, 0.2, 0.25};
    auto start = parse(started);
    QVERIFY(start);
    QCOMPARE(start->type, BackendEventType::Start);
    QCOMPARE(start->device, QStringLiteral("cpu"));
    QCOMPARE(start->world_size, 2);
    QCOMPARE(start->warmup_steps, 1);
    QCOMPARE(start->measured_steps, 3);
    QCOMPARE(start->time_factor, 2500.0);

    auto progress = parse(ProgressEvent{"warmup", 0, 1, 1234.5});
    QVERIFY(progress);
    QCOMPARE(progress->type, BackendEventType::Progress);
    QCOMPARE(progress->phase, QStringLiteral("warmup"));
    QCOMPARE(progress->step, 0);
    QCOMPARE(progress->of, 1);

    StepEvent measured;
    measured.step = 1;
    measured.of = 3;
    measured.metrics = RunMetrics{40.5, 0.3, 0.43};
    measured.busy_us = {1, 2};
    measured.clock_error_us = 0.4;
    measured.ops = {{0, 1, 0, OpKind::Forward, 0, 0, 100.0, 101.5, 0, false},
                    {1, 1, 3, OpKind::FullBackward, 1, 2, 110, 113, 0, true},
                    {1, 1, 4, OpKind::WeightGrad, 1, 2, 113, 114, 0, false}};
    auto step = parse(measured);
    QVERIFY(step);
    QCOMPARE(step->type, BackendEventType::Step);
    QCOMPARE(step->step, 1);
    QCOMPARE(step->of, 3);
    QCOMPARE(step->ops.size(), std::size_t{3});
    QCOMPARE(step->ops[0].kind, OpKind::Forward);
    QCOMPARE(step->ops[0].start_us, 100.0);
    QCOMPARE(step->ops[0].end_us, 101.5);
    QCOMPARE(step->ops[1].kind, OpKind::FullBackward);
    QCOMPARE(step->ops[1].rank, 1);
    QCOMPARE(step->ops[1].index, 3);
    QVERIFY(step->ops[1].overlapped);
    QCOMPARE(step->ops[2].kind, OpKind::WeightGrad);
    QVERIFY(step->problem.isEmpty());
    QVERIFY(step->metrics);
    QCOMPARE(step->metrics->makespan_us, 40.5);
    QCOMPARE(step->metrics->bubble_ratio, 0.43);

    auto error = parse(ErrorEvent{3, "NCCL timeout: rank 2 stopped answering"});
    QVERIFY(error);
    QCOMPARE(error->type, BackendEventType::Error);
    QCOMPARE(error->rank, 3);
    QCOMPARE(error->text, QStringLiteral("NCCL timeout: rank 2 stopped answering"));

    auto warning = parse(WarningEvent{0, "one replica only"});
    QVERIFY(warning);
    QCOMPARE(warning->type, BackendEventType::Warning);

    DoneEvent finished;
    finished.trace_path = "/tmp/x/trace.json";
    finished.steps = 3;
    auto done = parse(finished);
    QVERIFY(done);
    QCOMPARE(done->type, BackendEventType::Done);
    QCOMPARE(done->trace_path, QStringLiteral("/tmp/x/trace.json"));

    auto check = parse(CheckEvent{0, "GEMMs", 1e-6, true});
    QVERIFY(check);
    QCOMPARE(check->type, BackendEventType::Check);

    // One protocol: other spellings ("type" for the event, kind names, start/end) are refused
    // with the field that is wrong, not guessed at.
    auto renamed = BackendOutputParser::parseLine(R"({"type":"step","step":0,"ops":[]})");
    QVERIFY(renamed);
    QCOMPARE(renamed->type, BackendEventType::Malformed);
    QVERIFY2(renamed->problem.contains(QStringLiteral("/event")), qPrintable(renamed->problem));
    auto spelled = BackendOutputParser::parseLine(
        R"({"event":"step","step":0,"ops":[{"rank":0,"kind":"input-grad","stage":0,"microbatch":1,"start_us":5,"end_us":7}]})");
    QVERIFY(spelled);
    QCOMPARE(spelled->ops.size(), std::size_t{0});
    QVERIFY2(spelled->problem.contains(QStringLiteral("/ops/0/kind")),
             qPrintable(spelled->problem));

    // An event this window does not know is kept and logged, not dropped.
    auto other = BackendOutputParser::parseLine(R"({"event":"devices","cpu":true})");
    QVERIFY(other);
    QCOMPARE(other->type, BackendEventType::Other);
  }

  void toleratesMalformedLines() {
    QVERIFY(!BackendOutputParser::parseLine("   "));
    auto text =
        BackendOutputParser::parseLine("[host:01234] mpirun noticed that process rank 1 exited");
    QVERIFY(text);
    QCOMPARE(text->type, BackendEventType::Text);
    QVERIFY(text->text.contains(QStringLiteral("mpirun noticed")));
    // Lines that look like JSON but are not events: refusesMalformedLines.
    // Bad op records are skipped one by one; the good ones stay.
    auto partial = BackendOutputParser::parseLine(
        R"({"event":"step","step":0,"ops":[{"rank":0,"kind":"F","stage":0,"microbatch":0,"start_us":0,"end_us":1},)"
        R"({"rank":-1,"kind":"F","stage":0,"microbatch":0,"start_us":0,"end_us":1},)"
        R"({"rank":0,"kind":"Q","stage":0,"microbatch":0,"start_us":0,"end_us":1},)"
        R"({"rank":0,"kind":"F","stage":0,"microbatch":1,"start_us":3,"end_us":2},)"
        R"({"rank":0,"kind":"F","stage":0,"microbatch":1,"start_us":"x","end_us":2}, 5]})");
    QVERIFY(partial);
    QCOMPARE(partial->type, BackendEventType::Step);
    QCOMPARE(partial->ops.size(), std::size_t{1});
    QVERIFY(partial->problem.contains(QStringLiteral("5 of 6")));
    // An error without a message still says something.
    auto bare = BackendOutputParser::parseLine(R"({"event":"error"})");
    QVERIFY(bare && bare->type == BackendEventType::Error && !bare->text.isEmpty());
  }

  void refusesMalformedLines_data() {
    QTest::addColumn<QByteArray>("line");
    QTest::newRow("not json") << QByteArray("{not json");
    QTest::newRow("cut short") << QByteArray("{\"event\":");
    QTest::newRow("empty object") << QByteArray("{}");
    QTest::newRow("no event") << QByteArray("{\"message\":\"no event\"}");
    QTest::newRow("step without its number") << QByteArray("{\"event\":\"step\",\"ops\":[]}");
    QTest::newRow("step without ops") << QByteArray("{\"event\":\"step\",\"step\":2}");
    QTest::newRow("ops not a list") << QByteArray("{\"event\":\"step\",\"step\":2,\"ops\":7}");
    // Refused by the depth limit, not by a stack overflow.
    QTest::newRow("nested past the depth limit")
        << "{\"event\":" + QByteArray(100000, '[') + QByteArray(100000, ']') + "}";
  }

  void refusesMalformedLines() {
    QFETCH(QByteArray, line);
    auto event = BackendOutputParser::parseLine(line);
    QVERIFY(event);
    QCOMPARE(event->type, BackendEventType::Malformed);
    QVERIFY2(!event->problem.isEmpty(), line.left(80).constData());
  }

  void splitsChunksIntoLines() {
    BackendOutputParser parser;
    DoneEvent done;
    done.trace_path = "t.json";
    const QByteArray stream =
        QByteArray::fromStdString(runEventLine(ProgressEvent{"warmup", 0, 2, 0})) + "\r\n" +
        "text from mpirun\n\n" + QByteArray::fromStdString(runEventLine(ErrorEvent{1, "boom"})) +
        "\n" + QByteArray::fromStdString(runEventLine(done));
    // Byte by byte: every split point must give the same events.
    std::vector<BackendEvent> events;
    for (char byte : stream) {
      auto more = parser.feed(QByteArray(1, byte));
      events.insert(events.end(), more.begin(), more.end());
    }
    QCOMPARE(events.size(), std::size_t{3});
    auto rest = parser.finish();
    QCOMPARE(rest.size(), std::size_t{1});
    QCOMPARE(events[0].type, BackendEventType::Progress);
    QCOMPARE(events[1].type, BackendEventType::Text);
    QCOMPARE(events[2].type, BackendEventType::Error);
    QCOMPARE(rest[0].type, BackendEventType::Done);
    QCOMPARE(rest[0].trace_path, QStringLiteral("t.json"));

    // An over-long line is dropped with a note, and the next line reads normally (a done line
    // with only its required field, to stay under the small limit).
    BackendOutputParser small;
    small.setMaxLineBytes(64);
    auto long_events = small.feed(QByteArray(50, 'x'));
    QVERIFY(long_events.empty());
    long_events = small.feed(QByteArray(50, 'y') + "\n{\"event\":\"done\",\"trace\":\"t\"}\n");
    QCOMPARE(long_events.size(), std::size_t{2});
    QCOMPARE(long_events[0].type, BackendEventType::Malformed);
    QVERIFY(long_events[0].problem.contains(QStringLiteral("100 bytes")));
    QCOMPARE(long_events[1].type, BackendEventType::Done);
  }

  void progressCountsWarmupAndMeasuredSteps() {
    RunProgress progress;
    progress.setPlanned(2, 3);
    QCOMPARE(progress.total(), 5);
    QCOMPARE(progress.done(), 0);
    QCOMPARE(progress.text(), QStringLiteral("starting up"));
    BackendEvent start;
    start.type = BackendEventType::Start;
    start.warmup_steps = 1;
    start.measured_steps = 4;
    progress.apply(start);
    QCOMPARE(progress.total(), 5);
    QCOMPARE(progress.text(), QStringLiteral("warm-up step 1 of 1"));
    BackendEvent warm;
    warm.type = BackendEventType::Progress;
    warm.phase = QStringLiteral("warmup");
    warm.step = 0;
    warm.of = 1;
    progress.apply(warm);
    QCOMPARE(progress.done(), 1);
    QCOMPARE(progress.text(), QStringLiteral("measured step 1 of 4"));
    BackendEvent step;
    step.type = BackendEventType::Step;
    step.step = 1;
    step.of = 4;
    progress.apply(step);
    QCOMPARE(progress.done(), 3);
    QCOMPARE(progress.measuredDone(), 2);
    BackendEvent done;
    done.type = BackendEventType::Done;
    progress.apply(done);
    QCOMPARE(progress.done(), progress.total());
    QCOMPARE(progress.text(), QStringLiteral("done"));
  }

  void formatsErrors_data() {
    QTest::addColumn<double>("value");
    QTest::addColumn<bool>("points");
    QTest::addColumn<QString>("expected");
    QTest::newRow("a relative error over") << 0.1234 << false << QStringLiteral("+12.3 %");
    QTest::newRow("a relative error under") << -0.05 << false << QStringLiteral("-5.0 %");
    QTest::newRow("no negative zero") << -0.00001 << false << QStringLiteral("+0.0 %");
    QTest::newRow("large, without decimals") << 2.5 << false << QStringLiteral("+250 %");
    QTest::newRow("a difference over") << 0.0912 << true << QStringLiteral("+9.1 pts");
    QTest::newRow("a difference under") << -0.02 << true << QStringLiteral("-2.0 pts");
  }

  // Relative errors in signed percent, differences of fractions in signed points.
  void formatsErrors() {
    QFETCH(double, value);
    QFETCH(bool, points);
    QFETCH(QString, expected);
    QCOMPARE(points ? formatPointDifference(value) : formatSignedPercent(value), expected);
  }

  // --- launch templates ----------------------------------------------------------------------

  // Each target's default template, expanded with launchValues(): its program (when the row
  // names one), the value after each flag, and words it must contain. Paths with spaces stay one
  // argument each.
  void expandsEachTargetsDefaultTemplate_data() {
    const LaunchValues values = launchValues();
    QTest::addColumn<int>("target");
    QTest::addColumn<QString>("program");
    QTest::addColumn<QStringList>("flagsAndValues");
    QTest::addColumn<QStringList>("words");
    QTest::newRow("cpu") << static_cast<int>(LaunchTarget::Cpu) << QStringLiteral("mpirun")
                         << QStringList{QStringLiteral("-np"),      QStringLiteral("4"),
                                        QStringLiteral("--plan"),   values.plan,
                                        QStringLiteral("--trace"),  values.trace,
                                        QStringLiteral("--device"), QStringLiteral("cpu"),
                                        QStringLiteral("--warmup"), QStringLiteral("2"),
                                        QStringLiteral("--steps"),  QStringLiteral("5")}
                         << QStringList{QStringLiteral("--allow-run-as-root"), values.backend};
    QTest::newRow("shared gpu") << static_cast<int>(LaunchTarget::SharedGpu) << values.backend
                                << QStringList{QStringLiteral("--device"),
                                               QStringLiteral("gpu-shared")}
                                << QStringList{};
    QTest::newRow("local gpus") << static_cast<int>(LaunchTarget::LocalGpus) << QString()
                                << QStringList{QStringLiteral("-np"), QStringLiteral("16"),
                                               QStringLiteral("--device"), QStringLiteral("cuda")}
                                << QStringList{};
    QTest::newRow("slurm") << static_cast<int>(LaunchTarget::Slurm) << QStringLiteral("srun")
                           << QStringList{}
                           << QStringList{QStringLiteral("--nodes=2"),
                                          QStringLiteral("--ntasks=16"),
                                          QStringLiteral("--ntasks-per-node=8")};
  }

  void expandsEachTargetsDefaultTemplate() {
    QFETCH(int, target);
    QFETCH(QString, program);
    QFETCH(QStringList, flagsAndValues);
    QFETCH(QStringList, words);
    auto command = expandLaunchTemplate(defaultLaunchTemplate(static_cast<LaunchTarget>(target)),
                                        launchValues());
    QVERIFY(command);
    if (!program.isEmpty()) QCOMPARE(command->first(), program);
    for (qsizetype i = 0; i + 1 < flagsAndValues.size(); i += 2) {
      const qsizetype flag = command->indexOf(flagsAndValues[i]);
      QVERIFY2(flag >= 0 && flag + 1 < command->size(), qPrintable(flagsAndValues[i]));
      QCOMPARE(command->at(flag + 1), flagsAndValues[i + 1]);
    }
    for (const QString &word : words)
      QVERIFY2(command->contains(word), qPrintable(word));
  }

  void expandsCustomTemplatesAndRefusesBadOnes() {
    LaunchValues values = launchValues();
    // A custom command with quotes and a placeholder inside a word.
    auto custom = expandLaunchTemplate(
        QStringLiteral("env OUT=\"{trace}\" '{backend}' --plan={plan}"), values);
    QVERIFY(custom);
    QCOMPARE(custom->size(), 4);
    QCOMPARE(custom->at(1), QStringLiteral("OUT=/tmp/run 1/trace.json"));
    QCOMPARE(custom->at(2), values.backend);
    QCOMPARE(custom->at(3), QStringLiteral("--plan=/tmp/run 1/plan.json"));

    // Shell-like words: single quotes, escaped blanks, empty quotes; an unclosed quote is refused.
    auto words = splitCommandLine(QStringLiteral("a 'b c' d\\ e \"f \\\"g\\\"\" '' x''y"));
    QVERIFY(words);
    QCOMPARE(*words, (QStringList{QStringLiteral("a"), QStringLiteral("b c"), QStringLiteral("d e"),
                                  QStringLiteral("f \"g\""), QString(), QStringLiteral("xy")}));
    QVERIFY(!splitCommandLine(QStringLiteral("srun 'oops")));

    auto unknown = expandLaunchTemplate(QStringLiteral("{backend} --plan {plna}"), values);
    QVERIFY(!unknown);
    QVERIFY(unknown.error().message.find("{plna}") != std::string::npos);
    QVERIFY(!expandLaunchTemplate(QStringLiteral("   "), values));
    values.backend.clear();
    auto missing = expandLaunchTemplate(defaultLaunchTemplate(LaunchTarget::Cpu), values);
    QVERIFY(!missing);
    QVERIFY(missing.error().message.find("pipescope-backend was not found") != std::string::npos);
  }
};

QTEST_MAIN(TestRunProtocol)
#include "test_run_protocol.moc"
