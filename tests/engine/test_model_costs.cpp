// Costs and memory from a model, hardware and a DP × TP × PP mesh (issue #3, DESIGN.md §5).
// Qt is used only for the test harness; everything under test is plain C++.
#include <QtTest>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>

#include "engine/lowering.h"
#include "engine/model/collectives.h"
#include "engine/model/model_setup.h"
#include "engine/schedule.h"
#include "engine/simulator.h"

using namespace pipescope;

namespace {

struct Run {
  Schedule schedule;
  ModelDerivation derivation;
  SimulationResult simulation;
  ModelReport report;
};

/// Derives costs, simulates the schedule with activation bytes tracked and reports; the error
/// says which step failed.
Result<Run> simulateModel(const ModelSetup &setup, const Mesh &mesh,
                          const ScheduleRequest &request) {
  auto schedule = generateSchedule(request);
  if (!schedule) return makeError("schedule: " + schedule.error().message);
  auto derivation = deriveModelCosts(setup, mesh, schedule->placement);
  if (!derivation) return makeError("derive: " + derivation.error().message);
  if (auto status = checkOpCoverage(*schedule); !status) return status.error();
  const LoweredProgram program = lowerSchedule(*schedule);
  auto times = resolveStageTimes(derivation->costs, schedule->placement);
  if (!times) return makeError("costs: " + times.error().message);
  SimulationOptions options;
  options.stage_activation_bytes = derivation->stage_activation_bytes;
  options.stage_activation_granule_bytes = derivation->stage_activation_granule_bytes;
  auto simulation = simulate(*schedule, program, *times, options);
  if (!simulation) return makeError("simulate: " + simulation.error().message);
  Run run{*schedule, *derivation, *simulation, {}};
  run.report = reportModel(setup, mesh, run.schedule, run.derivation, run.simulation);
  return run;
}

ModelSetup presetSetup(const std::string &model, const std::string &hardware) {
  ModelSetup setup;
  auto m = loadModelSpec(model);
  auto hw = loadHardwareSpec(hardware);
  if (m) setup.model = *m;
  if (hw) setup.hardware = *hw;
  return setup;
}

/// The preset as a hardware file that gives only a flat efficiency factor (no GEMM curve, no HBM
/// bandwidth, collectives at the links' full figures, no fixed overhead per layer): the
/// first-order model these hand computations check, which such files keep.
ModelSetup flatPresetSetup(const std::string &model, const std::string &hardware) {
  ModelSetup setup = presetSetup(model, hardware);
  setup.hardware.gemm_efficiency.clear();
  setup.hardware.hbm_gbps = 0;
  setup.hardware.intra_node_bus_efficiency = 1;
  setup.hardware.inter_node_bus_efficiency = 1;
  setup.hardware.layer_overhead_us = 0;
  return setup;
}

Mesh makeMesh(int dp, int tp, int pp, const char *order = "tp-pp-dp", int gpus_per_node = 8) {
  Mesh mesh;
  mesh.dp = dp;
  mesh.tp = tp;
  mesh.pp = pp;
  mesh.gpus_per_node = gpus_per_node;
  mesh.order = *Mesh::parseOrder(order);
  return mesh;
}

ScheduleRequest request(const char *name, int pp, int microbatches, int chunks = 1) {
  ScheduleRequest r;
  r.name = name;
  r.pp = pp;
  r.microbatches = microbatches;
  r.chunks = chunks;
  return r;
}

bool near(double actual, double expected, double relative) {
  return std::abs(actual - expected) <= relative * std::abs(expected);
}

std::string show(double actual, double expected) {
  char buffer[128];
  std::snprintf(buffer, sizeof buffer, "got %.6g, expected %.6g", actual, expected);
  return buffer;
}

#define REQUIRE_OK(result)                                                                         \
  QVERIFY2((result).ok(), (result).ok() ? "" : (result).error().message.c_str())

} // namespace

class TestModelCosts : public QObject {
  Q_OBJECT

private slots:
  void presetsLoad_data();
  void presetsLoad();
  void requiredPresetsShip();
  void parameterCounts_data();
  void parameterCounts();
  void seedArticle175B();
  void parameterBytesSumToModel_data();
  void parameterBytesSumToModel();
  void zero1DividesOptimizerOnly();
  void rankOrderMovesTpTraffic();
  void fullRecomputeLowersMemoryRaisesBackward();
  void activationFormula_data();
  void activationFormula();
  void flopsFromShapes();
  void tpAllReduceIsRing();
  void pipelineTransfers();
  void gradientSyncOverlap();
  void interleavedSyncGoesChunkByChunk();
  void collectiveContentionByHand();
  void throughputAndMfu();
  void modelThatCannotFitIsFlagged();
  void someRanksFitOthersDoNot();
  void transformerEngineLossKeepsSixteenBitLogits();
  void impossibleMeshRefused_data();
  void impossibleMeshRefused();
  void unknownPresetListsPresets();
  void layerSplit();
  void bidirectionalHoldsTwoStages();
  void jsonRoundTrip();
  void latentAndWideAttentionByHand();
  void wideAttentionActivations();
  void jsonErrorsNameTheField();
  void userFileLoads();
  void zeroStagesMemoryByHand();
  void zero3HeldAcrossMicrobatchesUnderPp();
  void zero3GathersByHand();
  void selectiveOpActivationsByHand();
  void swigluFusionActivationsByHand();
  void recomputeModulesByHand();
  void overlappedPairHoldsOneLayerMore();
  void zeroStageAndLossJson();
};

void TestModelCosts::presetsLoad_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<bool>("model");
  for (const auto &name : modelPresetNames())
    QTest::newRow(name.c_str()) << QString::fromStdString(name) << true;
  for (const auto &name : hardwarePresetNames())
    QTest::newRow(name.c_str()) << QString::fromStdString(name) << false;
}

void TestModelCosts::presetsLoad() {
  QFETCH(QString, name);
  QFETCH(bool, model);
  const std::string preset = name.toStdString();
  if (model) {
    auto spec = loadModelSpec(preset);
    REQUIRE_OK(spec);
    QCOMPARE(spec->name, preset);
    QVERIFY2(!spec->source.empty(), "every preset names its source");
    QVERIFY(parameterCount(*spec) > 1e6);
    // Round trip through JSON.
    auto again = modelSpecFromJson(toJson(*spec), "/model");
    REQUIRE_OK(again);
    QCOMPARE(toJson(*again), toJson(*spec));
  } else {
    auto spec = loadHardwareSpec(preset);
    REQUIRE_OK(spec);
    QCOMPARE(spec->name, preset);
    QVERIFY2(!spec->source.empty(), "every preset names its source");
    QVERIFY(spec->peak_tflops > 100 && spec->efficiency > 0 && spec->efficiency <= 1);
    auto again = hardwareSpecFromJson(toJson(*spec), "/hardware");
    REQUIRE_OK(again);
    QCOMPARE(toJson(*again), toJson(*spec));
  }
}

void TestModelCosts::requiredPresetsShip() {
  const auto models = modelPresetNames();
  const auto hardware = hardwarePresetNames();
  for (const char *name : {"llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b"})
    QVERIFY2(std::find(models.begin(), models.end(), name) != models.end(), name);
  for (const char *name : {"h100-sxm", "h200", "a100-80gb"})
    QVERIFY2(std::find(hardware.begin(), hardware.end(), name) != hardware.end(), name);
}

void TestModelCosts::parameterCounts_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<double>("expected");
  QTest::addColumn<double>("tolerance");
  QTest::newRow("gpt3-175b") << "gpt3-175b" << 175e9 << 0.01;
  QTest::newRow("llama3-8b") << "llama3-8b" << 8.0e9 << 0.01;
  QTest::newRow("llama3-70b") << "llama3-70b" << 70.6e9 << 0.01;
  QTest::newRow("llama3-405b") << "llama3-405b" << 405e9 << 0.01;
  // Qwen3-235B-A22B: 235B (the name); DeepSeek-V3: 671B main model + the 11.6B of its MTP layer,
  // 2h→h projection and norms (README_WEIGHTS.md: 11.5B unique MTP parameters).
  QTest::newRow("qwen3-235b-a22b") << "qwen3-235b-a22b" << 235e9 << 0.01;
  QTest::newRow("deepseek-v3") << "deepseek-v3" << 682.6e9 << 0.005;
}

void TestModelCosts::parameterCounts() {
  QFETCH(QString, name);
  QFETCH(double, expected);
  QFETCH(double, tolerance);
  auto spec = loadModelSpec(name.toStdString());
  REQUIRE_OK(spec);
  const double count = parameterCount(*spec);
  QVERIFY2(near(count, expected, tolerance), show(count, expected).c_str());
}

// 3D Parallelism seed article, "Example: 175B Model on 1024 GPUs": DP=32, PP=8, TP=4, 2 bytes per
// parameter of weights and 8 of optimizer state: 10.9 GB and 43.8 GB per GPU.
void TestModelCosts::seedArticle175B() {
  ModelSetup setup = presetSetup("gpt3-175b", "a100-80gb");
  setup.training.optimizer_bytes_per_param = 8; // the article's assumption (Adam m and v in fp32)
  setup.training.recompute = Recompute::Selective;
  setup.training.sequence_parallel = true;
  const Mesh mesh = makeMesh(32, 4, 8);
  auto run = simulateModel(setup, mesh, request("1f1b", 8, 32));
  REQUIRE_OK(run);
  const auto &memory = run->report.memory;
  QCOMPARE(static_cast<int>(memory.size()), 8);
  // Middle stages hold 12 of the 96 layers and nothing else.
  for (int p = 1; p < 7; ++p) {
    QVERIFY2(near(memory[p].params, 10.9e9, 0.01), show(memory[p].params, 10.9e9).c_str());
    QVERIFY2(near(memory[p].optimizer, 43.8e9, 0.01), show(memory[p].optimizer, 43.8e9).c_str());
  }
  // Averaged over the pipeline (embedding and head included) it is the article's 175B × 2 / 32.
  double params = 0, optimizer = 0;
  for (const auto &m : memory) {
    params += m.params;
    optimizer += m.optimizer;
  }
  QVERIFY2(near(params / 8, 175e9 * 2 / 32, 0.01), show(params / 8, 175e9 * 2 / 32).c_str());
  QVERIFY2(near(optimizer / 8, 175e9 * 8 / 32, 0.01), show(optimizer / 8, 175e9 * 8 / 32).c_str());

  // ZeRO-1 over the 32 DP replicas: 43.8 GB / 32 = 1.37 GB.
  setup.training.zero_stage = 1;
  auto sharded = simulateModel(setup, mesh, request("1f1b", 8, 32));
  REQUIRE_OK(sharded);
  for (int p = 1; p < 7; ++p)
    QVERIFY2(near(sharded->report.memory[p].optimizer, 43.8e9 / 32, 0.01),
             show(sharded->report.memory[p].optimizer, 43.8e9 / 32).c_str());
}

