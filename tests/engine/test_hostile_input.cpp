// Hostile and huge input on the reading side: what is not a file, what never ends, what is too
// big or too deep, CSV as spreadsheets write it, and traces no run could have produced. Every
// case is refused with one clear message (or read, where it is legitimate); nothing hangs.
#include <QtTest>

#include <QTemporaryDir>

#include <sstream>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/json_io.h"
#include "engine/plan_file.h"
#include "engine/pytorch_csv.h"
#include "engine/trace_file.h"

using namespace pipescope;
using nlohmann::json;

namespace {

bool hasControlCharacter(const std::string &text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

std::string writeFile(const QTemporaryDir &dir, const std::string &name, const std::string &text) {
  const std::string path = dir.filePath(QString::fromStdString(name)).toStdString();
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file) return path;
  std::fwrite(text.data(), 1, text.size(), file);
  std::fclose(file);
  return path;
}

json simulatedTrace(const std::string &schedule) {
  Plan plan;
  plan.request.name = schedule;
  plan.request.pp = plan.mesh.pp = 4;
  plan.request.microbatches = 8;
  if (schedule == "dualpipe") plan.costs.overlapped_us = 2.5;
  auto evaluation = evaluatePlan(plan);
  if (!evaluation) return json();
  return traceToJson(traceFromEvaluation(plan, *evaluation));
}

Trace simulated(const std::string &schedule, int pp, int microbatches, int chunks = 1) {
  Plan plan;
  plan.request.name = schedule;
  plan.request.pp = plan.mesh.pp = pp;
  plan.request.microbatches = microbatches;
  plan.request.chunks = chunks;
  if (schedule == "dualpipe" || schedule == "dualpipev") plan.costs.overlapped_us = 2.5;
  auto evaluation = evaluatePlan(plan);
  if (!evaluation) return Trace{};
  return traceFromEvaluation(plan, *evaluation);
}

// The streaming reader on JSON text in memory.
Result<TraceDocument> readTraceText(const std::string &text, const TraceReadLimits &limits = {}) {
  std::istringstream input(text);
  return readTraceDocument(input, limits);
}

// Field by field, so a failure says which record differs.
std::string differences(const Trace &a, const Trace &b) {
  if (a.source != b.source) return "source";
  if (a.ops.size() != b.ops.size())
    return "op count " + std::to_string(a.ops.size()) + " vs " + std::to_string(b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const TraceOp &x = a.ops[i], &y = b.ops[i];
    if (x.rank != y.rank || x.step != y.step || x.index != y.index || x.kind != y.kind ||
        x.stage != y.stage || x.microbatch != y.microbatch || x.start_us != y.start_us ||
        x.end_us != y.end_us || x.lane != y.lane || x.overlapped != y.overlapped)
      return "op " + std::to_string(i);
  }
  if (a.transfers.size() != b.transfers.size()) return "transfer count";
  for (std::size_t i = 0; i < a.transfers.size(); ++i) {
    const TraceTransfer &x = a.transfers[i], &y = b.transfers[i];
    if (x.from_rank != y.from_rank || x.to_rank != y.to_rank || x.stage != y.stage ||
        x.microbatch != y.microbatch || x.gradient != y.gradient || x.start_us != y.start_us ||
        x.end_us != y.end_us || x.bytes != y.bytes)
      return "transfer " + std::to_string(i);
  }
  if (a.makespan_us != b.makespan_us || a.bubble_fraction != b.bubble_fraction ||
      a.bubble_ratio != b.bubble_ratio)
    return "metrics";
  if (a.ranks.size() != b.ranks.size()) return "rank count";
  for (std::size_t i = 0; i < a.ranks.size(); ++i)
    if (a.ranks[i].busy_us != b.ranks[i].busy_us || a.ranks[i].idle_us != b.ranks[i].idle_us ||
        a.ranks[i].peak_inflight != b.ranks[i].peak_inflight ||
        a.ranks[i].peak_inflight_microbatches != b.ranks[i].peak_inflight_microbatches)
      return "rank " + std::to_string(i);
  if (a.devices != b.devices || a.clock_error_us != b.clock_error_us) return "devices";
  if (planToJson(a.plan) != planToJson(b.plan)) return "plan";
  return "";
}

std::size_t opCount(const std::vector<std::vector<Op>> &ranks) {
  std::size_t count = 0;
  for (const auto &ops : ranks)
    count += ops.size();
  return count;
}

} // namespace

