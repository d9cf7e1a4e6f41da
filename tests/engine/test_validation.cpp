// The cost model against published measurements (docs/validation.md, DESIGN.md §5a): every
// shipped row is predicted with its GPU type's preset and its error pinned below a bound, so a
// change that makes the predictions worse fails here.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "engine/model/model_setup.h"
#include "engine/model/validated_accuracy.h"
#include "engine/model/validation.h"
#include "engine/plan_file.h"
#include "engine/schedule.h"

using namespace pipescope;

namespace {

/// |error| bounds per row (fractions). They hold today's accuracy with a little room; tighten
/// them when the model improves, never loosen them without saying why in the commit.
const std::map<std::string, double> kStepErrorBounds = {
    // The two A100 tables fit the a100-80gb curve's one level (0.70 at the plateau) together,
    // every row a fit row (docs/measurements/fit_a100_level.py): 2.8 % mean over the 18. It
    // was 0.68, set on SC'21 alone (1.9 % there), before the 2022 table showed it 8 % slow;
    // the bounds of the 76.1B and 310.1B rows moved out with the refit (-1.8 to -3.9 %, +0.4
    // to -1.9 %).
    {"megatron-sc21-a100/gpt-1.7b", 0.01},
    {"megatron-sc21-a100/gpt-3.6b", 0.015},
    {"megatron-sc21-a100/gpt-7.5b", 0.015},
    {"megatron-sc21-a100/gpt-18.4b", 0.02},
    {"megatron-sc21-a100/gpt-39.1b", 0.04},
    {"megatron-sc21-a100/gpt-76.1b", 0.045},
    {"megatron-sc21-a100/gpt-145.6b", 0.01},
    {"megatron-sc21-a100/gpt-310.1b", 0.025},
    {"megatron-sc21-a100/gpt-529.6b", 0.02},
    {"megatron-sc21-a100/gpt-1008b", 0.035},
    // Korthikanti et al. (MLSys 2023), Table 5: Megatron-LM of 2022, whose backward TP
    // collectives run beside the column-parallel GEMMs (tp_backward_overlap; without it the
    // full-recomputation rows came out 5 points slower than the selective ones). Held out at
    // the SC'21 level they were 5.8 % mean, +12.1 % worst; the 1T pair, non-interleaved on
    // PP 64, stays the slowest (+9.2 %, +8.6 %): the same layout ran 102.6 s a step in SC'21
    // and 94.4 s here. Calculon reports 3.65 % mean and 8.87 % worst on these eight.
    {"megatron-mlsys23-a100/gpt-22b-full", 0.01},
    {"megatron-mlsys23-a100/gpt-22b-seq-selective", 0.04},
    {"megatron-mlsys23-a100/gpt-175b-full", 0.025},
    {"megatron-mlsys23-a100/gpt-175b-seq-selective", 0.01},
    {"megatron-mlsys23-a100/gpt-530b-full", 0.06},
    {"megatron-mlsys23-a100/gpt-530b-seq-selective", 0.03},
    {"megatron-mlsys23-a100/gpt-1t-full", 0.095},
    {"megatron-mlsys23-a100/gpt-1t-seq-selective", 0.09},
    // +0.4 %: DualPipe with DeepEP-style dispatch (once per node, at most 4 nodes a token) hides
    // the all-to-all, its kernels holding 20 of the 132 SMs beside the pair's compute, each MoE
    // layer leaves the GPU its host time, and the backward redoes the norms and MLA
    // up-projections (§3.2.3) and the experts' SwiGLU (§3.3.3) as the report says; the figure
    // is a whole-run mean (batch ramp, restarts and checkpoints inside it). Held out of the goal
    // below (docs/validation.md, which also sets a MoE layer against DeepSeek's kernel profile).
    {"deepseek-v3-h800/deepseek-v3-pretrain", 0.02},
    // Megatron-Core r0.8.0 on H100 in BF16, interleaved with one layer a virtual stage where
    // PP > 1 (the README's overlapped PP communication exists only in that schedule at that
    // commit; the set's notes). The BF16 level (0.56 at the plateau) is fitted on gpt-1.7b,
    // gpt-7.1b and gpt-177b-strong-96, whose steps are that level's alone
    // (docs/measurements/fit_h100_levels.py); the others are held out: the large models within
    // 3.7 %, the strong-scaling end at 4608 GPUs -1.5 %. The PP 1 rows on TP 4 and 8 come out
    // slow (16B +12.4 %, 32B +38 %): their fp32 gradient reduce-scatter on one or two NICs a GPU
    // is not hidden by the last of 4 microbatches' backward (and slows the GEMMs it runs
    // beside, collective_gemm_slowdown: +8.6 % and +34 % without that), and the 32B's compute
    // alone is over its published step (docs/validation.md).
    {"megatron-core-h100/gpt-1.7b", 0.055},
    {"megatron-core-h100/gpt-7.1b", 0.015},
    {"megatron-core-h100/gpt-16b", 0.135},
    {"megatron-core-h100/gpt-32b", 0.39},
    {"megatron-core-h100/gpt-70b", 0.035},
    {"megatron-core-h100/gpt-119b", 0.035},
    {"megatron-core-h100/gpt-177b", 0.03},
    {"megatron-core-h100/gpt-314b", 0.045},
    {"megatron-core-h100/gpt-462b", 0.035},
    {"megatron-core-h100/gpt-177b-strong-96", 0.01},
    {"megatron-core-h100/gpt-177b-strong-4608", 0.025},
    // Megatron-Bridge on DGX-H100 in FP8, Megatron's rank order (tp-cp-ep-dp-pp). The dense rows
    // fit the H100 FP8 curve's one factor (1.00 of the BF16 curve read at half an FP8 GEMM's
    // FLOPs, the most the fit allows, with TP overlap as run): the 70B rows, whose last stage
    // also runs the BF16 head, come out slow (+8.7 %, +11.4 %), the 405B rows within 6.9 %.
    // Their loss is Transformer Engine's fused one, as the recipes' overrides set it
    // (cross_entropy "te").
    // Llama 3 8B on 8 GPUs under Megatron-FSDP (ZeRO-3 over the 8, gradients reduced in bf16,
    // gradient_accumulation_fusion off as its recipe sets it): held out of the fit, +12.4 %, as
    // slow as the 70B rows: this table's software runs dense FP8 layers faster than NeMo 24.07's,
    // which the same factor fits (nemo-h100 below).
    {"megatron-bridge-h100/llama3-8b-fsdp", 0.13},
    {"megatron-bridge-h100/llama3-70b-gbs128", 0.1},
    {"megatron-bridge-h100/llama3-70b-gbs256", 0.12},
    {"megatron-bridge-h100/llama3.1-405b-gbs512", 0.08},
    {"megatron-bridge-h100/llama3.1-405b-gbs1536", 0.03},
    // Held out, MoE, each with the dispatcher and overlap its recipe ran (NCCL all-to-all or
    // DeepEP/HybridEP; combined 1F1B where moe_a2a_overlap was on), and the MoE layers' host
    // time of the Megatron-MoE-ModelZoo rows below: -1.4 %, -2.6 %, -2.6 % and +2.7 % (Qwen3-235B
    // at GBS 2048 and 8192), DeepSeek-V3 -7.1 %.
    // The 25.11 figure of the PP 2 configuration (5275 tokens/s/GPU) stays -58 %, set aside:
    // Megatron-Bridge's maintainers filed it as 25.11's 2x regression of this model (issue
    // #1998), and 25.09 measured the same layout at 10494. Pinned all the same.
    {"megatron-bridge-h100/qwen3-30b-a3b-gbs512-pp2", 0.595},
    {"megatron-bridge-h100/qwen3-30b-a3b-gbs1024-pp2", 0.035},
    {"megatron-bridge-h100/qwen3-30b-a3b-gbs1024-ep16", 0.04},
    // Expert-tensor-parallel 1 (mesh etp 1): EP over the TP × DP ranks, as these recipes run.
    // The 25.11 recipe of the same layout at GBS 2048 (128 microbatches a replica).
    {"megatron-bridge-h100/qwen3-235b-a22b-gbs2048", 0.03},
    {"megatron-bridge-h100/qwen3-235b-a22b-gbs8192", 0.03},
    {"megatron-bridge-h100/deepseek-v3-gbs8192", 0.08},
    // Megatron-Core's MoE best practice, Qwen3-235B-A22B on 256 H100s in BF16: the declared fit
    // subset of the MoE layers' host time (kDefaultMoeLayerHostUs, 3.5 ms: mean |error| 15.4 %
    // here; 14.8 % at 2.0 ms, the flat least, docs/validation.md). The EP 32 rows (4 local
    // experts) come out slow, the intra-node EP 8 rows with 16 on PP 32 or TP 4 fast; the FSDP
    // row +22 % (+12 % before the GEMMs its overlapped ZeRO-3 traffic slows were priced). Their
    // loss
    // is Transformer Engine's (the launch's --cross-entropy-fusion-impl te), which took the PP 32
    // row from -8.2 % to -11.6 %.
    {"megatron-moe-modelzoo-h100/qwen3-235b-a22b-ep32-deepep", 0.205},
    {"megatron-moe-modelzoo-h100/qwen3-235b-a22b-ep32-deepep-a2a-overlap", 0.14},
    {"megatron-moe-modelzoo-h100/qwen3-235b-a22b-ep8-fsdp", 0.23},
    {"megatron-moe-modelzoo-h100/qwen3-235b-a22b-ep8-a2a-pp32", 0.13},
    {"megatron-moe-modelzoo-h100/qwen3-235b-a22b-ep8-deepep-tp4", 0.12},
    // NeMo 24.07 on DGX-H100 in FP8 (NeMo's performance summary): held out of every fit, the
    // settings the table does not print taken by one rule from the launcher's 24.07 configs,
    // userbuffers TP overlap also where NVIDIA published a userbuffers configuration for the
    // row's own shape (both GPT3-175B rows: the launcher's 'H100/175B/TP4/MBS1/SeqLen2K/FP8'
    // file, MLPerf Training v4.0's GPT-3 config of the 512-GPU layout; +2.0 % and +14.4 %
    // without it); Nemotron-340B with the settings of the launcher's recipe that has the table's
    // layout (userbuffers TP overlap: +11.7 % on the 24.07 tag's settings); the GPT3 and Llama
    // rows reduce gradients in bf16, as the launcher's H100 example scripts of those models
    // set (grad_sync_dtype=bf16; 2.9 % mean with fp32, which with TE's FP8 weight copies would
    // not fit GPT3-20B in 80 GB). 3.1 % mean. Slow: the 512-GPU GPT3-175B (MBS 2); fast:
    // Nemotron-8B (MBS 4, two microbatches) and Llama 3 8B (CP 2).
    {"nemo-h100/gpt3-5b", 0.02},
    {"nemo-h100/gpt3-20b", 0.035},
    {"nemo-h100/gpt3-175b-128", 0.02},
    {"nemo-h100/gpt3-175b-512", 0.09},
    {"nemo-h100/llama2-7b", 0.035},
    {"nemo-h100/llama2-13b", 0.025},
    {"nemo-h100/llama2-70b", 0.01},
    {"nemo-h100/nemotron-8b", 0.1},
    {"nemo-h100/nemotron-22b", 0.02},
    {"nemo-h100/nemotron-340b", 0.035},
    {"nemo-h100/llama3-8b", 0.085},
    {"nemo-h100/llama3-70b", 0.025},
    // MLPerf Training GPT-3 175B, NVIDIA's DGX H100 submissions (v3.1, v4.0): the launch is the
    // submission's own, nothing assumed but the vocabulary's padding; held out. Within 0.9 % at
    // 128 microbatches a replica on 512 and 768 GPUs; 6-10 % fast at 6 to 16 microbatches on
    // 4096 to 11616 GPUs (7-13 % before the GEMMs an overlapped DP sync slows were priced),
    // where the measured steps carry more a step than pipescope's fill, drain and exposed DP
    // sync (docs/validation.md); the v4.0 MBS 2 row 10 % slow, as NeMo's MBS 2 GPT3-175B row
    // is 8 %.
    {"mlperf-training-h100/v3.1-512", 0.015},
    {"mlperf-training-h100/v3.1-768", 0.02},
    {"mlperf-training-h100/v3.1-4096", 0.07},
    {"mlperf-training-h100/v3.1-6144", 0.075},
    {"mlperf-training-h100/v3.1-8192", 0.075},
    {"mlperf-training-h100/v3.1-10240", 0.105},
    {"mlperf-training-h100/v3.1-10752", 0.11},
    {"mlperf-training-h100/v4.0-512", 0.11},
    // v4.0's large systems (per-layer CUDA graphs, PP 6, 6 microbatches): -8.7 % since their
    // FP8 parameters are gathered at one byte (-6.3 % at two), which shortens the DP sync the
    // GEMMs beside it are slowed by.
    {"mlperf-training-h100/v4.0-10752", 0.09},
    {"mlperf-training-h100/v4.0-11616", 0.09},
    // v4.1 (NeMo 24.09, MBS 2, VP 6, FP8 parameters): 12-15 % slow, as every MBS 2 GPT-3 row is.
    {"mlperf-training-h100/v4.1-256", 0.155},
    {"mlperf-training-h100/v4.1-512", 0.135},
    // v5.0, Llama 3.1 405B (TP 8, PP 8, VP 8, CP 2, sequence 8192): -3.4 % to +3.9 %.
    {"mlperf-training-h100/v5.0-405b-512", 0.05},
    {"mlperf-training-h100/v5.0-405b-2048", 0.035},
    {"mlperf-training-h100/v5.0-405b-2432", 0.03},
    {"mlperf-training-h100/v5.0-405b-2560", 0.015},
    {"mlperf-training-h100/v5.0-405b-8192", 0.045},
    // The first rows on H200 (Nebius, the same 405B code at TP 4): +3.6 % and +3.2 %.
    {"mlperf-training-h200/v5.0-405b-512", 0.045},
    {"mlperf-training-h200/v5.0-405b-1024", 0.04},
};
/// Peak-memory |error| bounds per row with a published memory figure (fractions). torchtitan's
/// rows check memory only (their GPU's bf16 peak is not published). Today -9.1 % and -9.2 %:
/// the figure is the caching allocator's peak reserved, which pipescope does not model (it
/// predicts the peak of live tensors; docs/validation.md has the accounting), so these rows
/// sit outside the 5 % goal and guard against regressions.
const std::map<std::string, double> kMemoryErrorBounds = {
    {"torchtitan-h100-96gb/llama3.1-8b-fsdp-8", 0.10},
    {"torchtitan-h100-96gb/llama3.1-8b-fsdp-128", 0.10},
    // Megatron-LM's CI, peak allocated: -0.4 %, -1.0 % and -0.6 % since the loss's transient
    // (the 16-bit logits beside the fp32 ones, and the fused loss's extra fp32 copy) is priced;
    // they were -2.3 %, -4.5 % and -5.0 % without it. The MoE row (SwiGLU experts) is -2.8 %
    // since its fused SwiGLU keeps 6 bytes × ffn a token, not eager PyTorch's 8: the 8 had
    // covered for what it still does not price (qk-layernorm, the fp32 router, 0.5 GiB of
    // static memory).
    {"megatron-lm-ci-h100/gpt3-7b-tp4-pp1", 0.01},
    {"megatron-lm-ci-h100/gpt3-7b-tp1-pp4", 0.015},
    {"megatron-lm-ci-h100/gpt3-moe-tp2-pp2-ep4", 0.035},
    // The same in FP8 (Transformer Engine's tensorwise recipe, no --fp8-param-gather): -1.7 %
    // with TE's FP8 copies of the linear layers' inputs (1.8 GiB less than the BF16 row's,
    // measured 1.7 GiB less in all) and of the weights with their transposes (0.64 GiB) priced;
    // -3.0 % with the inputs alone, +0.5 % with neither (the two cancelling).
    {"megatron-lm-ci-h100/gpt3-moe-tp2-pp2-ep4-fp8", 0.02},
    // The same with Megatron's recompute modules (layernorm, mla_up_proj, mlp, moe_act) and the
    // all-to-all overlapped in combined 1F1B: +4.3 %. It was +26 % with the modules' activations
    // counted as kept, and +13 % with each overlapped F&B pair holding both its chunks at once
    // (the pair runs a forward layer beside a backward layer, so it holds one layer more).
    {"megatron-lm-ci-h100/gpt3-moe-tp2-pp2-ep4-selective-recompute", 0.05},
};
/// The memory goal, for rows whose published figure is the memory pipescope predicts.
constexpr double kMemoryGoal = 0.05;
/// Sets whose runs pipescope models as they ran (precision, parallelism, kernels): the goal
/// applies to them. The MoE sets are not: their layers' host time is one fitted figure
/// (megatron-moe-modelzoo-h100 its fit subset), and the H100 FP8 curve was fit on the dense
/// megatron-bridge-h100 rows (kFitRows).
const std::set<std::string> kGoalSets = {"megatron-sc21-a100"};
/// The goal: better than the best published analytic predictor (about 3.7 % mean and
/// 8.9 % worst on such a set); today 1.8 % and 3.9 %.
constexpr double kMeanStepErrorBound = 0.025;
constexpr double kWorstStepErrorBound = 0.05;
/// Both A100 tables, the rows the A100 level is fit on: today 2.8 % mean, 9.2 % worst (the 1T
/// of the 2022 table; the goal's worst, 8 %, is not met there). Regression guards.
const std::set<std::string> kA100Sets = {"megatron-sc21-a100", "megatron-mlsys23-a100"};
constexpr double kA100MeanBound = 0.03, kA100WorstBound = 0.095;
/// The rows the H100 BF16 curve's level was fit on (docs/measurements/fit_h100_levels.py):
/// steps that are that level's alone, no pipeline bubble and a hidden DP sync. Today 1.9 %.
const std::set<std::string> kBf16FitRows = {"megatron-core-h100/gpt-1.7b",
                                            "megatron-core-h100/gpt-7.1b",
                                            "megatron-core-h100/gpt-177b-strong-96"};
constexpr double kBf16FitMeanBound = 0.025;
/// The rows the H100 FP8 curve's factor was fit on (with TP overlap as their recipes run it):
/// today 7.3 % mean, 11.4 % worst.
const std::set<std::string> kFitRows = {
    "megatron-bridge-h100/llama3-70b-gbs128", "megatron-bridge-h100/llama3-70b-gbs256",
    "megatron-bridge-h100/llama3.1-405b-gbs512", "megatron-bridge-h100/llama3.1-405b-gbs1536"};
constexpr double kFitMeanBound = 0.08, kFitWorstBound = 0.12;
/// NeMo 24.07's FP8 table, held out of every fit: today 2.9 % mean, 8.4 % worst.
const std::string kHeldOutFp8Set = "nemo-h100";
constexpr double kHeldOutFp8MeanBound = 0.035, kHeldOutFp8WorstBound = 0.09;
/// Every row but the one set aside: today 5.3 % mean, 38.2 % worst over 76 rows (the issue's
/// 3.5 % / 8 % goal is not met over all rows; docs/validation.md says why). With it, 6.0 % and
/// 57.9 %.
/// Regression guards only.
constexpr double kAllMeanBound = 0.055, kAllWorstBound = 0.39;
constexpr double kWithSetAsideMeanBound = 0.062, kWithSetAsideWorstBound = 0.585;
/// The timed rows whose measured time is set aside (ValidationCase::set_aside).
const std::set<std::string> kSetAsideRows = {"megatron-bridge-h100/qwen3-30b-a3b-gbs512-pp2"};

// Rows measured faster than their configuration's speed of light (speedOfLightSetup): the
// ModelZoo's FSDP row, whose ZeRO-3 gathers and fp32 gradient reduce-scatters over the 32-rank
// expert-data groups take longer at line rate than its measured step (docs/validation.md,
// "Speed of light"). A change that moves a row across its speed of light shows here.
const std::set<std::string> kBelowSpeedOfLight = {
    "megatron-moe-modelzoo-h100/qwen3-235b-a22b-ep8-fsdp"};

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