void TestModelCosts::parameterBytesSumToModel_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<QString>("schedule");
  QTest::addColumn<int>("tp");
  QTest::addColumn<int>("pp");
  QTest::addColumn<int>("chunks");
  QTest::addColumn<double>("copies"); // copies of the model the replica holds
  QTest::newRow("llama3-70b tp1 pp4") << "llama3-70b"
                                      << "1f1b" << 1 << 4 << 1 << 1.0;
  QTest::newRow("llama3-70b tp8 pp4") << "llama3-70b"
                                      << "1f1b" << 8 << 4 << 1 << 1.0;
  QTest::newRow("llama3-8b interleaved") << "llama3-8b"
                                         << "interleaved-1f1b" << 2 << 4 << 2 << 1.0;
  QTest::newRow("llama3-8b zb-v") << "llama3-8b"
                                  << "zb-v" << 1 << 4 << 2 << 1.0;
  QTest::newRow("llama3-8b 1 stage") << "llama3-8b"
                                     << "1f1b" << 1 << 1 << 1 << 1.0;
  QTest::newRow("llama3-8b dualpipe (two copies)") << "llama3-8b"
                                                   << "dualpipe" << 1 << 4 << 2 << 2.0;
}

void TestModelCosts::parameterBytesSumToModel() {
  QFETCH(QString, model);
  QFETCH(QString, schedule);
  QFETCH(int, tp);
  QFETCH(int, pp);
  QFETCH(int, chunks);
  QFETCH(double, copies);
  const ModelSetup setup = presetSetup(model.toStdString(), "h200");
  auto run = simulateModel(setup, makeMesh(1, tp, pp),
                           request(schedule.toStdString().c_str(), pp, 8, chunks));
  REQUIRE_OK(run);
  double bytes = 0;
  for (const auto &m : run->report.memory)
    bytes += m.params * tp; // every TP rank of the stage
  // Every TP rank holds the RMSNorm weights whole (2 per layer and the final one): t - 1 extra
  // copies of them; everything else is split.
  const auto &m = setup.model;
  const double replicated = (2.0 * m.layers + 1) * m.hidden;
  const double expected = copies * (parameterCount(m) + (tp - 1) * replicated) * 2; // bf16
  QVERIFY2(near(bytes, expected, 1e-12), show(bytes, expected).c_str());
  // Layers per model stage add up to the model's (for dualpipe the first P virtual stages are
  // the P model stages).
  const auto &layers = run->derivation.stage_layers;
  const int model_stages = run->schedule.placement.modelStageCount();
  QCOMPARE(std::accumulate(layers.begin(), layers.begin() + model_stages, 0), setup.model.layers);
}

void TestModelCosts::zero1DividesOptimizerOnly() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  setup.training.recompute = Recompute::Selective;
  const Mesh mesh = makeMesh(8, 2, 4);
  auto plain = simulateModel(setup, mesh, request("1f1b", 4, 16));
  setup.training.zero_stage = 1;
  auto sharded = simulateModel(setup, mesh, request("1f1b", 4, 16));
  REQUIRE_OK(plain);
  REQUIRE_OK(sharded);
  for (std::size_t p = 0; p < plain->report.memory.size(); ++p) {
    const auto &a = plain->report.memory[p];
    const auto &b = sharded->report.memory[p];
    QVERIFY2(near(b.optimizer, a.optimizer / 8, 1e-12), show(b.optimizer, a.optimizer / 8).c_str());
    QCOMPARE(b.params, a.params);
    QCOMPARE(b.grads, a.grads);
    QCOMPARE(b.activations_peak, a.activations_peak);
    QVERIFY(b.total < a.total);
  }
  // The optimizer step after the last backward runs over the rank's 1/dp of the state.
  QVERIFY(sharded->report.step_time_s < plain->report.step_time_s);
  QCOMPARE(sharded->report.dp.bytes, plain->report.dp.bytes);
}

// tp = 4, pp = 4 on 8-GPU nodes: tp-pp-dp keeps each TP group in a node; pp-tp-dp strides TP
// groups by pp = 4, so each spans two nodes and its all-reduces cross InfiniBand.
void TestModelCosts::rankOrderMovesTpTraffic() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  setup.training.recompute = Recompute::Selective;
  const Mesh inner = makeMesh(1, 4, 4, "tp-pp-dp");
  const Mesh outer = makeMesh(1, 4, 4, "pp-tp-dp");
  QVERIFY(inner.groupInsideNode(MeshGroup::TP, 0));
  QVERIFY(!outer.groupInsideNode(MeshGroup::TP, 0));
  auto a = simulateModel(setup, inner, request("1f1b", 4, 16));
  auto b = simulateModel(setup, outer, request("1f1b", 4, 16));
  REQUIRE_OK(a);
  REQUIRE_OK(b);
  QCOMPARE(a->report.tp.link, std::string("intra-node"));
  QCOMPARE(b->report.tp.link, std::string("inter-node"));
  QCOMPARE(a->report.tp.bytes, b->report.tp.bytes); // same traffic, another link
  QVERIFY(b->report.tp.time_s > 2 * a->report.tp.time_s);
  QVERIFY2(b->report.step_time_s > a->report.step_time_s,
           show(b->report.step_time_s, a->report.step_time_s).c_str());
  QVERIFY(b->report.mfu < a->report.mfu);
  // Pipeline traffic moves the other way: tp-pp-dp crosses nodes between ranks 1 and 2.
  QCOMPARE(a->report.pp.link, std::string("mixed"));
  QCOMPARE(b->report.pp.link, std::string("intra-node"));
  QCOMPARE(a->report.dp.link, std::string("none"));
}

void TestModelCosts::fullRecomputeLowersMemoryRaisesBackward() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  // Selective recomputation redoes the materialized attention core; FlashAttention has none to
  // redo (its backward recomputes the scores anyway), so selective costs nothing extra there.
  {
    const Mesh mesh = makeMesh(1, 2, 4);
    setup.training.recompute = Recompute::None;
    auto flash_none = simulateModel(setup, mesh, request("1f1b", 4, 8));
    setup.training.recompute = Recompute::Selective;
    auto flash_selective = simulateModel(setup, mesh, request("1f1b", 4, 8));
    REQUIRE_OK(flash_none);
    REQUIRE_OK(flash_selective);
    QCOMPARE(flash_selective->derivation.costs.stage_overrides[1].backward_us,
             flash_none->derivation.costs.stage_overrides[1].backward_us);
  }
  setup.model.attention = "materialized";
  const Mesh mesh = makeMesh(1, 2, 4);
  setup.training.recompute = Recompute::None;
  auto none = simulateModel(setup, mesh, request("1f1b", 4, 8));
  setup.training.recompute = Recompute::Selective;
  auto selective = simulateModel(setup, mesh, request("1f1b", 4, 8));
  setup.training.recompute = Recompute::Full;
  auto full = simulateModel(setup, mesh, request("1f1b", 4, 8));
  REQUIRE_OK(none);
  REQUIRE_OK(selective);
  REQUIRE_OK(full);
  for (int s = 0; s < 4; ++s) {
    const auto &n = none->derivation.costs.stage_overrides[s];
    const auto &sel = selective->derivation.costs.stage_overrides[s];
    const auto &f = full->derivation.costs.stage_overrides[s];
    QCOMPARE(f.forward_us, n.forward_us);
    QCOMPARE(f.weight_us, n.weight_us);
    QVERIFY(sel.backward_us > n.backward_us);
    QVERIFY(f.backward_us > sel.backward_us);
    // Full recomputation adds a forward's worth of the layers' work (compute and TP all-reduces)
    // to B; the middle stages have nothing but layers.
    if (s == 1 || s == 2)
      QVERIFY2(near(f.backward_us - n.backward_us, f.forward_us, 1e-9),
               show(f.backward_us - n.backward_us, f.forward_us).c_str());
    QVERIFY(none->derivation.stage_activation_bytes[s] >
            selective->derivation.stage_activation_bytes[s]);
    QVERIFY(selective->derivation.stage_activation_bytes[s] >
            full->derivation.stage_activation_bytes[s]);
  }
  for (int p = 0; p < 4; ++p) {
    QVERIFY(full->report.memory[p].activations_peak < selective->report.memory[p].activations_peak);
    QVERIFY(selective->report.memory[p].activations_peak < none->report.memory[p].activations_peak);
  }
  QVERIFY(full->report.step_time_s > none->report.step_time_s);
}

// Korthikanti et al. 2022, Table 2, for a standard layer (GPT-3: MHA, 4h GeLU MLP), per layer.
void TestModelCosts::activationFormula_data() {
  QTest::addColumn<int>("tp");
  QTest::addColumn<bool>("sp");
  QTest::addColumn<int>("recompute");
  QTest::addColumn<double>("per_sbh");  // coefficient of s·b·h
  QTest::addColumn<double>("per_as2b"); // coefficient of a·s²·b
  QTest::newRow("no parallelism") << 1 << false << 0 << 34.0 << 5.0;
  QTest::newRow("tp 4") << 4 << false << 0 << 10.0 + 24.0 / 4 << 5.0 / 4;
  QTest::newRow("tp 4 + sp") << 4 << true << 0 << 34.0 / 4 << 5.0 / 4;
  QTest::newRow("tp 4 + selective") << 4 << false << 1 << 10.0 + 24.0 / 4 << 0.0;
  QTest::newRow("tp 4 + sp + selective") << 4 << true << 1 << 34.0 / 4 << 0.0;
  QTest::newRow("tp 4 + full") << 4 << false << 2 << 2.0 << 0.0;
  QTest::newRow("tp 4 + sp + full") << 4 << true << 2 << 2.0 / 4 << 0.0;
}

