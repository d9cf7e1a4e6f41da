// Each cost term of the per-op model against a hand computation (issue #13): the GEMM curve and
// its roofline, the memory-bound kernels, materialized and flash attention, the optimizer step,
// the refusals of a bad curve, NCCL's ring and tree all-reduce, DualPipe's pair and the hover's
// line.
#include <QtTest>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "engine/evaluation.h"
#include "engine/model/collectives.h"
#include "engine/model/gemm_efficiency.h"
#include "engine/model/layer_costs.h"
#include "engine/model/layer_layout.h"
#include "engine/model/model_setup.h"
#include "engine/model/moe.h"
#include "engine/model/speed_of_light.h"
#include "engine/schedule.h"

using namespace pipescope;

namespace {

bool near(double got, double want, double tolerance = 1e-9) {
  return std::abs(got - want) <= tolerance * std::max(1.0, std::abs(want));
}

const LayerOp *findOp(const std::vector<LayerOp> &ops, const std::string &name) {
  for (const auto &op : ops)
    if (op.name == name) return &op;
  return nullptr;
}

const LayerOp *findOp(const PartWork &work, const std::string &name) {
  return findOp(work.ops, name);
}

/// The message a file reader refused with ("" when it read the file).
template <typename T> std::string refusal(const Result<T> &read) {
  return read ? std::string() : read.error().message;
}

/// One setup derived twice: as given, and with the training switch `flag` on (a cost term
/// checked against its absence).
struct WithAndWithout {
  ModelDerivation without, with;
};
Result<WithAndWithout> deriveWithAndWithout(ModelSetup setup, const Mesh &mesh,
                                            const Placement &placement, bool TrainingSetup::*flag) {
  auto without = deriveModelCosts(setup, mesh, placement);
  if (!without) return without.error();
  setup.training.*flag = true;
  auto with = deriveModelCosts(setup, mesh, placement);
  if (!with) return with.error();
  return WithAndWithout{std::move(*without), std::move(*with)};
}

/// Whether stage 1's passes grew from `without` to `with` by a time split in thirds over F, I and
/// W (as the MoE host time and the layer overhead are): `third` in F and W, 2 × `third` in the
/// backward (I + W), and `part` (the PassBreakdown field it shows in) `third` in each pass.
bool addsThirds(const ModelDerivation &without, const ModelDerivation &with, double third,
                double PassBreakdown::*part) {
  const StageBreakdown &stage = with.stage_breakdown[1];
  const StageCost &a = without.costs.stage_overrides[1], &b = with.costs.stage_overrides[1];
  return near(stage.forward.*part, third) && near(stage.input_grad.*part, third) &&
         near(stage.weight_grad.*part, third) && near(b.forward_us - a.forward_us, third, 1e-6) &&
         near(b.backward_us - a.backward_us, 2 * third, 1e-6) &&
         near(b.weight_us - a.weight_us, third, 1e-6);
}

/// A model preset on a hardware preset with default training.
Result<ModelSetup> presetSetup(const std::string &model, const std::string &hardware) {
  auto m = loadModelSpec(model);
  if (!m) return m.error();
  auto hw = loadHardwareSpec(hardware);
  if (!hw) return hw.error();
  return ModelSetup{*m, *hw, {}};
}

/// A small GPT-like layer on a round-number GPU: 100 TFLOP/s, a flat 50 % GEMM efficiency,
/// 1000 GB/s of HBM at 80 %.
ModelSetup tinySetup() {
  ModelSetup setup;
  ModelSpec &m = setup.model;
  m.layers = 2, m.hidden = 1024, m.ffn_hidden = 4096, m.heads = 8, m.kv_heads = 8;
  m.vocab = 32000, m.sequence_length = 2048, m.microbatch_size = 2;
  m.gated_mlp = false, m.norm = "layernorm", m.position_embeddings = 2048;
  HardwareSpec &hw = setup.hardware;
  hw.peak_tflops = 100, hw.efficiency = 0.5, hw.hbm_gbps = 1000, hw.memory_efficiency = 0.8;
  return setup;
}

} // namespace

class TestCostTerms : public QObject {
  Q_OBJECT

private slots:
  void curveInterpolatesInLogSize() {
    GemmHardware g;
    g.peak_tflops = 100;
    g.curve = {{1e9, 0.4}, {1e12, 0.7}};
    QVERIFY(near(gemmEfficiency(g, 1e12), 0.7));
    QVERIFY(near(gemmEfficiency(g, 1e15), 0.7));                   // the last point holds above it
    QVERIFY(near(gemmEfficiency(g, std::sqrt(1e9 * 1e12)), 0.55)); // halfway in log size
    QVERIFY(near(gemmEfficiency(g, 1e8), 0.04)); // below: the smallest rung's time, scaled
    g.curve.clear();
    g.flat_efficiency = 0.3;
    QCOMPARE(gemmEfficiency(g, 1e12), 0.3); // a file with only a factor
  }

  // An FP8 GEMM of 2F FLOPs on a GPU with twice the BF16 peak takes as long as a BF16 GEMM of F:
  // without an FP8 curve of its own, the hardware's FP8 curve is the BF16 one with every point
  // at peak_fp8 / peak times its FLOPs, so both GEMMs get the same efficiency and time.
  void fp8CurveIsTheBf16CurveAtTheFasterRate() {
    HardwareSpec hw;
    hw.peak_tflops = 100, hw.peak_fp8_tflops = 200, hw.efficiency = 0.5;
    hw.gemm_efficiency = {{1e9, 0.4}, {1e12, 0.7}};
    const auto fp8 = fp8CurveFromBf16(hw);
    QCOMPARE(fp8.size(), std::size_t{2});
    QVERIFY(near(fp8[0].flops, 2e9) && near(fp8[1].flops, 2e12));
    QCOMPARE(fp8[0].efficiency, 0.4);
    const GemmHardware bf16_gemm = gemmHardwareOf(hw), fp8_gemm = gemmHardwareOf(hw, true);
    QCOMPARE(fp8_gemm.peak_tflops, 200.0);
    const double f = std::sqrt(1e9 * 1e12); // halfway in log size: 0.55 in BF16
    QVERIFY(near(gemmEfficiency(fp8_gemm, 2 * f), 0.55));
    QVERIFY(near(gemmEfficiency(fp8_gemm, f), gemmEfficiency(bf16_gemm, f / 2)));
    const GemmShape bf16_shape{4096, 1024, 1024, 1}, fp8_shape{8192, 1024, 1024, 1};
    QVERIFY(near(gemmTimeUs(fp8_gemm, fp8_shape, 1), gemmTimeUs(bf16_gemm, bf16_shape, 2)));
    // A hardware file's own FP8 curve is read as it is.
    hw.gemm_efficiency_fp8 = {{1e9, 0.3}};
    QCOMPARE(gemmHardwareOf(hw, true).curve.front().flops, 1e9);
    // Without an FP8 peak there is no rate to shift by: the BF16 curve as it is.
    HardwareSpec no_fp8 = hw;
    no_fp8.peak_fp8_tflops = 0;
    QCOMPARE(fp8CurveFromBf16(no_fp8).front().flops, 1e9);
  }

  void rooflinePricesSkinnyGemms() {
    GemmHardware g;
    g.peak_tflops = 100, g.flat_efficiency = 0.5, g.hbm_gbps = 1000, g.memory_efficiency = 0.8;
    // 4096³: compute-bound, 2·4096³ / (100e6 · 0.5) µs.
    const GemmShape square{4096, 4096, 4096, 1};
    QVERIFY(near(gemmTimeUs(g, square, 2), square.flops() / 50e6));
    // 16 × 8192 by 8192 × 8192: the 8192² weights dominate; bytes / (1000e3 · 0.8) µs.
    const GemmShape skinny{16, 8192, 8192, 1};
    const double bytes = 2.0 * (16 * 8192 + 8192.0 * 8192 + 16 * 8192);
    QVERIFY(near(gemmTimeUs(g, skinny, 2), bytes / 800e3));
    QVERIFY(gemmTimeUs(g, skinny, 2) > skinny.flops() / 50e6);
    // An FP8 GEMM reads its operands in one byte each and writes a 16-bit result: the same
    // skinny GEMM moves half the weight bytes, as the hardware's FP8 GEMMs say.
    HardwareSpec hw;
    hw.peak_tflops = 100, hw.peak_fp8_tflops = 200, hw.efficiency = 0.5;
    hw.hbm_gbps = 1000, hw.memory_efficiency = 0.8;
    const GemmHardware fp8 = gemmHardwareOf(hw, true);
    QCOMPARE(fp8.operand_bytes, 1.0);
    QCOMPARE(gemmHardwareOf(hw).operand_bytes, 0.0);
    const double fp8_bytes = 1.0 * (16 * 8192 + 8192.0 * 8192) + 2.0 * 16 * 8192;
    QVERIFY(near(gemmTimeUs(fp8, skinny, 2), fp8_bytes / 800e3));
  }

  void badCurvesNameTheField() {
    auto json = toJson(HardwareSpec{});
    json["gemm_efficiency"] = {{{"size", 1024}, {"efficiency", 0.5}},
                               {{"size", 2048}, {"efficiency", 0.4}}};
    auto falling = hardwareSpecFromJson(json, "/hardware");
    QVERIFY(!falling);
    QVERIFY2(falling.error().message.find("/hardware/gemm_efficiency/1/efficiency") !=
                 std::string::npos,
             falling.error().message.c_str());
    json["gemm_efficiency"] = {{{"size", 2048}, {"efficiency", 0.5}},
                               {{"size", 1024}, {"efficiency", 0.6}}};
    auto unsorted = hardwareSpecFromJson(json, "/hardware");
    QVERIFY(!unsorted);
    QVERIFY2(unsorted.error().message.find("/hardware/gemm_efficiency/1/flops") !=
                 std::string::npos,
             unsorted.error().message.c_str());
    for (double bad : {0.0, 1.5, -0.2}) {
      json["gemm_efficiency"] = {{{"flops", 1e9}, {"efficiency", bad}}};
      auto out_of_range = hardwareSpecFromJson(json, "/hardware");
      QVERIFY(!out_of_range);
      QVERIFY2(out_of_range.error().message.find("/hardware/gemm_efficiency/0/efficiency") !=
                       std::string::npos &&
                   out_of_range.error().message.find("(0, 1]") != std::string::npos,
               out_of_range.error().message.c_str());
    }
    json["gemm_efficiency"] = {{{"size", 1024}, {"efficiency", 0.5}}};
    auto good = hardwareSpecFromJson(json, "/hardware");
    QVERIFY2(good, good ? "" : good.error().message.c_str());
    QCOMPARE(good->gemm_efficiency.front().flops, 2.0 * 1024 * 1024 * 1024);
  }

  void layerGemmsFromTheirShapes() {
    const ModelSetup setup = tinySetup();
    const PartWork work = transformerLayerWork(setup.model, setup.hardware, {2, false});
    const double tokens = 2 * 2048, h = 1024, f = 4096, t = 2;
    const double rate = 100e6 * 0.5; // FLOPs per µs
    const auto *qkv = findOp(work, "qkv");
    QVERIFY(qkv);
    QVERIFY(near(qkv->forward_us, 2 * tokens * h * 3 * h / t / rate));
    QVERIFY(near(qkv->input_grad_us, qkv->forward_us));
    QVERIFY(near(qkv->weight_grad_us, qkv->forward_us));
    const auto *down = findOp(work, "mlp_down");
    QVERIFY(down);
    QVERIFY(near(down->forward_us, 2 * tokens * f / t * h / rate));
    // Every GEMM: 24·b·s·h² / t forward for a standard layer.
    double gemm_forward = 0;
    for (const auto &op : work.ops)
      if (op.category == OpCategory::Gemm) gemm_forward += op.forward_us;
    QVERIFY(near(gemm_forward, 24 * tokens * h * h / t / rate));
  }

  // The speed of light prices the same work at the hardware's peaks: a GEMM at 100 % of the
  // tensor-core peak (the tiny GPU's 0.5 curve level gone: half the time), a norm at the full HBM
  // bandwidth (0.8 gone), and every figure the presets add beyond the kernels at nothing.
  void speedOfLightIsThePeaks() {
    ModelSetup setup = tinySetup();
    setup.hardware.gemm_efficiency = {{1e9, 0.3}, {1e12, 0.6}};
    setup.hardware.attention_efficiency = 0.5;
    setup.hardware.collective_gemm_slowdown = 0.22;
    setup.hardware.layer_overhead_us = 400;
    setup.hardware.inter_node_latency_us = 5;
    setup.hardware.inter_node_bus_efficiency = 0.9;
    setup.training.moe_layer_host_us = 3500;
    const ModelSetup fastest = speedOfLightSetup(setup);
    const HardwareSpec &h = fastest.hardware;
    QVERIFY(h.gemm_efficiency.empty() && h.gemm_efficiency_fp8.empty());
    QCOMPARE(h.efficiency, 1.0);
    QCOMPARE(h.attention_efficiency, 1.0);
    QCOMPARE(h.memory_efficiency, 1.0);
    QCOMPARE(h.inter_node_bus_efficiency, 1.0);
    QCOMPARE(h.inter_node_latency_us, 0.0);
    QCOMPARE(h.collective_gemm_slowdown, 0.0);
    QCOMPARE(h.layer_overhead_us, 0.0);
    QCOMPARE(fastest.training.moe_layer_host_us, 0.0);
    QCOMPARE(h.peak_tflops, setup.hardware.peak_tflops); // the peaks themselves stay
    QCOMPARE(h.hbm_gbps, setup.hardware.hbm_gbps);
    const PartWork work = transformerLayerWork(fastest.model, h, {2, false});
    const double tokens = 2 * 2048, hidden = 1024, t = 2;
    QVERIFY(near(findOp(work, "qkv")->forward_us, 2 * tokens * hidden * 3 * hidden / t / 100e6));
    QVERIFY(near(findOp(work, "input_layernorm")->forward_us, 2 * 2 * tokens * hidden / 1000e3));
    // And the whole step is faster than the setup's own, never slower.
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 2, mesh.tp = 2, mesh.pp = 2, mesh.gpus_per_node = 2;
    auto slow = deriveModelCosts(setup, mesh, schedule->placement);
    auto fast = deriveModelCosts(fastest, mesh, schedule->placement);
    QVERIFY(slow.ok() && fast.ok());
    for (std::size_t v = 0; v < 2; ++v) {
      QVERIFY(fast->costs.stage_overrides[v].forward_us <
              slow->costs.stage_overrides[v].forward_us);
      QVERIFY(fast->costs.stage_overrides[v].backward_us <
              slow->costs.stage_overrides[v].backward_us);
    }
  }

