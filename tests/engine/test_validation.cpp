// The cost model against published measurements (docs/validation.md, DESIGN.md §5a): every
// shipped row is predicted with its GPU type's preset and its error pinned below a bound, so a
// change that makes the predictions worse fails here.
#include <QtTest>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "engine/model/validation.h"

using namespace pipescope;

namespace {

/// |error| bounds per row (fractions). They hold today's accuracy with a little room; tighten
/// them when the model improves, never loosen them without saying why in the commit.
const std::map<std::string, double> kStepErrorBounds = {
    {"megatron-sc21-a100/gpt-1.7b", 0.015},
    {"megatron-sc21-a100/gpt-3.6b", 0.015},
    {"megatron-sc21-a100/gpt-7.5b", 0.015},
    {"megatron-sc21-a100/gpt-18.4b", 0.02},
    {"megatron-sc21-a100/gpt-39.1b", 0.06},
    {"megatron-sc21-a100/gpt-76.1b", 0.035},
    {"megatron-sc21-a100/gpt-145.6b", 0.03},
    {"megatron-sc21-a100/gpt-310.1b", 0.015},
    {"megatron-sc21-a100/gpt-529.6b", 0.02},
    {"megatron-sc21-a100/gpt-1008b", 0.065},
    // +22.7 % today: DeepSeek ran FP8 GEMMs and FP8 dispatch with node-limited routing, which
    // pipescope does not model (bf16 GEMMs; every routed copy over InfiniBand at 2 bytes), so
    // this row guards against regressions but is outside the goal below (docs/validation.md).
    {"deepseek-v3-h800/deepseek-v3-pretrain", 0.25},
};
/// Sets whose runs pipescope models as they ran (precision, parallelism, kernels): the goal
/// applies to them. deepseek-v3-h800 is not one (FP8, see above).
const std::set<std::string> kGoalSets = {"megatron-sc21-a100"};
/// The goal: better than the best published analytic predictor (about 3.7 % mean and
/// 8.9 % worst on such a set); today 1.7 % and 5.5 %.
constexpr double kMeanStepErrorBound = 0.025;
constexpr double kWorstStepErrorBound = 0.065;

} // namespace

class TestValidation : public QObject {
  Q_OBJECT

private slots:
  void narayananFlopsByHand() {
    // 1T row of Table 1: B = 3072, s = 2048, l = 128, h = 25600, V = 51200.
    const double by_hand = 96.0 * 3072 * 2048 * 128 * 25600.0 * 25600.0 *
                           (1 + 2048.0 / (6 * 25600) + 51200.0 / (16.0 * 128 * 25600));
    QCOMPARE(narayanan2021IterationFlops(3072, 2048, 128, 25600, 51200), by_hand);
    // At 163 teraFLOP/s on 3072 GPUs that is the 102.6 s iteration the table implies.
    QVERIFY(std::abs(by_hand / (163e12 * 3072) - 102.63) < 0.01);
  }

  // DeepSeek-V3: 180K H800 GPU-hours per 10^12 tokens; a step of 15360 × 4096 tokens on 2048
  // GPUs is 180000 · 3600 / 10^12 · 62,914,560 / 2048 = 19.91 s.
  void gpuHoursBecomeAStep() {
    auto set = loadValidationSet("deepseek-v3-h800");
    QVERIFY2(set.ok(), set ? "" : set.error().message.c_str());
    QCOMPARE(set->cases.size(), std::size_t{1});
    const double by_hand = 180000.0 * 3600 / 1e12 * 15360 * 4096 / 2048;
    QVERIFY(std::abs(set->cases[0].measured_step_s - by_hand) < 1e-9 * by_hand);
    QVERIFY(std::abs(by_hand - 19.906) < 0.001);
  }

  void shippedSetsLoad() {
    const auto names = validationSetNames();
    QVERIFY(!names.empty());
    for (const auto &name : names) {
      auto set = loadValidationSet(name);
      QVERIFY2(set.ok(), set ? "" : set.error().message.c_str());
      QVERIFY(!set->source.empty());
      for (const auto &c : set->cases) {
        QVERIFY2(c.measured_step_s > 0, c.id.c_str());
        QVERIFY2(!c.published.empty(), c.id.c_str());
      }
    }
  }

  void everyRowWithinItsBound() {
    double sum = 0, worst = 0;
    int rows = 0, goal_rows = 0;
    for (const auto &name : validationSetNames()) {
      auto set = loadValidationSet(name);
      QVERIFY(set.ok());
      for (const auto &c : set->cases) {
        const std::string key = name + "/" + c.id;
        const auto bound = kStepErrorBounds.find(key);
        QVERIFY2(bound != kStepErrorBounds.end(), ("no bound for " + key).c_str());
        auto result = predictValidationCase(c);
        QVERIFY2(result.ok(), result ? "" : result.error().message.c_str());
        const double error = std::abs(result->step_error);
        QVERIFY2(error <= bound->second, (key + ": |error| " + std::to_string(error) +
                                          " above its bound " + std::to_string(bound->second))
                                             .c_str());
        if (result->memory_error) QVERIFY2(std::abs(*result->memory_error) <= 0.05, key.c_str());
        ++rows;
        if (kGoalSets.count(name) == 0) continue;
        sum += error;
        worst = std::max(worst, error);
        ++goal_rows;
      }
    }
    QCOMPARE(rows, static_cast<int>(kStepErrorBounds.size()));
    QVERIFY(goal_rows > 0);
    QVERIFY2(sum / goal_rows <= kMeanStepErrorBound, std::to_string(sum / goal_rows).c_str());
    QVERIFY2(worst <= kWorstStepErrorBound, std::to_string(worst).c_str());
  }

  void badFilesNameTheField() {
    auto missing = validationSetFromJson(
        nlohmann::json{{"format", "pipescope.validation"}, {"version", 1}, {"title", "t"}}, "x");
    QVERIFY(!missing);
    QVERIFY2(missing.error().message.find("source") != std::string::npos,
             missing.error().message.c_str());
    auto set = loadValidationSet("megatron-sc21-a100");
    QVERIFY(set.ok());
    nlohmann::json row = {{"id", "r"},
                          {"published", "p"},
                          {"hardware", "a100-80gb"},
                          {"model",
                           {{"layers", 2},
                            {"hidden", 64},
                            {"ffn_hidden", 256},
                            {"heads", 4},
                            {"vocab", 100},
                            {"sequence_length", 64}}},
                          {"mesh", {{"dp", 1}, {"tp", 1}, {"pp", 1}}},
                          {"schedule", {{"name", "1f1b"}, {"microbatches", 1}}},
                          {"measured", {{"tflops_per_gpu", 100}}}};
    auto no_formula = validationSetFromJson({{"format", "pipescope.validation"},
                                             {"version", 1},
                                             {"title", "t"},
                                             {"source", "s"},
                                             {"rows", {row}}},
                                            "x");
    QVERIFY(!no_formula);
    QVERIFY2(no_formula.error().message.find("/rows/0/measured") != std::string::npos,
             no_formula.error().message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestValidation)
#include "test_validation.moc"