void TestModelCosts::activationFormula() {
  QFETCH(int, tp);
  QFETCH(bool, sp);
  QFETCH(int, recompute);
  QFETCH(double, per_sbh);
  QFETCH(double, per_as2b);
  ModelSetup setup = presetSetup("gpt3-175b", "a100-80gb");
  setup.training.sequence_parallel = sp;
  setup.training.recompute = static_cast<Recompute>(recompute);
  auto schedule = generateSchedule(request("1f1b", 8, 8));
  REQUIRE_OK(schedule);
  auto derivation = deriveModelCosts(setup, makeMesh(1, tp, 8), schedule->placement);
  REQUIRE_OK(derivation);
  const double s = 2048, b = 1, h = 12288, a = 96;
  const double expected = 12 * (s * b * h * per_sbh + a * s * s * b * per_as2b); // 12 layers
  const double got = derivation->stage_activation_bytes[3];                      // middle stage
  QVERIFY2(near(got, expected, 1e-12), show(got, expected).c_str());
}

// F = (24·b·s·h² + 4·b·s²·h) per layer for a standard layer, B = 2F, W = the matmul part.
void TestModelCosts::flopsFromShapes() {
  ModelSetup setup = flatPresetSetup("gpt3-175b", "a100-80gb");
  auto schedule = generateSchedule(request("1f1b", 8, 8));
  REQUIRE_OK(schedule);
  auto derivation = deriveModelCosts(setup, makeMesh(1, 1, 8), schedule->placement);
  REQUIRE_OK(derivation);
  const double s = 2048, b = 1, h = 12288;
  const double rate = setup.hardware.peak_tflops * 1e6 * setup.hardware.efficiency;
  const double forward = 12 * (24 * b * s * h * h + 4 * b * s * s * h) / rate;
  const double weight = 12 * (24 * b * s * h * h) / rate;
  const auto &mid = derivation->costs.stage_overrides[4];
  QVERIFY2(near(mid.forward_us, forward, 1e-12), show(mid.forward_us, forward).c_str());
  QVERIFY2(near(mid.backward_us, 2 * forward, 1e-12), show(mid.backward_us, 2 * forward).c_str());
  QVERIFY2(near(mid.weight_us, weight, 1e-12), show(mid.weight_us, weight).c_str());
  // The last stage adds the output head (2·b·s·h·V per pass), the first the embedding (no FLOPs).
  const auto &last = derivation->costs.stage_overrides[7];
  const double head = 2 * b * s * h * 50257 / rate;
  QVERIFY2(near(last.forward_us - mid.forward_us, head, 1e-9),
           show(last.forward_us - mid.forward_us, head).c_str());
  QVERIFY2(near(last.weight_us - mid.weight_us, head, 1e-9),
           show(last.weight_us - mid.weight_us, head).c_str());
  QCOMPARE(derivation->costs.stage_overrides[0].forward_us, mid.forward_us);
  // Rank share for display: L/P layers.
  QVERIFY2(near(derivation->costs.forward_us, forward, 1e-12),
           show(derivation->costs.forward_us, forward).c_str());
}

// Two all-reduces of b·s·h elements per layer in F: 2(t-1)/t · bytes / bandwidth + 2(t-1) ·
// latency.
void TestModelCosts::tpAllReduceIsRing() {
  ModelSetup setup = flatPresetSetup("llama3-8b", "h100-sxm");
  auto schedule = generateSchedule(request("1f1b", 4, 8));
  REQUIRE_OK(schedule);
  const Mesh mesh = makeMesh(1, 8, 4);
  auto fast = deriveModelCosts(setup, mesh, schedule->placement);
  setup.hardware.intra_node_gbps /= 2;
  setup.hardware.intra_node_latency_us += 1;
  auto slow = deriveModelCosts(setup, mesh, schedule->placement);
  REQUIRE_OK(fast);
  REQUIRE_OK(slow);
  const double t = 8, layers = 8, bytes = 8192.0 * 4096 * 2;
  const double bw = setup.hardware.intra_node_gbps * 1e3; // bytes per µs, after halving
  const double per_allreduce =
      2 * (t - 1) / t * (bytes / bw - bytes / (2 * bw)) + 2 * (t - 1) * 1.0;
  const double got =
      slow->costs.stage_overrides[1].forward_us - fast->costs.stage_overrides[1].forward_us;
  QVERIFY2(near(got, layers * 2 * per_allreduce, 1e-9),
           show(got, layers * 2 * per_allreduce).c_str());
  // The input-grad carries the backward's two all-reduces; W has none.
  QCOMPARE(slow->costs.stage_overrides[1].weight_us, fast->costs.stage_overrides[1].weight_us);
  const double got_b =
      slow->costs.stage_overrides[1].backward_us - fast->costs.stage_overrides[1].backward_us;
  QVERIFY2(near(got_b, layers * 2 * per_allreduce, 1e-9),
           show(got_b, layers * 2 * per_allreduce).c_str());
}

void TestModelCosts::pipelineTransfers() {
  ModelSetup setup = flatPresetSetup("llama3-8b", "h100-sxm");
  auto schedule = generateSchedule(request("1f1b", 4, 8));
  REQUIRE_OK(schedule);
  // tp = 4, pp = 4, tp-pp-dp: pipeline ranks 0,1 in node 0 and 2,3 in node 1.
  auto derivation = deriveModelCosts(setup, makeMesh(1, 4, 4), schedule->placement);
  REQUIRE_OK(derivation);
  const double bytes = 8192.0 * 4096 * 2; // b·s·h bf16
  // Megatron's scatter/gather: each of the 4 TP ranks sends a quarter, and the receiving TP group
  // all-gathers the whole tensor over NVLink ((t-1)/t of it per rank, t-1 latency steps).
  QCOMPARE(derivation->costs.activation_bytes, bytes / 4);
  const auto &hw = setup.hardware;
  const double gather = 3.0 / 4 * bytes / (hw.intra_node_gbps * 1e3) + 3 * hw.intra_node_latency_us;
  const auto &boundary = derivation->costs.boundary_transfer_us;
  QCOMPARE(static_cast<int>(boundary.size()), 4);
  QVERIFY(near(boundary[0],
               hw.intra_node_latency_us + bytes / 4 / (hw.intra_node_gbps * 1e3) + gather, 1e-12));
  QVERIFY(near(boundary[1],
               hw.inter_node_latency_us + bytes / 4 / (hw.inter_node_gbps * 1e3) + gather, 1e-12));
  QVERIFY(near(boundary[2],
               hw.intra_node_latency_us + bytes / 4 / (hw.intra_node_gbps * 1e3) + gather, 1e-12));
  // Sequence parallelism: each TP rank holds and sends its 1/t of the sequence; nothing to gather.
  setup.training.sequence_parallel = true;
  auto sp = deriveModelCosts(setup, makeMesh(1, 4, 4), schedule->placement);
  REQUIRE_OK(sp);
  QCOMPARE(sp->costs.activation_bytes, bytes / 4);
  QVERIFY(near(sp->costs.boundary_transfer_us[1],
               hw.inter_node_latency_us + bytes / 4 / (hw.inter_node_gbps * 1e3), 1e-12));
}

void TestModelCosts::gradientSyncOverlap() {
  ModelSetup setup = flatPresetSetup("llama3-8b", "h100-sxm");
  setup.training.recompute = Recompute::Selective;
  auto schedule = generateSchedule(request("1f1b", 2, 8));
  REQUIRE_OK(schedule);
  const Mesh single = makeMesh(1, 4, 2);
  const Mesh replicas = makeMesh(8, 4, 2);
  auto none = deriveModelCosts(setup, single, schedule->placement);
  auto plain = deriveModelCosts(setup, replicas, schedule->placement);
  setup.training.overlap_gradient_sync = true;
  auto overlapped = deriveModelCosts(setup, replicas, schedule->placement);
  REQUIRE_OK(none);
  REQUIRE_OK(plain);
  REQUIRE_OK(overlapped);
  QCOMPARE(none->costs.gradient_sync_us, 0.0);
  QVERIFY(plain->costs.gradient_sync_us > 0);
  QVERIFY(overlapped->costs.gradient_sync_us > 0);
  QVERIFY(overlapped->costs.gradient_sync_us < plain->costs.gradient_sync_us);
  // DP groups stride 8 ranks: every group crosses nodes. Rank 0 holds 16 layers + embedding of
  // 1/4 (tp) in bf16; ring all-reduce over 8.
  const double params = 16 * (4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096 + 3 * 4096.0 * 14336) / 4 +
                        16 * 2 * 4096.0 + 128256.0 * 4096 / 4;
  const double bytes = params * 2;
  const auto &hw = setup.hardware;
  const double expected =
      2.0 * 7 / 8 * bytes / (hw.inter_node_gbps * 1e3) + 2.0 * 7 * hw.inter_node_latency_us;
  auto run = simulateModel(setup, replicas, request("1f1b", 2, 8));
  REQUIRE_OK(run);
  QVERIFY(run->report.dp.time_s * 1e6 >= expected * (1 - 1e-9));
  QCOMPARE(run->report.dp.link, std::string("inter-node"));
  QVERIFY(run->report.dp.exposed_time_s < run->report.dp.time_s);
}

