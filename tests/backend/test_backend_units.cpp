// The backend's parts one at a time: the CPU GEMM against the naive reference, the fused
// elementwise math against finite differences, the synthetic stage, workload sizing, the
// measured-trace builder, the command line and launch detection.
#include <QtTest>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <thread>

#include <unistd.h>

#include "backend/clock_sync.h"
#include "backend/gemm_bench.h"
#include "backend/launch.h"
#include "backend/measured_trace.h"
#include "backend/options.h"
#include "backend/tcp_channel.h"
#include "backend/workload.h"
#include "engine/model/gemm_efficiency.h"
#include "engine/model/layer_costs.h"
#include "engine/model/model_setup.h"
#include "engine/plan_file.h"
#include "kernels/cpu_elementwise.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cpu_stage.h"

using namespace pipescope;
using namespace pipescope::backend;
using kernels::Transpose;

namespace {

std::vector<float> values(std::size_t count, unsigned seed) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] =
        static_cast<float>(((i + 1) * 2654435761u + std::size_t{seed} * 40503u) % 2001u) / 1000.0f -
        1.0f;
  return out;
}

bool allFinite(const std::vector<float> &data) {
  return std::all_of(data.begin(), data.end(), [](float x) { return std::isfinite(x); });
}

Result<Evaluation> evaluateRequest(Plan &plan, ModelDerivation *derivation) {
  return evaluatePlan(plan, {}, derivation);
}

// An H100's bf16 ladder of two rungs, 4096^3 at 700 and 8192^3 at 770 TFLOP/s.
GemmBenchmark h100Ladder() {
  GemmBenchmark gpu;
  gpu.device = "cuda: NVIDIA H100 80GB HBM3";
  gpu.gpu_name = "NVIDIA H100 80GB HBM3";
  gpu.rates = {gemmRate(4096, "bf16", 2 * 4096.0 * 4096 * 4096 / 700e6, 10),
               gemmRate(8192, "bf16", 2 * 8192.0 * 8192 * 8192 / 770e6, 10)};
  return gpu;
}

} // namespace

