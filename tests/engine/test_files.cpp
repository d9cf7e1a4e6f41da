// Plan, trace, custom schedule and Chrome trace files: round trips, and every class of bad input
// refused with a message naming the field — nothing crashes.
#include <QtTest>

#include <QTemporaryDir>

#include <functional>
#include <set>

#include "resources/embedded_resources.h"

#include "engine/output_file.h"
#include "engine/plan_file.h"
#include "engine/pytorch_csv.h"
#include "engine/trace_file.h"

using namespace pipescope;
using nlohmann::json;

namespace {

Plan samplePlan() {
  Plan plan;
  plan.request = {"interleaved-1f1b", 4, 8, 2, 0};
  plan.mesh.pp = 4;
  plan.mesh.dp = 2;
  plan.mesh.tp = 2;
  plan.mesh.gpus_per_node = 4;
  plan.mesh.order = *Mesh::parseOrder("pp-tp-dp");
  plan.costs.forward_us = 1.25;
  plan.costs.backward_us = 2.5;
  plan.costs.weight_us = 1.0;
  plan.costs.p2p_latency_us = 0.5;
  plan.costs.p2p_bandwidth_gbps = 25;
  plan.costs.activation_bytes = 1 << 20;
  return plan;
}

std::string errorOf(const std::string &text) {
  auto parsed = parseJsonLimited(text);
  if (!parsed) return parsed.error().message;
  auto plan = planFromJson(*parsed);
  return plan ? std::string() : plan.error().message;
}

json validPlanJson() {
  return planToJson(samplePlan());
}

} // namespace

class TestFiles : public QObject {
  Q_OBJECT

private slots:
  void planRoundTripsThroughJson() {
    const Plan plan = samplePlan();
    const json first = planToJson(plan);
    auto back = planFromJson(first);
    QVERIFY2(back, back ? "" : back.error().message.c_str());
    QCOMPARE(QString::fromStdString(planToJson(*back).dump()),
             QString::fromStdString(first.dump()));
    QCOMPARE(back->mesh.orderName(), std::string("pp-tp-dp"));
    QCOMPARE(back->costs.activation_bytes, double(1 << 20));
    // The lone input-grad op's extra (zero-bubble schedules under async TP backward), rank share
    // and per stage, is written only when set and read back.
    QVERIFY(!first["costs"].contains("input_grad_split_extra"));
    Plan split = plan;
    split.costs.input_grad_split_extra_us = 0.25;
    split.costs.stage_overrides.assign(8, StageCost{1, 2, 1, 0.125}); // P 4 x V 2 stages
    auto split_back = planFromJson(planToJson(split));
    QVERIFY2(split_back, split_back ? "" : split_back.error().message.c_str());
    QCOMPARE(split_back->costs.input_grad_split_extra_us, 0.25);
    QCOMPARE(split_back->costs.stage_overrides.front().input_grad_split_extra_us, 0.125);
  }

  // CP and EP are mesh keys: written only when used (a plan without them reads as before, its
  // order in three names), read back with the four-name order, refused with the field named.
  void meshWithContextAndExpertParallelRoundTrips() {
    Plan plan = samplePlan();
    QVERIFY(!planToJson(plan)["mesh"].contains("cp"));
    QVERIFY(!planToJson(plan)["mesh"].contains("ep"));
    plan.mesh.cp = 2;
    plan.mesh.ep = 4;
    plan.mesh.order = *Mesh::parseOrder("dp-cp-tp-pp", 2);
    const json first = planToJson(plan);
    QCOMPARE(first["mesh"]["cp"].get<int>(), 2);
    QCOMPARE(first["mesh"]["ep"].get<int>(), 4);
    QCOMPARE(first["mesh"]["rank_order"].get<std::string>(), std::string("dp-cp-tp-pp"));
    auto back = planFromJson(first);
    QVERIFY2(back, back ? "" : back.error().message.c_str());
    QCOMPARE(back->mesh.cp, 2);
    QCOMPARE(back->mesh.ep, 4);
    QCOMPARE(back->mesh.order, plan.mesh.order);
    QCOMPARE(back->mesh.worldSize(), 2 * 2 * 2 * 4);
    QCOMPARE(QString::fromStdString(planToJson(*back).dump()),
             QString::fromStdString(first.dump()));

    json unnamed = first; // no rank order: the default, which places cp next to tp
    unnamed["mesh"].erase("rank_order");
    auto defaulted = planFromJson(unnamed);
    QVERIFY2(defaulted, defaulted ? "" : defaulted.error().message.c_str());
    QCOMPARE(defaulted->mesh.order, Mesh{}.order);
    QCOMPARE(defaulted->mesh.orderName(), std::string("tp-cp-pp-dp"));

    json three = first;
    three["mesh"]["rank_order"] = "tp-pp-dp";
    QVERIFY(errorOf(three.dump())
                .find("/mesh/rank_order: rank order 'tp-pp-dp' does not place "
                      "cp, but cp = 2") != std::string::npos);
    json uneven = first;
    uneven["mesh"]["ep"] = 3;
    QVERIFY2(errorOf(uneven.dump()).find("/mesh: ep = 3 does not divide dp × cp = 2 × 2 = 4") !=
                 std::string::npos,
             errorOf(uneven.dump()).c_str());
    json zero = first;
    zero["mesh"]["cp"] = 0;
    QVERIFY(errorOf(zero.dump()).find("/mesh/cp") != std::string::npos);
    // A plan that names cp in its order but has none prints its order in three names.
    json none = first;
    none["mesh"].erase("cp");
    none["mesh"]["ep"] = 2;
    auto without = planFromJson(none);
    QVERIFY2(without, without ? "" : without.error().message.c_str());
    QCOMPARE(without->mesh.orderName(), std::string("dp-tp-pp"));
  }