class TestHostileInput : public QObject {
  Q_OBJECT

private slots:
  void notRegularFilesAreRefused_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("expected");
    QTest::newRow("directory") << "directory"
                               << "is a directory";
    QTest::newRow("FIFO nobody writes to") << "fifo"
                                           << "nothing was written to it";
    QTest::newRow("/dev/zero") << "zero"
                               << "not a regular file";
    QTest::newRow("missing file") << "missing"
                                  << "no such file";
    QTest::newRow("file over the size limit") << "big"
                                              << "at most 1000 are read";
  }
  void notRegularFilesAreRefused() {
    QFETCH(QString, kind);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    std::string path = dir.path().toStdString();
    ReadLimits limits;
    limits.pipe_silence_ms = 300;
    limits.max_bytes = 1000;
    if (kind == "fifo") {
      path += "/plan.json";
      QCOMPARE(::mkfifo(path.c_str(), 0600), 0);
    } else if (kind == "zero") {
      path = "/dev/zero";
    } else if (kind == "missing") {
      path += "/none.json";
    } else if (kind == "big") {
      path = writeFile(dir, "big.json", std::string(1001, ' '));
    }
    // Returning at all is the point for the FIFO: a blocking open or read would hang here.
    auto read = readTextFile(path, limits);
    QVERIFY(!read);
    QVERIFY2(read.error().message.find(expected.toStdString()) != std::string::npos,
             read.error().message.c_str());
  }

  void pipesAreRead_data() {
    QTest::addColumn<int>("bytes");
    QTest::newRow("small, all written before reading") << 100;
    QTest::newRow("larger than the pipe's buffer, written while reading") << 300000;
  }
  void pipesAreRead() {
    QFETCH(int, bytes);
    // What `<(cat plan.json)` hands a program: /dev/fd/N, the read end of a pipe.
    int ends[2];
    QCOMPARE(::pipe(ends), 0);
    std::string content(static_cast<std::size_t>(bytes), 'x');
    content.front() = '{';
    std::thread writer([&] {
      std::size_t done = 0;
      while (done < content.size()) {
        const ssize_t wrote = ::write(ends[1], content.data() + done, content.size() - done);
        if (wrote <= 0) break;
        done += static_cast<std::size_t>(wrote);
      }
      ::close(ends[1]);
    });
    auto read = readTextFile("/dev/fd/" + std::to_string(ends[0]));
    writer.join();
    ::close(ends[0]);
    QVERIFY2(read, read ? "" : read.error().message.c_str());
    QCOMPARE(read->size(), content.size());
    QVERIFY(*read == content);
  }

  void pipeOverTheLimitIsRefused() {
    int ends[2];
    QCOMPARE(::pipe(ends), 0);
    const std::string content(5000, 'x');
    QCOMPARE(::write(ends[1], content.data(), content.size()),
             static_cast<ssize_t>(content.size()));
    ::close(ends[1]);
    ReadLimits limits;
    limits.max_bytes = 1000;
    auto read = readTextFile("/dev/fd/" + std::to_string(ends[0]), limits);
    ::close(ends[0]);
    QVERIFY(!read);
    QVERIFY2(read.error().message.find("at most 1000") != std::string::npos,
             read.error().message.c_str());
  }

  void csvAsPeopleWriteIt_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<int>("ranks");
    QTest::addColumn<int>("ops");
    QTest::newRow("LF") << QByteArray("0F0,0B0\n1F0,1B0\n") << 2 << 4;
    QTest::newRow("UTF-8 BOM (Excel)") << QByteArray("\xEF\xBB\xBF"
                                                     "0F0,0B0\n1F0,1B0\n")
                                       << 2 << 4;
    QTest::newRow("CRLF") << QByteArray("0F0,0B0\r\n1F0,1B0\r\n") << 2 << 4;
    QTest::newRow("CR only") << QByteArray("0F0,0B0\r1F0,1B0\r") << 2 << 4;
    QTest::newRow("no final newline") << QByteArray("0F0,0B0\n1F0,1B0") << 2 << 4;
    QTest::newRow("blank lines between rows") << QByteArray("0F0,0B0\n\n  \n1F0,1B0\n") << 2 << 4;
    QTest::newRow("blank lines after rows") << QByteArray("0F0,0B0\n1F0,1B0\n\n\r\n \n") << 2 << 4;
    QTest::newRow("BOM, CRLF, blank lines and idle cells")
        << QByteArray("\xEF\xBB\xBF"
                      "0F0,,0B0\r\n\r\n1F0, ,1B0\r\n\r\n")
        << 2 << 4;
  }
  void csvAsPeopleWriteIt() {
    QFETCH(QByteArray, text);
    QFETCH(int, ranks);
    QFETCH(int, ops);
    auto parsed = parsePytorchCsv(std::string_view(text.constData(), text.size()));
    QVERIFY2(parsed, parsed ? "" : parsed.error().message.c_str());
    QCOMPARE(static_cast<int>(parsed->size()), ranks);
    QCOMPARE(static_cast<int>(opCount(*parsed)), ops);
    QVERIFY(makeCustomSchedule(std::move(*parsed)));
  }

  void malformedCsvNamesRowAndColumn_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<QString>("expected");
    QTest::newRow("bad cell, CRLF")
        << QByteArray("0F0,0B0\r\n1F0,1X0\r\n") << "CSV row 2 (rank 1), column 2: '1X0'";
    QTest::newRow("bad cell after blank lines, CR only")
        << QByteArray("0F0,0B0\r\r1F0,zz\r") << "CSV row 3 (rank 1), column 2: 'zz'";
    QTest::newRow("bad cell, BOM") << QByteArray("\xEF\xBB\xBF"
                                                 "Q,0B0\n")
                                   << "CSV row 1 (rank 0), column 1: 'Q'";
    QTest::newRow("control characters in a cell") << QByteArray("0F\x01\x1b"
                                                                "0\n")
                                                  << "'0F\\x01\\x1b0'";
    QTest::newRow("a raw CR inside a quoted cell") << QByteArray("\"0F\r\n") << "'0F'";
    QTest::newRow("nothing but blank lines") << QByteArray("\r\n\n\r") << "has no rows";
  }
  void malformedCsvNamesRowAndColumn() {
    QFETCH(QByteArray, text);
    QFETCH(QString, expected);
    auto parsed = parsePytorchCsv(std::string_view(text.constData(), text.size()));
    QVERIFY(!parsed);
    const std::string &message = parsed.error().message;
    QVERIFY2(message.find(expected.toStdString()) != std::string::npos, message.c_str());
    QVERIFY2(!hasControlCharacter(message), message.c_str());
  }

  void controlCharactersAreEscaped() {
    QCOMPARE(escapeControlCharacters("a\rb\nc\td\x01\x7f"), std::string("a\\rb\\nc\\td\\x01\\x7f"));
    QCOMPARE(escapeControlCharacters("plain é"), std::string("plain é"));
    // A path with control characters, in every reader's message.
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string missing = dir.path().toStdString() + "/bad\r\nname\x1b.json";
    auto read = readTextFile(missing);
    QVERIFY(!read);
    QVERIFY2(!hasControlCharacter(read.error().message), read.error().message.c_str());
    QVERIFY2(read.error().message.find("bad\\r\\nname\\x1b.json") != std::string::npos,
             read.error().message.c_str());
    const std::string path = writeFile(dir, "bad\rplan.json", "{\"format\": 3}");
    auto plan = loadPlan(path);
    QVERIFY(!plan);
    QVERIFY2(!hasControlCharacter(plan.error().message), plan.error().message.c_str());
    QVERIFY2(plan.error().message.find("bad\\rplan.json") != std::string::npos,
             plan.error().message.c_str());
    // File content quoted in a message.
    json trace = simulatedTrace("1f1b");
    trace["ops"][2]["kind"] = "F\r\n";
    auto refused = traceFromJson(trace);
    QVERIFY(!refused);
    QVERIFY2(!hasControlCharacter(refused.error().message), refused.error().message.c_str());
    QVERIFY2(refused.error().message.find("/ops/2/kind") != std::string::npos,
             refused.error().message.c_str());
  }

  void hugeJsonIsRefusedBeforeParsing_data() {
    QTest::addColumn<QString>("shape");
    QTest::addColumn<QString>("expected");
    QTest::newRow("nested 100000 deep") << "deep"
                                        << "nests deeper than 64 levels";
    QTest::newRow("nested 65 deep") << "deep65"
                                    << "nests deeper than 64 levels";
    QTest::newRow("too many values") << "values"
                                     << "holds more than 1000 values";
    QTest::newRow("too many objects") << "objects"
                                      << "holds more than 1000 values";
    QTest::newRow("too many bytes") << "bytes"
                                    << "at most 5000 are read";
    QTest::newRow("broken after many values") << "broken"
                                              << "not valid JSON";
  }
  void hugeJsonIsRefusedBeforeParsing() {
    QFETCH(QString, shape);
    QFETCH(QString, expected);
    JsonLimits limits;
    limits.max_values = 1000;
    limits.max_bytes = 5000;
    std::string text;
    if (shape == "deep") {
      limits.max_bytes = kMaxJsonBytes;
      text = std::string(100000, '[') + std::string(100000, ']');
    } else if (shape == "deep65") {
      text = std::string(65, '[') + std::string(65, ']');
    } else if (shape == "values") {
      text = "[0";
      for (int i = 0; i < 1000; ++i)
        text += ",0";
      text += "]";
    } else if (shape == "objects") {
      text = "{\"a\":[{}";
      for (int i = 0; i < 999; ++i)
        text += ",{}";
      text += "]}";
    } else if (shape == "bytes") {
      text = "[\"" + std::string(5000, 'x') + "\"]";
    } else if (shape == "broken") {
      text = "[0";
      for (int i = 0; i < 500; ++i)
        text += ",0";
      text += ",\x01]";
    }
    auto parsed = parseJsonLimited(text, limits);
    QVERIFY(!parsed);
    QVERIFY2(parsed.error().message.find(expected.toStdString()) != std::string::npos,
             parsed.error().message.c_str());
    QVERIFY2(!hasControlCharacter(parsed.error().message), parsed.error().message.c_str());
  }

  void jsonWithinTheLimitsIsParsed() {
    JsonLimits limits;
    limits.max_values = 1000;
    std::string text = "[0";
    for (int i = 0; i < 998; ++i)
      text += ",0";
    text += "]"; // 999 numbers and the array: exactly 1000 values
    auto parsed = parseJsonLimited(text, limits);
    QVERIFY2(parsed, parsed ? "" : parsed.error().message.c_str());
    QCOMPARE(parsed->size(), std::size_t{999});
    QVERIFY(parseJsonLimited(std::string(64, '[') + std::string(64, ']')));
  }

  void impossibleTracesAreRefusedByPointer_data() {
    QTest::addColumn<QString>("defect");
    QTest::addColumn<QString>("expected");
    QTest::newRow("duplicate op") << "duplicate"
                                  << ": duplicate of /ops/17 (rank 1 ";
    QTest::newRow("op on a rank the plan lacks") << "rank"
                                                 << "/ops/5/rank: 9 is not a pipeline rank";
    QTest::newRow("op on a stage the plan lacks") << "stage"
                                                  << "/ops/5/stage: 7 is not a stage";
    QTest::newRow("microbatch the plan lacks") << "microbatch"
                                               << "/ops/5/microbatch: 8 is not";
    QTest::newRow("overlapping ops on one lane") << "overlap"
                                                 << "/ops/1: overlaps /ops/0 on rank 0";
    QTest::newRow("overlapped mark on overlapping ops") << "overlapped"
                                                        << "/ops/1: overlaps /ops/0 on rank 0";
    QTest::newRow("negative start") << "negative"
                                    << "/ops/3/start_us: expected a number between 0";
    QTest::newRow("non-finite end") << "nan"
                                    << "/ops/3/end_us: expected a number between 0";
    QTest::newRow("infinite end") << "inf"
                                  << "/ops/4/end_us: expected a number between 0";
    QTest::newRow("negative transfer time") << "comm"
                                            << "/comms/2/start_us";
  }
  void impossibleTracesAreRefusedByPointer() {
    QFETCH(QString, defect);
    QFETCH(QString, expected);
    json trace = simulatedTrace("1f1b");
    QVERIFY(trace.is_object());
    QVERIFY(traceFromJson(trace)); // the untouched trace is fine
    auto &ops = trace["ops"];
    QCOMPARE(ops[0]["rank"].get<int>(), 0);
    QCOMPARE(ops[1]["rank"].get<int>(), 0);
    if (defect == "duplicate") {
      json copy = ops[17];
      copy["index"] = 99;
      ops.push_back(copy);
    } else if (defect == "rank") {
      ops[5]["rank"] = 9;
    } else if (defect == "stage") {
      ops[5]["stage"] = 7;
    } else if (defect == "microbatch") {
      ops[5]["microbatch"] = 8;
    } else if (defect == "overlap" || defect == "overlapped") {
      ops[1]["start_us"] = ops[0]["start_us"].get<double>() + 0.01;
      ops[1]["end_us"] = ops[1]["start_us"].get<double>() + 1.0;
      if (defect == "overlapped") ops[0]["overlapped"] = ops[1]["overlapped"] = true;
    } else if (defect == "negative") {
      ops[3]["start_us"] = -1.0;
    } else if (defect == "nan") {
      ops[3]["end_us"] = std::numeric_limits<double>::quiet_NaN();
    } else if (defect == "inf") {
      ops[4]["end_us"] = std::numeric_limits<double>::infinity();
    } else if (defect == "comm") {
      trace["comms"][2]["start_us"] = -3.0;
    }
    auto refused = traceFromJson(trace);
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find(expected.toStdString()) != std::string::npos,
             refused.error().message.c_str());
    // The streaming reader refuses its text with the message the document reader gives for the
    // same text (NaN and infinity are written as null, so compare with the text's document).
    for (const int indent : {-1, 1}) {
      const std::string text = trace.dump(indent);
      auto streamed = readTraceText(text);
      QVERIFY(!streamed);
      QCOMPARE(streamed.error().message, traceFromJson(json::parse(text)).error().message);
    }
  }

  void streamedTracesLoadBackEqual_data() {
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<int>("chunks");
    QTest::newRow("1f1b") << "1f1b" << 1;
    QTest::newRow("gpipe") << "gpipe" << 1;
    QTest::newRow("interleaved-1f1b V=3") << "interleaved-1f1b" << 3;
    QTest::newRow("zb-h1") << "zb-h1" << 1;
    QTest::newRow("zb-v") << "zb-v" << 1;
    QTest::newRow("dualpipe") << "dualpipe" << 1;
    QTest::newRow("dualpipev") << "dualpipev" << 1;
  }
  void streamedTracesLoadBackEqual() {
    QFETCH(QString, schedule);
    QFETCH(int, chunks);
    const Trace trace = simulated(schedule.toStdString(), 4, 12, chunks);
    QVERIFY(!trace.ops.empty());
    QVERIFY(!trace.transfers.empty());
    if (schedule.startsWith("dualpipe")) {
      const auto pairs = std::count_if(trace.ops.begin(), trace.ops.end(),
                                       [](const TraceOp &op) { return op.overlapped; });
      QVERIFY(pairs > 0);
    }
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("trace.json").toStdString();
    QVERIFY(saveTrace(path, trace));
    auto loaded = loadTrace(path);
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    QCOMPARE(QString::fromStdString(differences(trace, *loaded)), QString());
    // The document reader agrees, and compact text (as streamed writers write it) reads the same.
    auto fromDocument = traceFromJson(traceToJson(trace));
    QVERIFY(fromDocument);
    QCOMPARE(QString::fromStdString(differences(trace, *fromDocument)), QString());
    auto compact = readTraceText(traceToJson(trace).dump());
    QVERIFY2(compact, compact ? "" : compact.error().message.c_str());
    QCOMPARE(QString::fromStdString(differences(trace, compact->trace)), QString());
    // A measured trace keeps its devices, and the rest of the document keeps extra blocks.
    Trace measured = trace;
    measured.source = "measured";
    measured.devices = {"gpu0", "gpu1", "gpu2", "gpu3"};
    measured.clock_error_us = 1.5;
    json document = traceToJson(measured);
    document["backend"] = {{"workload", {{"expected_time_factor", 2.0}}}};
    auto withExtra = readTraceText(document.dump());
    QVERIFY2(withExtra, withExtra ? "" : withExtra.error().message.c_str());
    QCOMPARE(QString::fromStdString(differences(measured, withExtra->trace)), QString());
    QCOMPARE(withExtra->rest["backend"]["workload"]["expected_time_factor"].get<double>(), 2.0);
    QVERIFY(!withExtra->rest.contains("ops"));
    QVERIFY(!withExtra->rest.contains("comms"));
  }

  void badRecordDeepInTheOpsIsRefusedByPointer_data() {
    QTest::addColumn<QString>("defect");
    QTest::addColumn<QString>("expected");
    QTest::newRow("string time") << "string"
                                 << "start_us: expected a number, got a string";
    QTest::newRow("not an object") << "scalar"
                                   << ": expected an object, got an integer";
    QTest::newRow("array record") << "array"
                                  << ": expected an object, got an array";
    QTest::newRow("unknown kind") << "kind"
                                  << "/kind: expected one of F, I, W, B, got \"X\"";
    QTest::newRow("ends before it starts") << "backwards"
                                           << "/end_us: ends before it starts";
    QTest::newRow("missing stage") << "missing"
                                   << "/stage: missing; expected an integer";
  }
  void badRecordDeepInTheOpsIsRefusedByPointer() {
    QFETCH(QString, defect);
    QFETCH(QString, expected);
    json trace = traceToJson(simulated("interleaved-1f1b", 8, 32, 2));
    auto &ops = trace["ops"];
    QVERIFY(ops.size() > 1000);
    const std::size_t at = ops.size() - 7;
    if (defect == "string")
      ops[at]["start_us"] = "12";
    else if (defect == "scalar")
      ops[at] = 5;
    else if (defect == "array")
      ops[at] = json::array({1, 2});
    else if (defect == "kind")
      ops[at]["kind"] = "X";
    else if (defect == "backwards")
      ops[at]["end_us"] = 0.0;
    else if (defect == "missing")
      ops[at].erase("stage");
    // A later bad record is not the one reported.
    ops[at + 3]["rank"] = "late";
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = writeFile(dir, "trace.json", trace.dump(1));
    auto loaded = loadTrace(path);
    QVERIFY(!loaded);
    const std::string wanted = path + ": /ops/" + std::to_string(at);
    QVERIFY2(loaded.error().message.starts_with(wanted), loaded.error().message.c_str());
    QVERIFY2(loaded.error().message.find(expected.toStdString()) != std::string::npos,
             loaded.error().message.c_str());
    auto document = traceFromJson(trace);
    QVERIFY(!document);
    QCOMPARE(path + ": " + document.error().message, loaded.error().message);
  }

  void tracesPastTheValueCapLoad() {
    // The value cap bounds what is built at once; streamed op and comm records do not count.
    // Lowered here so a small trace is past it: 1536 ops of about 10 values each.
    const Trace trace = simulated("1f1b", 8, 96);
    QCOMPARE(trace.ops.size(), std::size_t{8 * 96 * 2});
    const std::string text = traceToJson(trace).dump();
    TraceReadLimits limits;
    limits.json.max_values = 2000;
    JsonLimits documentLimits;
    documentLimits.max_values = limits.json.max_values;
    auto document = parseJsonLimited(text, documentLimits);
    QVERIFY(!document);
    QVERIFY2(document.error().message.find("holds more than 2000 values") != std::string::npos,
             document.error().message.c_str());
    auto streamed = readTraceText(text, limits);
    QVERIFY2(streamed, streamed ? "" : streamed.error().message.c_str());
    QCOMPARE(QString::fromStdString(differences(trace, streamed->trace)), QString());
    // The records have their own cap, per array.
    limits.max_records = trace.ops.size() - 1;
    auto tooMany = readTraceText(text, limits);
    QVERIFY(!tooMany);
    QVERIFY2(tooMany.error().message.starts_with("/comms: more than 1535 records") ||
                 tooMany.error().message.starts_with("/ops: more than 1535 records"),
             tooMany.error().message.c_str());
    limits.max_records = std::max(trace.ops.size(), trace.transfers.size());
    QVERIFY(readTraceText(text, limits));
    // One record cannot hold more than the value cap, nor the rest of the document.
    json huge = traceToJson(trace);
    huge["ops"][100]["padding"] = json::array();
    for (int i = 0; i < 3000; ++i)
      huge["ops"][100]["padding"].push_back(i);
    auto refused = readTraceText(huge.dump(), limits);
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("more than 2000 values") != std::string::npos,
             refused.error().message.c_str());
    json extra = traceToJson(trace);
    extra["extra"] = json::array();
    for (int i = 0; i < 3000; ++i)
      extra["extra"].push_back(i);
    QVERIFY(!readTraceText(extra.dump(), limits));
  }

  void streamedTraceLimits() {
    const Trace trace = simulated("1f1b", 4, 8);
    json document = traceToJson(trace);
    // Depth, everywhere including inside a record.
    json deep = 1;
    for (int i = 0; i < 70; ++i)
      deep = json::array({deep});
    json nested = document;
    nested["ops"][3]["lane"] = deep;
    auto refused = readTraceText(nested.dump());
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("nests deeper than 64 levels") != std::string::npos,
             refused.error().message.c_str());
    // Broken text, and a file past the byte limit named with its path.
    auto broken = readTraceText(document.dump().substr(0, 5000));
    QVERIFY(!broken);
    QVERIFY2(broken.error().message.starts_with("not valid JSON: "),
             broken.error().message.c_str());
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = writeFile(dir, "trace.json", document.dump());
    TraceReadLimits limits;
    limits.json.max_bytes = 4000;
    auto big = loadTraceDocument(path, limits);
    QVERIFY(!big);
    QVERIFY2(big.error().message.find("at most 4000 are read") != std::string::npos,
             big.error().message.c_str());
    QVERIFY2(big.error().message.find(path) != std::string::npos, big.error().message.c_str());
    // Not a trace: the format check still speaks first, and ops that are not an array are named.
    auto plan = readTraceText(document["plan"].dump());
    QVERIFY(!plan);
    QCOMPARE(plan.error().message, traceFromJson(document["plan"]).error().message);
    json scalarOps = document;
    scalarOps["ops"] = 3;
    auto notArray = readTraceText(scalarOps.dump());
    QVERIFY(!notArray);
    QCOMPARE(notArray.error().message, traceFromJson(scalarOps).error().message);
    QVERIFY2(notArray.error().message.starts_with("/ops: "), notArray.error().message.c_str());
    // A repeated key replaces the earlier value, as json::parse does.
    std::string text = document.dump();
    text.insert(1, "\"ops\":[1,2],");
    auto repeated = readTraceText(text);
    QVERIFY2(repeated, repeated ? "" : repeated.error().message.c_str());
    QCOMPARE(repeated->trace.ops.size(), trace.ops.size());
    QVERIFY(!readTraceText("[1,2,3]"));
    QVERIFY(!readTraceText(""));
  }

  void overlappedPairsAreNotOverlaps() {
    // DualPipe records an overlapped F&B pair as two parts with the same start and end.
    json trace = simulatedTrace("dualpipe");
    QVERIFY(trace.is_object());
    int overlapped = 0;
    for (const auto &op : trace["ops"])
      overlapped += op.value("overlapped", false) ? 1 : 0;
    QVERIFY(overlapped > 0);
    auto read = traceFromJson(trace);
    QVERIFY2(read, read ? "" : read.error().message.c_str());
    QCOMPARE(read->ops.size(), trace["ops"].size());
  }

  void traceFileDuplicateIsRefusedWithItsPath() {
    json trace = simulatedTrace("1f1b");
    trace["ops"].push_back(trace["ops"][17]);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = writeFile(dir, "trace.json", trace.dump());
    auto loaded = loadTrace(path);
    QVERIFY(!loaded);
    const std::string wanted =
        path + ": /ops/" + std::to_string(trace["ops"].size() - 1) + ": duplicate of /ops/17";
    QVERIFY2(loaded.error().message.find(wanted) == 0, loaded.error().message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestHostileInput)
#include "test_hostile_input.moc"
