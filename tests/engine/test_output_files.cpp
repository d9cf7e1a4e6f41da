// engine/output_file.{h,cpp} and the streamed trace writers: atomic writes through symlinks,
// devices and FIFOs written in place, all-or-none transactions, gzip, and streamed traces that
// read back as the documents the old nlohmann-building writers produced.
#include <QtTest>

#include <QTemporaryDir>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/json_io.h"
#include "engine/output_file.h"
#include "engine/plan_file.h"
#include "engine/trace_file.h"

using namespace pipescope;
using nlohmann::json;

namespace {

// The writers as they were before streaming (commit a1b0959), kept as the reference the
// streamed text must parse back to.
json oldTraceToJson(const Trace &trace) {
  json out;
  out["format"] = kTraceFormat;
  out["version"] = kTraceVersion;
  out["source"] = trace.source;
  out["plan"] = planToJson(trace.plan);
  json ops = json::array();
  for (const auto &op : trace.ops) {
    json record = {{"rank", op.rank},         {"step", op.step},
                   {"index", op.index},       {"kind", std::string(opKindLetter(op.kind))},
                   {"stage", op.stage},       {"microbatch", op.microbatch},
                   {"start_us", op.start_us}, {"end_us", op.end_us},
                   {"lane", op.lane}};
    if (op.overlapped) record["overlapped"] = true;
    ops.push_back(std::move(record));
  }
  out["ops"] = std::move(ops);
  json transfers = json::array();
  for (const auto &t : trace.transfers)
    transfers.push_back({{"from_rank", t.from_rank},
                         {"to_rank", t.to_rank},
                         {"stage", t.stage},
                         {"microbatch", t.microbatch},
                         {"kind", t.gradient ? "gradient" : "activation"},
                         {"start_us", t.start_us},
                         {"end_us", t.end_us},
                         {"bytes", t.bytes}});
  out["comms"] = std::move(transfers);
  json ranks = json::array();
  for (const auto &r : trace.ranks)
    ranks.push_back({{"busy", r.busy_us},
                     {"idle", r.idle_us},
                     {"peak_inflight", r.peak_inflight},
                     {"peak_inflight_microbatches", r.peak_inflight_microbatches}});
  out["metrics"] = {{"makespan", trace.makespan_us},
                    {"bubble_fraction", trace.bubble_fraction},
                    {"bubble_ratio", trace.bubble_ratio},
                    {"ranks", std::move(ranks)}};
  if (trace.source == "measured") {
    out["devices"] = trace.devices;
    out["clock_error_us"] = trace.clock_error_us;
  }
  return out;
}

json oldChromeTrace(const Trace &trace) {
  json events = json::array();
  int max_rank = -1;
  for (const auto &op : trace.ops)
    max_rank = std::max(max_rank, op.rank);
  for (int r = 0; r <= max_rank; ++r) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", r},
                      {"tid", 0},
                      {"args", {{"name", "compute"}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", r},
                      {"tid", 1},
                      {"args", {{"name", "p2p"}}}});
  }
  for (const auto &op : trace.ops) {
    const std::string name = std::string(opKindLetter(op.kind)) + std::to_string(op.microbatch) +
                             " (stage " + std::to_string(op.stage) + ")";
    json args = {{"stage", op.stage},
                 {"microbatch", op.microbatch},
                 {"kind", std::string(opKindName(op.kind))},
                 {"step", op.step}};
    if (op.overlapped) args["overlapped"] = true;
    events.push_back({{"name", name},
                      {"cat", std::string(opKindName(op.kind))},
                      {"ph", "X"},
                      {"pid", op.rank},
                      {"tid", op.lane},
                      {"ts", op.start_us},
                      {"dur", op.end_us - op.start_us},
                      {"args", std::move(args)}});
  }
  // Each transfer: a slice on the sender's p2p lane and a flow arrow to the receiver.
  for (std::size_t i = 0; i < trace.transfers.size(); ++i) {
    const auto &t = trace.transfers[i];
    const std::string name = std::string(t.gradient ? "grad " : "act ") + std::to_string(t.stage) +
                             ":" + std::to_string(t.microbatch) + " → rank " +
                             std::to_string(t.to_rank);
    events.push_back({{"name", name},
                      {"cat", "p2p"},
                      {"ph", "X"},
                      {"pid", t.from_rank},
                      {"tid", 1},
                      {"ts", t.start_us},
                      {"dur", std::max(0.0, t.end_us - t.start_us)},
                      {"args", {{"bytes", t.bytes}, {"to_rank", t.to_rank}}}});
    events.push_back({{"name", "p2p"},
                      {"cat", "p2p"},
                      {"ph", "s"},
                      {"id", i},
                      {"pid", t.from_rank},
                      {"tid", 1},
                      {"ts", t.start_us}});
    events.push_back({{"name", "p2p"},
                      {"cat", "p2p"},
                      {"ph", "f"},
                      {"bp", "e"},
                      {"id", i},
                      {"pid", t.to_rank},
                      {"tid", 0},
                      {"ts", t.end_us}});
  }
  for (std::size_t r = 0; r < trace.memory.size(); ++r)
    for (const auto &point : trace.memory[r])
      events.push_back(
          {{"name", "in-flight activations"},
           {"ph", "C"},
           {"pid", static_cast<int>(r)},
           {"ts", point.time_us},
           {"args",
            {{"chunks", point.inflight_chunks}, {"microbatches", point.inflight_microbatches}}}});
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
}