  // DeepSeek's published kernel profile of DeepSeek-V3 training (deepseek-ai/profile-data
  // train.json; docs/validation.md, "DeepSeek-V3's MoE layers against DeepSeek's kernel
  // profile"): an overlapped F&B pair of two 4-MoE-layer chunks on H800, EP 64, spans 129.0 ms
  // of GPU time, 32.25 ms a layer; its kernels sum to 18.76 ms of GEMMs, 5.49 of attention and
  // 8.40 of memory-bound work a layer (docs/measurements/kernel_breakdown.py). The H800 row's
  // middle stage holds 4 MoE layers: its pair, priced with DeepEP's 20 of 132 SMs taken, the MoE
  // host time and the RMSNorms and MLA up-projections recomputed as the report says (§3.2.3; the
  // profile's backward has them), is within 5 % of the profile (+4.5 %: +3.0 % while FP8 GEMMs
  // were priced at the BF16 curve's efficiency at their own FLOPs, not at half of them), and
  // each category within 25 %.
  void moeLayerPairAgainstDeepSeeksKernelProfile() {
    auto set = loadValidationSet("deepseek-v3-h800");
    QVERIFY2(set.ok(), set ? "" : set.error().message.c_str());
    const ValidationCase &row = set->cases.front();
    auto schedule = generateSchedule(row.request);
    QVERIFY(schedule);
    const auto pairPerLayer = [&](const ModelSetup &setup) {
      auto derived = deriveModelCosts(setup, row.mesh, schedule->placement);
      if (!derived) return -1.0;
      const StageBreakdown &stage = derived->stage_breakdown[4];
      const double a = stage.forward.ep_us; // the stage's all-to-all each way (F and B alike)
      const double share = dispatcherSmShare(setup.hardware, setup.training);
      // The host time the GPU waits out is neither stretched nor hiding (model_costs.cpp).
      const double f_host = stage.forward.host_us,
                   b_host = stage.input_grad.host_us + stage.weight_grad.host_us;
      const double f = share * (stage.forward.total() - a - f_host);
      const double b = share * (stage.input_grad.total() + stage.weight_grad.total() - a - b_host);
      const double pair = f + b + 2 * a - std::min(a, b) - std::min(a, f) + f_host + b_host;
      return pair / stage.layers;
    };
    const double profile_us = 129012.0 / 4;
    const double priced = pairPerLayer(row.setup);
    QVERIFY2(std::abs(priced / profile_us - 1) < 0.05, std::to_string(priced).c_str());
    // Each of the two terms the profile bears out is needed: without the SM share the pair comes
    // out over 9 % short, without the MoE host time (3.5 ms a layer; the profile's compute
    // stream idles 2.8 ms a layer) over 5 % short.
    ModelSetup no_sm_count = row.setup;
    no_sm_count.hardware.sm_count = 0;
    const double unshared = pairPerLayer(no_sm_count);
    QVERIFY2(unshared > 0 && unshared / profile_us < 0.91, std::to_string(unshared).c_str());
    ModelSetup no_host = row.setup;
    no_host.training.moe_layer_host_us = 0;
    const double hostless = pairPerLayer(no_host);
    QVERIFY2(hostless > 0 && hostless / profile_us < 0.95, std::to_string(hostless).c_str());
    auto derived = deriveModelCosts(row.setup, row.mesh, schedule->placement);
    QVERIFY(derived);
    double gemm = 0, attention = 0, memory = 0;
    for (const LayerOp &op : derived->moe_layer_ops) {
      const double us = op.forward_us + op.input_grad_us + op.weight_grad_us;
      (op.category == OpCategory::Gemm        ? gemm
       : op.category == OpCategory::Attention ? attention
                                              : memory) += us;
    }
    const double stretch = dispatcherSmShare(row.setup.hardware, row.setup.training);
    for (const auto &[name, predicted, measured] :
         {std::tuple{"gemm", gemm, 18760.0}, std::tuple{"attention", attention, 5490.0},
          std::tuple{"memory-bound", memory, 8400.0}})
      QVERIFY2(std::abs(stretch * predicted / measured - 1) < 0.25,
               (std::string(name) + " " + std::to_string(stretch * predicted)).c_str());
  }