// An interleaved rank syncs each chunk once its last microbatch is through it
// (overlappedSyncExposedUs, Megatron-Core's grad_sync_func per model chunk): by hand, then on a
// model, where V = 4 chunks hide more of the same sync than one chunk does.
void TestModelCosts::interleavedSyncGoesChunkByChunk() {
  // One chunk: all but the compute, at least one of 10 units' share.
  QCOMPARE(overlappedSyncExposedUs(100, 60, 1, 4, 10), 40.0);
  QCOMPARE(overlappedSyncExposedUs(100, 95, 1, 4, 10), 10.0);
  // V = 4, P = 2, 80 us of compute: b = 20 a chunk, the first chunk's sync hides behind
  // 20 · (1 + 3 · 2) = 140 us. 300 us queue past it by 160; 100 us fit, but the last chunk's
  // 25 us share hides behind only its own 20 us (5), below one unit's 10.
  QCOMPARE(overlappedSyncExposedUs(300, 80, 4, 2, 10), 160.0);
  QCOMPARE(overlappedSyncExposedUs(100, 80, 4, 2, 10), 10.0);
  QCOMPARE(overlappedSyncExposedUs(100, 80, 4, 2, 40), 5.0);
  QCOMPARE(overlappedSyncExposedUs(100, 80, 4, 2, 1), 100.0);

  ModelSetup setup = flatPresetSetup("llama3-8b", "h100-sxm");
  setup.training.zero_stage = 1;
  setup.training.overlap_gradient_sync = true;
  setup.training.fp32_gradients = true;
  setup.model.sequence_length = 512; // a short backward: the sync outlasts one chunk's
  // The hiding alone: the GEMMs the hidden sync slows (collectiveContentionByHand) left out.
  setup.hardware.collective_gemm_slowdown = 0;
  const Mesh mesh = makeMesh(8, 4, 2);
  auto one_chunk = simulateModel(setup, mesh, request("1f1b", 2, 8));
  auto four_chunks = simulateModel(setup, mesh, request("interleaved-1f1b", 2, 8, 4));
  REQUIRE_OK(one_chunk);
  REQUIRE_OK(four_chunks);
  QVERIFY(near(four_chunks->report.dp.time_s, one_chunk->report.dp.time_s, 0.01));
  // The sync outlasts the compute either way, so a rank's reduce-scatter and all-gather hide
  // behind (1 + (V − 1)·P)/V = 7/4 of its backward and forward instead of one of each: 3/4·(B + F)
  // more, B and F the rank's passes of one microbatch (the same on both placements).
  double least = 1e300, most = 0;
  for (int rank = 0; rank < 2; ++rank) {
    double passes = 0;
    const Placement &placement = four_chunks->schedule.placement;
    for (int v = 0; v < placement.stageCount(); ++v)
      if (placement.rankOf(v) == rank) {
        const StageCost &cost =
            four_chunks->derivation.costs.stage_overrides[static_cast<std::size_t>(v)];
        passes += cost.forward_us + cost.backward_us;
      }
    least = std::min(least, 0.75 * passes);
    most = std::max(most, 0.75 * passes);
  }
  const double hidden_us =
      (one_chunk->report.dp.exposed_time_s - four_chunks->report.dp.exposed_time_s) * 1e6;
  QVERIFY2(
      hidden_us > least * (1 - 1e-6) && hidden_us < most * (1 + 1e-6),
      qPrintable(
          QStringLiteral("%1 us hidden, expected %2 to %3").arg(hidden_us).arg(least).arg(most)));
}

// An overlapped DP sync's NCCL kernel holds SMs while it runs, and the GEMMs beside it run slower
// (docs/measurements/h100-sm-contention.md): the hidden part of the sync costs
// slowdown · (the GEMMs' share of the compute it hides behind) of its time.
void TestModelCosts::collectiveContentionByHand() {
  QCOMPARE(collectiveContentionUs(0.2, 1000, 0.75), 150.0);
  QCOMPARE(collectiveContentionUs(0.2, -5, 0.75), 0.0); // nothing hidden, nothing slowed
  QCOMPARE(collectiveContentionUs(0.2, 1000, 1.5), 200.0);
  QCOMPARE(collectiveContentionUs(0, 1000, 0.75), 0.0);

  // ZeRO-1 on one pipeline rank: the reduce-scatter hides behind the backward and the
  // all-gather behind the forward, each slowing that pass's GEMMs.
  ModelSetup setup = flatPresetSetup("llama3-8b", "h100-sxm");
  setup.training.zero_stage = 1;
  setup.training.overlap_gradient_sync = true;
  const Mesh mesh = makeMesh(8, 1, 1);
  const auto tailAt = [&](double slowdown) {
    ModelSetup trial = setup;
    trial.hardware.collective_gemm_slowdown = slowdown;
    return simulateModel(trial, mesh, request("1f1b", 1, 8));
  };
  const auto none = tailAt(0), some = tailAt(0.2), twice = tailAt(0.4);
  REQUIRE_OK(none);
  REQUIRE_OK(some);
  REQUIRE_OK(twice);
  const double added =
      some->derivation.costs.gradient_sync_us - none->derivation.costs.gradient_sync_us;
  const double hidden_us = (none->report.dp.time_s - none->report.dp.exposed_time_s) * 1e6;
  const StageBreakdown &parts = none->derivation.stage_breakdown[0];
  PassBreakdown backward = parts.input_grad;
  backward += parts.weight_grad;
  const double forward_share = parts.forward.gemm_us / parts.forward.total();
  const double backward_share = backward.gemm_us / backward.total();
  QVERIFY(hidden_us > 0);
  QVERIFY2(added >= 0.2 * std::min(forward_share, backward_share) * hidden_us * (1 - 1e-9) &&
               added <= 0.2 * std::max(forward_share, backward_share) * hidden_us * (1 + 1e-9),
           qPrintable(QStringLiteral("%1 us added for %2 us hidden").arg(added).arg(hidden_us)));
  // Linear in the slowdown, paid after the last op, and part of the report's exposed DP time.
  QVERIFY(near(twice->derivation.costs.gradient_sync_us - none->derivation.costs.gradient_sync_us,
               2 * added, 1e-9));
  QVERIFY(
      near(some->report.dp.exposed_time_s - none->report.dp.exposed_time_s, added * 1e-6, 1e-6));
  QVERIFY(some->report.step_time_s > none->report.step_time_s);
  // Without overlap the sync is exposed whole and slows nothing.
  setup.training.overlap_gradient_sync = false;
  const auto plain = tailAt(0), plain_slowed = tailAt(0.2);
  REQUIRE_OK(plain);
  REQUIRE_OK(plain_slowed);
  QCOMPARE(plain_slowed->derivation.costs.gradient_sync_us,
           plain->derivation.costs.gradient_sync_us);
}

void TestModelCosts::throughputAndMfu() {
  ModelSetup setup = presetSetup("llama3-70b", "h100-sxm");
  setup.training.recompute = Recompute::Selective;
  setup.training.sequence_parallel = true;
  const Mesh mesh = makeMesh(2, 8, 8);
  auto run = simulateModel(setup, mesh, request("1f1b", 8, 32));
  REQUIRE_OK(run);
  const auto &r = run->report;
  QVERIFY(r.step_time_s > 0);
  QVERIFY2(near(r.step_time_s, run->simulation.makespan_us * 1e-6, 1e-12),
           "step time is the makespan");
  const double tokens = 2.0 * 32 * 1 * 8192;
  QVERIFY(near(r.tokens_per_s, tokens / r.step_time_s, 1e-12));
  QVERIFY2(r.mfu > 0.1 && r.mfu < setup.hardware.efficiency, std::to_string(r.mfu).c_str());
  // Model FLOPs: 3 × forward = 6·N·tokens (N without the embedding table) plus attention.
  const auto &m = setup.model;
  const double n_matmul = parameterCount(m) - static_cast<double>(m.vocab) * m.hidden -
                          (2.0 * m.layers + 1) * m.hidden; // minus the embedding table and norms
  const double attention = 3 * 4.0 * m.sequence_length * m.sequence_length * m.hidden * m.layers;
  const double expected = 2 * 32 * (6 * n_matmul * m.sequence_length + attention);
  QVERIFY2(near(r.model_flops_per_step, expected, 1e-9),
           show(r.model_flops_per_step, expected).c_str());
  QVERIFY(r.tp.bytes > 0 && r.pp.bytes > 0 && r.dp.bytes > 0);
  QCOMPARE(r.tp.link, std::string("intra-node"));
  QCOMPARE(r.mfu_fp8, 0.0); // BF16 GEMMs: one MFU, against the 16-bit peak

  // FP8 GEMMs: the same model FLOPs over the FP8 peak as well (989 and 1979 TFLOPS on h100-sxm).
  setup.training.gemm_precision = GemmPrecision::Fp8;
  auto fp8 = simulateModel(setup, mesh, request("1f1b", 8, 32));
  REQUIRE_OK(fp8);
  const auto &f = fp8->report;
  QVERIFY(f.step_time_s < r.step_time_s);
  QVERIFY(near(f.mfu, f.model_flops_per_step / (f.step_time_s * 128 * 989e12), 1e-9));
  QVERIFY2(near(f.mfu_fp8, f.mfu * 989 / 1979, 1e-9), show(f.mfu_fp8, f.mfu * 989 / 1979).c_str());
}

void TestModelCosts::modelThatCannotFitIsFlagged() {
  ModelSetup setup = presetSetup("llama3-405b", "h100-sxm");
  auto run = simulateModel(setup, makeMesh(1, 1, 1), request("1f1b", 1, 2));
  REQUIRE_OK(run);
  QCOMPARE(static_cast<int>(run->report.memory.size()), 1);
  const auto &m = run->report.memory[0];
  QVERIFY(!m.fits);
  QVERIFY(m.total > m.capacity);
  QVERIFY(near(m.capacity, 79.6 * 1073741824.0, 1e-12));
  QVERIFY(near(m.params, parameterCount(setup.model) * 2, 1e-12));
  QVERIFY(near(m.total, m.params + m.grads + m.optimizer + m.activations_peak, 1e-12));
}

// 1F1B holds P - r microbatches on rank r: with llama3-70b on 8 × 8 without recomputation and
// two sequences per microbatch the first rank runs out of memory and the last one does not.
void TestModelCosts::someRanksFitOthersDoNot() {
  ModelSetup setup = presetSetup("llama3-70b", "h100-sxm");
  setup.model.microbatch_size = 2;
  auto run = simulateModel(setup, makeMesh(1, 8, 8), request("1f1b", 8, 32));
  REQUIRE_OK(run);
  const auto &memory = run->report.memory;
  QVERIFY(!memory.front().fits);
  QVERIFY(memory.back().fits);
  QVERIFY(memory.front().activations_peak > 4 * memory.back().activations_peak);
  // The peak is what the simulation saw, and on the last rank the loss's transient beside it:
  // the 16-bit logits and, as the fused loss runs, one more fp32 copy (2 + 4 bytes of b·s·V/t).
  const double logits = 2.0 * setup.model.sequence_length * setup.model.vocab / 8;
  QVERIFY(near(run->derivation.loss_transient_bytes, 6 * logits, 1e-12));
  for (int p = 0; p < 8; ++p)
    QCOMPARE(memory[p].activations_peak, run->simulation.ranks[p].peak_activation_bytes +
                                             (p == 7 ? run->derivation.loss_transient_bytes : 0.0));
}