std::string contentOf(const std::string &path) {
  auto text = readTextFile(path);
  return text ? *text : std::string("<unreadable: ") + text.error().message + ">";
}

// Every entry in the folder: a leftover temporary would show up here.
QStringList entries(const QTemporaryDir &dir) {
  return QDir(dir.path())
      .entryList(QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot, QDir::Name);
}

Evaluation evaluated(const Plan &plan, bool memory) {
  SimulationOptions options;
  options.memory_timeline = memory;
  auto evaluation = evaluatePlan(plan, options);
  if (!evaluation) qFatal("%s", evaluation.error().message.c_str());
  return std::move(*evaluation);
}

Plan planOf(const std::string &name, int pp, int microbatches, int chunks) {
  Plan plan;
  plan.request = {name, pp, microbatches, chunks, 0};
  plan.mesh.pp = pp;
  plan.costs.p2p_latency_us = 0.5;
  plan.costs.p2p_bandwidth_gbps = 10;
  plan.costs.activation_bytes = 1e6;
  return plan;
}

std::string streamed(const std::function<void(const TextSink &)> &produce) {
  std::string text;
  produce([&text](std::string_view piece) { text += piece; });
  return text;
}

} // namespace

class TestOutputFiles : public QObject {
  Q_OBJECT

private slots:
  void writesThroughSymlinksKeepTheLink_data() {
    QTest::addColumn<QString>("link_target"); // relative to the folder, as the link holds it
    QTest::addColumn<bool>("target_exists");
    QTest::newRow("relative target") << "real.json" << true;
    QTest::newRow("absolute target") << "@ABS@real.json" << true;
    QTest::newRow("target in a subfolder") << "sub/real.json" << true;
    QTest::newRow("dangling link: the target is created") << "real.json" << false;
  }
  void writesThroughSymlinksKeepTheLink() {
    QFETCH(QString, link_target);
    QFETCH(bool, target_exists);
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkdir("sub"));
    std::string target_text = link_target.toStdString();
    if (target_text.starts_with("@ABS@"))
      target_text = dir.filePath(QString::fromStdString(target_text.substr(5))).toStdString();
    const std::string target =
        target_text.starts_with('/')
            ? target_text
            : dir.filePath(QString::fromStdString(target_text)).toStdString();
    if (target_exists) QVERIFY(writeTextFile(target, "old"));
    const std::string link = dir.filePath("link.json").toStdString();
    QCOMPARE(::symlink(target_text.c_str(), link.c_str()), 0);
    // A chain: link2 -> link.json -> target.
    const std::string link2 = dir.filePath("link2.json").toStdString();
    QCOMPARE(::symlink("link.json", link2.c_str()), 0);