  void shippedSetsLoad() {
    const auto names = validationSetNames();
    QVERIFY(!names.empty());
    for (const auto &name : names) {
      auto set = loadValidationSet(name);
      QVERIFY2(set.ok(), set ? "" : set.error().message.c_str());
      QVERIFY(!set->source.empty());
      for (const auto &c : set->cases) {
        QVERIFY2(c.measured_step_s > 0 || c.measured_memory_gib, c.id.c_str());
        QVERIFY2(!c.published.empty(), c.id.c_str());
      }
    }
  }

  // Megatron-Bridge publishes tokens/s per GPU: a step of GBS 128 × 8192 tokens at 1602 tokens/s
  // on each of 64 GPUs takes 128 · 8192 / (1602 · 64) = 10.227 s.
  void tokensPerGpuBecomeAStep() {
    auto set = loadValidationSet("megatron-bridge-h100");
    QVERIFY2(set.ok(), set ? "" : set.error().message.c_str());
    const auto row =
        std::find_if(set->cases.begin(), set->cases.end(),
                     [](const ValidationCase &c) { return c.id == "llama3-70b-gbs128"; });
    QVERIFY(row != set->cases.end());
    const double by_hand = 128.0 * 8192 / (1602.0 * 64);
    QVERIFY(std::abs(row->measured_step_s - by_hand) < 1e-9 * by_hand);
    QVERIFY(std::abs(by_hand - 10.227) < 0.001);
    QCOMPARE(row->setup.training.gemm_precision, GemmPrecision::Fp8);
    // CP ranks share sequences: 405B at GBS 512 on dp 16 with CP 2 runs 64 microbatches per
    // replica, and its step is 512 · 8192 / (292 · 1024).
    const auto cp = std::find_if(set->cases.begin(), set->cases.end(), [](const ValidationCase &c) {
      return c.id == "llama3.1-405b-gbs512";
    });
    QVERIFY(cp != set->cases.end());
    QCOMPARE(cp->request.microbatches, 64);
    QVERIFY(std::abs(cp->measured_step_s - 512.0 * 8192 / (292.0 * 1024)) < 1e-9);
  }