// Transformer Engine's fused loss (cross_entropy "te") keeps the 16-bit logits for its backward
// and overwrites them with their gradient: 2 bytes a logit stored on the last stage instead of
// the fp32 copy's 4, and nothing beside them, where Megatron's fused loss holds the 16-bit
// logits and one more fp32 copy while it runs (6 bytes).
void TestModelCosts::transformerEngineLossKeepsSixteenBitLogits() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  auto megatron = simulateModel(setup, makeMesh(1, 1, 2), request("1f1b", 2, 4));
  REQUIRE_OK(megatron);
  setup.training.cross_entropy = "te";
  auto te = simulateModel(setup, makeMesh(1, 1, 2), request("1f1b", 2, 4));
  REQUIRE_OK(te);
  const double logits = static_cast<double>(setup.model.sequence_length) * setup.model.vocab;
  QVERIFY(near(megatron->derivation.loss_transient_bytes, 6 * logits, 1e-12));
  QCOMPARE(te->derivation.loss_transient_bytes, 0.0);
  QVERIFY(near(megatron->derivation.stage_activation_bytes[1] -
                   te->derivation.stage_activation_bytes[1],
               2 * logits, 1e-12));
  QCOMPARE(te->derivation.stage_activation_bytes[0],
           megatron->derivation.stage_activation_bytes[0]);
  // Its kernels pass over the 16-bit logits three times, Megatron's fused ones over fp32 copies.
  QVERIFY(te->derivation.stage_breakdown[1].forward.memory_bound_us <
          megatron->derivation.stage_breakdown[1].forward.memory_bound_us);
  QVERIFY(te->derivation.stage_breakdown[1].input_grad.memory_bound_us <
          megatron->derivation.stage_breakdown[1].input_grad.memory_bound_us);
}

void TestModelCosts::impossibleMeshRefused_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<int>("tp");
  QTest::addColumn<int>("mesh_pp");
  QTest::addColumn<int>("pp");
  QTest::addColumn<int>("chunks");
  QTest::addColumn<int>("gpus_per_node");
  QTest::addColumn<QString>("message");
  QTest::newRow("layers fewer than stages")
      << "llama3-8b" << 1 << 8 << 8 << 8 << 8 << "32 layers cannot fill 64 model stages";
  QTest::newRow("tp beyond a node")
      << "llama3-8b" << 16 << 2 << 2 << 1 << 8 << "spans more than one node";
  QTest::newRow("heads not divisible")
      << "llama3-8b" << 3 << 2 << 2 << 1 << 8 << "heads (32) are not divisible by tp = 3";
  QTest::newRow("kv heads not divisible")
      << "llama3-8b" << 16 << 2 << 2 << 1 << 16 << "kv_heads (8) are not divisible by tp = 16";
  QTest::newRow("mesh pp differs")
      << "llama3-8b" << 1 << 4 << 2 << 1 << 8 << "the mesh has pp = 4 but the schedule has P = 2";
}

void TestModelCosts::impossibleMeshRefused() {
  QFETCH(QString, model);
  QFETCH(int, tp);
  QFETCH(int, mesh_pp);
  QFETCH(int, pp);
  QFETCH(int, chunks);
  QFETCH(int, gpus_per_node);
  QFETCH(QString, message);
  const ModelSetup setup = presetSetup(model.toStdString(), "h100-sxm");
  const Placement placement = Placement::make(PlacementKind::Loop, pp, chunks, 8);
  auto derivation =
      deriveModelCosts(setup, makeMesh(1, tp, mesh_pp, "tp-pp-dp", gpus_per_node), placement);
  QVERIFY(!derivation.ok());
  QVERIFY2(derivation.error().message.find(message.toStdString()) != std::string::npos,
           derivation.error().message.c_str());
}

void TestModelCosts::unknownPresetListsPresets() {
  auto model = loadModelSpec("llama9-1t");
  QVERIFY(!model.ok());
  QVERIFY2(model.error().message.find("llama3-70b") != std::string::npos,
           model.error().message.c_str());
  QVERIFY(model.error().message.find("llama9-1t") != std::string::npos);
  auto hardware = loadHardwareSpec("b300");
  QVERIFY(!hardware.ok());
  QVERIFY2(hardware.error().message.find("h100-sxm") != std::string::npos,
           hardware.error().message.c_str());
}

void TestModelCosts::layerSplit() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  setup.model.layers = 30;
  const Placement placement = Placement::make(PlacementKind::Loop, 4, 1, 8);
  const Mesh mesh = makeMesh(1, 1, 4);
  auto even = deriveModelCosts(setup, mesh, placement);
  REQUIRE_OK(even);
  QCOMPARE(even->stage_layers, (std::vector<int>{8, 8, 7, 7}));
  setup.training.balance_layers = true;
  auto balanced = deriveModelCosts(setup, mesh, placement);
  REQUIRE_OK(balanced);
  const auto &layers = balanced->stage_layers;
  QCOMPARE(std::accumulate(layers.begin(), layers.end(), 0), 30);
  // The head (2·s·h·V per pass, about two layers' work for Llama 3 8B) takes layers off the last
  // stage.
  QVERIFY(layers.back() < layers[1]);
  const auto slowest = [](const Costs &costs) {
    double worst = 0;
    for (const auto &c : costs.stage_overrides)
      worst = std::max(worst, c.forward_us + c.backward_us);
    return worst;
  };
  QVERIFY(slowest(balanced->costs) < slowest(even->costs));
  // No other split with every stage >= 1 layer does better (exhaustive over 4 stages).
  const auto &o = even->costs.stage_overrides;
  const double per_layer = (o[1].forward_us + o[1].backward_us) / 8;
  const double head = (o[3].forward_us + o[3].backward_us) - 7 * per_layer;
  const double embed = (o[0].forward_us + o[0].backward_us) - 8 * per_layer;
  double best = 1e300;
  for (int a = 1; a <= 27; ++a)
    for (int b = 1; a + b <= 28; ++b)
      for (int c = 1; a + b + c <= 29; ++c) {
        const int d = 30 - a - b - c;
        best = std::min(best, std::max({embed + a * per_layer, b * per_layer, c * per_layer,
                                        head + d * per_layer}));
      }
  QVERIFY2(near(slowest(balanced->costs), best, 1e-9),
           show(slowest(balanced->costs), best).c_str());
}

void TestModelCosts::bidirectionalHoldsTwoStages() {
  const ModelSetup setup = presetSetup("llama3-8b", "h200");
  auto run = simulateModel(setup, makeMesh(1, 1, 4), request("dualpipe", 4, 8));
  REQUIRE_OK(run);
  // Rank 0 holds model stages 0 and 3 (embedding and head), rank 1 stages 1 and 2.
  const auto &memory = run->report.memory;
  QVERIFY(memory[0].params > memory[1].params);
  QCOMPARE(memory[0].params, memory[3].params);
  QCOMPARE(memory[1].params, memory[2].params);
  QCOMPARE(run->derivation.stage_layers, (std::vector<int>{8, 8, 8, 8, 8, 8, 8, 8}));
  QVERIFY(run->report.tokens_per_s > 0);
}

void TestModelCosts::jsonRoundTrip() {
  TrainingSetup training;
  training.recompute = Recompute::Selective;
  training.zero_stage = 1;
  training.sequence_parallel = true;
  training.optimizer_bytes_per_param = 8;
  training.balance_layers = true;
  training.overlap_gradient_sync = true;
  auto again = trainingSetupFromJson(toJson(training), "/training");
  REQUIRE_OK(again);
  QCOMPARE(toJson(*again), toJson(training));
  QCOMPARE(std::string(recomputeName(Recompute::Full)), std::string("full"));
  QVERIFY(parseRecompute("selective").ok());
  QVERIFY(!parseRecompute("some").ok());
  // Defaults when absent.
  auto empty = trainingSetupFromJson(nlohmann::json::object(), "/training");
  REQUIRE_OK(empty);
  QCOMPARE(empty->optimizer_bytes_per_param, 12.0);
  QVERIFY(empty->recompute == Recompute::None);
}

void TestModelCosts::jsonErrorsNameTheField() {
  auto spec = loadModelSpec("llama3-8b");
  REQUIRE_OK(spec);
  nlohmann::json json = toJson(*spec);
  json["hiden"] = 4096;
  auto typo = modelSpecFromJson(json, "/model");
  QVERIFY(!typo.ok());
  QVERIFY2(typo.error().message.find("/model/hiden") != std::string::npos,
           typo.error().message.c_str());

  json = toJson(*spec);
  json["layers"] = "many";
  auto type = modelSpecFromJson(json, "/model");
  QVERIFY(!type.ok());
  QVERIFY2(type.error().message.find("/model/layers") != std::string::npos,
           type.error().message.c_str());

  json = toJson(*spec);
  json["heads"] = 33;
  auto heads = modelSpecFromJson(json, "/model");
  QVERIFY(!heads.ok());
  QVERIFY2(heads.error().message.find("/model/heads") != std::string::npos,
           heads.error().message.c_str());

  // Attention widths: a negative head_dim, MLA without its head sizes, head_dim with MLA, and
  // latent sizes without kv_lora_rank each name their field.
  const std::pair<nlohmann::json, std::string> attention_cases[] = {
      {{{"head_dim", -1}}, "/model/head_dim"},
      {{{"kv_lora_rank", 512}, {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64}},
       "/model/v_head_dim"},
      {{{"kv_lora_rank", 512},
        {"qk_nope_head_dim", 128},
        {"qk_rope_head_dim", 64},
        {"v_head_dim", 128},
        {"head_dim", 128}},
       "/model/head_dim"},
      {{{"q_lora_rank", 1536}}, "/model/kv_lora_rank"},
  };
  for (const auto &[patch, pointer] : attention_cases) {
    json = toJson(*spec);
    json.update(patch);
    auto bad = modelSpecFromJson(json, "/model");
    QVERIFY2(!bad.ok(), patch.dump().c_str());
    QVERIFY2(bad.error().message.find(pointer) != std::string::npos, bad.error().message.c_str());
  }
  // head_dim lifts the hidden % heads rule: 4096 over 48 heads of 128.
  json = toJson(*spec);
  json["heads"] = 48, json["kv_heads"] = 8, json["head_dim"] = 128;
  auto wide = modelSpecFromJson(json, "/model");
  REQUIRE_OK(wide);

  nlohmann::json hw = toJson(*loadHardwareSpec("h100-sxm"));
  hw["efficiency"] = 1.5;
  auto eff = hardwareSpecFromJson(hw, "/hardware");
  QVERIFY(!eff.ok());
  QVERIFY2(eff.error().message.find("/hardware/efficiency") != std::string::npos,
           eff.error().message.c_str());

  auto recompute = trainingSetupFromJson({{"recompute", "most"}}, "/training");
  QVERIFY(!recompute.ok());
  QVERIFY2(recompute.error().message.find("/training/recompute") != std::string::npos,
           recompute.error().message.c_str());
}