class TestBackendUnits : public QObject {
  Q_OBJECT

private slots:
  void gemmMatchesTheReference_data() {
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::addColumn<int>("variant");
    QTest::addColumn<float>("alpha");
    QTest::addColumn<float>("beta");
    const int sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {64, 64, 64}, {130, 600, 300}, {37, 45, 129}};
    for (const auto &s : sizes)
      for (int variant = 0; variant < 4; ++variant)
        QTest::addRow("%dx%dx%d op%d", s[0], s[1], s[2], variant)
            << s[0] << s[1] << s[2] << variant << (variant == 3 ? 0.5f : 1.0f)
            << (variant == 2 ? 0.75f : 0.0f);
  }

  void gemmMatchesTheReference() {
    QFETCH(int, m);
    QFETCH(int, n);
    QFETCH(int, k);
    QFETCH(int, variant);
    QFETCH(float, alpha);
    QFETCH(float, beta);
    const Transpose ta = variant & 1 ? Transpose::Yes : Transpose::No;
    const Transpose tb = variant & 2 ? Transpose::Yes : Transpose::No;
    const auto a = values(static_cast<std::size_t>(m) * k, 1);
    const auto b = values(static_cast<std::size_t>(k) * n, 2);
    auto got = values(static_cast<std::size_t>(m) * n, 3), want = got;
    const int lda = ta == Transpose::Yes ? m : k, ldb = tb == Transpose::Yes ? k : n;
    kernels::gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, got.data(), n);
    kernels::gemmReference(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, want.data(),
                           n);
    const double error = kernels::maxRelativeError(got.data(), want.data(), got.size());
    QVERIFY2(error < 1e-5, qPrintable(QString::number(error)));
  }

  void gemmHonoursLeadingDimensions() {
    // A 3×2 block inside a 5-wide matrix times a 2×4 block inside a 6-wide one.
    const auto a = values(std::size_t{3} * 5, 4), b = values(std::size_t{2} * 6, 5);
    std::vector<float> got(std::size_t{3} * 7, 9.0f), want = got;
    kernels::gemm(Transpose::No, Transpose::No, 3, 4, 2, 1.0f, a.data() + 1, 5, b.data() + 2, 6,
                  0.0f, got.data(), 7);
    kernels::gemmReference(Transpose::No, Transpose::No, 3, 4, 2, 1.0f, a.data() + 1, 5,
                           b.data() + 2, 6, 0.0f, want.data(), 7);
    QVERIFY(kernels::maxRelativeError(got.data(), want.data(), got.size()) < 1e-6);
    QCOMPARE(got[6], 9.0f); // columns past n are untouched
  }

  void maxRelativeErrorSeesNaN() {
    const float x[] = {1.0f, NAN}, y[] = {1.0f, 1.0f};
    QVERIFY(std::isinf(kernels::maxRelativeError(x, y, 2)));
  }

  void activationDerivativesMatchFiniteDifferences() {
    for (float x : {-3.0f, -1.0f, -0.1f, 0.0f, 0.3f, 2.0f}) {
      const float h = 1e-3f;
      const float numeric = (kernels::gelu(x + h) - kernels::gelu(x - h)) / (2 * h);
      QVERIFY2(std::abs(numeric - kernels::geluDerivative(x)) < 1e-3f,
               qPrintable(QString::number(x)));
    }
    // SwiGLU: pre = [gate | up], one row, two columns.
    const float pre[] = {0.7f, -1.2f, 0.4f, 2.0f}, bias[] = {0.1f, 0.0f, -0.2f, 0.3f};
    const float dout[] = {1.0f, 1.0f};
    float dpre[4];
    kernels::biasSwigluBackward(dout, pre, bias, dpre, 1, 2);
    for (int i = 0; i < 4; ++i) {
      float plus[4], minus[4], out_plus[2], out_minus[2];
      std::copy(pre, pre + 4, plus);
      std::copy(pre, pre + 4, minus);
      plus[i] += 1e-3f;
      minus[i] -= 1e-3f;
      kernels::biasSwigluForward(plus, bias, out_plus, 1, 2);
      kernels::biasSwigluForward(minus, bias, out_minus, 1, 2);
      const float numeric = (out_plus[0] + out_plus[1] - out_minus[0] - out_minus[1]) / 2e-3f;
      QVERIFY2(std::abs(numeric - dpre[i]) < 2e-3f, qPrintable(QString::number(i)));
    }
  }

  // The attention softmax: rows of probabilities, and a backward that matches finite differences
  // of L = Σ g·softmax(x) (the upstream gradient g held fixed).
  void softmaxAndItsBackwardMatchFiniteDifferences() {
    const float scores[] = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f, 3.0f, -2.0f, 1.0f};
    const float upstream[] = {0.3f, -0.7f, 1.1f, 0.2f, -0.4f, 0.9f, 0.0f, 0.5f};
    float probs[8];
    std::copy(scores, scores + 8, probs);
    kernels::softmaxRows(probs, 2, 4);
    for (int r = 0; r < 2; ++r) {
      const float sum = probs[4 * r] + probs[4 * r + 1] + probs[4 * r + 2] + probs[4 * r + 3];
      QVERIFY(std::abs(sum - 1.0f) < 1e-6f);
    }
    QVERIFY(probs[2] > probs[0] && probs[0] > probs[3] && probs[3] > probs[1]);
    float grad[8];
    std::copy(upstream, upstream + 8, grad);
    kernels::softmaxRowsBackward(probs, grad, 2, 4);
    const auto loss = [&](const float *x) {
      float p[8];
      std::copy(x, x + 8, p);
      kernels::softmaxRows(p, 2, 4);
      double l = 0;
      for (int i = 0; i < 8; ++i)
        l += static_cast<double>(upstream[i]) * p[i];
      return l;
    };
    for (int i = 0; i < 8; ++i) {
      float plus[8], minus[8];
      std::copy(scores, scores + 8, plus);
      std::copy(scores, scores + 8, minus);
      plus[i] += 1e-3f;
      minus[i] -= 1e-3f;
      const double numeric = (loss(plus) - loss(minus)) / 2e-3;
      QVERIFY2(std::abs(numeric - grad[i]) < 1e-3, qPrintable(QString::number(i)));
    }
  }

  void layerFlopsFollowNarayanan() {
    // A GPT layer (MHA, GELU, f = 4h): forward = 24·b·s·h² + 4·b·s²·h (Narayanan et al. 2021).
    kernels::LayerShape l;
    l.batch = 2, l.sequence = 128, l.heads = 8, l.kv_heads = 8, l.head_dim = 32;
    l.hidden = 256, l.ffn = 1024, l.gated = false;
    const double b = 2, s = 128, h = 256;
    QCOMPARE(l.forwardFlops(), 24 * b * s * h * h + 4 * b * s * s * h);
    QCOMPARE(l.inputGradFlops() + l.weightGradFlops(), 2 * l.forwardFlops());
  }

  void cpuStageSplitsTheBackward() {
    kernels::StageWork work;
    work.layers = 2;
    work.layer.batch = 2, work.layer.sequence = 16, work.layer.heads = 4, work.layer.kv_heads = 2;
    work.layer.head_dim = 8, work.layer.hidden = 32, work.layer.ffn = 48, work.layer.gated = true;
    work.head_vocab = 40;
    kernels::CpuStage stage(work, 3);
    std::vector<float> input = values(stage.activationElements(), 6), output(input.size());
    std::vector<float> input_grad(input.size());
    QVERIFY(stage.forward(input.data(), output.data(), {}));
    QVERIFY(allFinite(output));
    QVERIFY(output != input);
    const auto grads_before = stage.weightGradients();
    QVERIFY(stage.inputGrad(nullptr, input_grad.data(), {}));
    QVERIFY(allFinite(input_grad));
    QVERIFY(stage.weightGradients() == grads_before); // I leaves the weight gradients alone
    stage.weightGrad();
    QVERIFY(stage.weightGradients() != grads_before); // W accumulates them
    QVERIFY(allFinite(stage.weightGradients()));
    // A TP all-reduce is called twice in the forward and twice in the input-grad per layer.
    int calls = 0;
    const kernels::AllReduceSum count = [&calls](float *, std::size_t) { return ++calls, true; };
    QVERIFY(stage.forward(input.data(), output.data(), count));
    QVERIFY(stage.inputGrad(output.data(), input_grad.data(), count));
    QCOMPARE(calls, 4 * work.layers);
    const kernels::AllReduceSum failing = [](float *, std::size_t) { return false; };
    QVERIFY(!stage.forward(input.data(), output.data(), failing));
  }

  void unitGemmCountsFollowThePlannedTimes() {
    Plan plan;
    plan.request.name = "zb-h1";
    plan.request.pp = 2;
    plan.request.microbatches = 4;
    plan.mesh.pp = 2;
    plan.costs.forward_us = 100, plan.costs.backward_us = 300, plan.costs.weight_us = 100;
    ModelDerivation derivation;
    auto evaluation = evaluateRequest(plan, &derivation);
    QVERIFY(evaluation);
    DeviceSpeed speed;
    speed.unit = 32, speed.unit_gemm_us = 10;
    auto workload = planWorkload(plan, *evaluation, derivation, DeviceKind::Cpu, 2.0, speed);
    QVERIFY(workload);
    QCOMPARE(workload->stages.size(), std::size_t(2));
    for (const auto &stage : workload->stages) {
      QCOMPARE(stage.unit, 32);
      QCOMPARE(stage.unit_forward, 20);    // 100 µs × 2 / 10 µs
      QCOMPARE(stage.unit_input_grad, 40); // (300 - 100) × 2 / 10
      QCOMPARE(stage.unit_weight_grad, 20);
    }
    // Automatic: the largest op (B = 300 µs) becomes the cpu target.
    auto automatic = planWorkload(plan, *evaluation, derivation, DeviceKind::Cpu, 0, speed);
    QVERIFY(automatic);
    QCOMPARE(automatic->size_scale, automaticTargetMicroseconds(DeviceKind::Cpu) / 300.0);
    auto too_big = planWorkload(plan, *evaluation, derivation, DeviceKind::Cpu, 1e6, speed);
    QVERIFY(!too_big);
  }

  // On GPUs the time factor of a model plan comes from the cost model at the shapes the stages
  // run: 1 when they run the plan's own shapes on a device that times the startup GEMM as the
  // plan's hardware prices it; above 1 on gpu-shared, whose stages share the memory bandwidth;
  // and at half size above the FLOP ratio, since memory-bound work shrinks slower than FLOPs.
  void gpuTimeFactorComesFromTheCostModel() {
    Plan plan;
    plan.request.name = "1f1b";
    plan.request.pp = 4;
    plan.request.microbatches = 8;
    plan.mesh.pp = 4;
    ModelSetup setup;
    auto model = loadModelSpec("llama3-8b");
    auto hardware = loadHardwareSpec("h100-sxm");
    QVERIFY(model && hardware);
    setup.model = *model;
    setup.model.attention = "materialized";
    setup.hardware = *hardware;
    plan.model = setup;
    ModelDerivation derivation;
    auto evaluation = evaluateRequest(plan, &derivation);
    QVERIFY2(evaluation, evaluation ? "" : evaluation.error().message.c_str());
    DeviceSpeed speed;
    speed.unit = 2048;
    speed.unit_gemm_us = gemmTimeUs(gemmHardwareOf(*hardware), {2048, 2048, 2048, 1}, 2.0);
    speed.flops_per_us = 2.0 * 2048 * 2048 * 2048 / speed.unit_gemm_us;
    auto whole = planWorkload(plan, *evaluation, derivation, DeviceKind::Cuda, 1.0, speed);
    QVERIFY(whole);
    QVERIFY2(std::abs(whole->expected_time_factor - 1.0) < 1e-9,
             qPrintable(QString::number(whole->expected_time_factor, 'g', 12)));
    QVERIFY(whole->time_factor_source.find("cost model") != std::string::npos);
    auto shared = planWorkload(plan, *evaluation, derivation, DeviceKind::SharedGpu, 1.0, speed);
    QVERIFY(shared && shared->expected_time_factor > 1.05);
    auto half = planWorkload(plan, *evaluation, derivation, DeviceKind::Cuda, 0.5, speed);
    QVERIFY(half);
    double full_flops = 0, half_flops = 0;
    for (std::size_t v = 0; v < whole->stages.size(); ++v) {
      full_flops += whole->stages[v].forwardFlops() + whole->stages[v].inputGradFlops() +
                    whole->stages[v].weightGradFlops();
      half_flops += half->stages[v].forwardFlops() + half->stages[v].inputGradFlops() +
                    half->stages[v].weightGradFlops();
    }
    QVERIFY2(half->expected_time_factor > half_flops / full_flops &&
                 half->expected_time_factor < 1.0,
             qPrintable(QString::number(half->expected_time_factor) + " vs FLOPs " +
                        QString::number(half_flops / full_flops)));
    // The cpu device keeps the FLOP-based factor (its speed is a timed forward).
    auto cpu = planWorkload(plan, *evaluation, derivation, DeviceKind::Cpu, 0.05, speed);
    QVERIFY(cpu && cpu->time_factor_source.find("FLOPs") != std::string::npos);
  }

  void modelScaleAimsAtTheTarget() {
    Plan plan;
    plan.request.pp = 2;
    plan.request.microbatches = 4;
    plan.mesh.pp = 2;
    plan.mesh.tp = 2;
    ModelSetup setup;
    setup.model.layers = 8;
    setup.model.hidden = 1024;
    setup.model.heads = 8;
    setup.model.kv_heads = 8;
    setup.model.ffn_hidden = 4096;
    setup.model.sequence_length = 1024;
    setup.model.vocab = 32000;
    plan.model = setup;
    ModelDerivation derivation;
    auto evaluation = evaluateRequest(plan, &derivation);
    QVERIFY2(evaluation, evaluation ? "" : evaluation.error().message.c_str());
    DeviceSpeed speed;
    speed.flops_per_us = 5000; // 5 GFLOP/s
    auto workload = planWorkload(plan, *evaluation, derivation, DeviceKind::Cpu, 0, speed);
    QVERIFY(workload);
    QVERIFY(workload->size_scale < 1);
    double largest = 0;
    for (const auto &stage : workload->stages)
      largest = std::max({largest, stage.forwardFlops(), stage.inputGradFlops()});
    const double us = largest / speed.flops_per_us;
    const double target = automaticTargetMicroseconds(DeviceKind::Cpu);
    QVERIFY2(us <= target && us > 0.7 * target, qPrintable(QString::number(us)));
    // Layers per stage from the model, the head on the last stage, heads split by tp, heads no
    // narrower than 16.
    QCOMPARE(workload->stages[0].layers + workload->stages[1].layers, 8);
    QCOMPARE(workload->stages[0].head_vocab, 0);
    QVERIFY(workload->stages[1].head_vocab > 0);
    const auto &layer = workload->stages[0].layer;
    QCOMPARE(layer.heads * 2 * layer.head_dim, layer.hidden);
    QVERIFY(layer.head_dim >= 16);
    QCOMPARE(layer.kv_heads, layer.heads); // multi-head attention stays so
  }

  void recordsRoundTrip() {
    RankStepRecord record;
    record.pipeline_rank = 2;
    record.coords = {1, 2, 3};
    record.timings.ops = {{1, 2}, {3, 5}};
    record.timings.sends = {{7, 2.5}};
    record.timings.arrivals = {{4, 0.5}, {9, 4.5}};
    record.timings.gradient_sync_us = 12;
    auto decoded = decodeRecord(encodeRecord(record));
    QVERIFY(decoded);
    QCOMPARE(decoded->coords, record.coords);
    QCOMPARE(decoded->timings.ops.size(), std::size_t(2));
    QCOMPARE(decoded->timings.ops[1].end_us, 5.0);
    QCOMPARE(decoded->timings.arrivals, record.timings.arrivals);
    QCOMPARE(decoded->timings.gradient_sync_us, 12.0);
    auto cut = encodeRecord(record);
    cut.resize(cut.size() - 3);
    QVERIFY(!decodeRecord(cut));
    QCOMPARE(decodeText(encodeText("gpu: H100")), std::string("gpu: H100"));
  }

  void traceBuilderRecordsEveryOp() {
    Plan plan;
    plan.request.name = "dualpipe";
    plan.request.pp = 2;
    plan.request.microbatches = 4;
    plan.mesh.pp = 2;
    auto evaluation = evaluatePlan(plan);
    QVERIFY(evaluation);
    const Schedule &schedule = evaluation->schedule;
    MeasuredTraceBuilder builder(plan, schedule, evaluation->program, {"a", "b"}, 1024);
    std::vector<RankStepRecord> records;
    std::size_t pairs = 0, ops = 0;
    for (int r = 0; r < 2; ++r) {
      RankStepRecord record;
      record.pipeline_rank = r;
      record.coords = {0, r, 0};
      double t = 1000 + r; // an arbitrary origin, as aligned clocks give
      for (const Op &op : schedule.ranks[static_cast<std::size_t>(r)]) {
        record.timings.ops.push_back({t, t + 10});
        t += 20; // busy half the time
        pairs += op.kind == OpKind::OverlappedPair;
        ++ops;
      }
      records.push_back(record);
    }
    QVERIFY(builder.addStep(0, records, 3.0));
    const Trace &trace = builder.trace();
    QCOMPARE(trace.ops.size(), ops + pairs);
    QCOMPARE(trace.source, std::string("measured"));
    QCOMPARE(trace.clock_error_us, 3.0);
    QCOMPARE(trace.ops.front().start_us, 0.0); // the first op of the first step is time 0
    QVERIFY(trace.bubble_fraction > 0.45 && trace.bubble_fraction < 0.55);
    const StepEvent step = builder.stepEvent(builder.steps().front());
    QCOMPARE(step.ops.size(), trace.ops.size());
    // The live step line reads back through the protocol's reader, overlapped pairs included.
    const auto read = readRunEventLine(runEventLine(step));
    QVERIFY2(read, read ? "" : read.error().message.c_str());
    QCOMPARE(std::get<StepEvent>(*read).ops.size(), trace.ops.size());
    QCOMPARE(std::get<StepEvent>(*read).metrics->bubble_fraction,
             builder.steps().front().bubble_fraction);
    auto refit = builder.calibrated(plan.costs);
    QVERIFY(refit); // overlapped pairs included
    QVERIFY(refit->simulation.makespan_us > 0);
    records.pop_back();
    QVERIFY(!builder.addStep(1, records, 0)); // a rank's timings missing
  }

  // --gemm-bench sets the measured peak beside the datasheet of the matching hardware preset; a
  // GPU whose peak differs from every preset's (PCIe, NVL parts) gets none rather than a wrong one.
  void gpuNamesMatchTheirDatasheetPresets() {
    QCOMPARE(hardwarePresetForGpu("NVIDIA H100 80GB HBM3"), std::optional<std::string>("h100-sxm"));
    QCOMPARE(hardwarePresetForGpu("NVIDIA H200"), std::optional<std::string>("h200"));
    QCOMPARE(hardwarePresetForGpu("NVIDIA A100-SXM4-80GB"),
             std::optional<std::string>("a100-80gb"));
    QCOMPARE(hardwarePresetForGpu("NVIDIA H100 PCIe"), std::optional<std::string>());
    QCOMPARE(hardwarePresetForGpu("NVIDIA H100 NVL"), std::optional<std::string>());
    QCOMPARE(hardwarePresetForGpu("NVIDIA A100-SXM4-40GB"), std::optional<std::string>());
    QCOMPARE(hardwarePresetForGpu("NVIDIA GeForce RTX 4090"), std::optional<std::string>());
    // Every name the matcher returns is a preset that loads.
    for (const char *name : {"h100-sxm", "h200", "a100-80gb"})
      QVERIFY2(loadHardwareSpec(name), name);
  }

  // --gemm-bench --save-hardware: the ladder becomes the hardware file's GEMM curve, efficiency
  // over the datasheet peak, never falling with size (a dip is carried over by the best rate).
  void ladderBecomesAHardwareCurve() {
    GemmBenchmark gpu;
    gpu.device = "cuda: NVIDIA H100 80GB HBM3";
    gpu.gpu_name = "NVIDIA H100 80GB HBM3";
    gpu.sm_count = 114; // the GPU's own count wins over the base preset's 132
    gpu.rates = {gemmRate(1024, "bf16", 2 * 1024.0 * 1024 * 1024 / 300e6, 10),
                 gemmRate(2048, "bf16", 2 * 2048.0 * 2048 * 2048 / 600e6, 10),
                 gemmRate(4096, "bf16", 2 * 4096.0 * 4096 * 4096 / 550e6, 10)}; // a dip
    auto base = loadHardwareSpec("h100-sxm");
    QVERIFY(base);
    auto saved = hardwareFromBenchmark(gpu, *base);
    QVERIFY2(saved, saved ? "" : saved.error().message.c_str());
    QCOMPARE(saved->peak_tflops, 989.0);
    QCOMPARE(static_cast<int>(saved->gemm_efficiency.size()), 3);
    QVERIFY(std::abs(saved->gemm_efficiency[0].efficiency - 300.0 / 989) < 1e-9);
    QVERIFY(std::abs(saved->gemm_efficiency[1].efficiency - 600.0 / 989) < 1e-9);
    QVERIFY(std::abs(saved->gemm_efficiency[2].efficiency - 600.0 / 989) < 1e-9); // carried
    QCOMPARE(saved->gemm_efficiency[2].flops, 2 * 4096.0 * 4096 * 4096);
    QCOMPARE(saved->intra_node_gbps, base->intra_node_gbps); // links from the base
    QCOMPARE(saved->sm_count, 114);
    // The hardware_saved event sets the saved curve beside the preset's in-training level at the
    // largest rung: 600 of 989 TFLOP/s there against the preset's curve at 2·4096³ FLOPs.
    const nlohmann::json compared = savedAgainstBaseFields(gpu, *saved, *base);
    QCOMPARE(compared.at("largest_gemm_flops").get<double>(), 2 * 4096.0 * 4096 * 4096);
    QVERIFY(std::abs(compared.at("saved_efficiency").get<double>() - 600.0 / 989) < 1e-9);
    const double preset = gemmEfficiency(gemmHardwareOf(*base), 2 * 4096.0 * 4096 * 4096);
    QVERIFY(preset > 0.3 && preset < 600.0 / 989);
    QVERIFY(std::abs(compared.at("base_efficiency").get<double>() - preset) < 1e-12);
    const std::string note = compared.at("note").get<std::string>();
    QVERIFY2(note.find("'h100-sxm'") != std::string::npos, note.c_str());
    const std::string faster =
        std::to_string(static_cast<int>(std::lround(100 * (600.0 / 989 / preset - 1)))) +
        " % faster";
    QVERIFY2(note.find(faster) != std::string::npos, note.c_str());
    // The file it writes reads back as the same curve.
    auto reread = hardwareSpecFromJson(toJson(*saved), "");
    QVERIFY2(reread, reread ? "" : reread.error().message.c_str());
    QCOMPARE(reread->gemm_efficiency.size(), saved->gemm_efficiency.size());
    QCOMPARE(reread->sm_count, 114);
    // On the cpu device (fp32) the peak becomes the best measured rate.
    GemmBenchmark cpu;
    cpu.device = "cpu";
    cpu.rates = {gemmRate(256, "fp32", 2 * 256.0 * 256 * 256 / 0.01e6, 1),
                 gemmRate(512, "fp32", 2 * 512.0 * 512 * 512 / 0.02e6, 1)};
    auto cpu_hardware = hardwareFromBenchmark(cpu, *base);
    QVERIFY(cpu_hardware);
    QVERIFY(std::abs(cpu_hardware->peak_tflops - 0.02) < 1e-12);
    QVERIFY(std::abs(cpu_hardware->gemm_efficiency.back().efficiency - 1) < 1e-12);
    // ... has nothing to set beside a GPU preset ...
    QVERIFY(savedAgainstBaseFields(cpu, *cpu_hardware, *base).empty());
    // ... and has no FP8 to price, whatever the base GPU had.
    QCOMPARE(cpu_hardware->peak_fp8_tflops, 0.0);
    QVERIFY(cpu_hardware->gemm_efficiency_fp8.empty());
    // --save-hardware needs the benchmark; --hardware needs --save-hardware.
    const char *lone_save[] = {"x", "--save-hardware", "h.json"};
    auto refused = parseOptions(3, const_cast<char **>(lone_save));
    QVERIFY(!refused);
    QVERIFY(refused.error().message.find("--gemm-bench") != std::string::npos);
    const char *lone_base[] = {"x", "--gemm-bench", "--hardware", "h100-sxm"};
    QVERIFY(!parseOptions(4, const_cast<char **>(lone_base)));
  }

  // The GEMMs timed beside a resident stand-in collective: the median slowdown becomes the
  // saved file's collective_gemm_slowdown (held within [0, 1]), each sample a gemm_contention
  // event; a GPU without samples keeps the base's figure, the cpu device's file prices none.
  void contentionBecomesTheSavedSlowdown() {
    GemmBenchmark gpu = h100Ladder();
    QVERIFY(!gpu.collective_gemm_slowdown());
    // Slowdowns 0.10, 0.30, 0.20 and 0.25: the median is 0.225.
    gpu.contention = {
        {4096, 2, 200, 220}, {4096, 8, 200, 260}, {8192, 2, 1400, 1680}, {8192, 8, 1400, 1750}};
    QCOMPARE(gpu.contention[1].slowdown(), 0.3);
    QVERIFY(std::abs(*gpu.collective_gemm_slowdown() - 0.225) < 1e-12);
    auto base = loadHardwareSpec("h100-sxm");
    QVERIFY(base);
    base->collective_gemm_slowdown = 0.5;
    auto saved = hardwareFromBenchmark(gpu, *base);
    QVERIFY2(saved, saved ? "" : saved.error().message.c_str());
    QVERIFY(std::abs(saved->collective_gemm_slowdown - 0.225) < 1e-12);
    QVERIFY(saved->notes.find("collective_gemm_slowdown 0.225") != std::string::npos);
    const auto events = gemmBenchmarkEvents(gpu);
    int samples = 0;
    for (const auto &event : events)
      if (event["event"] == "gemm_contention") {
        ++samples;
        QVERIFY(event["slowdown"].get<double>() > 0.09);
      }
    QCOMPARE(samples, 4);
    QVERIFY(std::abs(events.back()["collective_gemm_slowdown"].get<double>() - 0.225) < 1e-12);
    // A GEMM faster beside the CTAs than alone (noise) counts as no slowdown; none above 1.
    gpu.contention = {{4096, 2, 200, 190}};
    QCOMPARE(*gpu.collective_gemm_slowdown(), 0.0);
    gpu.contention = {{4096, 2, 200, 900}};
    QCOMPARE(*gpu.collective_gemm_slowdown(), 1.0);
    // No samples: the base's figure stays.
    gpu.contention.clear();
    auto kept = hardwareFromBenchmark(gpu, *base);
    QVERIFY(kept);
    QCOMPARE(kept->collective_gemm_slowdown, 0.5);
    QVERIFY(!gemmBenchmarkEvents(gpu).back().contains("collective_gemm_slowdown"));
    // The cpu device: no collective kernel shares its cores.
    GemmBenchmark cpu;
    cpu.device = "cpu";
    cpu.rates = {gemmRate(256, "fp32", 2 * 256.0 * 256 * 256 / 50e6, 10)};
    auto cpu_hardware = hardwareFromBenchmark(cpu, *base);
    QVERIFY2(cpu_hardware, cpu_hardware ? "" : cpu_hardware.error().message.c_str());
    QCOMPARE(cpu_hardware->collective_gemm_slowdown, 0.0);
  }

  // --sustain: the held GEMM's settled rate (the median window of the second half) over the
  // ladder's rate at that size scales the saved curve; a held rate above the ladder's does not
  // raise it, and the cpu device holds nothing.
  void heldGemmScalesTheSavedCurve() {
    SustainedGemm held;
    held.size = 8192;
    held.seconds = 30;
    held.ladder_tflops = 770;
    held.window_tflops = {580, 700, 690, 720, 670, 668, 672, 500}; // second half: 670 668 672 500
    QCOMPARE(held.tflops(), 670.0);
    QVERIFY(std::abs(held.fraction_of_ladder() - 670.0 / 770) < 1e-12);
    GemmBenchmark gpu = h100Ladder();
    gpu.sustained = held;
    auto base = loadHardwareSpec("h100-sxm");
    QVERIFY(base);
    auto saved = hardwareFromBenchmark(gpu, *base);
    QVERIFY2(saved, saved ? "" : saved.error().message.c_str());
    QVERIFY(std::abs(saved->gemm_efficiency[0].efficiency - 700.0 * 670 / 770 / 989) < 1e-9);
    QVERIFY(std::abs(saved->gemm_efficiency[1].efficiency - 670.0 / 989) < 1e-9);
    QVERIFY(saved->gemm_efficiency_source.find("held for 30 s") != std::string::npos);
    const auto events = gemmBenchmarkEvents(gpu);
    QCOMPARE(events.back()["sustained_tflops"].get<double>(), 670.0);
    QCOMPARE(events.back()["sustained_window_tflops"].size(), std::size_t{8});
    // Held faster than the ladder (a cold ladder): the curve stays the ladder's.
    gpu.sustained->window_tflops = {800, 800};
    QCOMPARE(gpu.sustained->fraction_of_ladder(), 1.0);
    auto unscaled = hardwareFromBenchmark(gpu, *base);
    QVERIFY(unscaled);
    QVERIFY(std::abs(unscaled->gemm_efficiency[1].efficiency - 770.0 / 989) < 1e-9);
    // Nothing held: the ladder as measured, and no held fields in the summary.
    gpu.sustained.reset();
    QVERIFY(!gemmBenchmarkEvents(gpu).back().contains("sustained_tflops"));
    // --sustain takes seconds (0 skips) and belongs to --gemm-bench.
    const char *with_bench[] = {"x", "--gemm-bench", "--sustain", "0"};
    auto options = parseOptions(4, const_cast<char **>(with_bench));
    QVERIFY(options);
    QCOMPARE(options->sustain_s, 0.0);
    const char *alone[] = {"x", "--sustain", "10", "--plan", "p.json"};
    auto refused = parseOptions(5, const_cast<char **>(alone));
    QVERIFY(!refused);
    QVERIFY(refused.error().message.find("--gemm-bench") != std::string::npos);
    const char *negative[] = {"x", "--gemm-bench", "--sustain", "-1"};
    QVERIFY(!parseOptions(4, const_cast<char **>(negative)));
  }

  // A GPU with FP8 tensor cores runs an FP8 ladder too: it becomes the saved file's FP8 curve,
  // efficiency over the FP8 peak, scaled by the same held fraction as the bf16 curve (one power
  // limit), with its own events; a base without an FP8 peak cannot read it and says so.
  void fp8LadderBecomesTheFp8Curve() {
    GemmBenchmark gpu = h100Ladder();
    gpu.fp8_rates = {gemmRate(4096, "fp8-e4m3", 2 * 4096.0 * 4096 * 4096 / 1200e6, 10),
                     gemmRate(8192, "fp8-e4m3", 2 * 8192.0 * 8192 * 8192 / 1400e6, 10)};
    SustainedGemm held;
    held.size = 8192;
    held.seconds = 20;
    held.ladder_tflops = 770;
    held.window_tflops = {700, 700}; // held at 700 of the ladder's 770
    gpu.sustained = held;
    auto base = loadHardwareSpec("h100-sxm");
    QVERIFY(base);
    QCOMPARE(base->peak_fp8_tflops, 1979.0);
    auto saved = hardwareFromBenchmark(gpu, *base);
    QVERIFY2(saved, saved ? "" : saved.error().message.c_str());
    QCOMPARE(saved->peak_fp8_tflops, 1979.0);
    QCOMPARE(saved->gemm_efficiency_fp8.size(), std::size_t{2});
    const double scale = 700.0 / 770;
    QVERIFY(std::abs(saved->gemm_efficiency_fp8[0].efficiency - 1200 * scale / 1979) < 1e-9);
    QVERIFY(std::abs(saved->gemm_efficiency_fp8[1].efficiency - 1400 * scale / 1979) < 1e-9);
    QCOMPARE(saved->gemm_efficiency_fp8[1].flops, 2 * 8192.0 * 8192 * 8192);
    QVERIFY(saved->gemm_efficiency_fp8_source.find("FP8 E4M3") != std::string::npos);
    // An FP8 plan on the saved file prices its GEMMs on this curve, not the preset's.
    const GemmHardware fp8 = gemmHardwareOf(*saved, true);
    QVERIFY(std::abs(gemmEfficiency(fp8, 2 * 8192.0 * 8192 * 8192) - 1400 * scale / 1979) < 1e-9);
    // The FP8 rungs are events of their own, and the summary sets them beside the FP8 datasheet.
    gpu.datasheet_preset = "h100-sxm";
    gpu.datasheet_tflops = 989;
    gpu.datasheet_fp8_tflops = 1979;
    const auto events = gemmBenchmarkEvents(gpu);
    int fp8_events = 0, bf16_events = 0;
    for (const auto &event : events) {
      if (event["event"] == "gemm_fp8") {
        ++fp8_events;
        QCOMPARE(event["dtype"].get<std::string>(), std::string("fp8-e4m3"));
      }
      if (event["event"] == "gemm") ++bf16_events;
    }
    QCOMPARE(fp8_events, 2);
    QCOMPARE(bf16_events, 2);
    QCOMPARE(events.back()["best_fp8_tflops"].get<double>(), 1400.0);
    QVERIFY(std::abs(events.back()["fp8_fraction_of_datasheet"].get<double>() - 1400.0 / 1979) <
            1e-12);
    // A base without an FP8 peak (an A100 file) cannot read an FP8 ladder.
    auto a100 = loadHardwareSpec("a100-80gb");
    QVERIFY(a100);
    auto refused = hardwareFromBenchmark(gpu, *a100);
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("peak_fp8_tflops") != std::string::npos,
             refused.error().message.c_str());
    // No FP8 ladder (a GPU without FP8 tensor cores): no FP8 peak or curve, whatever the base
    // had, so an FP8 plan on the file is refused rather than priced on another GPU's FP8.
    gpu.fp8_rates.clear();
    auto bf16_only = hardwareFromBenchmark(gpu, *base);
    QVERIFY2(bf16_only, bf16_only ? "" : bf16_only.error().message.c_str());
    QCOMPARE(bf16_only->peak_fp8_tflops, 0.0);
    QVERIFY(bf16_only->gemm_efficiency_fp8.empty());
    QVERIFY(!gemmBenchmarkEvents(gpu).back().contains("best_fp8_tflops"));
  }

  void optionsParse() {
    const char *good[] = {
        "pipescope-backend", "--plan", "p.json",  "--trace", "t.json",       "--device", "cuda",
        "--warmup",          "2",      "--steps", "5",       "--size-scale", "0.25"};
    auto options = parseOptions(13, const_cast<char **>(good));
    QVERIFY(options);
    QCOMPARE(options->device, DeviceKind::Cuda);
    QCOMPARE(options->measured_steps, 5);
    QCOMPARE(options->size_scale, 0.25);
    const char *bad_device[] = {"x", "--plan", "p", "--trace", "t", "--device", "tpu"};
    auto refused = parseOptions(7, const_cast<char **>(bad_device));
    QVERIFY(!refused);
    QVERIFY(refused.error().message.find("cpu, cuda or gpu-shared") != std::string::npos);
    const char *no_trace[] = {"x", "--plan", "p"};
    QVERIFY(!parseOptions(3, const_cast<char **>(no_trace)));
    const char *fraction[] = {"x", "--plan", "p", "--trace", "t", "--steps", "1.5"};
    QVERIFY(!parseOptions(7, const_cast<char **>(fraction)));
    // The GEMM benchmark needs no plan.
    const char *bench[] = {"x", "--gemm-bench", "--device", "gpu-shared"};
    auto gemm = parseOptions(4, const_cast<char **>(bench));
    QVERIFY(gemm && gemm->gemm_bench);
    QCOMPARE(gemm->device, DeviceKind::SharedGpu);
  }

  // The torchrun path's control channel: a TCP star on localhost, three ranks as threads.
  void tcpChannelCoordinatesRanks() {
    const int port = 20000 + static_cast<int>(getpid() % 20000);
    constexpr int kRanks = 3;
    std::vector<std::string> problems(kRanks);
    std::vector<std::vector<std::vector<double>>> gathered(kRanks);
    std::vector<std::string> received(kRanks);
    std::vector<double> clock_errors(kRanks, -1);
    std::vector<std::thread> threads;
    threads.reserve(kRanks);
    for (int rank = 0; rank < kRanks; ++rank)
      threads.emplace_back([&, rank] {
        auto channel = connectTcpChannel(rank, kRanks, "127.0.0.1", port, 20);
        if (!channel) {
          problems[rank] = channel.error().message;
          return;
        }
        ControlChannel &c = **channel;
        std::vector<char> bytes;
        if (rank == 0) bytes = {'n', 'c', 'c', 'l'};
        auto first = c.firstFailure(rank != 2, 20);
        auto all = c.gather({double(rank), double(rank * 10)}, 20);
        auto domains = findClockDomains(c, 20);
        if (!domains) {
          problems[rank] = domains.error().message;
          return;
        }
        // One host: every rank shares rank 0's clock. Ping-pong anyway, as across hosts.
        ClockDomains separate;
        separate.this_rank_shares_root_clock = false;
        separate.shares_root_clock.assign(kRanks, 0);
        if (!domains->this_rank_shares_root_clock) {
          problems[rank] = "a thread of this process does not share rank 0's clock";
          return;
        }
        auto alignment = alignClocks(c, separate, 20, 3);
        if (!first || *first != 2 || !c.barrier(20) || !c.broadcast(bytes, 20) || !all ||
            !alignment) {
          problems[rank] = "a collective failed";
          return;
        }
        received[rank] = std::string(bytes.begin(), bytes.end());
        gathered[rank] = *all;
        clock_errors[rank] = alignment->error_us;
        c.finish();
      });
    for (auto &thread : threads)
      thread.join();
    for (int rank = 0; rank < kRanks; ++rank) {
      QVERIFY2(problems[rank].empty(), problems[rank].c_str());
      QCOMPARE(received[rank], std::string("nccl"));
    }
    QCOMPARE(gathered[0].size(), std::size_t(kRanks));
    QCOMPARE(gathered[0][2], (std::vector<double>{2, 20}));
    QVERIFY(gathered[1].empty());
    QVERIFY(clock_errors[0] >= 0 && clock_errors[0] < 1e6); // one host: one clock
  }

  void tcpChannelTimesOutWithoutPeers() {
    auto channel = connectTcpChannel(1, 2, "127.0.0.1", 1, 0.3); // nobody listens on port 1
    QVERIFY(!channel);
    QVERIFY(channel.error().message.find("cannot connect") != std::string::npos);
  }

  void launchIsDetectedFromTheEnvironment() {
    for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
                             "SLURM_STEP_NUM_TASKS", "RANK", "WORLD_SIZE"})
      unsetenv(name);
    QCOMPARE(detectLaunch().launcher, Launcher::Single);
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("MASTER_ADDR", "node0", 1);
    setenv("MASTER_PORT", "29500", 1);
    auto torchrun = detectLaunch();
    QCOMPARE(torchrun.launcher, Launcher::Torchrun);
    QCOMPARE(torchrun.rank, 3);
    QCOMPARE(torchrun.world_size, 8);
    QCOMPARE(torchrun.local_rank, 1);
    QCOMPARE(torchrun.master_port, 29500);
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_STEP_NUM_TASKS", "16", 1);
    setenv("SLURM_LOCALID", "1", 1);
    QCOMPARE(detectLaunch().launcher, Launcher::Slurm); // srun wins over RANK
    setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    const auto mpirun = detectLaunch();
    QCOMPARE(mpirun.launcher, Launcher::Mpirun); // mpirun inside a Slurm allocation
    QCOMPARE(mpirun.world_size, 4);
    for (const char *name :
         {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
          "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "RANK", "WORLD_SIZE",
          "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"})
      unsetenv(name);
  }
};

QTEST_GUILESS_MAIN(TestBackendUnits)
#include "test_backend_units.moc"