  // NeMo's table prints GPUs, GBS, MBS, TP, PP and CP: Llama 3 8B on 8 GPUs with CP 2 runs
  // dp 4, so 128 / (1 · 4) = 32 microbatches a replica, and 12273 tokens/s/GPU is a step of
  // 128 · 8192 / (12273 · 8) = 10.680 s.
  void nemoTableRowsBecomePlans() {
    auto set = loadValidationSet("nemo-h100");
    QVERIFY2(set.ok(), set ? "" : set.error().message.c_str());
    QCOMPARE(static_cast<int>(set->cases.size()), 12);
    const auto row = std::find_if(set->cases.begin(), set->cases.end(),
                                  [](const ValidationCase &c) { return c.id == "llama3-8b"; });
    QVERIFY(row != set->cases.end());
    QCOMPARE(row->mesh.dp, 4);
    QCOMPARE(row->mesh.cp, 2);
    QCOMPARE(row->request.microbatches, 32);
    QVERIFY(std::abs(row->measured_step_s - 128.0 * 8192 / (12273.0 * 8)) < 1e-9);
    QCOMPARE(row->setup.training.gemm_precision, GemmPrecision::Fp8);
  }

  void everyRowWithinItsBound() {
    StepErrorSummary all, with_set_aside, goal, fit, bf16_fit, a100, held_out_fp8;
    int memory_rows = 0;
    for (const auto &name : validationSetNames()) {
      auto set = loadValidationSet(name);
      QVERIFY(set.ok());
      for (const auto &c : set->cases) {
        const std::string key = name + "/" + c.id;
        auto result = predictValidationCase(c, true);
        QVERIFY2(result.ok(), result ? "" : result.error().message.c_str());
        // A row with a measured time has a time bound, one with a published memory a memory
        // bound (the goal's 5 % unless pinned otherwise).
        QCOMPARE(result->step_error.has_value(), kStepErrorBounds.count(key) == 1);
        QVERIFY2(result->step_error || result->memory_error, key.c_str());
        if (result->memory_error) {
          const auto pinned = kMemoryErrorBounds.find(key);
          const double bound = pinned == kMemoryErrorBounds.end() ? kMemoryGoal : pinned->second;
          QVERIFY2(std::abs(*result->memory_error) <= bound,
                   (key + ": memory |error| " + std::to_string(*result->memory_error)).c_str());
          ++memory_rows;
        }
        // The speed of light is a floor under the prediction itself, and the rows measured
        // below it are the ones this file names.
        QVERIFY2(result->speed_of_light_step_s > 0 &&
                     result->speed_of_light_step_s < result->predicted_step_s,
                 key.c_str());
        QCOMPARE(belowSpeedOfLight(*result), kBelowSpeedOfLight.count(key) == 1);
        // Not asked for, it is not worked out (the fits predict every row at every candidate).
        QCOMPARE(predictValidationCase(c)->speed_of_light_step_s, 0.0);
        if (!result->step_error) continue;
        const double error = *result->step_error;
        const double bound = kStepErrorBounds.at(key);
        QVERIFY2(std::abs(error) <= bound, (key + ": |error| " + std::to_string(std::abs(error)) +
                                            " above its bound " + std::to_string(bound))
                                               .c_str());
        with_set_aside.add(error);
        QCOMPARE(!c.set_aside.empty(), kSetAsideRows.count(key) == 1);
        QCOMPARE(countsInStepAccuracy(*result), c.set_aside.empty());
        if (!c.set_aside.empty()) continue;
        all.add(error);
        if (kFitRows.count(key) != 0) fit.add(error);
        if (kBf16FitRows.count(key) != 0) bf16_fit.add(error);
        if (kA100Sets.count(name) != 0) a100.add(error);
        if (name == kHeldOutFp8Set) held_out_fp8.add(error);
        if (kGoalSets.count(name) != 0) goal.add(error);
      }
    }
    QCOMPARE(with_set_aside.runs, static_cast<int>(kStepErrorBounds.size()));
    QCOMPARE(all.runs, static_cast<int>(kStepErrorBounds.size() - kSetAsideRows.size()));
    QVERIFY2(with_set_aside.mean() <= kWithSetAsideMeanBound,
             std::to_string(with_set_aside.mean()).c_str());
    QVERIFY2(with_set_aside.worst <= kWithSetAsideWorstBound,
             std::to_string(with_set_aside.worst).c_str());
    QVERIFY(memory_rows >= static_cast<int>(kMemoryErrorBounds.size()));
    QVERIFY(goal.runs > 0);
    QVERIFY2(goal.mean() <= kMeanStepErrorBound, std::to_string(goal.mean()).c_str());
    QVERIFY2(goal.worst <= kWorstStepErrorBound, std::to_string(goal.worst).c_str());
    QCOMPARE(a100.runs, 18);
    QVERIFY2(a100.mean() <= kA100MeanBound, std::to_string(a100.mean()).c_str());
    QVERIFY2(a100.worst <= kA100WorstBound, std::to_string(a100.worst).c_str());
    QCOMPARE(bf16_fit.runs, static_cast<int>(kBf16FitRows.size()));
    QVERIFY2(bf16_fit.mean() <= kBf16FitMeanBound, std::to_string(bf16_fit.mean()).c_str());
    QCOMPARE(fit.runs, static_cast<int>(kFitRows.size()));
    QVERIFY2(fit.mean() <= kFitMeanBound, std::to_string(fit.mean()).c_str());
    QVERIFY2(fit.worst <= kFitWorstBound, std::to_string(fit.worst).c_str());
    QCOMPARE(held_out_fp8.runs, static_cast<int>(loadValidationSet(kHeldOutFp8Set)->cases.size()));
    QVERIFY2(held_out_fp8.mean() <= kHeldOutFp8MeanBound,
             std::to_string(held_out_fp8.mean()).c_str());
    QVERIFY2(held_out_fp8.worst <= kHeldOutFp8WorstBound,
             std::to_string(held_out_fp8.worst).c_str());
    QVERIFY2(all.mean() <= kAllMeanBound, std::to_string(all.mean()).c_str());
    QVERIFY2(all.worst <= kAllWorstBound, std::to_string(all.worst).c_str());
  }