  void memoryBoundKernelsAtHbm() {
    const ModelSetup setup = tinySetup();
    const double bw = 1000e3 * 0.8; // bytes per µs
    const double tokens = 2 * 2048, h = 1024, f = 4096;
    // Without sequence parallelism every TP rank normalizes the whole b·s·h.
    const PartWork work = transformerLayerWork(setup.model, setup.hardware, {2, false});
    const auto *norm = findOp(work, "input_layernorm");
    QVERIFY(norm);
    QVERIFY(near(norm->forward_us, 2 * 2 * tokens * h / bw));
    QVERIFY(near(norm->input_grad_us, 3 * 2 * tokens * h / bw));
    const auto *gelu = findOp(work, "gelu");
    QVERIFY(gelu);
    QVERIFY(near(gelu->forward_us, 2 * 2 * tokens * f / 2 / bw));
    const auto *residual = findOp(work, "mlp_bias_dropout_add");
    QVERIFY(residual);
    QVERIFY(near(residual->forward_us, (3 * 2 + 1) * tokens * h / bw));
    // Scores: b·a/t·s² elements through softmax (2 passes of 2 bytes) and dropout (2·2 + 1).
    const double scores = 2 * 8 / 2.0 * 2048 * 2048;
    QVERIFY(near(findOp(work, "softmax")->forward_us, 2 * 2 * scores / bw));
    QVERIFY(near(findOp(work, "attention_dropout")->forward_us, 5 * scores / bw));
    // Sequence parallelism splits the norm by t.
    const PartWork sp = transformerLayerWork(setup.model, setup.hardware, {2, true});
    QVERIFY(near(findOp(sp, "input_layernorm")->forward_us, norm->forward_us / 2));
    // Without HBM bandwidth in the file, memory-bound work is not priced.
    ModelSetup no_hbm = setup;
    no_hbm.hardware.hbm_gbps = 0;
    QCOMPARE(transformerLayerWork(no_hbm.model, no_hbm.hardware, {2, false}).memory_bound_us, 0.0);
  }

  void attentionMaterializedAndFlash() {
    ModelSetup setup = tinySetup();
    setup.hardware.hbm_gbps = 0; // compute only, so the hand numbers are plain FLOPs
    const double b = 2, s = 2048, h = 1024, t = 2, rate = 100e6 * 0.5;
    const PartWork materialized = transformerLayerWork(setup.model, setup.hardware, {2, false});
    const auto *scores = findOp(materialized, "attention_scores");
    QVERIFY(scores);
    QVERIFY(near(scores->forward_us, 4 * b * s * s * h / t / rate)); // no causal saving
    QVERIFY(near(scores->input_grad_us, 2 * scores->forward_us));
    QVERIFY(scores->selective_recompute);
    setup.model.attention = "flash";
    setup.hardware.attention_efficiency = 0.4;
    const PartWork flash = transformerLayerWork(setup.model, setup.hardware, {2, false});
    const auto *fa = findOp(flash, "flash_attention");
    QVERIFY(fa);
    QVERIFY(near(fa->forward_us, 4 * b * s * s * h / t / 2 / (100e6 * 0.4))); // causal: half
    QVERIFY(near(fa->input_grad_us, 2.5 * fa->forward_us)); // 5 matmuls for the forward's 2
    QVERIFY(!findOp(flash, "softmax"));
    QCOMPARE(flash.selective_recompute_us, 0.0);
  }

  // head_dim ≠ hidden / heads (Qwen3-235B-A22B: 64 heads × 128 on h = 4096): the QKV and output
  // projections and attention run at the heads' width, not h.
  void headDimWiderThanHidden() {
    ModelSetup setup = tinySetup();
    setup.hardware.hbm_gbps = 0;
    setup.model.heads = 16, setup.model.kv_heads = 4, setup.model.head_dim = 128;
    setup.model.attention = "flash";
    setup.hardware.attention_efficiency = 0.5;
    const double tokens = 2 * 2048, b = 2, s = 2048, h = 1024, t = 2, rate = 100e6 * 0.5;
    const double width = 16 * 128, kv = 4 * 128; // 2048 wide queries, 512 wide K and V
    const PartWork work = transformerLayerWork(setup.model, setup.hardware, {2, false});
    const auto *qkv = findOp(work, "qkv");
    QVERIFY(qkv);
    QVERIFY(near(qkv->forward_us, 2 * tokens * h * (width + 2 * kv) / t / rate));
    const auto *out = findOp(work, "attention_out");
    QVERIFY(out);
    QVERIFY(near(out->forward_us, 2 * tokens * width / t * h / rate));
    const auto *fa = findOp(work, "flash_attention");
    QVERIFY(fa);
    // 4·b·s²·(heads·d)/t, halved by causal masking.
    QVERIFY(near(fa->forward_us, 4 * b * s * s * width / t / 2 / rate));
    const AttentionShape shape = attentionShapeOf(setup.model);
    QCOMPARE(shape.sharded_params, h * (width + 2 * kv) + width * h);
    QCOMPARE(shape.replicated_params, 0.0);
  }

  // Multi-head latent attention (DeepSeek-V3 §2.1.1) on a small layer: h = 1024, 8 heads,
  // query latent 256, KV latent 128, score dims 64 + 32, value dim 64, TP 2.
  void latentAttentionGemmsFromTheirShapes() {
    ModelSetup setup = tinySetup();
    setup.hardware.hbm_gbps = 0;
    ModelSpec &m = setup.model;
    m.position_embeddings = 0, m.attention = "flash";
    m.q_lora_rank = 256, m.kv_lora_rank = 128;
    m.qk_nope_head_dim = 64, m.qk_rope_head_dim = 32, m.v_head_dim = 64;
    setup.hardware.attention_efficiency = 0.5;
    const double tokens = 2 * 2048, b = 2, s = 2048, h = 1024, t = 2, rate = 100e6 * 0.5;
    const PartWork work = transformerLayerWork(m, setup.hardware, {2, false});
    const auto forward = [&](const char *name) {
      const auto *op = findOp(work, name);
      return op ? op->forward_us : -1.0;
    };
    // Down-projections whole on each TP rank, up-projections split by heads.
    QVERIFY(near(forward("q_down"), 2 * tokens * h * 256 / rate));
    QVERIFY(near(forward("q_up"), 2 * tokens * 256 * (8 * 96 / t) / rate));
    QVERIFY(near(forward("kv_down"), 2 * tokens * h * (128 + 32) / rate));
    QVERIFY(near(forward("kv_up"), 2 * tokens * 128 * (8 * (64 + 64) / t) / rate));
    QVERIFY(near(forward("attention_out"), 2 * tokens * (8 * 64 / t) * h / rate));
    QVERIFY(!findOp(work, "qkv"));
    // Q·Kᵀ over 96 and P·V over 64 per head: 2·b·s²·(heads/t)·(96 + 64), causal half.
    QVERIFY(near(forward("flash_attention"), 2 * b * s * s * (8 / t) * (96 + 64) / 2 / rate));
    // Parameters: W_DQ, W_DKV (with the rope key) whole; W_UQ, W_UKV, W_O split.
    const AttentionShape shape = attentionShapeOf(m);
    QCOMPARE(shape.replicated_params, h * 256 + h * (128 + 32));
    QCOMPARE(shape.sharded_params, 256.0 * 8 * 96 + 128.0 * 8 * (64 + 64) + 8.0 * 64 * h);
    QCOMPARE(shape.latent_norm_params, 256.0 + 128.0);
    // Without a query latent the queries come straight from h.
    m.q_lora_rank = 0;
    const PartWork direct = transformerLayerWork(m, setup.hardware, {2, false});
    QVERIFY(!findOp(direct, "q_down"));
    const auto *q = findOp(direct, "q_proj");
    QVERIFY(q);
    QVERIFY(near(q->forward_us, 2 * tokens * h * (8 * 96 / t) / rate));
  }

  // The latents' RMSNorms are memory-bound: read and write tokens × rank elements.
  void latentNormsAtHbm() {
    ModelSetup setup = tinySetup();
    ModelSpec &m = setup.model;
    m.q_lora_rank = 256, m.kv_lora_rank = 128;
    m.qk_nope_head_dim = 64, m.qk_rope_head_dim = 32, m.v_head_dim = 64;
    const double tokens = 2 * 2048, bw = 1000e3 * 0.8; // bytes per µs
    const PartWork work = transformerLayerWork(m, setup.hardware, {2, false});
    const auto *q_norm = findOp(work, "q_latent_rmsnorm");
    const auto *kv_norm = findOp(work, "kv_latent_rmsnorm");
    QVERIFY(q_norm && kv_norm);
    QVERIFY(near(q_norm->forward_us, 2 * 2 * tokens * 256 / bw));
    QVERIFY(near(kv_norm->input_grad_us, 3 * 2 * tokens * 128 / bw));
  }

  void headAndEmbedding() {
    const ModelSetup setup = tinySetup();
    const double tokens = 2 * 2048, h = 1024, V = 32000, t = 2, rate = 100e6 * 0.5;
    const PartWork head = headWork(setup.model, setup.hardware, {2, false});
    const auto *out = findOp(head, "output_head");
    QVERIFY(out);
    QVERIFY(near(out->forward_us, 2 * tokens * h * V / t / rate));
    const auto *loss = findOp(head, "cross_entropy");
    QVERIFY(loss);
    QVERIFY(near(loss->forward_us, (2 * 2 + 8) * tokens * V / t / 800e3));
    QVERIFY(near(loss->input_grad_us, (4 + 2) * tokens * V / t / 800e3));
    // Unfused (Megatron without --cross-entropy-loss-fusion), per logit: the cast to fp32
    // (2 + 4 bytes), max (4), subtract, exp, divide (8 each), sum (4) forward; mul_ (8) and the
    // cast back (4 + 2) backward. Same GEMM, three times the loss's forward traffic.
    const PartWork unfused =
        headWork(setup.model, setup.hardware, {2, false}, "vocab-parallel-unfused");
    const auto *unfused_loss = findOp(unfused, "cross_entropy");
    QVERIFY(unfused_loss);
    QVERIFY(near(unfused_loss->forward_us, 38 * tokens * V / t / 800e3));
    QVERIFY(near(unfused_loss->input_grad_us, 14 * tokens * V / t / 800e3));
    QVERIFY(near(findOp(unfused, "output_head")->forward_us, out->forward_us));
    // The embedding's backward is all weight gradient.
    const PartWork embedding = embeddingWork(setup.model, setup.hardware, {2, false}, 4);
    QCOMPARE(embedding.input_grad_us, 0.0);
    QVERIFY(embedding.weight_grad_us > 0);
    // The table's dense gradient on the rank's V/t rows: zero fill (2 bytes), then read (2) and
    // added into an fp32 buffer (read 4, write 4); with a 16-bit buffer 2 + 2 + 2·2.
    const auto *table = findOp(embedding, "embedding_table_grad");
    QVERIFY(table);
    QCOMPARE(table->forward_us, 0.0);
    QVERIFY(near(table->weight_grad_us, (2 + 2 + 4 + 4) * V / t * h / 800e3));
    const PartWork bf16_buffer = embeddingWork(setup.model, setup.hardware, {2, false}, 2);
    QVERIFY(near(findOp(bf16_buffer, "embedding_table_grad")->weight_grad_us,
                 (2 + 2 + 2 + 2) * V / t * h / 800e3));
  }

  void optimizerStepReadsAndWritesEveryState() {
    HardwareSpec hw;
    hw.hbm_gbps = 1000, hw.memory_efficiency = 0.8;
    // 1e9 parameters, 12 bytes of Adam state read and written, a 4-byte gradient read, 2-byte
    // weights written: 30 GB at 800 GB/s.
    QVERIFY(near(optimizerStepUs(1e9, 12, 2, hw), 30e9 / 800e3));
    hw.hbm_gbps = 0;
    QCOMPARE(optimizerStepUs(1e9, 12, 2, hw), 0.0);
  }