    QVERIFY(writeTextFile(link2, "new"));
    QVERIFY(std::filesystem::is_symlink(link));
    QVERIFY(std::filesystem::is_symlink(link2));
    QCOMPARE(contentOf(target), std::string("new"));
    QVERIFY(std::filesystem::is_regular_file(std::filesystem::symlink_status(target)));
    // No temporary left beside the link or the target.
    for (const auto &name :
         entries(dir) + QDir(dir.filePath("sub")).entryList(QDir::Files | QDir::Hidden))
      QVERIFY2(!name.startsWith('.'), qPrintable(name));
  }

  void replacingKeepsTheFileMode() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("mode.json").toStdString();
    QVERIFY(writeTextFile(path, "old"));
    QCOMPARE(::chmod(path.c_str(), 0640), 0);
    QVERIFY(writeTextFile(path, "new"));
    struct stat info {};
    QCOMPARE(::stat(path.c_str(), &info), 0);
    QCOMPARE(info.st_mode & 07777, mode_t{0640});
    QCOMPARE(contentOf(path), std::string("new"));
  }

  void devNullStaysACharacterDevice() {
    auto output = OutputFile::open("/dev/null");
    QVERIFY(output);
    QVERIFY(output->inPlace());
    output->write("discarded");
    QVERIFY(output->commit());
    struct stat info {};
    QCOMPARE(::lstat("/dev/null", &info), 0);
    QVERIFY(S_ISCHR(info.st_mode));
  }

  void devFullGivesTheReason() {
    const auto status = writeTextFile("/dev/full", "x");
    QVERIFY(!status);
    QVERIFY2(status.error().message.find("'/dev/full'") != std::string::npos,
             status.error().message.c_str());
    QVERIFY2(status.error().message.find("No space left on device") != std::string::npos,
             status.error().message.c_str());
  }

  void missingFolderGivesTheReason() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("missing/x.json").toStdString();
    const auto status = writeTextFile(path, "x");
    QVERIFY(!status);
    QVERIFY2(status.error().message.find(path) != std::string::npos,
             status.error().message.c_str());
    QVERIFY2(status.error().message.find("No such file or directory") != std::string::npos,
             status.error().message.c_str());
  }

  void aFifoIsWrittenInPlace() {
    QTemporaryDir dir;
    const std::string fifo = dir.filePath("pipe").toStdString();
    QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
    std::string received;
    std::thread reader([&] {
      const int fd = ::open(fifo.c_str(), O_RDONLY);
      char buffer[4096];
      ssize_t n = 0;
      while (fd >= 0 && (n = ::read(fd, buffer, sizeof buffer)) > 0)
        received.append(buffer, static_cast<std::size_t>(n));
      if (fd >= 0) ::close(fd);
    });
    const auto status = writeTextFile(fifo, "through the pipe");
    reader.join();
    QVERIFY(status);
    QCOMPARE(received, std::string("through the pipe"));
    struct stat info {};
    QCOMPARE(::lstat(fifo.c_str(), &info), 0);
    QVERIFY(S_ISFIFO(info.st_mode));
    QCOMPARE(entries(dir), QStringList{"pipe"});
  }

  void dashIsStandardOutput() {
    QVERIFY(isStandardOutput("-"));
    QVERIFY(isStandardOutput("/dev/stdout"));
    QVERIFY(!isStandardOutput("./-x"));
    auto output = OutputFile::open("-");
    QVERIFY(output);
    QVERIFY(output->inPlace());
  }

  void twoWritersOfOnePathDoNotCollide() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("shared.json").toStdString();
    auto first = OutputFile::open(path);
    auto second = OutputFile::open(path);
    QVERIFY(first && second);
    QCOMPARE(entries(dir).size(), 2); // two distinct temporaries
    first->write("first");
    second->write("second");
    QVERIFY(first->commit());
    QVERIFY(second->commit());
    QCOMPARE(contentOf(path), std::string("second"));
    QCOMPARE(entries(dir), QStringList{"shared.json"});
  }

  void anAbandonedOutputLeavesNothing() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("abandoned.json").toStdString();
    {
      auto output = OutputFile::open(path);
      QVERIFY(output);
      output->write("never committed");
    }
    QVERIFY(entries(dir).isEmpty());
  }

  void aFailedOutputAmongSeveralLeavesNone_data() {
    QTest::addColumn<QString>("failing"); // the output that fails
    QTest::newRow("a device that is full") << "/dev/full";
    QTest::newRow("a folder that is missing") << "@DIR@missing/x.json";
  }
  void aFailedOutputAmongSeveralLeavesNone() {
    QFETCH(QString, failing);
    QTemporaryDir dir;
    const std::string kept = dir.filePath("kept.json").toStdString();
    const std::string fresh = dir.filePath("fresh.csv").toStdString();
    QVERIFY(writeTextFile(kept, "old"));
    std::string failing_path = failing.toStdString();
    if (failing_path.starts_with("@DIR@"))
      failing_path = dir.filePath(QString::fromStdString(failing_path.substr(5))).toStdString();
    OutputTransaction outputs;
    QVERIFY(outputs.add(kept));
    QVERIFY(outputs.add(fresh));
    auto bad = outputs.add(failing_path);
    if (bad) {
      for (const auto index : outputs.writeOrder())
        outputs.output(index).write("new");
      const auto status = outputs.commit();
      QVERIFY(!status);
      QVERIFY2(status.error().message.find(failing_path) != std::string::npos,
               status.error().message.c_str());
    } else {
      outputs.discard(); // what a caller does when one output cannot even be opened
    }
    QCOMPARE(contentOf(kept), std::string("old"));
    QVERIFY(!std::filesystem::exists(fresh));
    QCOMPARE(entries(dir), QStringList{"kept.json"});
  }

  void aTransactionWritesInPlaceOutputsLast() {
    QTemporaryDir dir;
    OutputTransaction outputs;
    QVERIFY(outputs.add("/dev/null"));
    QVERIFY(outputs.add(dir.filePath("a.json").toStdString()));
    QCOMPARE(outputs.writeOrder(), (std::vector<std::size_t>{1, 0}));
    for (const auto index : outputs.writeOrder())
      outputs.output(index).write("content");
    QVERIFY(outputs.commit());
    QCOMPARE(contentOf(dir.filePath("a.json").toStdString()), std::string("content"));
  }

  void gzippedTraceRoundTrips() {
    const Plan plan = planOf("1f1b", 4, 8, 1);
    const Evaluation evaluation = evaluated(plan, false);
    const Trace trace = traceFromEvaluation(plan, evaluation);
    QTemporaryDir dir;
    const std::string path = dir.filePath("trace.json.gz").toStdString();
    QVERIFY(saveTrace(path, trace));
    std::ifstream file(path, std::ios::binary);
    char magic[2] = {};
    file.read(magic, 2);
    QCOMPARE(static_cast<unsigned char>(magic[0]), 0x1f); // gzip, not plain JSON
    QCOMPARE(static_cast<unsigned char>(magic[1]), 0x8b);
    auto loaded = loadTrace(path);
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    QCOMPARE(loaded->ops.size(), trace.ops.size());
    QCOMPARE(traceToJson(*loaded), traceToJson(trace));
  }

  void aDamagedGzipIsRefused() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("cut.json.gz").toStdString();
    QVERIFY(writeTextFile(path, std::string(50000, 'x')));
    std::ifstream file(path, std::ios::binary); // the compressed bytes, not inflated
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    QVERIFY(text.starts_with("\x1f\x8b"));
    QVERIFY(
        writeTextFile(dir.filePath("cut2.json").toStdString(), text.substr(0, text.size() / 2)));
    const auto loaded = loadTrace(dir.filePath("cut2.json").toStdString());
    QVERIFY(!loaded);
    QVERIFY2(loaded.error().message.find("gzip") != std::string::npos,
             loaded.error().message.c_str());
  }

  void streamedTracesEqualTheOldDocuments_data() {
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("microbatches");
    QTest::addColumn<int>("chunks");
    QTest::newRow("1f1b") << "1f1b" << 4 << 8 << 1;
    QTest::newRow("interleaved") << "interleaved-1f1b" << 2 << 4 << 2;
    QTest::newRow("zb-h1 (I and W)") << "zb-h1" << 3 << 6 << 1;
    QTest::newRow("dualpipev (overlapped pairs)") << "dualpipev" << 4 << 10 << 2;
  }
  void streamedTracesEqualTheOldDocuments() {
    QFETCH(QString, schedule);
    QFETCH(int, pp);
    QFETCH(int, microbatches);
    QFETCH(int, chunks);
    const Plan plan = planOf(schedule.toStdString(), pp, microbatches, chunks);
    const Evaluation evaluation = evaluated(plan, true);
    const Trace trace = traceFromEvaluation(plan, evaluation);
    QVERIFY(!trace.ops.empty());
    QVERIFY(!trace.transfers.empty());
    QVERIFY(!trace.memory.empty());
    const json old_trace = oldTraceToJson(trace);
    const json old_chrome = oldChromeTrace(trace);
    QCOMPARE(traceToJson(trace), old_trace);
    QCOMPARE(chromeTrace(trace), old_chrome);
    QCOMPARE(json::parse(
                 streamed([&](const TextSink &w) { streamSimulatedTrace(w, plan, evaluation); })),
             old_trace);
    QCOMPARE(json::parse(streamed(
                 [&](const TextSink &w) { streamSimulatedChromeTrace(w, plan, evaluation); })),
             old_chrome);
  }

  void streamedMeasuredTraceKeepsDevicesAndExtraFields() {
    const Plan plan = planOf("1f1b", 2, 2, 1);
    Trace trace = traceFromEvaluation(plan, evaluated(plan, false));
    trace.source = "measured";
    trace.devices = {"cpu 0", "cpu \"1\""};
    trace.clock_error_us = 2.5;
    const json extra = {{"backend", {{"device", "cpu"}}}};
    json expected = oldTraceToJson(trace);
    expected["backend"] = extra["backend"];
    const json written =
        json::parse(streamed([&](const TextSink &w) { streamTrace(w, trace, extra); }));
    QCOMPARE(written, expected);
    QVERIFY(traceFromJson(written));
  }
};

QTEST_GUILESS_MAIN(TestOutputFiles)
#include "test_output_files.moc"