  // Every published run ran, so a planner that prunes by predicted memory must keep it: each
  // timed row's prediction fits its GPU. The last to come in was DeepSeek-V3 on H800 (96.5 GiB
  // predicted), with its linear layers' inputs kept in FP8 and the SwiGLU's output recomputed
  // from its input, as its report says (§3.3.3): 79.3 GiB of the H800's 79.6.
  void publishedRunsFitTheirGpus() {
    int checked = 0;
    for (const std::string &name : validationSetNames()) {
      auto set = loadValidationSet(name);
      QVERIFY2(set, name.c_str());
      for (const ValidationCase &row : set->cases) {
        if (row.measured_step_s <= 0) continue;
        auto result = predictValidationCase(row);
        QVERIFY(result);
        bool fits = true;
        for (const auto &memory : result->report.memory)
          fits = fits && memory.fits;
        const std::string id = name + "/" + row.id;
        QVERIFY2(fits, id.c_str());
        ++checked;
      }
    }
    QCOMPARE(checked, 77);
  }

  // A summary's mean and worst are of |error|: signs cancel nothing.
  void stepErrorSummaryTakesMagnitudes() {
    StepErrorSummary summary;
    QCOMPARE(summary.mean(), 0.0);
    summary.add(0.04);
    summary.add(-0.10);
    QCOMPARE(summary.runs, 2);
    QVERIFY(std::abs(summary.mean() - 0.07) < 1e-15);
    QCOMPARE(summary.worst, 0.10);
  }