// Parameters of DeepSeek-V3 (MLA) and Qwen3-235B-A22B (head_dim 128 on h = 4096) by hand, total
// and active, against the published 671B / 37B and 235B / 22B.
void TestModelCosts::latentAndWideAttentionByHand() {
  auto deepseek = loadModelSpec("deepseek-v3");
  REQUIRE_OK(deepseek);
  deepseek->mtp_layers = 0; // the main model, as the report counts 671B
  const double h = 7168, V = 129280, fe = 2048, heads = 128;
  const double attention = h * 1536 + 1536 * heads * (128 + 64)         // W_DQ, W_UQ
                           + h * (512 + 64) + 512 * heads * (128 + 128) // W_DKV (+ rope), W_UKV
                           + heads * 128 * h                            // W_O
                           + 1536 + 512 + 2 * h;                        // latent and layer norms
  const double expert = 3 * h * fe;
  const double dense_layer = attention + 3 * h * 18432;
  const double moe_layer = attention + (256 + 1) * expert + h * 256; // routed, shared, router
  const double total = 3 * dense_layer + 58 * moe_layer + 2 * V * h + h;
  QVERIFY2(near(parameterCount(*deepseek), total, 1e-12),
           show(parameterCount(*deepseek), total).c_str());
  QVERIFY2(near(total, 671e9, 0.002), show(total, 671e9).c_str());
  // Active per token: 8 routed of 256 (the report's 37B; README_WEIGHTS.md: 36.6B without the
  // 0.9B embedding).
  const double active = total - 58 * (256 - 8) * expert;
  QVERIFY2(near(active, 37.5e9, 0.01), show(active, 37.5e9).c_str());

  auto qwen = loadModelSpec("qwen3-235b-a22b");
  REQUIRE_OK(qwen);
  const double qh = 4096, qV = 151936, width = 64 * 128, kv = 4 * 128, qfe = 1536;
  const double q_layer =
      qh * (width + 2 * kv) + width * qh + 128 * 3 * qh * qfe + qh * 128 + 2 * qh;
  const double q_total = 94 * q_layer + 2 * qV * qh + qh;
  QVERIFY2(near(parameterCount(*qwen), q_total, 1e-12),
           show(parameterCount(*qwen), q_total).c_str());
  const double q_active = q_total - 94 * (128 - 8) * 3 * qh * qfe;
  QVERIFY2(near(q_active, 22.2e9, 0.01), show(q_active, 22.2e9).c_str());
}

// Activations follow the attention's own widths: Q, K, V and the output projection's input are
// 2 bytes per element each (Korthikanti et al. 2022), so making the heads wider than h adds
// 2·s·b·(Δq + Δk + Δv + Δo) per layer; MLA adds its latents before and after their norms and
// the shared rope key.
void TestModelCosts::wideAttentionActivations() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  setup.model.attention = "flash";
  auto schedule = generateSchedule(request("1f1b", 4, 8));
  REQUIRE_OK(schedule);
  const Mesh mesh = makeMesh(1, 1, 4);
  auto narrow = deriveModelCosts(setup, mesh, schedule->placement);
  REQUIRE_OK(narrow);
  setup.model.head_dim = 256; // 32 × 256 = 8192 wide queries, 8 × 256 = 2048 wide K and V
  auto wide = deriveModelCosts(setup, mesh, schedule->placement);
  REQUIRE_OK(wide);
  const double s = 8192, b = 1, layers = 8; // 32 layers over 4 stages
  const double delta = layers * 2 * s * b * ((8192 - 4096) + 2 * (2048 - 1024) + (8192 - 4096));
  const double got = wide->stage_activation_bytes[1] - narrow->stage_activation_bytes[1];
  QVERIFY2(near(got, delta, 1e-12), show(got, delta).c_str());

  // MLA instead: queries and keys 32 × (64 + 32), values 32 × 64, latents 512 and 256 with a
  // 32-wide rope key.
  setup.model.head_dim = 0;
  setup.model.q_lora_rank = 512, setup.model.kv_lora_rank = 256;
  setup.model.qk_nope_head_dim = 64, setup.model.qk_rope_head_dim = 32, setup.model.v_head_dim = 64;
  auto latent = deriveModelCosts(setup, mesh, schedule->placement);
  REQUIRE_OK(latent);
  const double q = 32 * 96, v = 32 * 64;
  const double mla_delta =
      layers * 2 * s * b * ((q + q + v + v) - (4096 + 1024 + 1024 + 4096) + 2 * 512 + 2 * 256 + 32);
  const double mla_got = latent->stage_activation_bytes[1] - narrow->stage_activation_bytes[1];
  QVERIFY2(near(mla_got, mla_delta, 1e-12), show(mla_got, mla_delta).c_str());
}

void TestModelCosts::userFileLoads() {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("pipescope-test-model-" +
                    std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::filesystem::create_directories(dir);
  auto spec = loadModelSpec("llama3-8b");
  REQUIRE_OK(spec);
  spec->name = "my-model";
  spec->layers = 40;
  const auto model_path = (dir / "my-model.json").string();
  std::ofstream(model_path) << toJson(*spec).dump(2);
  auto loaded = loadModelSpec(model_path);
  REQUIRE_OK(loaded);
  QCOMPARE(loaded->layers, 40);
  QCOMPARE(loaded->name, std::string("my-model"));

  // A hardware file is not a model file.
  const auto hw_path = (dir / "gpu.json").string();
  std::ofstream(hw_path) << toJson(*loadHardwareSpec("a100-80gb")).dump(2);
  REQUIRE_OK(loadHardwareSpec(hw_path));
  auto wrong = loadModelSpec(hw_path);
  QVERIFY(!wrong.ok());
  QVERIFY2(wrong.error().message.find("pipescope.hardware") != std::string::npos,
           wrong.error().message.c_str());

  // Missing format, broken JSON, and deep nesting are refused with a message.
  const auto bad_path = (dir / "bad.json").string();
  std::ofstream(bad_path) << R"({"layers": 2})";
  auto no_format = loadModelSpec(bad_path);
  QVERIFY(!no_format.ok());
  QVERIFY2(no_format.error().message.find("/format") != std::string::npos,
           no_format.error().message.c_str());
  std::ofstream(bad_path) << R"({"format": "pipescope.model", )";
  QVERIFY(!loadModelSpec(bad_path).ok());
  std::ofstream(bad_path) << std::string(100000, '[') << std::string(100000, ']');
  auto deep = loadModelSpec(bad_path);
  QVERIFY(!deep.ok());
  QVERIFY2(deep.error().message.find("nests deeper") != std::string::npos,
           deep.error().message.c_str());
  std::filesystem::remove_all(dir);
}

namespace {

/// Llama 3 8B parameters by hand: a layer (Q and O 4096², K and V 4096 × 1024, three MLP
/// matrices 4096 × 14336, two RMSNorm weights) and what lies outside the layers (embedding and
/// untied head 128256 × 4096, the final norm).
constexpr double kLlama8bLayer =
    4096.0 * (4096 + 1024 + 1024 + 4096) + 3.0 * 4096 * 14336 + 2.0 * 4096;
constexpr double kLlama8bOutside = 2.0 * 128256 * 4096 + 4096;
constexpr double kLlama8b = 32 * kLlama8bLayer + kLlama8bOutside;

} // namespace

// The ZeRO paper's per-rank memory (Rajbhandari et al. 2020, Figure 1: 2Ψ + 2Ψ + KΨ, then
// 2Ψ + 2Ψ + KΨ/N, 2Ψ + (2 + K)Ψ/N, (2 + 2 + K)Ψ/N) with K = 12, N = dp = 8, Ψ = Llama 3 8B on
// one pipeline rank; ZeRO-2 holds one layer's unsharded gradients in flight, ZeRO-3 two
// gathered layers and the root unit (embedding, final norm, head) with the layer's and the
// root's unsharded gradients.
void TestModelCosts::zeroStagesMemoryByHand() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  QVERIFY(near(parameterCount(setup.model), kLlama8b, 1e-12));
  const Mesh mesh = makeMesh(8, 1, 1);
  const double psi = kLlama8b, n = 8;
  struct Expected {
    double params, grads, optimizer;
  };
  const Expected expected[] = {
      {2 * psi, 2 * psi, 12 * psi},
      {2 * psi, 2 * psi, 12 * psi / n},
      {2 * psi, 2 * psi / n + 2 * kLlama8bLayer, 12 * psi / n},
      {2 * psi / n + 2 * (2 * kLlama8bLayer + kLlama8bOutside),
       2 * psi / n + 2 * (kLlama8bLayer + kLlama8bOutside), 12 * psi / n},
  };
  double activations = -1;
  for (int stage = 0; stage <= 3; ++stage) {
    setup.training.zero_stage = stage;
    auto run = simulateModel(setup, mesh, request("1f1b", 1, 1));
    REQUIRE_OK(run);
    const RankMemory &memory = run->report.memory[0];
    const Expected &e = expected[stage];
    QVERIFY2(near(memory.params, e.params, 1e-12), show(memory.params, e.params).c_str());
    QVERIFY2(near(memory.grads, e.grads, 1e-12), show(memory.grads, e.grads).c_str());
    QVERIFY2(near(memory.optimizer, e.optimizer, 1e-12),
             show(memory.optimizer, e.optimizer).c_str());
    // Sharding moves no activation.
    if (activations < 0) activations = memory.activations_peak;
    QCOMPARE(memory.activations_peak, activations);
    // Traffic per step: an all-reduce's 2(n-1)/n of the 16-bit gradients, ZeRO-3 3(n-1)/n
    // (ZeRO paper §7.2: 1.5×).
    const double volume = stage == 3 ? 3.0 : 2.0;
    QVERIFY2(near(run->report.dp.bytes, volume * (n - 1) / n * 2 * psi, 1e-12),
             show(run->report.dp.bytes, volume * (n - 1) / n * 2 * psi).c_str());
  }
  // One data-parallel rank: nothing to shard, gather or reduce-scatter.
  auto alone = simulateModel(setup, makeMesh(1, 1, 1), request("1f1b", 1, 1));
  REQUIRE_OK(alone);
  QVERIFY(near(alone->report.memory[0].params, 2 * psi, 1e-12));
  QVERIFY(near(alone->report.memory[0].grads, 2 * psi, 1e-12));
  QCOMPARE(alone->report.dp.bytes, 0.0);
  // Without pipelining, FSDP gathers and reduce-scatters again for every microbatch.
  auto four = simulateModel(setup, mesh, request("1f1b", 1, 4));
  REQUIRE_OK(four);
  QVERIFY(near(four->report.dp.bytes, 4 * 3.0 * (n - 1) / n * 2 * psi, 1e-12));
  // FP8 GEMMs at ZeRO-1: Transformer Engine's FP8 copy and transpose of every layer weight
  // beside the 16-bit weights; with FP8 parameters none, and the updated layer weights gathered
  // at one byte (the embedding, head and final norm outside the layers at two).
  setup.training.zero_stage = 1;
  setup.training.gemm_precision = GemmPrecision::Fp8;
  auto copies = simulateModel(setup, mesh, request("1f1b", 1, 1));
  setup.training.fp8_params = true;
  auto fp8_params = simulateModel(setup, mesh, request("1f1b", 1, 1));
  REQUIRE_OK(copies);
  REQUIRE_OK(fp8_params);
  const double layers = psi - kLlama8bOutside;
  QVERIFY(near(copies->report.memory[0].params, 2 * psi + 2 * layers, 1e-12));
  QVERIFY(near(fp8_params->report.memory[0].params, 2 * psi, 1e-12));
  QVERIFY(near(copies->report.dp.bytes, 2.0 * (n - 1) / n * 2 * psi, 1e-12));
  const double gathered = 2 * kLlama8bOutside + 1 * layers;
  QVERIFY2(near(fp8_params->report.dp.bytes, (n - 1) / n * (2 * psi + gathered), 1e-12),
           show(fp8_params->report.dp.bytes, (n - 1) / n * (2 * psi + gathered)).c_str());
  // ZeRO-3 gathers them at one byte for the forward and again for the backward.
  setup.training.zero_stage = 3;
  auto fsdp = simulateModel(setup, mesh, request("1f1b", 1, 1));
  REQUIRE_OK(fsdp);
  QVERIFY2(near(fsdp->report.dp.bytes, (n - 1) / n * (2 * psi + 2 * gathered), 1e-12),
           show(fsdp->report.dp.bytes, (n - 1) / n * (2 * psi + 2 * gathered)).c_str());
}