  void planRoundTripsThroughAFileWithItsProgram() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("plan.json").toStdString();
    const Plan plan = samplePlan();
    auto evaluation = evaluatePlan(plan);
    QVERIFY(evaluation);
    QVERIFY(savePlan(path, plan, &evaluation->program));
    auto loaded = loadPlan(path);
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    QVERIFY(loaded->program);
    QCOMPARE(loaded->program->instructionCount(), evaluation->program.instructionCount());
    auto again = evaluatePlan(*loaded);
    QVERIFY(again);
    QCOMPARE(again->simulation.makespan_us, evaluation->simulation.makespan_us);
    // The program's text names sends by producing stage and recvs by consuming stage.
    const json written = planToJson(plan, &evaluation->program);
    QCOMPARE(written["program"][0][1].get<std::string>(), std::string("0SEND_F0"));
    QCOMPARE(written["program"][1][0].get<std::string>(), std::string("1RECV_F0"));
  }

  void aProgramThatIsNotTheLoweringIsRefused() {
    const Plan plan = samplePlan();
    auto evaluation = evaluatePlan(plan);
    json document = planToJson(plan, &evaluation->program);
    std::swap(document["program"][1][0], document["program"][1][1]);
    const auto loaded = planFromJson(document);
    QVERIFY(!loaded);
    QVERIFY2(loaded.error().message.find("/program/1/0: expected '1RECV_F0'") == 0,
             loaded.error().message.c_str());
  }

  void customPlanRoundTrips() {
    auto lists = parsePytorchCsv("0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1F1,1I1,1W0,1W1\n");
    QVERIFY(lists);
    auto schedule = makeCustomSchedule(*lists);
    QVERIFY(schedule);
    Plan plan;
    plan.request = {"custom", 2, 2, 1, 0};
    plan.mesh.pp = 2;
    plan.custom = *schedule;
    auto back = planFromJson(planToJson(plan));
    QVERIFY2(back, back ? "" : back.error().message.c_str());
    QVERIFY(back->custom);
    QVERIFY(back->custom->ranks == schedule->ranks);
    QVERIFY(evaluatePlan(*back));
  }

  void traceRoundTrips() {
    Plan plan = samplePlan();
    plan.request = {"dualpipe", 4, 8, 1, 0};
    SimulationOptions options;
    options.memory_timeline = true;
    auto evaluation = evaluatePlan(plan, options);
    QVERIFY2(evaluation, evaluation ? "" : evaluation.error().message.c_str());
    const Trace trace = traceFromEvaluation(plan, *evaluation);
    // Overlapped pairs appear as their two parts with one start and end, each marked.
    int overlapped = 0;
    for (const auto &op : trace.ops)
      overlapped += op.overlapped ? 1 : 0;
    QVERIFY(overlapped > 0 && overlapped % 2 == 0);
    QTemporaryDir dir;
    const std::string path = dir.filePath("trace.json").toStdString();
    QVERIFY(saveTrace(path, trace));
    auto loaded = loadTrace(path);
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    QCOMPARE(loaded->ops.size(), trace.ops.size());
    QCOMPARE(loaded->transfers.size(), trace.transfers.size());
    QCOMPARE(loaded->makespan_us, trace.makespan_us);
    QCOMPARE(loaded->source, std::string("simulated"));
    QCOMPARE(traceToJson(*loaded)["ops"].dump(), traceToJson(trace)["ops"].dump());
  }

  void chromeTraceHasLanesFlowsAndCounters() {
    Plan plan = samplePlan();
    SimulationOptions options;
    options.memory_timeline = true;
    auto evaluation = evaluatePlan(plan, options);
    QVERIFY(evaluation);
    const json chrome = chromeTrace(traceFromEvaluation(plan, *evaluation));
    int complete = 0, flow_starts = 0, flow_ends = 0, counters = 0;
    std::set<int> pids;
    for (const auto &event : chrome["traceEvents"]) {
      const auto phase = event["ph"].get<std::string>();
      if (phase == "X" && event["tid"] == 0) {
        ++complete;
        pids.insert(event["pid"].get<int>());
      }
      if (phase == "s") ++flow_starts;
      if (phase == "f") ++flow_ends;
      if (phase == "C") ++counters;
    }
    QCOMPARE(complete, int(evaluation->schedule.opCount()));
    QCOMPARE(int(pids.size()), 4);
    QCOMPARE(flow_starts, int(evaluation->program.messages.size()));
    QCOMPARE(flow_ends, flow_starts);
    QVERIFY(counters > 0);
  }

  void badInputIsRefusedWithItsField_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected");
    auto with = [](const std::function<void(json &)> &edit) {
      json plan = validPlanJson();
      edit(plan);
      return QString::fromStdString(plan.dump());
    };
    QTest::newRow("not JSON") << "{\"format\": "
                              << "not valid JSON: line 1, column 12";
    QTest::newRow("empty") << ""
                           << "not valid JSON";
    QTest::newRow("array") << "[1,2]"
                           << "expected a JSON object";
    QTest::newRow("other format") << with([](json &p) { p["format"] = "pipescope.trace"; })
                                  << "/format: this is a \"pipescope.trace\" file";
    QTest::newRow("newer version")
        << with([](json &p) { p["version"] = 7; }) << "newer than this pipescope reads";
    QTest::newRow("older version")
        << with([](json &p) { p["version"] = 0; }) << "older than this pipescope reads";
    QTest::newRow("missing schedule")
        << with([](json &p) { p.erase("schedule"); }) << "/schedule: missing";
    QTest::newRow("pp as string") << with([](json &p) { p["schedule"]["pp"] = "four"; })
                                  << "/schedule/pp: expected an integer, got a string";
    QTest::newRow("fractional M") << with([](json &p) { p["schedule"]["microbatches"] = 2.5; })
                                  << "/schedule/microbatches: expected an integer";
    QTest::newRow("unknown schedule") << with([](json &p) { p["schedule"]["name"] = "zb-h9"; })
                                      << "/schedule: unknown schedule 'zb-h9'";
    QTest::newRow("impossible V") << with([](json &p) { p["schedule"]["virtual_stages"] = 1; })
                                  << "/schedule: interleaved-1f1b needs V >= 2";
    QTest::newRow("absurd P") << with([](json &p) {
      p["schedule"]["pp"] = 1e12;
      p["mesh"]["pp"] = 1e12;
    }) << "/schedule/pp: expected an integer between 1 and 16384";
    QTest::newRow("absurd M") << with([](json &p) { p["schedule"]["microbatches"] = 99999999999; })
                              << "/schedule/microbatches: expected an integer between";
    QTest::newRow("too many ops") << with([](json &p) {
      p["schedule"]["pp"] = 4096;
      p["mesh"]["pp"] = 4096;
      p["schedule"]["microbatches"] = 4096;
      p["schedule"]["virtual_stages"] = 8;
    }) << "ops; pipescope simulates at most";
    QTest::newRow("negative cost")
        << with([](json &p) { p["costs"]["forward"] = -1; })
        << "/costs/forward: expected a finite number of microseconds from 0";
    QTest::newRow("W above B") << with([](json &p) { p["costs"]["weight"] = 9; })
                               << "/costs/weight: W (9) must not exceed";
    QTest::newRow("bad rank order") << with([](json &p) { p["mesh"]["rank_order"] = "tp-tp-dp"; })
                                    << "/mesh/rank_order: rank order 'tp-tp-dp' is not valid";
    QTest::newRow("mesh pp mismatch")
        << with([](json &p) { p["mesh"]["pp"] = 8; }) << "/mesh/pp: is 8 but /schedule/pp is 4";
    QTest::newRow("model without hardware")
        << with([](json &p) { p["model"] = json::object(); }) << "/hardware: missing";
    QTest::newRow("custom without lists")
        << with([](json &p) { p["schedule"]["name"] = "custom"; }) << "/custom: missing";
    QTest::newRow("custom bad action") << with([](json &p) {
      p["schedule"]["name"] = "custom";
      p["custom"] = json::parse(R"({"ranks": [["0F0", "0X0"]]})");
    }) << "/custom/ranks/0/1: '0X0' is not an action";
    QTest::newRow("custom missing op") << with([](json &p) {
      p["schedule"]["pp"] = 2;
      p["mesh"]["pp"] = 2;
      p["schedule"]["name"] = "custom";
      p["custom"] = json::parse(R"({"ranks": [["0F0", "0B0"], ["1F0"]]})");
    }) << "";
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    QTest::newRow("deeply nested") << QString::fromStdString(deep) << "nests deeper than 64 levels";
    QTest::newRow("deep inside a field")
        << QString::fromStdString("{\"format\":\"pipescope.plan\",\"version\":1,\"schedule\":" +
                                  std::string(70, '[') + std::string(70, ']') + "}")
        << "nests deeper than 64";
  }

  void badInputIsRefusedWithItsField() {
    QFETCH(QString, text);
    QFETCH(QString, expected);
    const std::string error = errorOf(text.toStdString());
    if (expected.isEmpty()) {
      // Structurally valid plans with a broken schedule load; evaluating them is refused.
      auto plan = planFromJson(json::parse(text.toStdString()));
      QVERIFY(plan);
      const auto evaluation = evaluatePlan(*plan);
      QVERIFY(!evaluation);
      QVERIFY2(evaluation.error().message.find("rank 1 is missing 1B0") != std::string::npos,
               evaluation.error().message.c_str());
      return;
    }
    QVERIFY2(!error.empty(), "accepted");
    QVERIFY2(error.find(expected.toStdString()) != std::string::npos, error.c_str());
    QVERIFY2(error.find('\n') == std::string::npos, error.c_str());
  }

  void badTracesAreRefused() {
    Plan plan = samplePlan();
    auto evaluation = evaluatePlan(plan);
    json trace = traceToJson(traceFromEvaluation(plan, *evaluation));
    json backwards = trace;
    backwards["ops"][0]["start_us"] = 1e6; // after its end
    auto refused = traceFromJson(backwards);
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("/ops/0/end_us: ends before it starts") == 0,
             refused.error().message.c_str());
    json kind = trace;
    kind["ops"][3]["kind"] = "Q";
    QVERIFY(!traceFromJson(kind));
    json source = trace;
    source["source"] = "guessed";
    QVERIFY(!traceFromJson(source));
    QVERIFY(!traceFromJson(validPlanJson()));
  }

  void customScheduleFilesInBothFormats() {
    QTemporaryDir dir;
    const std::string csv = dir.filePath("s.csv").toStdString();
    const std::string json_path = dir.filePath("s.json").toStdString();
    QVERIFY(writeTextFile(csv, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"));
    QVERIFY(writeTextFile(
        json_path,
        R"({"format":"pipescope.schedule","version":1,"ranks":[["0F0","0F1","0B0","0B1"],["1F0","1B0","1F1","1B1"]]})"));
    auto from_csv = loadCustomSchedule(csv);
    auto from_json = loadCustomSchedule(json_path);
    QVERIFY(from_csv && from_json);
    QVERIFY(from_csv->ranks == from_json->ranks);
    QCOMPARE(from_csv->pp(), 2);
    QCOMPARE(from_csv->microbatches(), 2);
    const auto missing = loadCustomSchedule(dir.filePath("none.csv").toStdString());
    QVERIFY(!missing);
    QVERIFY(missing.error().message.find("cannot open") == 0);
  }

  void failedWritesLeaveTheOldFile() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("keep.json").toStdString();
    QVERIFY(writeTextFile(path, "old"));
    const auto bad = writeTextFile(dir.filePath("missing/dir/x.json").toStdString(), "new");
    QVERIFY(!bad);
    QVERIFY(bad.error().message.find("cannot write") == 0);
    QCOMPARE(*readTextFile(path), std::string("old"));
  }

  void embeddedExamplePlanLoads() {
    const auto text = findEmbeddedResource("plans/example-1f1b.json");
    QVERIFY(text);
    auto parsed = parseJsonLimited(*text);
    QVERIFY(parsed);
    auto plan = planFromJson(*parsed);
    QVERIFY2(plan, plan ? "" : plan.error().message.c_str());
    QVERIFY(evaluatePlan(*plan));
  }
};

QTEST_APPLESS_MAIN(TestFiles)
#include "test_files.moc"