  // What the planner tells a user to expect of a prediction: the error on the published runs of
  // the same GPU type, precision and kind of model, the same figures `compare --published` gives
  // those rows, widening to the GPU type when no row shares all three, and saying so when no
  // published run checks the GPU type at all.
  void validatedAccuracyIsTheMatchingRowsError() {
    // The A100 tables: every timed A100 row is bf16 and dense; summed here from the sets.
    StepErrorSummary a100;
    double a100_signed = 0;
    for (const char *name : {"megatron-sc21-a100", "megatron-mlsys23-a100"}) {
      auto set = loadValidationSet(name);
      QVERIFY2(set, name);
      for (const ValidationCase &row : set->cases) {
        auto result = predictValidationCase(row);
        QVERIFY(result && result->step_error);
        a100.add(*result->step_error);
        a100_signed += *result->step_error;
      }
    }
    const ValidatedAccuracy accuracy =
        validatedAccuracy("a100-80gb", GemmPrecision::Bf16, /*moe=*/false);
    QCOMPARE(accuracy.scope, std::string("a100-80gb, bf16, dense"));
    QCOMPARE(accuracy.step.runs, 18);
    QCOMPARE(accuracy.step.runs, a100.runs);
    QVERIFY(std::abs(accuracy.step.mean() - a100.mean()) < 1e-12);
    QCOMPARE(accuracy.step.worst, a100.worst);
    QVERIFY(std::abs(accuracy.mean_signed_step_error - a100_signed / a100.runs) < 1e-12);
    QCOMPARE(accuracy.sets.size(), std::size_t{2});
    QCOMPARE(accuracy.memory.runs, 0); // neither table publishes memory
    QVERIFY(validatedAccuracyText(accuracy).find(
                "on 18 published runs (a100-80gb, bf16, dense: ") != std::string::npos);

    // H100: BF16 dense is Megatron-Core's table alone; FP8 MoE the Megatron-Bridge MoE rows;
    // the three CI memory rows check memory whatever the precision.
    const auto bf16 = validatedAccuracy("h100-sxm", GemmPrecision::Bf16, false);
    QCOMPARE(bf16.sets, std::vector<std::string>{"megatron-core-h100"});
    QCOMPARE(bf16.step.runs, 11);
    QCOMPARE(bf16.memory.runs, 5); // Megatron-LM's CI, BF16 and FP8
    const auto fp8_moe = validatedAccuracy("h100-sxm", GemmPrecision::Fp8, true);
    QCOMPARE(fp8_moe.scope, std::string("h100-sxm, fp8, MoE"));
    QCOMPARE(fp8_moe.sets, std::vector<std::string>{"megatron-bridge-h100"});
    QCOMPARE(fp8_moe.step.runs, 5); // the six less the 25.11 Qwen3-30B-A3B row, set aside
    const auto fp8_dense = validatedAccuracy("h100-sxm", GemmPrecision::Fp8, false);
    QCOMPARE(fp8_dense.step.runs, 34); // NeMo's 12, Megatron-Bridge's 5 Llama rows, MLPerf's 17

    // H800's one row is FP8 MoE: a BF16 dense plan on H800 gets it, said to be wider.
    const auto h800 = validatedAccuracy("h800", GemmPrecision::Bf16, false);
    QCOMPARE(h800.scope, std::string("h800, any precision or model"));
    QCOMPARE(h800.step.runs, 1);
    QVERIFY(validatedAccuracyText(h800).find("on 1 published run (h800, any precision or model: "
                                             "deepseek-v3-h800) the predicted step time was ") !=
            std::string::npos);

    // H200's two rows are MLPerf's Llama 3.1 405B on Nebius's machines, in FP8.
    const auto h200 = validatedAccuracy("h200", GemmPrecision::Fp8, false);
    QCOMPARE(h200.sets, std::vector<std::string>{"mlperf-training-h200"});
    QCOMPARE(h200.step.runs, 2);
    // No timed row on the 96 GB HBM2e H100 (torchtitan's rows there check memory only), or on a
    // hardware file of a name no row uses.
    for (const char *unchecked : {"h100-hbm2e-96gb", "my-own-gpu"}) {
      const auto none = validatedAccuracy(unchecked, GemmPrecision::Bf16, false);
      QCOMPARE(none.step.runs, 0);
      QVERIFY(none.sets.empty());
      // (The HBM2e H100's text goes on with its memory rows.)
      QVERIFY(validatedAccuracyText(none).rfind("no published run on " + std::string(unchecked) +
                                                    " checks the step time: this prediction is "
                                                    "unchecked",
                                                0) == 0);
      QVERIFY(!withinValidatedError(1.0, 1.0, none));
    }
    const auto json = validatedAccuracyJson(accuracy);
    QCOMPARE(json["runs"].get<int>(), 18);
    QCOMPARE(json["mean_abs_step_error"].get<double>(), accuracy.step.mean());
    QCOMPARE(json["differs_from_preset"], nlohmann::json::array());

    // A hardware file named like a preset that prices steps otherwise (an overhead and a curve
    // set by hand) is told apart: its figures are the preset's runs, which did not check those
    // values. Sources, notes and the device memory (what fits) do not count.
    auto h100 = loadHardwareSpec("h100-sxm");
    QVERIFY(h100);
    QVERIFY(fieldsDifferingFromPreset(*h100).empty());
    HardwareSpec edited = *h100;
    edited.notes = "measured by us";
    edited.memory_gib = 70;
    QVERIFY(fieldsDifferingFromPreset(edited).empty());
    edited.layer_overhead_us = 300;
    edited.gemm_efficiency.back().efficiency = 0.6;
    QCOMPARE(fieldsDifferingFromPreset(edited),
             (std::vector<std::string>{"gemm_efficiency", "layer_overhead_us"}));
    const auto by_hand = validatedAccuracy(edited, GemmPrecision::Bf16, false);
    QCOMPARE(by_hand.step.runs, 11); // still the preset's runs, said to be so
    QCOMPARE(by_hand.differs_from_preset,
             (std::vector<std::string>{"gemm_efficiency", "layer_overhead_us"}));
    QVERIFY2(validatedAccuracyText(by_hand).find(
                 "(runs on the preset h100-sxm; this hardware file differs from it in "
                 "gemm_efficiency, layer_overhead_us, which no published run checks)") !=
                 std::string::npos,
             validatedAccuracyText(by_hand).c_str());
    QVERIFY(validatedAccuracyText(validatedAccuracy(*h100, GemmPrecision::Bf16, false))
                .find("differs") == std::string::npos);
    edited.name = "my-h100"; // no preset of that name: nothing to differ from
    QVERIFY(fieldsDifferingFromPreset(edited).empty());

    // Closer to the best than the mean error: not known to be slower.
    const double mean = accuracy.step.mean();
    QVERIFY(withinValidatedError(10.0 * (1 + mean * 0.99), 10.0, accuracy));
    QVERIFY(!withinValidatedError(10.0 * (1 + mean * 1.01), 10.0, accuracy));
  }

