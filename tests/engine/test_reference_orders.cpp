// pipescope's generated orders against the orders their references generate, committed as test
// data because CI has neither:
//   tests/data/torch/schedule_orders.json.gz          torch.distributed.pipelining's pipeline_order
//                                                     (ScheduleGPipe, ScheduleInterleaved1F1B,
//                                                     ScheduleInterleavedZeroBubble,
//                                                     ScheduleLoopedBFS, ScheduleZBVZeroBubble,
//                                                     ScheduleDualPipeV) over a grid of P, M, V
//   tests/data/zero_bubble/v_schedule_orders.json.gz  sail-sg's zbv_greedy (V-Half, V-Min)
// Each file records the generator script and the version it ran.
#include <QtTest>

#include <map>

#include "engine/json_io.h"
#include "engine/pytorch_csv.h"
#include "engine/schedule.h"

using namespace pipescope;

namespace {

nlohmann::json loadOrders(const char *relative_path) {
  const std::string path = std::string(PIPESCOPE_TEST_DATA_DIR) + "/" + relative_path;
  auto text = readTextFile(path);
  if (!text) qFatal("%s", text.error().message.c_str());
  auto document = parseJsonLimited(*text);
  if (!document) qFatal("%s: %s", path.c_str(), document.error().message.c_str());
  return std::move(*document);
}

struct Point {
  std::string schedule;
  int pp, microbatches, chunks;
  std::string csv;
};

std::vector<Point> points(const nlohmann::json &document) {
  std::vector<Point> list;
  for (const auto &entry : document.at("orders"))
    list.push_back({entry.at("schedule").get<std::string>(), entry.at("pp").get<int>(),
                    entry.at("microbatches").get<int>(), entry.at("chunks").get<int>(),
                    entry.at("csv").get<std::string>()});
  return list;
}

QString describe(const Point &point) {
  return QString::fromStdString(point.schedule + " P=" + std::to_string(point.pp) +
                                " M=" + std::to_string(point.microbatches) +
                                " V=" + std::to_string(point.chunks));
}

// The first rank and step where two order lists differ, or an empty string.
std::string firstDifference(const std::vector<std::vector<Op>> &ours,
                            const std::vector<std::vector<Op>> &theirs) {
  if (ours.size() != theirs.size())
    return std::to_string(ours.size()) + " ranks against " + std::to_string(theirs.size());
  for (std::size_t r = 0; r < ours.size(); ++r)
    for (std::size_t i = 0; i < std::max(ours[r].size(), theirs[r].size()); ++i) {
      const std::string a = i < ours[r].size() ? formatOp(ours[r][i]) : "(end)";
      const std::string b = i < theirs[r].size() ? formatOp(theirs[r][i]) : "(end)";
      if (a != b)
        return "rank " + std::to_string(r) + ", op " + std::to_string(i) + ": pipescope " + a +
               ", reference " + b;
    }
  return {};
}

// Which points pipescope refuses on purpose, and why (everything else must be generated).
bool refusedOnPurpose(const Point &point) {
  // Megatron-LM's interleaving needs P >= 2 and M a multiple of P (pipescope keeps its rule).
  return point.schedule == "interleaved-1f1b" &&
         (point.pp < 2 || point.microbatches < point.pp || point.microbatches % point.pp != 0);
}

// Compares every point of a file; returns how many matched per schedule.
std::map<std::string, int> compareAll(const nlohmann::json &document) {
  std::map<std::string, int> matched;
  for (const auto &point : points(document)) {
    const ScheduleRequest request{point.schedule, point.pp, point.microbatches, point.chunks, 0};
    auto ours = generateSchedule(request);
    if (!ours) {
      if (refusedOnPurpose(point)) continue;
      QTest::qFail(qPrintable(describe(point) + ": pipescope refuses what the reference builds: " +
                              QString::fromStdString(ours.error().message)),
                   __FILE__, __LINE__);
      return {};
    }
    auto theirs = parsePytorchCsv(point.csv);
    if (!theirs) {
      QTest::qFail(
          qPrintable(describe(point) + ": " + QString::fromStdString(theirs.error().message)),
          __FILE__, __LINE__);
      return {};
    }
    const std::string difference = firstDifference(ours->ranks, *theirs);
    if (!difference.empty()) {
      QTest::qFail(qPrintable(describe(point) + ": " + QString::fromStdString(difference)),
                   __FILE__, __LINE__);
      return {};
    }
    ++matched[point.schedule];
  }
  return matched;
}

} // namespace

class TestReferenceOrders : public QObject {
  Q_OBJECT

private slots:
  void pytorchOrdersAreReproduced() {
    const auto document = loadOrders("torch/schedule_orders.json.gz");
    QCOMPARE(QString::fromStdString(document.at("torch_version").get<std::string>()).left(5),
             QStringLiteral("2.15."));
    const auto matched = compareAll(document);
    if (QTest::currentTestFailed()) return;
    // The grid: P in {1..6, 8}, M in {1..10, 12, 16, 18, 24}, V in {2, 3, 4} where it applies.
    for (const auto &[name, minimum] : std::map<std::string, int>{{"gpipe", 98},
                                                                  {"interleaved-1f1b", 87},
                                                                  {"interleaved-zb", 267},
                                                                  {"looped-bfs", 294},
                                                                  {"zb-v", 98},
                                                                  {"dualpipev", 52}}) {
      const auto found = matched.find(name);
      const int count = found == matched.end() ? 0 : found->second;
      QVERIFY2(count >= minimum, qPrintable(QString::fromStdString(name) + ": " +
                                            QString::number(count) + " orders compared"));
    }
  }

  void zeroBubbleReferenceOrdersAreReproduced() {
    const auto document = loadOrders("zero_bubble/v_schedule_orders.json.gz");
    QVERIFY(document.at("reference").get<std::string>().find("zbv_greedy") != std::string::npos);
    const auto matched = compareAll(document);
    if (QTest::currentTestFailed()) return;
    // P in {1..9, 12, 16}, M in {1..10, 12, 16, 24, 32}.
    QCOMPARE(matched.at("v-half"), 154);
    QCOMPARE(matched.at("v-min"), 154);
  }

  // The data's own CSV reads back to the same lists pipescope writes (PyTorch's REDUCE_GRAD and
  // WAIT_REDUCE_GRAD cells skipped), so the files move both ways.
  void pytorchCsvOfTheDataRoundTrips() {
    const auto document = loadOrders("torch/schedule_orders.json.gz");
    int checked = 0;
    for (const auto &point : points(document)) {
      if (point.schedule != "looped-bfs" && point.schedule != "interleaved-zb") continue;
      auto lists = parsePytorchCsv(point.csv);
      QVERIFY(lists);
      auto schedule = makeCustomSchedule(*lists);
      QVERIFY2(schedule, qPrintable(describe(point)));
      auto again = parsePytorchCsv(scheduleToPytorchCsv(*schedule));
      QVERIFY(again);
      QVERIFY(*again == *lists);
      ++checked;
    }
    QVERIFY(checked > 500);
  }
};

QTEST_MAIN(TestReferenceOrders)
#include "test_reference_orders.moc"