  // The breakdown adds up to the op times the simulator gets, stage by stage and pass by pass.
  void breakdownSumsToTheStageCosts() {
    auto loaded = presetSetup("gpt3-175b", "a100-80gb");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.training.recompute = Recompute::Full;
    auto schedule = generateSchedule({"1f1b", 4, 8, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 1, mesh.tp = 8, mesh.pp = 4;
    auto derivation = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY2(derivation, derivation ? "" : derivation.error().message.c_str());
    QCOMPARE(derivation->stage_breakdown.size(), derivation->costs.stage_overrides.size());
    for (std::size_t v = 0; v < derivation->stage_breakdown.size(); ++v) {
      const auto &parts = derivation->stage_breakdown[v];
      const auto &cost = derivation->costs.stage_overrides[v];
      QVERIFY(near(parts.forward.total(), cost.forward_us));
      QVERIFY(near(parts.weight_grad.total(), cost.weight_us));
      QVERIFY(near(parts.input_grad.total(), cost.backward_us - cost.weight_us));
      QVERIFY(parts.forward.tp_us > 0 && parts.input_grad.recompute_us > 0);
      QVERIFY(parts.forward.memory_bound_us > 0 && parts.forward.attention_us > 0);
      // Full recomputation redoes the forward of the stage's layers (the head is not redone).
      if (v == 1 || v == 2) QVERIFY(near(parts.input_grad.recompute_us, parts.forward.total()));
    }
    QVERIFY(!derivation->layer_ops.empty());
    const auto json = costBreakdownJson(derivation->stage_breakdown, derivation->layer_ops);
    QCOMPARE(json["stages"].size(), derivation->stage_breakdown.size());
    QVERIFY(json["layer_ops"][0].contains("category"));
  }

  // Mixtral 8x7B: 46.7B parameters, 12.9B active (Jiang et al. 2024, §2).
  void moeParameterCounts() {
    auto mixtral = loadModelSpec("mixtral-8x7b");
    QVERIFY(mixtral);
    QVERIFY2(std::abs(parameterCount(*mixtral) / 1e9 - 46.7) < 0.1,
             std::to_string(parameterCount(*mixtral)).c_str());
  }

  // MTP modules of an MoE model (DeepSeek-V3 §2.2: the module's block is the model's, MoE):
  // one counts an MoE layer, its 2h→h projection and two norms; on the loss stage of an uneven
  // layout its layer pays the all-to-all like the stage's own MoE layers.
  void mtpLayersOfAnMoeModelAreMoeLayers() {
    auto loaded = presetSetup("mixtral-8x7b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    QCOMPARE(setup.model.first_dense_layers, 0);
    ModelSpec fewer = setup.model, with_mtp = setup.model;
    fewer.layers -= 1;
    with_mtp.mtp_layers = 1;
    const double h = setup.model.hidden;
    const double moe_layer = parameterCount(setup.model) - parameterCount(fewer);
    QVERIFY(near(parameterCount(with_mtp) - parameterCount(setup.model),
                 moe_layer + 2 * h * h + 2 * h)); // RMSNorm: h weights each

    setup.model = with_mtp;
    setup.training.layout = *parseMegatronLayout("Et*15|t*17mL");
    Mesh mesh;
    mesh.dp = 4, mesh.tp = 1, mesh.pp = 2, mesh.gpus_per_node = 8;
    mesh.ep = 2;
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    auto derivation = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY2(derivation, derivation ? "" : derivation.error().message.c_str());
    const double first = derivation->stage_breakdown[0].forward.ep_us;
    const double last = derivation->stage_breakdown[1].forward.ep_us;
    QVERIFY(first > 0);
    QVERIFY(near(last / first, 18.0 / 15.0));
    // The breakdown still sums to what the simulator gets, the MTP module's work included.
    const StageBreakdown &parts = derivation->stage_breakdown[1];
    const StageCost &cost = derivation->costs.stage_overrides[1];
    QVERIFY(near(parts.forward.total(), cost.forward_us));
    QVERIFY(near(parts.weight_grad.total(), cost.weight_us));
    QVERIFY(near(parts.input_grad.total() + parts.weight_grad.total(), cost.backward_us));
    // The MTP stage holds its own copy of the (untied) embedding, whose gradient it sums with the
    // first stage's (Megatron-Core: LanguageModelEmbedding wherever mtp_process is set): V·h
    // more parameters than the same layout without MTP's embedding needs, and an embedding sync.
    QVERIFY(!setup.model.tied_embeddings);
    ModelSetup no_mtp = setup;
    no_mtp.model.mtp_layers = 0;
    no_mtp.training.layout = *parseMegatronLayout("Et*15|t*17L");
    auto plain = deriveModelCosts(no_mtp, mesh, schedule->placement);
    QVERIFY(plain);
    // The MTP layer's routed experts are split over EP = 2: its per-rank share is the whole
    // layer less the half of its experts another rank holds.
    const double experts_here =
        derivation->rank_expert_parameters[1] - plain->rank_expert_parameters[1];
    const double vocab_table = static_cast<double>(setup.model.vocab) * h;
    QVERIFY(near(derivation->rank_parameters[1] - plain->rank_parameters[1],
                 (moe_layer - experts_here) + 2 * h * h + 2 * h + vocab_table));
    QVERIFY(near(derivation->rank_parameters[0], plain->rank_parameters[0]));
  }

  // EP groups follow the rank order: 2 nodes of 8, dp = 4, tp = 2, pp = 2. Under tp-pp-dp the
  // replicas d = 0..3 of (p, t) = (0, 0) are ranks 0, 4, 8, 12: EP = 2 pairs stay in a node,
  // EP = 4 crosses; under dp-tp-pp they are ranks 0..3, one node.
  void expertParallelLinkFollowsTheRankOrder() {
    auto loaded = presetSetup("mixtral-8x7b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    const auto ep_time = [&](int ep, const char *order) {
      Mesh mesh;
      mesh.dp = 4, mesh.tp = 2, mesh.pp = 2, mesh.gpus_per_node = 8;
      mesh.order = *Mesh::parseOrder(order);
      mesh.ep = ep;
      auto derivation = deriveModelCosts(setup, mesh, schedule->placement);
      return derivation ? derivation->stage_breakdown[0].forward.ep_us : -1.0;
    };
    const double layers = 16;                   // per stage, all MoE
    const double bytes = 4096.0 * 2 * 4096 * 2; // b·s·k·h bf16
    const auto one = [&](double ep, double gbps, double efficiency, double latency) {
      return (ep - 1) / ep * bytes / (gbps * efficiency * 1e3) + (ep - 1) * latency;
    };
    const auto &hw = setup.hardware;
    const double intra2 =
        one(2, hw.intra_node_gbps, hw.intra_node_bus_efficiency, hw.intra_node_latency_us);
    // EP = 4 over 2 nodes, 2 ranks in each: 1/4 of the copies to the peer in the node on
    // NVLink, 2/4 to the two in the other node on InfiniBand, at once; the slower sets the time.
    const double inter4 =
        std::max(1.0 / 4 * bytes / (hw.intra_node_gbps * hw.intra_node_bus_efficiency * 1e3) +
                     hw.intra_node_latency_us,
                 2.0 / 4 * bytes / (hw.inter_node_gbps * hw.inter_node_bus_efficiency * 1e3) +
                     2 * hw.inter_node_latency_us);
    const double intra4 =
        one(4, hw.intra_node_gbps, hw.intra_node_bus_efficiency, hw.intra_node_latency_us);
    QVERIFY(near(ep_time(2, "tp-pp-dp"), layers * 2 * intra2));
    QVERIFY(near(ep_time(4, "tp-pp-dp"), layers * 2 * inter4));
    QVERIFY(near(ep_time(4, "dp-tp-pp"), layers * 2 * intra4));
    QCOMPARE(ep_time(1, "tp-pp-dp"), 0.0);
  }

  // DeepEP / HybridEP send a token once per other node and once per other GPU that holds one of
  // its experts, not once per expert: the expected counts under balanced random routing by hand
  // (E = 8 experts, top-2, EP = 4 over 2 nodes: 4 experts a node, 2 a GPU).
  void hierarchicalDispatchCountsNodesAndGpusByHand() {
    ModelSpec m;
    m.experts = 8, m.experts_per_token = 2, m.hidden = 1024, m.sequence_length = 1000;
    m.microbatch_size = 1, m.dtype = "bf16";
    // A given other node is missed when both experts come from the 4 elsewhere: C(4,2)/C(8,2).
    const RoutedDestinations open = expectedDestinations(m, 4, 2);
    QVERIFY(near(open.remote_nodes, 1 - 6.0 / 28));
    QVERIFY(near(open.other_gpus, 3 * (1 - 15.0 / 28)));
    // Node-limited (one of the 2 groups = nodes): half the tokens stay home and hit the other GPU
    // there with 1 - C(2,2)/C(4,2) = 5/6; the other half reach the other node and 5/3 GPUs in it.
    m.router_groups = 2, m.router_group_topk = 1;
    const RoutedDestinations limited = expectedDestinations(m, 4, 2);
    QVERIFY(near(limited.remote_nodes, 0.5));
    QVERIFY(near(limited.other_gpus, 0.5 * 5.0 / 6 + 0.5 * 5.0 / 3));
    // Groups that are not the group's nodes limit nothing here.
    QVERIFY(near(expectedDestinations(m, 4, 1).other_gpus, 3 * (1 - 15.0 / 28)));
    QCOMPARE(expectedDestinations(m, 1, 1).other_gpus, 0.0);
    // Time: the slower of the RDMA copies (one per remote node) and the NVLink copies.
    const LayerShape shape{1, false, false, 1, false};
    const double token_bytes = 1000.0 * 1024 * 2;
    const LinkSpeed nvlink{400, 1}, ib{40, 5};
    QVERIFY(near(moeHierarchicalAllToAllUs(m, shape, 4, 2, nvlink, ib),
                 std::max(limited.other_gpus * token_bytes / 400e3 + 1,
                          limited.remote_nodes * token_bytes / 40e3 + 5)));
    QVERIFY(near(moeHierarchicalAllToAllUs(m, shape, 4, 1, nvlink, ib),
                 expectedDestinations(m, 4, 1).other_gpus * token_bytes / 400e3 + 1));
    // Against NCCL's all-to-all of every copy, deduplication sends less over the network.
    QVERIFY(moeHierarchicalAllToAllUs(m, shape, 4, 2, nvlink, ib) <
            moeAllToAllOverNodesUs(m, shape, 4, 2, nvlink, ib));
  }

  // The plan field picks the dispatcher: DeepSeek-V3 over 64 ranks on 8 nodes, node-limited.
  void moeDispatcherFieldSelectsThePricing() {
    auto loaded = presetSetup("deepseek-v3", "h800");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    QCOMPARE(setup.model.router_groups, 8);
    QCOMPARE(setup.model.router_group_topk, 4);
    auto schedule = generateSchedule({"1f1b", 16, 32, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 64, mesh.tp = 1, mesh.pp = 16, mesh.gpus_per_node = 8, mesh.ep = 64;
    mesh.order = *Mesh::parseOrder("tp-cp-dp-pp");
    const auto ep_us = [&](const char *dispatcher) {
      setup.training.moe_dispatcher = dispatcher;
      auto derivation = deriveModelCosts(setup, mesh, schedule->placement);
      return derivation ? derivation->stage_breakdown[1].forward.ep_us : -1.0;
    };
    const double nccl = ep_us("alltoall"), deepep = ep_us("deepep");
    QVERIFY(nccl > 0 && deepep > 0);
    // 8 copies, 56/64 of them off the node, against about 3.2 nodes a token.
    QVERIFY2(deepep < 0.5 * nccl, qPrintable(QString("%1 vs %2").arg(deepep).arg(nccl)));
    QCOMPARE(ep_us("hybridep"), deepep);
    auto json = toJson(setup.training);
    json["moe_dispatcher"] = "nvshmem";
    auto bad = trainingSetupFromJson(json, "/training");
    QVERIFY(!bad);
    QVERIFY2(bad.error().message.find("/training/moe_dispatcher") != std::string::npos,
             bad.error().message.c_str());
    auto model = toJson(setup.model);
    model["router_group_topk"] = 9;
    auto too_many_groups = modelSpecFromJson(model, "/model");
    QVERIFY(!too_many_groups);
    QVERIFY2(too_many_groups.error().message.find("/model/router_group_topk") != std::string::npos,
             too_many_groups.error().message.c_str());
    model["router_groups"] = 7; // does not divide 256 experts
    model["router_group_topk"] = 4;
    auto uneven = modelSpecFromJson(model, "/model");
    QVERIFY(!uneven);
    QVERIFY2(uneven.error().message.find("/model/router_groups") != std::string::npos,
             uneven.error().message.c_str());
  }

  // Expert tensor parallelism below tp: a rank computes whole experts for its expert-TP
  // group's share of the tokens instead of a 1/tp slice of every expert for all of them. With
  // a flat GEMM efficiency and no memory roofline the FLOPs, and so the times, are the same;
  // the rank holds tp/etp times the expert parameters (E/ep whole experts).
  void expertTensorParallelKeepsFlopsAndMovesParameters() {
    auto loaded = presetSetup("qwen3-30b-a3b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.hardware.gemm_efficiency.clear();
    setup.hardware.hbm_gbps = 0;
    const LayerShape shape{2, true, false, 1, false};
    const PartWork split = moeMlpWork(setup.model, setup.hardware, shape, 4, 1, 2);
    const PartWork whole = moeMlpWork(setup.model, setup.hardware, shape, 4, 1, 1);
    for (const char *name : {"experts_up", "experts_down"}) {
      QVERIFY(findOp(split, name) && findOp(whole, name));
      QVERIFY(near(findOp(split, name)->forward_us, findOp(whole, name)->forward_us));
      QVERIFY(near(findOp(split, name)->weight_grad_us, findOp(whole, name)->weight_grad_us));
    }
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 4, mesh.tp = 2, mesh.pp = 2, mesh.ep = 4, mesh.gpus_per_node = 8;
    setup.training.sequence_parallel = true;
    auto by_tp = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY2(by_tp, by_tp ? "" : by_tp.error().message.c_str());
    mesh.etp = 1;
    auto by_one = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY2(by_one, by_one ? "" : by_one.error().message.c_str());
    QVERIFY(near(by_one->rank_expert_parameters[0], 2 * by_tp->rank_expert_parameters[0]));
    // simulate --json breaks an MoE layer down beside the dense one (this model has none dense
    // but the dense layer's ops are still listed for reference).
    const auto json =
        costBreakdownJson(by_one->stage_breakdown, by_one->layer_ops, by_one->moe_layer_ops);
    QVERIFY(json.contains("moe_layer_ops"));
    bool experts = false;
    for (const auto &op : json["moe_layer_ops"])
      experts = experts || op["name"] == "experts_up";
    QVERIFY(experts);
    // EP 8 now fits (tp × dp = 8 ranks to fold into), EP 4 = dp × cp no longer needs to.
    mesh.ep = 8;
    QVERIFY(deriveModelCosts(setup, mesh, schedule->placement));
    // Without sequence parallelism a TP rank has no slice of its own to dispatch.
    setup.training.sequence_parallel = false;
    auto no_sp = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(!no_sp);
    QVERIFY2(no_sp.error().message.find("needs sequence parallelism") != std::string::npos,
             no_sp.error().message.c_str());
  }

  // Megatron's --tp-comm-overlap: each of a layer's four TP all-gathers / reduce-scatters (half
  // an all-reduce each under SP) hides behind the GEMM it feeds or follows, which runs in tp
  // ring-exchange chunks; only what the GEMM cannot hide is exposed. By hand against the
  // derivation's own per-op GEMM times and all-reduce time.
  void tpCommOverlapHidesCollectivesBehindTheirGemms() {
    auto loaded = presetSetup("llama3-70b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.training.sequence_parallel = true;
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 1, mesh.tp = 8, mesh.pp = 2, mesh.gpus_per_node = 8;
    auto pair =
        deriveWithAndWithout(setup, mesh, schedule->placement, &TrainingSetup::tp_comm_overlap);
    QVERIFY2(pair, refusal(pair).c_str());
    const ModelDerivation *exposed = &pair->without, *overlapped = &pair->with;
    setup.training.tp_comm_overlap = true;
    // The exposed model: 2 all-reduce equivalents per layer in F, so ar = tp_us / (2 · layers)
    // on stage 1 (no embedding; the head's collectives are on the last stage: use stage 0).
    const auto &plain = exposed->stage_breakdown[0];
    const double layers = plain.layers;
    const double head_and_embedding_f = 0.5; // the embedding's reduce-scatter (SP) in F
    const double ar = plain.forward.tp_us / (2 * layers + head_and_embedding_f);
    const auto gemm = [&](const char *name, bool backward) {
      for (const auto &op : overlapped->layer_ops)
        if (op.name == name) return backward ? op.input_grad_us : op.forward_us;
      return -1.0;
    };
    double per_layer_f = 0, per_layer_i = 0;
    for (const char *name : {"qkv", "attention_out", "mlp_gate_up", "mlp_down"}) {
      QVERIFY(gemm(name, false) > 0);
      per_layer_f += std::max(0.0, ar / 2 - gemm(name, false));
      per_layer_i += std::max(0.0, ar / 2 - gemm(name, true));
    }
    const auto &over = overlapped->stage_breakdown[0];
    QVERIFY(near(over.forward.tp_us, layers * per_layer_f + head_and_embedding_f * ar));
    QVERIFY(over.forward.tp_us < 0.5 * plain.forward.tp_us);
    // The GEMMs beside the collectives run as 8 chunks of s/8 rows: slower than whole.
    const auto whole = [&](const char *name) {
      for (const auto &op : exposed->layer_ops)
        if (op.name == name) return op.forward_us;
      return -1.0;
    };
    QVERIFY(gemm("qkv", false) >= whole("qkv"));
    for (const auto &op : exposed->layer_ops)
      if (op.name == "mlp_down") QVERIFY(gemm("mlp_down", true) >= op.input_grad_us);
    // Without sequence parallelism there is no all-gather / reduce-scatter to overlap.
    setup.training.sequence_parallel = false;
    auto refused = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("tp_comm_overlap needs sequence parallelism") !=
                 std::string::npos,
             refused.error().message.c_str());
  }

  // Megatron-LM's asynchronous backward TP collectives (tp_backward_overlap): a column-parallel
  // layer's input-gradient all-reduce runs beside its weight-gradient GEMM (without SP); under
  // SP its input is all-gathered again beside the input-gradient GEMM and the input gradient
  // reduce-scattered beside the weight-gradient GEMM, while the row-parallel layers' gradient
  // all-gathers stay exposed. By hand against the derivation's own GEMM and all-reduce times,
  // on the last stage so the column-parallel output head counts too.
  void tpBackwardOverlapHidesColumnParallelCollectives() {
    auto loaded = presetSetup("gpt3-175b", "a100-80gb");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 1, mesh.tp = 8, mesh.pp = 2, mesh.gpus_per_node = 8;
    for (const bool sp : {false, true}) {
      ModelSetup setup = *loaded;
      setup.training.sequence_parallel = sp;
      auto pair = deriveWithAndWithout(setup, mesh, schedule->placement,
                                       &TrainingSetup::tp_backward_overlap);
      QVERIFY2(pair, refusal(pair).c_str());
      const ModelDerivation *exposed = &pair->without, *overlapped = &pair->with;
      setup.training.tp_backward_overlap = true;
      // The forward is unchanged; the exposed model's last stage has 2 all-reduce equivalents a
      // layer in I and the head's (an all-reduce, or a reduce-scatter under SP).
      const auto &plain = exposed->stage_breakdown[1];
      const auto &over = overlapped->stage_breakdown[1];
      QVERIFY(near(over.forward.tp_us, plain.forward.tp_us));
      const double layers = plain.layers, head = sp ? 0.5 : 1.0;
      const double ar = plain.input_grad.tp_us / (2 * layers + head);
      const auto pass = [](const std::vector<LayerOp> &ops, const char *name, bool weight) {
        for (const auto &op : ops)
          if (op.name == name) return weight ? op.weight_grad_us : op.input_grad_us;
        return -1.0;
      };
      const auto column = [&](double input_grad, double weight_grad) {
        return sp ? std::max(0.0, ar / 2 - input_grad) + std::max(0.0, ar / 2 - weight_grad)
                  : std::max(0.0, ar - weight_grad);
      };
      const auto &ops = overlapped->layer_ops;
      QVERIFY(pass(ops, "qkv", true) > 0 && pass(ops, "mlp_up", true) > 0);
      const double per_layer = column(pass(ops, "qkv", false), pass(ops, "qkv", true)) +
                               column(pass(ops, "mlp_up", false), pass(ops, "mlp_up", true)) +
                               (sp ? ar : 0.0); // the two row-parallel all-gathers
      // The head's GEMM: its share of the last stage's weight-grad GEMM time beyond the layers'.
      double layer_weight = 0;
      for (const auto &op : ops)
        if (op.category == OpCategory::Gemm) layer_weight += op.weight_grad_us;
      const double head_weight = over.weight_grad.gemm_us - layers * layer_weight;
      const double head_input = over.input_grad.gemm_us - layers * [&] {
        double sum = 0;
        for (const auto &op : ops)
          if (op.category == OpCategory::Gemm) sum += op.input_grad_us;
        return sum;
      }();
      QVERIFY(head_weight > 0 && head_input > 0);
      QVERIFY2(near(over.input_grad.tp_us, layers * per_layer + column(head_input, head_weight)),
               (std::to_string(over.input_grad.tp_us) + " vs " +
                std::to_string(layers * per_layer + column(head_input, head_weight)))
                   .c_str());
      QVERIFY(over.input_grad.tp_us < (sp ? 0.6 : 0.1) * plain.input_grad.tp_us);
      // A schedule that runs W as its own op loses what the weight-grad GEMMs hid: its lone I
      // takes min(ar, W GEMM) more per column-parallel layer (half an all-reduce under SP), and
      // the full backward B stays as priced above.
      const double collective = sp ? ar / 2 : ar;
      const double hidden = std::min(collective, pass(ops, "qkv", true)) +
                            std::min(collective, pass(ops, "mlp_up", true));
      const double split_extra = layers * hidden + std::min(collective, head_weight);
      const StageCost &last = overlapped->costs.stage_overrides[1];
      QVERIFY2(
          near(last.input_grad_split_extra_us, split_extra),
          (std::to_string(last.input_grad_split_extra_us) + " vs " + std::to_string(split_extra))
              .c_str());
      QVERIFY(near(over.split_input_grad_tp_us, split_extra));
      QCOMPARE(exposed->costs.stage_overrides[1].input_grad_split_extra_us, 0.0);
      auto zb = generateSchedule({"zb-h1", 2, 4, 1, 0});
      QVERIFY(zb);
      auto times = resolveStageTimes(overlapped->costs, zb->placement);
      QVERIFY(times);
      QVERIFY(near(times->input_grad[1], last.backward_us - last.weight_us + split_extra));
      QVERIFY(near(times->full_backward[1], last.backward_us));
      // Without the overlap a lone I is B - W exactly, as before.
      auto plain_times = resolveStageTimes(exposed->costs, zb->placement);
      QVERIFY(plain_times);
      const StageCost &plain_last = exposed->costs.stage_overrides[1];
      QVERIFY(near(plain_times->input_grad[1], plain_last.backward_us - plain_last.weight_us));
      // The explorer's hover adds up to the lone I's time, the extra in its TP comm.
      const Op lone_input_grad = inputGradOp(1, 0);
      const auto hover =
          describeOpCost(overlapped->stage_breakdown, lone_input_grad, times->input_grad[1]);
      QVERIFY2(hover && hover->find("TP comm") != std::string::npos, hover.value_or("").c_str());
      // The closed form reads the same I: ZB-H1 splits every B, so with the overlap it predicts
      // what it predicts without.
      auto zb_closed = analyticMetrics(*zb, overlapped->costs);
      auto zb_plain_closed = analyticMetrics(*zb, exposed->costs);
      QVERIFY(zb_closed && zb_plain_closed);
      QVERIFY(near(zb_closed->makespan_us, zb_plain_closed->makespan_us));
      // The extra survives a plan file and is checked like every time.
      Costs round_trip = overlapped->costs;
      QVERIFY(round_trip.check(2));
      round_trip.stage_overrides[0].input_grad_split_extra_us = -1;
      auto refused = round_trip.check(2);
      QVERIFY(!refused);
      QVERIFY(refused.error().message.find("input_grad_split_extra") != std::string::npos);
      // Under tp_comm_overlap (which needs SP) the userbuffers pricing governs; the flag adds
      // nothing.
      if (sp) {
        setup.training.tp_comm_overlap = true;
        auto both = deriveModelCosts(setup, mesh, schedule->placement);
        setup.training.tp_backward_overlap = false;
        auto userbuffers = deriveModelCosts(setup, mesh, schedule->placement);
        QVERIFY(both && userbuffers);
        QVERIFY(near(both->stage_breakdown[1].input_grad.tp_us,
                     userbuffers->stage_breakdown[1].input_grad.tp_us));
      }
    }
  }

  // fp32 gradients (Megatron-LM's default under bf16): the gradient buffer is 4 bytes a
  // parameter instead of 2, and the DP sync moves the gradients at 4 bytes (ZeRO-1's
  // reduce-scatter) while the updated parameters come back at 2 (its all-gather).
  void fp32GradientsWidenTheBufferAndTheReduction() {
    auto loaded = presetSetup("llama3-8b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.training.zero_stage = 1;
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 8, mesh.tp = 1, mesh.pp = 2, mesh.gpus_per_node = 8;
    auto narrow = deriveModelCosts(setup, mesh, schedule->placement);
    setup.training.fp32_gradients = true;
    auto wide = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(narrow && wide);
    const RankMemory a = rankMemory(setup, mesh, *narrow, 0, 0);
    setup.training.fp32_gradients = false;
    const RankMemory b = rankMemory(setup, mesh, *narrow, 0, 0);
    QVERIFY(near(a.grads, 2 * b.grads));
    QCOMPARE(a.params, b.params);
    QCOMPARE(a.optimizer, b.optimizer);
    // The sync: (4 + 2) / (2 + 2) of the 16-bit one, latency apart.
    QVERIFY(wide->costs.gradient_sync_us > 1.4 * narrow->costs.gradient_sync_us);
    QVERIFY(wide->costs.gradient_sync_us < 1.5 * narrow->costs.gradient_sync_us + 1);
  }

  // Megatron-LM without its fused kernels (--no-gradient-accumulation-fusion,
  // --no-masked-softmax-fusion): each weight's gradient added into the buffer by its own kernel
  // in W every microbatch (the 16-bit gradient read, the buffer read and written), and the
  // materialized scores masked by a pass of their own forward and backward.
  void unfusedGradientAddAndMaskByHand() {
    ModelSetup setup = tinySetup(); // layernorm, no biases, tied embeddings
    const double b = 2, s = 2048, h = 1024, f = 4096, a = 8, t = 2, dt = 2;
    const double bandwidth = 1000e3 * 0.8; // bytes per µs
    LayerShape shape{2, false};
    shape.unfused_softmax = true;
    shape.gradient_add_bytes = 10;
    shape.params = 1e6;
    const PartWork layer = transformerLayerWork(setup.model, setup.hardware, shape);
    const auto *mask = findOp(layer, "attention_mask");
    QVERIFY(mask);
    const double scores = b * a / t * s * s;
    QVERIFY(near(mask->forward_us, 2 * dt * scores / bandwidth));
    QVERIFY(near(mask->input_grad_us, 2 * dt * scores / bandwidth));
    QVERIFY(mask->selective_recompute); // recomputed with the scores
    const auto *add = findOp(layer, "gradient_accumulation");
    QVERIFY(add);
    QCOMPARE(add->forward_us, 0.0);
    QCOMPARE(add->input_grad_us, 0.0);
    QVERIFY(near(add->weight_grad_us, 10 * 1e6 / bandwidth));
    QVERIFY(
        !findOp(transformerLayerWork(setup.model, setup.hardware, {2, false}), "attention_mask"));

    // Through the whole derivation: the layer's own parameters on the TP rank, at 2 + 2 × 4
    // bytes with fp32 gradients; fused (the default) adds nothing.
    setup.training.fp32_gradients = true;
    auto schedule = generateSchedule({"1f1b", 1, 2, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 1, mesh.tp = 2, mesh.pp = 1, mesh.gpus_per_node = 8;
    auto fused = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY2(fused, fused ? "" : fused.error().message.c_str());
    for (const auto &op : fused->layer_ops)
      QVERIFY(op.name != "gradient_accumulation" && op.name != "attention_mask");
    setup.training.gradient_accumulation_fusion = false;
    setup.training.masked_softmax_fusion = false;
    auto unfused = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(unfused);
    const LayerOp *layer_add = findOp(unfused->layer_ops, "gradient_accumulation");
    QVERIFY(layer_add);
    const double layer_params = (4 * h * h + 2 * h * f) / t + 2 * (2 * h); // two layernorms whole
    QVERIFY(near(layer_add->weight_grad_us, (dt + 2 * 4) * layer_params / bandwidth));
    QVERIFY(unfused->costs.stage_overrides.front().weight_us >
            fused->costs.stage_overrides.front().weight_us);
    // Gradients sharded over dp 4 (ZeRO-3, as Megatron-FSDP shards them): the gradient is copied
    // into the unsharded bucket (2 + 4 bytes), and only its quarter added into the shard (2 × 4
    // / 4 bytes).
    mesh.dp = 4;
    setup.training.zero_stage = 3;
    auto sharded = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY2(sharded, sharded ? "" : sharded.error().message.c_str());
    const LayerOp *sharded_add = findOp(sharded->layer_ops, "gradient_accumulation");
    QVERIFY(sharded_add);
    QVERIFY(near(sharded_add->weight_grad_us, (dt + 4 + 2 * 4 / 4.0) * layer_params / bandwidth));
    setup.training.zero_stage = 0;
    mesh.dp = 1;

    // The plan file's fields: written only when off, read back, a wrong type named.
    QVERIFY(!toJson(TrainingSetup{}).contains("gradient_accumulation_fusion"));
    const nlohmann::json written = toJson(setup.training);
    QCOMPARE(written["gradient_accumulation_fusion"], nlohmann::json(false));
    QCOMPARE(written["masked_softmax_fusion"], nlohmann::json(false));
    auto read = trainingSetupFromJson(written, "/training");
    QVERIFY(read && !read->gradient_accumulation_fusion && !read->masked_softmax_fusion);
    auto bad = trainingSetupFromJson({{"masked_softmax_fusion", "no"}}, "/training");
    QVERIFY(!bad);
    QVERIFY2(bad.error().message.find("/training/masked_softmax_fusion") != std::string::npos,
             bad.error().message.c_str());
  }

  void moeRefusalsNameTheField() {
    auto loaded = presetSetup("mixtral-8x7b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 6, mesh.tp = 1, mesh.pp = 2;
    mesh.ep = 6; // divides dp × cp, not the 8 experts
    auto uneven = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(!uneven);
    QVERIFY2(uneven.error().message.find("experts (8) are not divisible by the mesh's ep = 6") !=
                 std::string::npos,
             uneven.error().message.c_str());
    mesh.ep = 4; // divides the experts, not dp × cp = 6
    auto outside = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(!outside);
    QVERIFY2(outside.error().message.find("ep = 4 does not divide dp × cp = 6 × 1 = 6") !=
                 std::string::npos,
             outside.error().message.c_str());
    mesh.cp = 2; // 6 × 2 = 12 ranks to fold EP into: ep = 4 fits
    QVERIFY(deriveModelCosts(setup, mesh, schedule->placement));
    auto json = toJson(setup.model);
    json["experts_per_token"] = 9;
    auto too_many = modelSpecFromJson(json, "/model");
    QVERIFY(!too_many);
    QVERIFY2(too_many.error().message.find("/model/experts_per_token") != std::string::npos,
             too_many.error().message.c_str());
  }

  // The DualPipe pair against a hand computation (DeepSeek-V3 §3.2.1): mixtral (32 MoE layers,
  // b·s·k·h = 1·4096·2·4096 bf16 per all-to-all), EP = 8 over the 8 replicas, pp = 4: a rank's
  // share of 8 layers runs 2 all-to-alls per layer in F and 2 in B, A = 16 of them each way.
  // The pair takes F + B less what each chunk's compute hides of the other's all-to-all:
  // min(A, B - A) + min(A, F - A), never less than max(F, B).
  void dualPipePairFromHiddenAllToAllByHand() {
    auto loaded = presetSetup("mixtral-8x7b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.training.moe_layer_host_us = 0; // the overlap alone (host time: its own test below)
    auto schedule = generateSchedule({"dualpipe", 4, 16, 1, 0});
    QVERIFY(schedule);
    const double bytes = 1.0 * 4096 * 2 * 4096 * 2;
    const auto derive = [&](const char *order, int ep = 8) {
      Mesh mesh;
      mesh.dp = 8, mesh.tp = 1, mesh.pp = 4, mesh.gpus_per_node = 8, mesh.ep = ep;
      mesh.order = *Mesh::parseOrder(order);
      return deriveModelCosts(setup, mesh, schedule->placement);
    };
    // EP inside a node (replicas vary fastest): NVLink all-to-alls, short beside the compute,
    // hidden whole: pair = F + B - 2A.
    const auto &hw = setup.hardware;
    const double nvlink =
        7.0 / 8 * bytes / (hw.intra_node_gbps * hw.intra_node_bus_efficiency * 1e3) +
        7 * hw.intra_node_latency_us;
    auto inside = derive("dp-tp-pp");
    QVERIFY2(inside, inside ? "" : inside.error().message.c_str());
    QVERIFY(near(inside->stage_breakdown[1].forward.ep_us, 8 * 2 * nvlink));
    const auto &c = inside->costs;
    const double a = 16 * nvlink;
    QVERIFY(a < c.forward_us - a && a < c.backward_us - a);
    QVERIFY(near(c.overlapped_us, c.forward_us + c.backward_us - 2 * a));
    // EP across 4 nodes (tp-pp-dp: replicas 4 ranks apart) on a slow network: the all-to-alls
    // outlast the compute, which hides entirely behind them: pair = 2A.
    setup.hardware.inter_node_gbps = 2;
    // (2 ranks of the group per node: 6/8 of the copies cross the network, 1/8 stays on NVLink.)
    const double slow =
        6.0 / 8 * bytes / (2 * hw.inter_node_bus_efficiency * 1e3) + 6 * hw.inter_node_latency_us;
    auto across = derive("tp-pp-dp");
    QVERIFY2(across, across ? "" : across.error().message.c_str());
    QVERIFY(near(across->stage_breakdown[1].forward.ep_us, 8 * 2 * slow));
    const auto &d = across->costs;
    const double b = 16 * slow;
    QVERIFY(d.forward_us - b < b && d.backward_us - b < b);
    QVERIFY(near(d.overlapped_us, 2 * b));
    // Nothing to hide without EP: no overlap figure (the pair takes F + B).
    auto dense_like = derive("tp-pp-dp", 1);
    QVERIFY(dense_like);
    QCOMPARE(dense_like->costs.overlapped_us, 0.0);
  }

  // DeepEP's kernels hold 20 of the H100's 132 SMs through an overlapped pair (DeepSeek-V3
  // §3.2.1-3.2.2: the SMs are split between communication and computation, 20 for the former;
  // the grid of its kernels in DeepSeek's published profile), so the pair's compute runs on 112:
  // F - A and B - A stretched by 132/112, then the same hiding as above, never more than F + B
  // (the overlap gains nothing then). NCCL's alltoall is not priced so, nor is a hardware file
  // without an SM count; a dispatcher given every SM is refused.
  void deepepKernelsTakeTheirSmsFromAnOverlappedPairByHand() {
    auto loaded = presetSetup("mixtral-8x7b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.training.moe_layer_host_us = 0; // the SM share alone (host time: its own test below)
    QCOMPARE(setup.hardware.sm_count, 132);
    auto schedule = generateSchedule({"dualpipe", 4, 16, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 8, mesh.tp = 1, mesh.pp = 4, mesh.gpus_per_node = 8, mesh.ep = 8;
    mesh.order = *Mesh::parseOrder("tp-pp-dp");                       // the EP group across 4 nodes
    QCOMPARE(dispatcherSmShare(setup.hardware, setup.training), 1.0); // alltoall
    setup.training.moe_dispatcher = "deepep";
    QVERIFY(near(dispatcherSmShare(setup.hardware, setup.training), 132.0 / 112));
    const auto pairByHand = [](const Costs &c, double a, double share) {
      const double fc = share * (c.forward_us - a), bc = share * (c.backward_us - a);
      const double hidden = std::min(a, bc) + std::min(a, fc);
      return std::clamp(fc + bc + 2 * a - hidden, std::max(c.forward_us, c.backward_us),
                        c.forward_us + c.backward_us);
    };
    double stretched_at = 0; // a network where the stretch shows and the cap does not bind
    for (double gbps : {50.0, 3.0}) {
      setup.hardware.inter_node_gbps = gbps;
      auto derived = deriveModelCosts(setup, mesh, schedule->placement);
      QVERIFY2(derived, derived ? "" : derived.error().message.c_str());
      const auto &c = derived->costs;
      // The rank's share of all-to-all time each way: the middle stage's (F and B alike).
      const double a = derived->stage_breakdown[1].forward.ep_us;
      QVERIFY(near(c.overlapped_us, pairByHand(c, a, 132.0 / 112)));
      QVERIFY(c.overlapped_us >= pairByHand(c, a, 1.0));
      if (c.overlapped_us < c.forward_us + c.backward_us && c.overlapped_us > pairByHand(c, a, 1.0))
        stretched_at = gbps;
    }
    QVERIFY(stretched_at > 0);
    setup.hardware.inter_node_gbps = stretched_at;
    auto base = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(base);
    const auto &c = base->costs;
    setup.training.moe_dispatcher_sms = 32; // Megatron's --moe-flex-dispatcher-num-sms
    QVERIFY(near(dispatcherSmShare(setup.hardware, setup.training), 132.0 / 100));
    auto more = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(more);
    QVERIFY(more->costs.overlapped_us > c.overlapped_us);
    setup.hardware.sm_count = 0; // unknown: not priced
    QCOMPARE(dispatcherSmShare(setup.hardware, setup.training), 1.0);
    setup.hardware.sm_count = 132;
    setup.training.moe_dispatcher_sms = 132;
    auto none_left = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(!none_left);
    QVERIFY2(none_left.error().message.find("moe_dispatcher_sms (132)") != std::string::npos,
             none_left.error().message.c_str());
    // The fields round-trip through the files.
    auto hardware = hardwareSpecFromJson(toJson(setup.hardware), "/hardware");
    QVERIFY(hardware);
    QCOMPARE(hardware->sm_count, 132);
    auto training = trainingSetupFromJson(toJson(setup.training), "/training");
    QVERIFY(training);
    QCOMPARE(training->moe_dispatcher_sms, 132);
    auto json = toJson(setup.hardware);
    json["sm_count"] = -1;
    const std::string refused = refusal(hardwareSpecFromJson(json, "/hardware"));
    QVERIFY2(refused.find("/hardware/sm_count") != std::string::npos, refused.c_str());
  }

  // An MoE layer's host time (moeLayerHostUs, docs/cost-model.md "MoE layers' host time"): the
  // GPU waits out h per MoE layer and microbatch, a third in each of F, I and W, and full
  // recomputation's forward a third again; a dense layer pays nothing. In an overlapped pair it
  // is neither stretched by the dispatcher's SMs nor hidden: the pair grows by exactly F's and
  // B's host shares. Negative means the default (3.5 ms), 0 none; the field round-trips, a
  // negative one in a file is refused naming it.
  void moeLayerHostTimeByHand() {
    auto loaded = presetSetup("mixtral-8x7b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.hardware.layer_overhead_us = 0; // every layer's fixed overhead: its own test
    QCOMPARE(moeLayerHostUs(setup.training, setup.hardware), kDefaultMoeLayerHostUs);
    QCOMPARE(kDefaultMoeLayerHostUs, 3500.0);
    setup.training.moe_dispatcher = "deepep";
    auto schedule = generateSchedule({"dualpipe", 4, 16, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 8, mesh.tp = 1, mesh.pp = 4, mesh.gpus_per_node = 8, mesh.ep = 8;
    mesh.order = *Mesh::parseOrder("tp-pp-dp");
    const auto derive = [&](double host_us, Recompute recompute) {
      ModelSetup s = setup;
      s.training.moe_layer_host_us = host_us;
      s.training.recompute = recompute;
      return deriveModelCosts(s, mesh, schedule->placement);
    };
    auto none = derive(0, Recompute::None);
    auto with = derive(3000, Recompute::None);
    QVERIFY2(none, none ? "" : none.error().message.c_str());
    QVERIFY2(with, with ? "" : with.error().message.c_str());
    // Stage 1 holds 8 of mixtral's 32 layers, all MoE: 8 × 1000 µs in each pass.
    QCOMPARE(with->stage_breakdown[1].layers, 8);
    QVERIFY(addsThirds(*none, *with, 8000, &PassBreakdown::host_us));
    const StageCost &b = with->costs.stage_overrides[1];
    // The rank's share of the pair (8 layers): its compute stretched and hiding as without host
    // time, then F's and B's host time on top.
    QVERIFY(near(with->costs.overlapped_us - none->costs.overlapped_us, 8000 + 16000, 1e-6));
    // Full recomputation launches the forward again in the input-grad pass.
    auto full = derive(3000, Recompute::Full);
    QVERIFY(full);
    QVERIFY(near(full->stage_breakdown[1].input_grad.host_us, 16000));
    // A dense model has no MoE layer to wait on.
    auto dense = presetSetup("llama3-8b", "h100-sxm");
    QVERIFY(dense);
    Mesh dense_mesh;
    dense_mesh.dp = 1, dense_mesh.tp = 1, dense_mesh.pp = 4;
    auto dense_costs = deriveModelCosts(*dense, dense_mesh, schedule->placement);
    QVERIFY2(dense_costs, dense_costs ? "" : dense_costs.error().message.c_str());
    for (const auto &parts : dense_costs->stage_breakdown)
      QCOMPARE(parts.forward.host_us + parts.input_grad.host_us + parts.weight_grad.host_us, 0.0);
    // The hover names the part.
    Op forward;
    forward.kind = OpKind::Forward;
    forward.stage = 1;
    auto text = describeOpCost(with->stage_breakdown, forward, b.forward_us);
    QVERIFY(text);
    QVERIFY2(text->ends_with("+ MoE host 8"), text->c_str()); // ms, as the op
    // Files: the field round-trips (the default stays unwritten); a negative figure is refused
    // naming it.
    QVERIFY(!toJson(setup.training).contains("moe_layer_host_us"));
    setup.training.moe_layer_host_us = 0;
    nlohmann::json json = toJson(setup.training);
    QCOMPARE(trainingSetupFromJson(json, "/training")->moe_layer_host_us, 0.0);
    json["moe_layer_host_us"] = -5;
    const std::string refused = refusal(trainingSetupFromJson(json, "/training"));
    QVERIFY2(refused.find("/training/moe_layer_host_us") != std::string::npos, refused.c_str());
    // A hardware file's own host time (pipescope calibrate --fit moe-host) is the default for
    // plans that leave theirs unset, and only for them; it round-trips, a negative one is refused.
    ModelSetup calibrated = setup;
    calibrated.hardware.moe_layer_host_us = 6000;
    calibrated.training.moe_layer_host_us = -1;
    QCOMPARE(moeLayerHostUs(calibrated.training, calibrated.hardware), 6000.0);
    calibrated.training.moe_layer_host_us = 0;
    QCOMPARE(moeLayerHostUs(calibrated.training, calibrated.hardware), 0.0);
    calibrated.training.moe_layer_host_us = -1;
    auto on_file = deriveModelCosts(calibrated, mesh, schedule->placement);
    QVERIFY2(on_file, on_file ? "" : on_file.error().message.c_str());
    QVERIFY(near(on_file->stage_breakdown[1].forward.host_us, 8 * 2000.0));
    nlohmann::json hardware_json = toJson(calibrated.hardware);
    QCOMPARE(hardwareSpecFromJson(hardware_json, "/hardware")->moe_layer_host_us, 6000.0);
    QVERIFY(!toJson(setup.hardware).contains("moe_layer_host_us")); // presets leave it unset
    hardware_json["moe_layer_host_us"] = -1;
    const std::string refused_hardware = refusal(hardwareSpecFromJson(hardware_json, "/hardware"));
    QVERIFY2(refused_hardware.find("/hardware/moe_layer_host_us") != std::string::npos,
             refused_hardware.c_str());
  }

  // Every transformer layer's fixed overhead (HardwareSpec::layer_overhead_us, docs/cost-model.md
  // "A layer's fixed overhead"): o per layer and microbatch, a third in each of F, I and W, dense
  // and MoE layers alike, the same at any microbatch size; full recomputation redoes F's third.
  // A file without it prices none (the presets: fitted with the levels it did not improve the
  // held-out rows, docs/measurements/fit_layer_overhead.py), and a negative one is refused naming
  // the field.
  void layerOverheadByHand() {
    auto loaded = presetSetup("llama3-8b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    QCOMPARE(loaded->hardware.layer_overhead_us, 0.0);
    auto schedule = generateSchedule({"1f1b", 4, 8, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 1, mesh.tp = 1, mesh.pp = 4;
    const auto derive = [&](const std::string &model, double overhead_us, Recompute recompute,
                            int microbatch_size = 1) {
      auto s = presetSetup(model, "h100-sxm");
      s->hardware.layer_overhead_us = overhead_us;
      s->training.recompute = recompute;
      s->model.microbatch_size = microbatch_size;
      return deriveModelCosts(*s, mesh, schedule->placement);
    };
    for (const int b : {1, 2}) {
      auto none = derive("llama3-8b", 0, Recompute::None, b);
      auto with = derive("llama3-8b", 3000, Recompute::None, b);
      QVERIFY2(none && with, none ? "" : none.error().message.c_str());
      // Stage 1 holds 8 of llama3-8b's 32 layers: 8 × 1000 µs in each pass, at any b.
      QCOMPARE(with->stage_breakdown[1].layers, 8);
      QVERIFY(addsThirds(*none, *with, 8000, &PassBreakdown::overhead_us));
      for (const auto &parts : none->stage_breakdown)
        QCOMPARE(parts.forward.overhead_us + parts.input_grad.overhead_us, 0.0);
    }
    // Full recomputation redoes the forward, its overhead with it.
    auto full_none = derive("llama3-8b", 0, Recompute::Full);
    auto full = derive("llama3-8b", 3000, Recompute::Full);
    QVERIFY(full_none && full);
    QVERIFY(near(full->stage_breakdown[1].input_grad.recompute_us -
                     full_none->stage_breakdown[1].input_grad.recompute_us,
                 8000, 1e-6));
    // An MoE layer pays it once too, beside its own host time.
    auto moe_none = derive("mixtral-8x7b", 0, Recompute::None);
    auto moe = derive("mixtral-8x7b", 3000, Recompute::None);
    QVERIFY2(moe_none && moe, moe ? "" : moe.error().message.c_str());
    QVERIFY(near(moe->stage_breakdown[1].forward.overhead_us, 8000));
    QVERIFY(near(moe->stage_breakdown[1].forward.host_us,
                 moe_none->stage_breakdown[1].forward.host_us));
    // The hover names the part.
    auto with = derive("llama3-8b", 3000, Recompute::None);
    Op forward;
    forward.kind = OpKind::Forward;
    forward.stage = 1;
    auto text =
        describeOpCost(with->stage_breakdown, forward, with->costs.stage_overrides[1].forward_us);
    QVERIFY(text);
    QVERIFY2(text->ends_with("+ layer overhead 8"), text->c_str()); // ms, as the op
    // Files: round-trips; a file without the field (or 0) prices none and stays unwritten; a
    // negative figure is refused naming it.
    HardwareSpec hardware = loaded->hardware;
    QVERIFY(!toJson(hardware).contains("layer_overhead_us"));
    hardware.layer_overhead_us = 450;
    nlohmann::json json = toJson(hardware);
    QCOMPARE(json["layer_overhead_us"].get<double>(), 450.0);
    QCOMPARE(hardwareSpecFromJson(json, "/hardware")->layer_overhead_us, 450.0);
    json.erase("layer_overhead_us");
    QCOMPARE(hardwareSpecFromJson(json, "/hardware")->layer_overhead_us, 0.0);
    json["layer_overhead_us"] = -1;
    const std::string refused = refusal(hardwareSpecFromJson(json, "/hardware"));
    QVERIFY2(refused.find("/hardware/layer_overhead_us") != std::string::npos, refused.c_str());
  }

  // The step's fixed overhead (HardwareSpec::step_overhead_us, docs/cost-model.md "A step's
  // fixed overhead"): paid once a step in the tail after each rank's last op, so the simulated
  // step grows by exactly that much under every schedule and microbatch count, and no op moves.
  // A file without it prices none, the speed of light drops it, and a negative one is refused
  // naming the field.
  void stepOverheadByHand() {
    auto loaded = presetSetup("llama3-8b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    QCOMPARE(loaded->hardware.step_overhead_us, 0.0);
    Mesh mesh;
    mesh.dp = 2, mesh.tp = 1, mesh.pp = 4;
    for (const ScheduleRequest &request :
         {ScheduleRequest{"1f1b", 4, 8, 1, 0}, ScheduleRequest{"interleaved-1f1b", 4, 16, 2, 0},
          ScheduleRequest{"zb-h1", 4, 4, 1, 0}}) {
      auto schedule = generateSchedule(request);
      QVERIFY(schedule);
      ModelSetup setup = *loaded;
      auto none = deriveModelCosts(setup, mesh, schedule->placement);
      setup.hardware.step_overhead_us = 120000;
      auto with = deriveModelCosts(setup, mesh, schedule->placement);
      QVERIFY2(none && with, none ? "" : none.error().message.c_str());
      QVERIFY(near(with->costs.gradient_sync_us, none->costs.gradient_sync_us + 120000));
      for (std::size_t v = 0; v < none->costs.stage_overrides.size(); ++v) {
        QCOMPARE(with->costs.stage_overrides[v].forward_us,
                 none->costs.stage_overrides[v].forward_us);
        QCOMPARE(with->costs.stage_overrides[v].backward_us,
                 none->costs.stage_overrides[v].backward_us);
      }
      auto step_none = evaluate(request, none->costs);
      auto step_with = evaluate(request, with->costs);
      QVERIFY(step_none && step_with);
      QVERIFY2(near(step_with->simulation.makespan_us, step_none->simulation.makespan_us + 120000),
               request.name.c_str());
      // Where the bubble leaves its closed form, the tail names the overhead apart.
      const auto tailText = [](const Evaluation &evaluation, double overhead_us) {
        for (const auto &departure : analyticDepartures(evaluation, overhead_us))
          if (departure.kind == DepartureKind::GradientSync) return departure.text;
        return std::string();
      };
      const std::string split = tailText(*step_with, 120000);
      QVERIFY2(split.find("the gradient sync and optimizer step add ") == 0 &&
                   split.find(" and the step overhead 120 ms after each rank's last op") !=
                       std::string::npos,
               split.c_str());
      QVERIFY2(tailText(*step_none, 0).find(" and the step overhead") == std::string::npos,
               tailText(*step_none, 0).c_str());
    }
    ModelSetup setup = *loaded;
    setup.hardware.step_overhead_us = 120000;
    QCOMPARE(speedOfLightSetup(setup).hardware.step_overhead_us, 0.0);
    // Files: round-trips; a file without the field (or 0) prices none and stays unwritten; a
    // negative figure is refused naming it.
    HardwareSpec hardware = loaded->hardware;
    QVERIFY(!toJson(hardware).contains("step_overhead_us"));
    hardware.step_overhead_us = 85000;
    nlohmann::json json = toJson(hardware);
    QCOMPARE(json["step_overhead_us"].get<double>(), 85000.0);
    QCOMPARE(hardwareSpecFromJson(json, "/hardware")->step_overhead_us, 85000.0);
    json.erase("step_overhead_us");
    QCOMPARE(hardwareSpecFromJson(json, "/hardware")->step_overhead_us, 0.0);
    json["step_overhead_us"] = -1;
    const std::string refused = refusal(hardwareSpecFromJson(json, "/hardware"));
    QVERIFY2(refused.find("/hardware/step_overhead_us") != std::string::npos, refused.c_str());
  }

  // CP splits each sequence: every activation of a stage halves at CP = 2 (flash attention keeps
  // only a per-row term); tokens per step stay dp × M × b × s (CP adds GPUs, not replicas), and
  // the refusal names the field.
  void contextParallelSplitsActivations() {
    auto loaded = presetSetup("llama3-8b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    auto schedule = generateSchedule({"1f1b", 4, 8, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 2, mesh.tp = 2, mesh.pp = 4;
    auto whole = deriveModelCosts(setup, mesh, schedule->placement);
    Mesh split_mesh = mesh;
    split_mesh.cp = 2;
    auto split = deriveModelCosts(setup, split_mesh, schedule->placement);
    QVERIFY(whole && split);
    for (std::size_t v = 0; v < 4; ++v)
      QVERIFY(near(split->stage_activation_bytes[v], whole->stage_activation_bytes[v] / 2));
    SimulationResult simulation;
    simulation.makespan_us = 1e6;
    const double tokens = 2.0 * 8 * 1 * setup.model.sequence_length; // dp × M × b × s
    QVERIFY(
        near(reportModel(setup, split_mesh, *schedule, *split, simulation).tokens_per_s, tokens));
    QVERIFY(near(reportModel(setup, mesh, *schedule, *whole, simulation).tokens_per_s, tokens));
    setup.model.sequence_length = 8190; // not a multiple of 2 × CP
    auto odd = deriveModelCosts(setup, split_mesh, schedule->placement);
    QVERIFY(!odd);
    QVERIFY2(odd.error().message.find("sequence_length (8190) is not divisible by 2 × cp = 4 "
                                      "(mesh cp = 2)") != std::string::npos,
             odd.error().message.c_str());
  }

  // The CP ring runs on the link the rank order gives the CP group, and only what attention does
  // not hide costs time: (cp - 1) steps of latency + K,V bytes / bandwidth, less attention.
  void contextParallelRingFollowsTheRankOrder() {
    auto loaded = presetSetup("llama3-8b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.hardware.inter_node_gbps = 0.5; // a slow network, so the ring shows
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    const auto derive = [&](const char *order) {
      Mesh mesh;
      mesh.dp = 1, mesh.cp = 4, mesh.tp = 2, mesh.pp = 2, mesh.gpus_per_node = 8;
      mesh.order = *Mesh::parseOrder(order, mesh.cp);
      return deriveModelCosts(setup, mesh, schedule->placement);
    };
    auto across = derive("tp-pp-cp-dp"); // c = 0..3 of (p, t) = (0, 0): ranks 0, 4, 8, 12
    auto inside = derive("cp-tp-pp-dp"); // ranks 0..3: one node
    QVERIFY(across && inside);
    QCOMPARE(inside->stage_breakdown[0].forward.cp_us, 0.0);
    double attention = 0;
    for (const auto &op : across->layer_ops)
      if (op.category == OpCategory::Attention) attention += op.forward_us;
    const auto &hw = setup.hardware;
    const double bytes = 2.0 * 1 * 8192 / 4 * 1024 / 2 * 2; // K,V of s/cp tokens, kv/t, bf16
    const double ring =
        3 * (hw.inter_node_latency_us + bytes / (0.5 * hw.inter_node_bus_efficiency * 1e3));
    QVERIFY(ring > attention);
    QVERIFY(near(across->stage_breakdown[0].forward.cp_us, 16 * (ring - attention)));
  }

  // NCCL's two all-reduces against hand computations (src/graph/tuning.cc's model).
  void ringAndTreeAllReduceFormulas() {
    // Ring: 2·7/8 · 1e6 B / 100 GB/s + 2·7 · 2 µs = 17.5 + 28.
    QVERIFY(near(ringAllReduceUs(1e6, 8, 100, 2), 45.5));
    QCOMPARE(ringAllReduceUs(1e6, 1, 100, 2), 0.0);
    // Tree, 64 ranks on 8 nodes: a chain of 8 in each node and a tree 3 levels deep, up and
    // down: 2·(7·1 + 3·5) µs, plus 1e6 B / (0.5 · 0.92 · 40 GB/s).
    QVERIFY(near(treeAllReduceUs(1e6, 64, 8, 40, 1, 5), 44 + 1e6 / 18400.0));
    // 64 ranks on 64 nodes: no chain, ⌊log2 64⌋ = 6 levels; 12 nodes: ⌊log2 12⌋ = 3.
    QVERIFY(near(treeAllReduceUs(0, 64, 64, 40, 1, 5), 60));
    QVERIFY(near(treeAllReduceUs(0, 12, 12, 40, 1, 5), 30));
    QCOMPARE(treeAllReduceUs(1e6, 1, 1, 40, 1, 5), 0.0);
  }

  // NCCL's tuner takes the cheaper: across many nodes a small message goes by tree (log2 of the
  // nodes in latency instead of 2(n-1) steps), a large one by ring (the tree moves every byte at
  // 0.46 of the bus bandwidth, the ring 2(n-1)/n of it at the full figure); inside a node the
  // tree is a chain with the ring's latency and a lower bandwidth, so always the ring.
  void autoPicksTreeForSmallMessagesAcrossNodes() {
    HardwareSpec hw;
    hw.intra_node_gbps = 450, hw.intra_node_latency_us = 1, hw.intra_node_bus_efficiency = 0.8;
    hw.inter_node_gbps = 50, hw.inter_node_latency_us = 5, hw.inter_node_bus_efficiency = 0.9;
    using Algorithm = CollectiveAlgorithm;
    const double small = 1 << 20, large = 1 << 30, inter_bus = 45, intra_bus = 360;
    // 64 ranks, one per node.
    const double small_ring = 2.0 * 63 / 64 * small / (inter_bus * 1e3) + 2 * 63 * 5.0;
    const double small_tree = 2 * 6 * 5.0 + small / (0.46 * inter_bus * 1e3);
    QVERIFY(small_tree < small_ring);
    QVERIFY(near(allReduceUs(hw, Algorithm::Ring, small, 64, 64, LinkKind::Inter), small_ring));
    QVERIFY(near(allReduceUs(hw, Algorithm::Tree, small, 64, 64, LinkKind::Inter), small_tree));
    QVERIFY(near(allReduceUs(hw, Algorithm::Auto, small, 64, 64, LinkKind::Inter), small_tree));
    QVERIFY(allReduceAlgorithm(hw, Algorithm::Auto, small, 64, 64, LinkKind::Inter) ==
            Algorithm::Tree);
    const double large_ring = 2.0 * 63 / 64 * large / (inter_bus * 1e3) + 2 * 63 * 5.0;
    const double large_tree = 2 * 6 * 5.0 + large / (0.46 * inter_bus * 1e3);
    QVERIFY(large_ring < large_tree);
    QVERIFY(near(allReduceUs(hw, Algorithm::Auto, large, 64, 64, LinkKind::Inter), large_ring));
    QVERIFY(allReduceAlgorithm(hw, Algorithm::Auto, large, 64, 64, LinkKind::Inter) ==
            Algorithm::Ring);
    // A mixed group is priced at the inter-node figures, 16 ranks on 2 nodes: a chain of 8. Its
    // 8 ranks a node run 8 rings (channels) through 8 NICs: min(8 × 45, 360) GB/s of bus.
    QVERIFY(near(allReduceUs(hw, Algorithm::Tree, small, 16, 2, LinkKind::Mixed),
                 2 * (7 * 1.0 + 1 * 5.0) + small / (0.46 * intra_bus * 1e3)));
    // 16 ranks on 8 nodes, 2 a node: twice one NIC's bus.
    QVERIFY(near(allReduceUs(hw, Algorithm::Ring, large, 16, 8, LinkKind::Inter),
                 2.0 * 15 / 16 * large / (2 * inter_bus * 1e3) + 2 * 15 * 5.0));
    // One node: ring whatever the size; the tree, when forced, is a chain of 8 on NVLink.
    for (double bytes : {1024.0, small, large}) {
      const double ring = 2.0 * 7 / 8 * bytes / (intra_bus * 1e3) + 2 * 7 * 1.0;
      const double chain = 2 * 7 * 1.0 + bytes / (0.46 * intra_bus * 1e3);
      QVERIFY(near(allReduceUs(hw, Algorithm::Auto, bytes, 8, 1, LinkKind::Intra), ring));
      QVERIFY(near(allReduceUs(hw, Algorithm::Tree, bytes, 8, 1, LinkKind::Intra), chain));
      QVERIFY(allReduceAlgorithm(hw, Algorithm::Auto, bytes, 8, 1, LinkKind::Intra) ==
              Algorithm::Ring);
    }
  }

  // The run's algorithm reaches the DP gradient all-reduce: dp = 16 replicas, one per node (tp =
  // 8 fills each), on a slow-latency network where the tree wins; ZeRO-1's reduce-scatter and
  // all-gather stay rings.
  void collectiveAlgorithmPricesTheGradientSync() {
    ModelSetup setup = tinySetup();
    setup.hardware.inter_node_latency_us = 50;
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 16, mesh.tp = 8, mesh.pp = 2, mesh.gpus_per_node = 8;
    mesh.order = *Mesh::parseOrder("tp-pp-dp");
    const auto derive = [&](CollectiveAlgorithm algorithm, bool zero1) {
      setup.training.collective_algorithm = algorithm;
      setup.training.zero_stage = zero1 ? 1 : 0;
      return deriveModelCosts(setup, mesh, schedule->placement);
    };
    auto ring = derive(CollectiveAlgorithm::Ring, false);
    auto tree = derive(CollectiveAlgorithm::Tree, false);
    auto automatic = derive(CollectiveAlgorithm::Auto, false);
    QVERIFY(ring && tree && automatic);
    const auto &params = ring->rank_parameters;
    const double bytes = *std::max_element(params.begin(), params.end()) * 2; // bf16 gradients
    const auto &hw = setup.hardware;
    const double ring_us = ringAllReduceUs(bytes, 16, hw.inter_node_gbps, 50);
    const double tree_us = treeAllReduceUs(bytes, 16, 16, hw.inter_node_gbps, 3, 50);
    QVERIFY(tree_us < ring_us);
    QVERIFY(
        near(ring->costs.gradient_sync_us - tree->costs.gradient_sync_us, ring_us - tree_us, 1e-6));
    QCOMPARE(automatic->costs.gradient_sync_us, tree->costs.gradient_sync_us);
    auto zero_ring = derive(CollectiveAlgorithm::Ring, true);
    auto zero_tree = derive(CollectiveAlgorithm::Tree, true);
    QVERIFY(zero_ring && zero_tree);
    QCOMPARE(zero_tree->costs.gradient_sync_us, zero_ring->costs.gradient_sync_us);
  }

  void collectiveAlgorithmInTrainingJson() {
    auto read = trainingSetupFromJson({{"collective_algorithm", "tree"}}, "/training");
    QVERIFY2(read, read ? "" : read.error().message.c_str());
    QVERIFY(read->collective_algorithm == CollectiveAlgorithm::Tree);
    QCOMPARE(toJson(*read)["collective_algorithm"], nlohmann::json("tree"));
    auto absent = trainingSetupFromJson(nlohmann::json::object(), "/training");
    QVERIFY(absent && absent->collective_algorithm == CollectiveAlgorithm::Auto);
    auto bad = trainingSetupFromJson({{"collective_algorithm", "butterfly"}}, "/training");
    QVERIFY(!bad);
    QVERIFY2(bad.error().message.find("/training/collective_algorithm") != std::string::npos &&
                 bad.error().message.find("auto") != std::string::npos,
             bad.error().message.c_str());
    auto wrong_type = trainingSetupFromJson({{"collective_algorithm", 2}}, "/training");
    QVERIFY(!wrong_type);
    QVERIFY2(wrong_type.error().message.find("/training/collective_algorithm") != std::string::npos,
             wrong_type.error().message.c_str());
  }

  // The hover's line: an op's time as its stage's parts, which must add up to it.
  void opCostLineAddsUpToTheOp() {
    std::vector<StageBreakdown> stages(2);
    stages[0].forward.gemm_us = 1410, stages[0].forward.attention_us = 180;
    stages[0].forward.memory_bound_us = 220, stages[0].forward.tp_us = 110;
    stages[1].input_grad.gemm_us = 2000, stages[1].input_grad.ep_us = 600;
    stages[1].weight_grad.gemm_us = 1000;
    Op forward{0, 3, -1, -1, OpKind::Forward};
    QCOMPARE(describeOpCost(stages, forward, 1920).value_or(""),
             std::string("F 1.92 ms = GEMM 1.41 + attention 0.18 + memory-bound 0.22 + TP comm "
                         "0.11"));
    Op weight{1, 0, -1, -1, OpKind::WeightGrad};
    QCOMPARE(describeOpCost(stages, weight, 1000).value_or(""), std::string("W 1 ms = GEMM 1"));
    Op backward{1, 0, -1, -1, OpKind::FullBackward};
    QCOMPARE(describeOpCost(stages, backward, 3600).value_or(""),
             std::string("B 3.6 ms = GEMM 3 + EP all-to-all 0.6"));
    Op input{1, 0, -1, -1, OpKind::InputGrad};
    QCOMPARE(describeOpCost(stages, input, 260).has_value(), false); // typed-in: no false sum
    // DualPipe's pair: F of stage 0 with B of stage 1, 0.52 ms of all-to-all hidden.
    Op pair{0, 1, 1, 0, OpKind::OverlappedPair};
    QCOMPARE(describeOpCost(stages, pair, 5000).value_or(""),
             std::string("FB 5 ms = GEMM 4.41 + attention 0.18 + memory-bound 0.22 + TP comm 0.11 "
                         "+ EP all-to-all 0.6 \u2212 overlap 0.52"));
    QCOMPARE(describeOpCost(stages, pair, 5600).has_value(), false); // longer than its parts
    // Under DeepEP on 100 of 125 SMs the pair's compute (all but the all-to-all, 4.92 ms) is
    // stretched 1.25x: 1.23 ms more, and the overlap is what brings the sum to the op's time.
    QCOMPARE(describeOpCost(stages, pair, 5600, 1.25).value_or(""),
             std::string("FB 5.6 ms = GEMM 4.41 + attention 0.18 + memory-bound 0.22 + TP comm "
                         "0.11 + EP all-to-all 0.6 + dispatcher SMs 1.23 \u2212 overlap 1.15"));
    QCOMPARE(describeOpCost(stages, forward, 1920, 1.25).value_or(""), // not a pair: no stretch
             std::string("F 1.92 ms = GEMM 1.41 + attention 0.18 + memory-bound 0.22 + TP comm "
                         "0.11"));
    Op outside{2, 0, -1, -1, OpKind::Forward};
    QCOMPARE(describeOpCost(stages, outside, 1920).has_value(), false);
    stages[0].forward = {};
    stages[0].forward.gemm_us = 512.25;
    QCOMPARE(describeOpCost(stages, forward, 512.25).value_or(""),
             std::string("F 512 \u00b5s = GEMM 512"));
  }

  // Every shipped GPU says where its bus efficiencies come from (nccl-tests busbw, quoted), and
  // the field survives a hardware file's round trip.
  void hardwarePresetsCiteTheirBusEfficiencies() {
    for (const auto &name : hardwarePresetNames()) {
      auto hw = loadHardwareSpec(name);
      QVERIFY2(hw, name.c_str());
      std::string source = hw->bus_efficiency_source;
      std::transform(source.begin(), source.end(), source.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      QVERIFY2(source.find("busbw") != std::string::npos, name.c_str());
      QVERIFY(hw->intra_node_bus_efficiency < 1 && hw->inter_node_bus_efficiency < 1);
      auto again = hardwareSpecFromJson(toJson(*hw), "/hardware");
      QVERIFY2(again, again ? "" : again.error().message.c_str());
      QCOMPARE(again->bus_efficiency_source, hw->bus_efficiency_source);
    }
  }

  // FP8 (Transformer Engine): the linear layers' GEMMs at the FP8 peak, attention and the head in
  // 16 bits, and the amax-and-cast kernels at HBM bandwidth: 6 bytes per element of each linear
  // layer's input (forward) and output gradient (input-grad).
  void fp8LinearGemmsAndTheirCasts() {
    ModelSetup setup = tinySetup();
    setup.hardware.peak_fp8_tflops = 200; // flat efficiency 0.5 at both peaks
    const LayerShape bf16{2, false};
    LayerShape fp8 = bf16;
    fp8.fp8_gemms = true;
    const PartWork slow = transformerLayerWork(setup.model, setup.hardware, bf16);
    const PartWork fast = transformerLayerWork(setup.model, setup.hardware, fp8);
    const double tokens = 2 * 2048, h = 1024, f = 4096, t = 2;
    const double fp8_rate = 200e6 * 0.5; // FLOPs per µs
    for (const char *name : {"qkv", "attention_out", "mlp_up", "mlp_down"}) {
      QVERIFY2(findOp(fast, name), name);
      QVERIFY2(near(findOp(fast, name)->forward_us, findOp(slow, name)->forward_us / 2), name);
      QVERIFY2(near(findOp(fast, name)->weight_grad_us, findOp(slow, name)->weight_grad_us / 2),
               name);
    }
    QVERIFY(near(findOp(fast, "qkv")->forward_us, 2 * tokens * h * 3 * h / t / fp8_rate));
    // Attention is not a TE linear layer: unchanged.
    QVERIFY(near(findOp(fast, "attention_scores")->forward_us,
                 findOp(slow, "attention_scores")->forward_us));
    QVERIFY(!findOp(slow, "fp8_quantize"));
    const auto *cast = findOp(fast, "fp8_quantize");
    QVERIFY(cast);
    QCOMPARE(cast->category, OpCategory::MemoryBound);
    // Inputs: qkv and mlp_up read h, attention_out h/t, mlp_down f/t per token; output
    // gradients: qkv 3h/t, attention_out h, mlp_up f/t, mlp_down h.
    const double bw = 1000e3 * 0.8; // bytes per µs
    QVERIFY(near(cast->forward_us, 6 * tokens * (h + h / t + h + f / t) / bw));
    QVERIFY(near(cast->input_grad_us, 6 * tokens * (3 * h / t + h + f / t + h) / bw));
    QCOMPARE(cast->weight_grad_us, 0.0);
    // The output head stays 16-bit.
    QVERIFY(near(findOp(headWork(setup.model, setup.hardware, fp8), "output_head")->forward_us,
                 findOp(headWork(setup.model, setup.hardware, bf16), "output_head")->forward_us));
  }

  // The FP8 curve, when given, replaces the bf16 one for the linear layers only.
  void fp8CurveAtTheFp8Peak() {
    HardwareSpec hw;
    hw.peak_tflops = 100, hw.peak_fp8_tflops = 200;
    hw.gemm_efficiency = {{1e9, 0.5}};
    hw.gemm_efficiency_fp8 = {{1e9, 0.4}};
    const GemmHardware bf16 = gemmHardwareOf(hw), fp8 = gemmHardwareOf(hw, true);
    QCOMPARE(bf16.peak_tflops, 100.0);
    QCOMPARE(fp8.peak_tflops, 200.0);
    QVERIFY(near(gemmEfficiency(fp8, 1e12), 0.4));
    hw.gemm_efficiency_fp8.clear(); // no FP8 curve: the bf16 one at the FP8 peak
    QVERIFY(near(gemmEfficiency(gemmHardwareOf(hw, true), 1e12), 0.5));
  }

  // Grouped expert GEMMs as Transformer Engine's GroupedLinear runs them: one GEMM per local
  // expert over 4 compute streams, so the curve is read at 4 experts' GEMMs at once and the call
  // takes local_experts / 4 such waves. Qwen3-30B-A3B, EP 8: 128 / 8 = 16 local experts, each
  // with tokens·k / 16 of the rank's routed copies.
  void groupedExpertGemmsFourAtATime() {
    auto loaded = presetSetup("qwen3-30b-a3b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    const ModelSetup &setup = *loaded;
    const ModelSpec &m = setup.model;
    const LayerShape shape{1, false, false};
    const PartWork work = moeMlpWork(m, setup.hardware, shape, 8, 1);
    const double local = m.experts / 8.0, tokens = 1.0 * m.microbatch_size * m.sequence_length;
    const double per_expert = tokens * m.experts_per_token / local;
    const double up = 2.0 * m.expert_ffn_hidden, h = m.hidden;
    const GemmHardware gemm = gemmHardwareOf(setup.hardware);
    const auto *experts_up = findOp(work, "experts_up");
    QVERIFY(experts_up);
    const double by_hand = local / 4 * gemmTimeUs(gemm, {per_expert, up, h, 4}, 2);
    QVERIFY(near(experts_up->forward_us, by_hand));
    // Slower than reading the curve at the whole call's work, as the curve rises with size.
    QVERIFY(experts_up->forward_us > gemmTimeUs(gemm, {per_expert, up, h, local}, 2) * 1.0001);
    // Four or fewer local experts run at once: one wave, as before.
    const PartWork few = moeMlpWork(m, setup.hardware, shape, 32, 1); // 4 local experts
    const double per_expert_few = tokens * m.experts_per_token / 4;
    QVERIFY(near(findOp(few, "experts_up")->forward_us,
                 gemmTimeUs(gemm, {per_expert_few, up, h, 4}, 2)));
  }

  // MoE under FP8: expert GEMMs at the FP8 rate, the router in 16 bits; a dispatch in FP8 moves
  // half the bytes of a 16-bit one.
  void fp8ExpertsAndDispatch() {
    auto loaded = presetSetup("mixtral-8x7b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.hardware.gemm_efficiency.clear();
    setup.hardware.gemm_efficiency_fp8.clear();
    setup.hardware.hbm_gbps = 0; // compute only
    const LayerShape bf16{1, false, false};
    LayerShape fp8 = bf16;
    fp8.fp8_gemms = true;
    const PartWork slow = moeMlpWork(setup.model, setup.hardware, bf16, 8, 1);
    const PartWork fast = moeMlpWork(setup.model, setup.hardware, fp8, 8, 1);
    const double ratio = setup.hardware.peak_fp8_tflops / setup.hardware.peak_tflops;
    QVERIFY(near(findOp(fast, "experts_up")->forward_us,
                 findOp(slow, "experts_up")->forward_us / ratio));
    QVERIFY(near(findOp(fast, "router")->forward_us, findOp(slow, "router")->forward_us));
    // 4096 tokens × 2 copies × 4096 elements, 7/8 of them leave the rank, at 50 GB/s, no latency.
    const double bytes16 = 4096.0 * 2 * 4096 * 2 * 7 / 8;
    QVERIFY(near(moeAllToAllUs(setup.model, bf16, 8, 50, 0), bytes16 / 50e3));
    QVERIFY(near(moeAllToAllUs(setup.model, bf16, 8, 50, 0, 1), bytes16 / 2 / 50e3));
    // The casts: every routed copy's h-wide input to the up GEMM and f-wide input to the down
    // GEMM (forward), their 2f- and h-wide output gradients (input-grad), 6 bytes each.
    setup.hardware.hbm_gbps = 1000, setup.hardware.memory_efficiency = 0.8;
    const PartWork priced = moeMlpWork(setup.model, setup.hardware, fp8, 8, 1);
    const auto *cast = findOp(priced, "experts_fp8_quantize");
    QVERIFY(cast);
    const double copies = 4096.0 * 2, h = 4096, f = 14336;
    QVERIFY(near(cast->forward_us, 6 * copies * (h + f) / 800e3));
    QVERIFY(near(cast->input_grad_us, 6 * copies * (2 * f + h) / 800e3));
    QVERIFY(!findOp(moeMlpWork(setup.model, setup.hardware, bf16, 8, 1), "experts_fp8_quantize"));
  }

  // A GPU without FP8 tensor cores refuses an FP8 plan, naming the field and the fix.
  void fp8RefusedWithoutFp8TensorCores() {
    auto loaded = presetSetup("llama3-8b", "a100-80gb");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.training.gemm_precision = GemmPrecision::Fp8;
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 1, mesh.tp = 1, mesh.pp = 2;
    auto refused = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(!refused);
    const std::string &message = refused.error().message;
    QVERIFY2(message.find("gemm_precision \"fp8\"") != std::string::npos, message.c_str());
    QVERIFY2(message.find("a100-80gb") != std::string::npos, message.c_str());
    QVERIFY2(message.find("peak_fp8_tflops") != std::string::npos, message.c_str());
    setup.training.gemm_precision = GemmPrecision::Bf16;
    QVERIFY(deriveModelCosts(setup, mesh, schedule->placement));
  }

  // Weights are cast once per step (TE's FP8 weight cache): the tail grows by 4 bytes per
  // parameter of the rank at HBM bandwidth (read 2, write the FP8 copy and its transpose). The
  // stored linear inputs are FP8.
  void fp8WeightCastOncePerStep() {
    auto loaded = presetSetup("llama3-8b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    auto schedule = generateSchedule({"1f1b", 1, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 1, mesh.tp = 1, mesh.pp = 1;
    auto bf16 = deriveModelCosts(setup, mesh, schedule->placement);
    setup.training.gemm_precision = GemmPrecision::Fp8;
    auto fp8 = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(bf16 && fp8);
    const double params = fp8->rank_parameters[0];
    QVERIFY(near(fp8->costs.gradient_sync_us - bf16->costs.gradient_sync_us,
                 memoryBoundUs(4 * params, setup.hardware)));
    QVERIFY(fp8->costs.forward_us < bf16->costs.forward_us);
    // Transformer Engine keeps each FP8 linear layer's input in FP8 for its weight gradient:
    // per layer a byte less an element of the QKV and MLP inputs (h each), the attention output
    // projection's input (heads × head_dim) and the down projection's input (ffn). Norm inputs,
    // Q, K, V, the gate and up outputs and the head's logits stay 16-bit.
    const ModelSpec &m = setup.model;
    const double output = m.heads * (m.head_dim > 0 ? m.head_dim : m.hidden / m.heads);
    const double saved = m.layers * static_cast<double>(m.sequence_length) * m.microbatch_size *
                         (2.0 * m.hidden + output + m.ffn_hidden);
    QCOMPARE(fp8->stage_activation_bytes.size(), std::size_t{1});
    QVERIFY(near(bf16->stage_activation_bytes[0] - fp8->stage_activation_bytes[0], saved));
    // Under full recomputation only the layers' 16-bit inputs are kept, FP8 or not.
    setup.training.recompute = Recompute::Full;
    auto fp8_full = deriveModelCosts(setup, mesh, schedule->placement);
    setup.training.gemm_precision = GemmPrecision::Bf16;
    auto bf16_full = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(fp8_full && bf16_full);
    QCOMPARE(fp8_full->stage_activation_bytes, bf16_full->stage_activation_bytes);
  }

  // Without FP8 parameters Transformer Engine holds, beside each 16-bit layer weight, its FP8
  // cast and the cast's transpose for the step: two bytes a weight of the layers on the rank.
  // FP8 parameters (Megatron's --fp8-param-gather) hold nothing more, and the distributed
  // optimizer all-gathers them at one byte.
  void fp8WeightCopiesUnlessFp8Parameters() {
    auto loaded = presetSetup("llama3-8b", "h100-sxm");
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    ModelSetup setup = *loaded;
    setup.training.zero_stage = 1;
    setup.training.gemm_precision = GemmPrecision::Fp8;
    auto schedule = generateSchedule({"1f1b", 2, 4, 1, 0});
    QVERIFY(schedule);
    Mesh mesh;
    mesh.dp = 8, mesh.tp = 1, mesh.pp = 2, mesh.gpus_per_node = 8;
    auto cached = deriveModelCosts(setup, mesh, schedule->placement);
    setup.training.fp8_params = true;
    auto fp8_params = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(cached && fp8_params);
    // Llama 3 8B's layer by hand: QKV 4096 x (4096 + 2 x 1024), output 4096 x 4096, MLP
    // 3 x 4096 x 14336, two RMSNorms of 4096; rank 0 holds 16 of the 32 layers.
    const double layer = 4096.0 * 6144 + 4096.0 * 4096 + 3 * 4096.0 * 14336 + 2 * 4096;
    QCOMPARE(layer, 218112000.0);
    const RankMemory with_params = rankMemory(setup, mesh, *fp8_params, 0, 0);
    setup.training.fp8_params = false;
    const RankMemory with_copies = rankMemory(setup, mesh, *cached, 0, 0);
    QVERIFY(near(with_copies.params - with_params.params, 2 * 16 * layer));
    QCOMPARE(with_params.params,
             2 * fp8_params->rank_parameters[0]); // 16-bit-sized: FP8 + transpose
    QCOMPARE(with_copies.grads, with_params.grads);
    // In bf16 there is nothing to copy.
    setup.training.gemm_precision = GemmPrecision::Bf16;
    auto bf16 = deriveModelCosts(setup, mesh, schedule->placement);
    QVERIFY(bf16);
    QCOMPARE(rankMemory(setup, mesh, *bf16, 0, 0).params, with_params.params);
    // ZeRO-1's sync: gradients reduce-scattered at 2 bytes, the updated weights gathered at 2,
    // or at 1 for the FP8 layers (the embedding, 13 % of rank 0's weights, stays 16-bit): the
    // traffic falls by a little under a quarter (the optimizer step beside it is unchanged).
    const double ratio = fp8_params->costs.gradient_sync_us / cached->costs.gradient_sync_us;
    QVERIFY2(ratio > 0.78 && ratio < 0.9, std::to_string(ratio).c_str());
  }

  // The plan file's FP8 fields: round trip, and errors that name the field.
  void fp8JsonFieldsNameTheField() {
    TrainingSetup training;
    training.gemm_precision = GemmPrecision::Fp8;
    training.fp8_dispatch = false;
    auto back = trainingSetupFromJson(toJson(training), "/training");
    QVERIFY2(back, back ? "" : back.error().message.c_str());
    QCOMPARE(back->gemm_precision, GemmPrecision::Fp8);
    QCOMPARE(back->fp8_dispatch, false);
    QVERIFY(!back->fp8_params);
    training.fp8_params = true;
    back = trainingSetupFromJson(toJson(training), "/training");
    QVERIFY2(back, back ? "" : back.error().message.c_str());
    QVERIFY(back->fp8_params);
    auto bf16_params = trainingSetupFromJson({{"fp8_params", true}}, "/training");
    QVERIFY(!bf16_params);
    QVERIFY2(bf16_params.error().message.find("/training/fp8_params") != std::string::npos &&
                 bf16_params.error().message.find("\"gemm_precision\": \"fp8\"") !=
                     std::string::npos,
             bf16_params.error().message.c_str());
    auto bad = trainingSetupFromJson({{"gemm_precision", "fp4"}}, "/training");
    QVERIFY(!bad);
    QVERIFY2(bad.error().message.find("/training/gemm_precision") != std::string::npos &&
                 bad.error().message.find("bf16 or fp8") != std::string::npos,
             bad.error().message.c_str());
    auto h100 = loadHardwareSpec("h100-sxm");
    QVERIFY(h100);
    QCOMPARE(h100->peak_fp8_tflops, 1979.0);
    QVERIFY(!h100->gemm_efficiency_fp8.empty());
    auto round = hardwareSpecFromJson(toJson(*h100), "/hardware");
    QVERIFY2(round, round ? "" : round.error().message.c_str());
    QCOMPARE(round->gemm_efficiency_fp8.size(), h100->gemm_efficiency_fp8.size());
    QCOMPARE(round->peak_fp8_tflops, 1979.0);
    auto json = toJson(*h100);
    json.erase("peak_fp8_tflops");
    auto no_peak = hardwareSpecFromJson(json, "/hardware");
    QVERIFY(!no_peak);
    QVERIFY2(no_peak.error().message.find("/hardware/gemm_efficiency_fp8") != std::string::npos,
             no_peak.error().message.c_str());
    json = toJson(*h100);
    json["gemm_efficiency_fp8"][1]["efficiency"] = 0.01; // falls with size
    auto falling = hardwareSpecFromJson(json, "/hardware");
    QVERIFY(!falling);
    QVERIFY2(falling.error().message.find("/hardware/gemm_efficiency_fp8/1/efficiency") !=
                 std::string::npos,
             falling.error().message.c_str());
    auto a100 = loadHardwareSpec("a100-80gb");
    QVERIFY(a100);
    QCOMPARE(a100->peak_fp8_tflops, 0.0);
  }

  void ladderMadeMonotone() {
    const auto curve = curveFromSquareLadder({512, 1024, 2048}, {100, 80, 200}, 400);
    QCOMPARE(static_cast<int>(curve.size()), 3);
    QCOMPARE(curve[1].efficiency, 0.25); // the dip carries the best so far
    QCOMPARE(curve[2].efficiency, 0.5);
    QVERIFY(checkGemmCurve(curve, "/c"));
  }
};

QTEST_GUILESS_MAIN(TestCostTerms)
#include "test_cost_terms.moc"