  // The planner ranks layouts, so the order of one workload's layouts matters more than any
  // one step: of the 18 pairs of published runs of one model on the same GPUs, tokens per
  // step and GEMM precision (Qwen3-235B-A22B's five BF16 layouts on 256 H100s, one of them
  // tied; Qwen3-30B-A3B's PP 2 and EP 16 on 16 H100s; the four models of Korthikanti et al. with
  // full or selective recomputation; Llama 3 70B on 64 H100s at GBS 128, PP 8 in
  // Megatron-Bridge's 25.11 and PP 4 × CP 2 in NeMo 24.07; Llama 3 8B on 8 H100s, FSDP in
  // Megatron-Bridge's 25.11 and CP 2 in NeMo 24.07; GPT-3 175B on 512 H100s at GBS 2048, MLPerf
  // v3.1's MBS 1, v4.1's MBS 2 and NeMo 24.07's MBS 2, and on 10752 at GBS 2688, MLPerf v3.1's
  // PP 8 and v4.0's PP 6), 16 are predicted in the measured order (MLPerf's two layouts on
  // 10,752 GPUs since v4.0's FP8 parameters are gathered at one byte: measured 3 % apart,
  // predicted 1.6 %). The four that are not: the EP 8, PP 32 row, measured 23 % slower than the
  // EP 32 DeepEP row and the EP 8 FSDP row and predicted faster than both; and the two Llama
  // pairs, 5 % and 18 % apart across two containers more than a year apart and predicted
  // within 1-7 % the other way (docs/validation.md). A hand-made pair checks the counting.
  void layoutsOfOneWorkloadInTheirMeasuredOrder() {
    std::vector<ValidationSet> sets;
    for (const auto &name : validationSetNames())
      sets.push_back(*loadValidationSet(name));
    std::vector<ValidationResult> results;
    for (const auto &set : sets)
      for (const auto &row : set.cases)
        results.push_back(*predictValidationCase(row));
    const LayoutRanking ranking = layoutRanking(results);
    QCOMPARE(ranking.pairs, 20);
    QVERIFY2(ranking.ordered >= 16, std::to_string(ranking.ordered).c_str());
    for (const auto &pair : ranking.misordered)
      QVERIFY2(pair.find("qwen3-235b-a22b-ep8-a2a-pp32") != std::string::npos ||
                   pair.find("llama3-70b-gbs128 vs llama3-70b") != std::string::npos ||
                   pair.find("llama3-8b-fsdp vs llama3-8b") != std::string::npos,
               pair.c_str());

    ValidationCase faster = sets.front().cases.front(), slower = faster;
    faster.id = "faster";
    slower.id = "slower";
    faster.measured_step_s = 1.0;
    slower.measured_step_s = 2.0;
    ValidationResult a, b;
    a.validation_case = &faster;
    a.predicted_step_s = 1.5;
    a.step_error = 0.5;
    b.validation_case = &slower;
    b.predicted_step_s = 1.4;
    b.step_error = -0.3;
    const LayoutRanking swapped = layoutRanking({a, b});
    QCOMPARE(swapped.pairs, 1);
    QCOMPARE(swapped.ordered, 0);
    QCOMPARE(swapped.misordered, std::vector<std::string>{"faster vs slower"});
    b.predicted_step_s = 1.6;
    QCOMPARE(layoutRanking({a, b}).ordered, 1);
    slower.mesh.dp *= 2; // twice the tokens: another workload
    QCOMPARE(layoutRanking({a, b}).pairs, 0);
    slower.mesh.dp /= 2;
    slower.set_aside = "a regression of its release"; // no longer a measurement of its layout
    QCOMPARE(layoutRanking({a, b}).pairs, 0);
  }

  // Every row, written as a plan file and read back (`compare --published --row --save-plan`,
  // the explorer's File > Open published run), predicts what the table predicts: a setting the
  // plan file dropped or misread would move the step or the memory.
  void everyRowSurvivesAPlanFile() {
    for (const auto &name : validationSetNames()) {
      auto set = loadValidationSet(name);
      QVERIFY2(set.ok(), set ? "" : set.error().message.c_str());
      for (const ValidationCase &row : set->cases) {
        const std::string where = name + "/" + row.id;
        auto table = predictValidationCase(row);
        QVERIFY2(table.ok(), where.c_str());
        auto read = planFromJson(nlohmann::json::parse(planToJson(validationCasePlan(row)).dump()));
        QVERIFY2(read.ok(), (where + ": " + (read ? "" : read.error().message)).c_str());
        QVERIFY2(read->model.has_value(), where.c_str());
        ModelDerivation derivation;
        auto evaluation = evaluatePlan(*read, {}, &derivation);
        QVERIFY2(evaluation.ok(), where.c_str());
        const ModelReport report = reportModel(*read->model, read->mesh, evaluation->schedule,
                                               derivation, evaluation->simulation);
        QVERIFY2(std::abs(report.step_time_s / table->predicted_step_s - 1) < 1e-9,
                 (where + ": " + std::to_string(report.step_time_s) + " s").c_str());
        QVERIFY2(std::abs(comparedMemoryGib(row, report) / table->predicted_memory_gib - 1) < 1e-9,
                 where.c_str());
      }
    }
  }