// Under PP torchtitan keeps the gathered parameters and the unsharded gradients for the whole
// step: each pipeline rank holds both whole beside its shards, and moves one all-gather and one
// reduce-scatter per step whatever the microbatch count.
void TestModelCosts::zero3HeldAcrossMicrobatchesUnderPp() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  setup.training.zero_stage = 3;
  const Mesh mesh = makeMesh(4, 1, 2);
  auto run = simulateModel(setup, mesh, request("1f1b", 2, 8));
  REQUIRE_OK(run);
  double bytes = 0;
  for (int p = 0; p < 2; ++p) {
    const double psi = run->derivation.rank_parameters[static_cast<std::size_t>(p)];
    const RankMemory &memory = run->report.memory[static_cast<std::size_t>(p)];
    QVERIFY2(near(memory.params, 2 * psi / 4 + 2 * psi, 1e-12),
             show(memory.params, 2 * psi / 4 + 2 * psi).c_str());
    QVERIFY2(near(memory.grads, 2 * psi / 4 + 2 * psi, 1e-12),
             show(memory.grads, 2 * psi / 4 + 2 * psi).c_str());
    QVERIFY(near(memory.optimizer, 12 * psi / 4, 1e-12));
    bytes += 2.0 * 3 / 4 * 2 * psi;
  }
  QVERIFY2(near(run->report.dp.bytes, bytes, 1e-12), show(run->report.dp.bytes, bytes).c_str());
}

// ZeRO-3 without pipelining on one node (flat hardware: links at their full figures): a ring
// all-gather of the rank's 16-bit parameters over n = 8 takes (n-1)/n · bytes / 450 GB/s +
// (n-1) · 1 µs, half the ring all-reduce. Not overlapped, the forward pays one and the backward
// one more plus the reduce-scatter (as long); overlapped, only what compute does not hide, at
// least the last layer's share.
void TestModelCosts::zero3GathersByHand() {
  ModelSetup setup = flatPresetSetup("llama3-8b", "h100-sxm");
  setup.training.zero_stage = 3;
  const Mesh mesh = makeMesh(8, 1, 1);
  const double gather = 7.0 / 8 * 2 * kLlama8b / (450 * 1e3) + 7 * 1.0;
  auto run = simulateModel(setup, mesh, request("1f1b", 1, 1));
  REQUIRE_OK(run);
  const StageBreakdown &parts = run->derivation.stage_breakdown[0];
  QVERIFY2(near(parts.forward.dp_us, gather, 1e-9), show(parts.forward.dp_us, gather).c_str());
  QVERIFY2(near(parts.input_grad.dp_us, 2 * gather, 1e-9),
           show(parts.input_grad.dp_us, 2 * gather).c_str());
  // The op times carry them: F is the breakdown's total.
  QVERIFY(near(run->derivation.costs.stage_overrides[0].forward_us, parts.forward.total(), 1e-9));
  QVERIFY(near(run->report.dp.time_s, 3 * gather * 1e-6, 1e-9));
  // Inside the ops rather than in the step's tail, and all of it exposed.
  QVERIFY(near(run->report.dp.exposed_time_s, 3 * gather * 1e-6, 1e-9));
  // The tail keeps only Adam's step (over the same 1/8 of the state as ZeRO-1's, which also
  // pays its all-reduce there).
  setup.training.zero_stage = 1;
  auto stage1 = simulateModel(setup, mesh, request("1f1b", 1, 1));
  REQUIRE_OK(stage1);
  QVERIFY(run->derivation.costs.gradient_sync_us < stage1->derivation.costs.gradient_sync_us);
  setup.training.zero_stage = 3;

  setup.training.overlap_gradient_sync = true;
  auto overlapped = simulateModel(setup, mesh, request("1f1b", 1, 1));
  REQUIRE_OK(overlapped);
  const StageBreakdown &hidden = overlapped->derivation.stage_breakdown[0];
  const double forward_compute = hidden.forward.total() - hidden.forward.dp_us;
  const double exposed = std::max(gather - forward_compute, gather / 32);
  // The hidden part slows the forward's GEMMs beside it (collectiveContentionUs).
  const double slowdown = setup.hardware.collective_gemm_slowdown;
  QVERIFY(slowdown > 0); // the h100-sxm preset's measured figure
  const double expected =
      exposed + slowdown * hidden.forward.gemm_us / forward_compute * (gather - exposed);
  QVERIFY2(near(hidden.forward.dp_us, expected, 1e-9),
           show(hidden.forward.dp_us, expected).c_str());
  QVERIFY(hidden.forward.dp_us < parts.forward.dp_us);
  QVERIFY(overlapped->report.step_time_s < run->report.step_time_s);
}

// A Llama 3 8B layer without recomputation (b = 1, s = 8192, h = 4096, one rank, FlashAttention),
// bytes per token: the two norms' inputs and outputs (8·h), Q, K, V and the attention output
// (2 × (4096 + 1024 + 1024 + 4096)), its fp32 log-sum-exp (4 × 32 heads) and the gated MLP's:
// Megatron's fused SwiGLU keeps the gate and up outputs and the down projection its input
// (6 × 14336); eager PyTorch also silu's output (8 × 14336).
void TestModelCosts::swigluFusionActivationsByHand() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  QVERIFY(setup.training.swiglu_fusion); // Megatron-LM's default, --bias-swiglu-fusion
  const double s = 8192, h = 4096, ffn = 14336;
  const double attention = 8 * h + 2 * (h + 1024 + 1024 + h) + 4 * 32;
  auto fused = simulateModel(setup, makeMesh(1, 1, 4), request("1f1b", 4, 4));
  REQUIRE_OK(fused);
  // Stage 1 holds 8 layers and neither embedding nor head.
  const double fused_layer = s * (attention + 6 * ffn);
  QVERIFY2(near(fused->derivation.stage_activation_bytes[1], 8 * fused_layer, 1e-12),
           show(fused->derivation.stage_activation_bytes[1], 8 * fused_layer).c_str());
  setup.training.swiglu_fusion = false;
  auto eager = simulateModel(setup, makeMesh(1, 1, 4), request("1f1b", 4, 4));
  REQUIRE_OK(eager);
  const double eager_layer = s * (attention + 8 * ffn);
  QVERIFY2(near(eager->derivation.stage_activation_bytes[1], 8 * eager_layer, 1e-12),
           show(eager->derivation.stage_activation_bytes[1], 8 * eager_layer).c_str());
  // Time is the same: the setting only says what the backward keeps.
  QCOMPARE(eager->report.step_time_s, fused->report.step_time_s);
  // A plan file says it only when it is not the default, and reads back.
  const auto json = toJson(setup.training);
  QCOMPARE(json["swiglu_fusion"].get<bool>(), false);
  auto back = trainingSetupFromJson(json, "/training");
  REQUIRE_OK(back);
  QVERIFY(!back->swiglu_fusion);
  QVERIFY(!toJson(presetSetup("llama3-8b", "h100-sxm").training).contains("swiglu_fusion"));
}