  // torchtitan's FSDP rows, predicted by hand per rank (Llama 3.1 8B, Ψ = 8,030,261,248
  // parameters, layer L = 218,112,000, outside the layers O = 1,050,677,248; b = 2, s = 8192,
  // V = 128,256): shards (2 + 2 + 12)Ψ/N, gathered 2(2L + O) parameters and 2(L + O)
  // gradients, 32 layers of torchtitan's per-op checkpointing (1,042,284,544 bytes each), the
  // head's input and norm (4·s·b·h) and fp32 logits (4·s·b·V), and torch's cross-entropy
  // backward (8·s·b·V).
  void torchtitanMemoryByHand() {
    auto set = loadValidationSet("torchtitan-h100-96gb");
    QVERIFY2(set.ok(), set ? "" : set.error().message.c_str());
    QCOMPARE(set->cases.size(), std::size_t{2});
    const double psi = 8030261248.0, layer = 218112000.0, outside = 1050677248.0;
    const double b = 2, s = 8192, h = 4096, V = 128256;
    const double activations = 32 * 1042284544.0 + 4 * s * b * h + 4 * s * b * V + 8 * s * b * V;
    const std::pair<int, double> published[] = {{8, 82.4}, {128, 67.0}};
    for (std::size_t i = 0; i < 2; ++i) {
      const ValidationCase &c = set->cases[i];
      const double n = published[i].first;
      QCOMPARE(c.mesh.dp, published[i].first);
      QCOMPARE(*c.measured_memory_gib, published[i].second);
      QCOMPARE(c.measured_step_s, 0.0); // memory only
      const double by_hand =
          16 * psi / n + 2 * (2 * layer + outside) + 2 * (layer + outside) + activations;
      auto result = predictValidationCase(c);
      QVERIFY2(result.ok(), result ? "" : result.error().message.c_str());
      QVERIFY2(std::abs(result->predicted_memory_gib * 1073741824.0 - by_hand) < 1e-9 * by_hand,
               std::to_string(result->predicted_memory_gib).c_str());
      QVERIFY(!result->step_error);
    }
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
    // A file of that one row, and the message it is refused with ("" if it loads).
    const auto refusal = [&row] {
      auto loaded = validationSetFromJson({{"format", "pipescope.validation"},
                                           {"version", 1},
                                           {"title", "t"},
                                           {"source", "s"},
                                           {"rows", {row}}},
                                          "x");
      return loaded ? std::string() : loaded.error().message;
    };
    QVERIFY2(refusal().find("/rows/0/measured") != std::string::npos, refusal().c_str());
    // A memory figure from a pipeline rank the mesh does not have.
    row["measured"] = {{"memory_gib", 10}, {"memory_pipeline_rank", 1}};
    QVERIFY2(refusal().find("/rows/0/measured/memory_pipeline_rank") != std::string::npos,
             refusal().c_str());
    // Only a measured time can be set aside: a memory-only row has none.
    row["measured"] = {{"memory_gib", 10}, {"set_aside", "a regression"}};
    QVERIFY2(refusal().find("/rows/0/measured/set_aside") != std::string::npos, refusal().c_str());
    row["measured"] = {{"step_time_s", 2.0}, {"set_aside", 7}};
    QVERIFY2(refusal().find("set_aside") != std::string::npos, refusal().c_str());
    row["measured"] = {{"step_time_s", 2.0}, {"set_aside", "a regression"}};
    QCOMPARE(refusal(), std::string());
  }

  // A measured time the software's own maintainers filed as a regression is not what its
  // configuration costs: the row keeps its prediction and error, and says why it is set aside.
  void setAsideRowsSayWhy() {
    auto set = loadValidationSet("megatron-bridge-h100");
    QVERIFY(set.ok());
    const auto row = std::find_if(set->cases.begin(), set->cases.end(),
                                  [](const auto &c) { return c.id == "qwen3-30b-a3b-gbs512-pp2"; });
    QVERIFY(row != set->cases.end());
    QVERIFY(row->set_aside.find("Megatron-Bridge issue #1998") != std::string::npos);
    QVERIFY(row->set_aside.find("10494") != std::string::npos);
    auto result = predictValidationCase(*row);
    QVERIFY(result.ok() && result->step_error);
    QVERIFY(!countsInStepAccuracy(*result));
    // Every other timed row of the set counts.
    for (const auto &c : set->cases)
      if (c.id != row->id) QVERIFY2(c.set_aside.empty(), c.id.c_str());
  }

  // Megatron-LM's CI measures the peak of allocated bytes, what pipescope predicts: the memory
  // goal (5 %) holds on the dense rows, each compared on the pipeline stage its figure is from;
  // the MoE row is within its own bound (kMemoryErrorBounds), on its last stage too.
  void megatronCiPeakAllocatedWithinTheGoal() {
    auto set = loadValidationSet("megatron-lm-ci-h100");
    QVERIFY2(set.ok(), set ? "" : set.error().message.c_str());
    QCOMPARE(set->cases.size(), std::size_t{5});
    for (const auto &c : set->cases) {
      QVERIFY(c.setup.training.fp32_gradients);
      auto result = predictValidationCase(c);
      QVERIFY2(result.ok(), result ? "" : result.error().message.c_str());
      QVERIFY(result->memory_error);
      const auto pinned = kMemoryErrorBounds.find("megatron-lm-ci-h100/" + c.id);
      const double bound = pinned == kMemoryErrorBounds.end() ? kMemoryGoal : pinned->second;
      QVERIFY2(std::abs(*result->memory_error) <= bound,
               (c.id + ": " + std::to_string(*result->memory_error)).c_str());
    }
    QCOMPARE(set->cases[1].memory_pipeline_rank, 3);
    QCOMPARE(set->cases[2].memory_pipeline_rank, 1);
    QVERIFY(set->cases[2].setup.model.experts == 32 && set->cases[2].mesh.ep == 4);
    // The same MoE GPT with Megatron's recompute modules and the all-to-all overlap (combined
    // 1F1B): its peak is the modules' and the overlapped pairs' check.
    QCOMPARE(set->cases[3].setup.training.gemm_precision, GemmPrecision::Fp8);
    const ValidationCase &recomputed = set->cases[4];
    QCOMPARE(recomputed.memory_pipeline_rank, 1);
    QCOMPARE(recomputed.request.name, std::string("combined-1f1b"));
    QCOMPARE(recomputed.setup.training.recompute_modules,
             (std::vector<std::string>{"layernorm", "mla_up_proj", "mlp", "moe_act"}));
  }
};

QTEST_GUILESS_MAIN(TestValidation)
#include "test_validation.moc"