// Megatron's recompute modules on a Llama 3 8B layer (b = 1, s = 8192, h = 4096, one rank): the
// layer keeps attention's 8·h + 2 × (4096 + 1024 + 1024 + 4096) + 4 × 32 bytes a token and its
// MLP 6 × 14336 (fused SwiGLU). "mlp" drops the MLP's and the output of the norm fused into its
// up projection (2·h) and redoes the MLP's forward in the input-grad pass; "layernorm" and
// "moe_act" drop nothing here (the norms are fused into the next linear layer, no experts).
void TestModelCosts::recomputeModulesByHand() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  const double s = 8192, h = 4096, ffn = 14336;
  const double attention = 8 * h + 2 * (h + 1024 + 1024 + h) + 4 * 32;
  auto kept = simulateModel(setup, makeMesh(1, 1, 4), request("1f1b", 4, 4));
  REQUIRE_OK(kept);
  setup.training.recompute_modules = {"layernorm", "mlp", "moe_act"};
  auto recomputed = simulateModel(setup, makeMesh(1, 1, 4), request("1f1b", 4, 4));
  REQUIRE_OK(recomputed);
  const double layer = s * (attention - 2 * h);
  QVERIFY2(near(recomputed->derivation.stage_activation_bytes[1], 8 * layer, 1e-12),
           show(recomputed->derivation.stage_activation_bytes[1], 8 * layer).c_str());
  // The backward rebuilds one layer's MLP beside the stored activations.
  QVERIFY(near(recomputed->derivation.recompute_transient_bytes, s * (6 * ffn + 2 * h), 1e-12));
  // Its input-grad pass redoes the MLP's forward: the norm, the up and down GEMMs, SwiGLU.
  double mlp_forward = 0;
  for (const auto &op : recomputed->derivation.layer_ops)
    if (op.name == "post_attention_rmsnorm" || op.name == "mlp_gate_up" || op.name == "swiglu" ||
        op.name == "mlp_down")
      mlp_forward += op.forward_us;
  QVERIFY(mlp_forward > 0);
  const auto &stage = recomputed->derivation.stage_breakdown[1];
  QVERIFY2(near(stage.input_grad.recompute_us, 8 * mlp_forward, 1e-9),
           show(stage.input_grad.recompute_us, 8 * mlp_forward).c_str());
  QVERIFY(recomputed->report.step_time_s > kept->report.step_time_s);
  // Plan files say them in Megatron's order, and refuse what does not go with them.
  const auto json = toJson(setup.training);
  QCOMPARE(json["recompute_modules"], nlohmann::json::array({"layernorm", "mlp", "moe_act"}));
  auto reordered = trainingSetupFromJson(
      {{"recompute", "selective"}, {"recompute_modules", {"moe_act", "layernorm"}}}, "/training");
  REQUIRE_OK(reordered);
  QCOMPARE(reordered->recompute_modules, (std::vector<std::string>{"layernorm", "moe_act"}));
  // Under full recomputation they do not apply: not written, so the file reads back.
  TrainingSetup full = *reordered;
  full.recompute = Recompute::Full;
  QVERIFY(!toJson(full).contains("recompute_modules"));
  REQUIRE_OK(trainingSetupFromJson(toJson(full), "/training"));
  const std::pair<nlohmann::json, std::string> refused[] = {
      {{{"recompute", "full"}, {"recompute_modules", {"mlp"}}},
       "/training/recompute_modules: Megatron's recompute modules go with"},
      {{{"recompute_modules", {"core_attn"}}},
       "/training/recompute_modules/0: 'core_attn' is not a module pipescope prices"},
      {{{"recompute_modules", "mlp"}}, "/training/recompute_modules: expected an array"}};
  for (const auto &[file, message] : refused) {
    auto result = trainingSetupFromJson(file, "/training");
    QVERIFY(!result);
    QVERIFY2(result.error().message.starts_with(message), result.error().message.c_str());
  }
}

// An overlapped F&B pair builds its forward chunk a layer at a time while its backward frees the
// other chunk's: it holds one layer more than before it, not the whole chunk more.
void TestModelCosts::overlappedPairHoldsOneLayerMore() {
  QCOMPARE(overlappedPairPeakBytes(10, 4, 4, 1), 11.0); // equal chunks: one layer ahead
  QCOMPARE(overlappedPairPeakBytes(10, 6, 4, 1), 13.0); // a larger forward: its excess too
  QCOMPARE(overlappedPairPeakBytes(10, 4, 6, 1), 11.0);
  QCOMPARE(overlappedPairPeakBytes(10, 4, 4, 4), 14.0); // one layer a chunk: both at once
  QCOMPARE(overlappedPairPeakBytes(10, 4, 0, 1), 14.0); // nothing to free
  // On a MoE model in combined 1F1B the pair's peak is below both chunks held at once.
  ModelSetup setup = presetSetup("qwen3-30b-a3b", "h100-sxm");
  setup.model.layers = 8;
  Mesh mesh = makeMesh(8, 1, 2);
  mesh.ep = 8;
  auto schedule = generateSchedule(request("combined-1f1b", 2, 8, 2));
  REQUIRE_OK(schedule);
  auto derivation = deriveModelCosts(setup, mesh, schedule->placement);
  REQUIRE_OK(derivation);
  const LoweredProgram program = lowerSchedule(*schedule);
  auto times = resolveStageTimes(derivation->costs, schedule->placement);
  REQUIRE_OK(times);
  SimulationOptions options;
  options.stage_activation_bytes = derivation->stage_activation_bytes;
  auto whole = simulate(*schedule, program, *times, options);
  REQUIRE_OK(whole);
  options.stage_activation_granule_bytes = derivation->stage_activation_granule_bytes;
  auto layered = simulate(*schedule, program, *times, options);
  REQUIRE_OK(layered);
  for (std::size_t r = 0; r < 2; ++r) {
    QVERIFY(layered->ranks[r].peak_activation_bytes < whole->ranks[r].peak_activation_bytes);
    // The chunk counts do not change: the pair still starts a forward before its backward ends.
    QCOMPARE(layered->ranks[r].peak_inflight, whole->ranks[r].peak_inflight);
  }
}

// torchtitan's per-op selective checkpointing of a Llama 3 8B layer (b = 1, s = 8192, h = 4096,
// one rank): input, Q, V, the attention output (2 bytes × s·(4096 + 4096 + 1024 + 4096)), the
// gate w1 (2 × s·14336), the down projection's output (2 × s·4096) and the fp32 log-sum-exp
// (4 × 32 heads × s). torch-fp32 cross-entropy adds two fp32 logit tensors (8 × s × 128256) on
// the loss rank.
void TestModelCosts::selectiveOpActivationsByHand() {
  ModelSetup setup = presetSetup("llama3-8b", "h100-sxm");
  const double s = 8192, h = 4096;
  const double layer = 2 * s * (h + h + 1024 + h) + 2 * s * 14336 + 2 * s * h + 4 * 32 * s;
  setup.training.recompute = Recompute::SelectiveOp;
  auto run = simulateModel(setup, makeMesh(1, 1, 4), request("1f1b", 4, 4));
  REQUIRE_OK(run);
  // Stage 1 holds 8 layers and neither embedding nor head.
  QVERIFY2(near(run->derivation.stage_activation_bytes[1], 8 * layer, 1e-12),
           show(run->derivation.stage_activation_bytes[1], 8 * layer).c_str());
  // Its backward redoes the rest of one layer on top of the stored ones.
  setup.training.recompute = Recompute::None;
  auto none = simulateModel(setup, makeMesh(1, 1, 4), request("1f1b", 4, 4));
  REQUIRE_OK(none);
  const double full_layer = none->derivation.stage_activation_bytes[1] / 8;
  QVERIFY(near(run->derivation.recompute_transient_bytes, full_layer - layer, 1e-12));
  // It recomputes K, the output projection, w3 and the memory-bound ops: more than nothing,
  // less than the whole forward.
  const double i_op = run->derivation.stage_breakdown[1].input_grad.recompute_us;
  QVERIFY(i_op > 0);
  QVERIFY(i_op < run->derivation.stage_breakdown[1].forward.total());

  setup.training.recompute = Recompute::SelectiveOp;
  setup.training.cross_entropy = "torch-fp32";
  auto torch_loss = simulateModel(setup, makeMesh(1, 1, 4), request("1f1b", 4, 4));
  REQUIRE_OK(torch_loss);
  QCOMPARE(torch_loss->derivation.loss_rank, 3);
  const double transient = 8 * s * 128256;
  // Megatron's fused loss (the default) holds the 16-bit logits and one more fp32 copy.
  QVERIFY(near(run->derivation.loss_transient_bytes, 6 * s * 128256, 1e-12));
  const double before =
      std::max(run->derivation.recompute_transient_bytes, run->derivation.loss_transient_bytes);
  const double grown =
      torch_loss->report.memory[3].activations_peak - run->report.memory[3].activations_peak;
  QVERIFY2(near(grown, transient - before, 1e-9), show(grown, transient - before).c_str());
  QCOMPARE(torch_loss->report.memory[1].activations_peak, run->report.memory[1].activations_peak);

  // Models the policy does not describe are refused, naming the way out.
  ModelSetup moe = presetSetup("mixtral-8x7b", "h100-sxm");
  moe.training.recompute = Recompute::SelectiveOp;
  auto refused = simulateModel(moe, makeMesh(1, 1, 4), request("1f1b", 4, 4));
  QVERIFY(!refused.ok());
  QVERIFY2(refused.error().message.find("selective or full") != std::string::npos,
           refused.error().message.c_str());
}

void TestModelCosts::zeroStageAndLossJson() {
  // Plan files before ZeRO stages say "zero1": true; it still means stage 1.
  auto old = trainingSetupFromJson({{"zero1", true}}, "/training");
  REQUIRE_OK(old);
  QCOMPARE(old->zero_stage, 1);
  auto three =
      trainingSetupFromJson({{"zero_stage", 3}, {"cross_entropy", "torch-fp32"}}, "/training");
  REQUIRE_OK(three);
  QCOMPARE(three->zero_stage, 3);
  QCOMPARE(toJson(*three)["zero_stage"], nlohmann::json(3));
  auto again = trainingSetupFromJson(toJson(*three), "/training");
  REQUIRE_OK(again);
  QCOMPARE(again->cross_entropy, std::string("torch-fp32"));
  const std::pair<nlohmann::json, std::string> refused[] = {
      {{{"zero_stage", 4}}, "/training/zero_stage"},
      {{{"zero1", true}, {"zero_stage", 3}}, "/training/zero1"},
      {{{"cross_entropy", "fused"}}, "/training/cross_entropy"},
      {{{"recompute", "op"}}, "/training/recompute"},
  };
  for (const auto &[json, pointer] : refused) {
    auto parsed = trainingSetupFromJson(json, "/training");
    QVERIFY(!parsed.ok());
    QVERIFY2(parsed.error().message.find(pointer) != std::string::npos,
             parsed.error().message.c_str());
  }
  QCOMPARE(std::string(recomputeName(Recompute::SelectiveOp)), std::string("selective-op"));
  QVERIFY(parseRecompute("selective-op").ok());
}

QTEST_APPLESS_MAIN(TestModelCosts)
#include "test_model_costs.moc"
