#include "kernels/cuda_stage.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/cpu_elementwise.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_gemm.h"

namespace pipescope::kernels {

std::string callFailure(const char *call, const std::string &message, const char *file, int line) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  return std::string(host) + ": " + file + ":" + std::to_string(line) + ": " + call +
         " failed: " + message;
}

std::string cudaErrorText(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + " (" + cudaGetErrorString(error) + ")";
}

std::string cublasErrorText(cublasStatus_t status) {
  return std::string(cublasGetStatusName(status)) + " (" + cublasGetStatusString(status) + ")";
}

namespace {

std::size_t cells(long long rows, long long columns) {
  return static_cast<std::size_t>(std::max(0LL, rows) * std::max(0LL, columns));
}

// Element counts of the stage's buffers, in allocation order; weights first (one block, so the
// DP all-reduce is one call), then their gradients, then the intermediates.
struct Layout {
  std::vector<std::size_t> weights;       // wqkv, wo, w1, b1, w2, head (or the unit matrix)
  std::vector<std::size_t> intermediates; // see allocate()
  std::size_t weightCount() const {
    std::size_t total = 0;
    for (auto c : weights)
      total += c;
    return total;
  }
  std::size_t total() const {
    std::size_t sum = 2 * weightCount();
    for (auto c : intermediates)
      sum += c;
    return sum;
  }
};

Layout layoutOf(const StageWork &work) {
  Layout layout;
  if (work.unit > 0) {
    const std::size_t n2 = cells(work.unit, work.unit);
    layout.weights = {n2};
    layout.intermediates = {n2, n2, n2, n2, n2}; // input, x, y, dy, dx
    return layout;
  }
  const LayerShape &l = work.layer;
  const long long t = l.tokens(), h = l.hidden, qkv = l.qkvWidth(), attn = l.attentionWidth(),
                  ffn_in = l.ffnInputWidth(), ffn = l.ffn, s = l.sequence,
                  group = std::max(1, l.heads / std::max(1, l.kv_heads));
  layout.weights = {cells(h, qkv),    cells(attn, h), cells(h, ffn_in),
                    cells(1, ffn_in), cells(ffn, h),  cells(h, work.head_vocab)};
  layout.intermediates = {cells(t, h),         cells(t, h),
                          cells(t, h),         cells(t, qkv),
                          cells(group * s, s), cells(t, attn),
                          cells(t, h),         cells(t, ffn_in),
                          cells(t, ffn),       cells(t, work.head_vocab),
                          cells(t, h),         cells(t, ffn),
                          cells(t, ffn_in),    cells(t, h),
                          cells(t, attn),      cells(group * s, s),
                          cells(t, qkv),       cells(t, h)};
  return layout;
}

} // namespace

std::size_t CudaStage::memoryBytes(const StageWork &work) {
  return layoutOf(work).total() * sizeof(bf16) + kGemmWorkspaceBytes;
}

Result<std::unique_ptr<CudaStage>> CudaStage::create(const StageWork &work, std::uint32_t seed,
                                                     cudaStream_t stream, int sm_count_target) {
  std::unique_ptr<CudaStage> stage(new CudaStage(work, stream));
  auto gemms = TunedGemm::create(sm_count_target);
  if (!gemms) return gemms.error();
  stage->gemms_ = std::move(*gemms);
  if (auto status = stage->allocate(seed); !status) return status.error();
  if (auto status = stage->tuneGemms(); !status) return status.error();
  return stage;
}

CudaStage::~CudaStage() {
  for (void *pointer : allocations_)
    cudaFree(pointer);
  if (cublas_) cublasDestroy(cublas_);
}

Status CudaStage::allocate(std::uint32_t seed) {
  PIPESCOPE_CUBLAS_CHECK(cublasCreate(&cublas_));
  const Layout layout = layoutOf(work_);
  weight_count_ = layout.weightCount();
  void *block = nullptr;
  PIPESCOPE_CUDA_CHECK(cudaMalloc(&block, layout.total() * sizeof(bf16)));
  allocations_.push_back(block);
  bf16 *cursor = static_cast<bf16 *>(block);
  const auto take = [&cursor](std::size_t count) {
    bf16 *at = cursor;
    cursor += count;
    return at;
  };
  weights_ = cursor;
  std::vector<bf16 *> weight_slices, grad_slices;
  for (auto count : layout.weights)
    weight_slices.push_back(take(count));
  weight_grads_ = cursor;
  for (auto count : layout.weights)
    grad_slices.push_back(take(count));
  std::vector<bf16 *> scratch;
  for (auto count : layout.intermediates)
    scratch.push_back(take(count));

  PIPESCOPE_CUDA_CHECK(cudaMemsetAsync(weight_grads_, 0, weight_count_ * sizeof(bf16), stream_));
  if (work_.unit > 0) {
    wqkv_ = weight_slices[0];
    dwqkv_ = grad_slices[0];
    input_ = scratch[0], x_ = scratch[1], y_ = scratch[2], dy_ = scratch[3], dx_ = scratch[4];
    PIPESCOPE_CUDA_CHECK(launchFillUniform(
        wqkv_, layout.weights[0], 1.7f / std::sqrt(static_cast<float>(work_.unit)), seed, stream_));
  } else {
    const LayerShape &l = work_.layer;
    bf16 **weights[] = {&wqkv_, &wo_, &w1_, &b1_, &w2_, &head_};
    bf16 **grads[] = {&dwqkv_, &dwo_, &dw1_, &db1_, &dw2_, &dhead_};
    const int fan_in[] = {l.hidden, l.attentionWidth(), l.hidden, 1, l.ffn, l.hidden};
    for (int i = 0; i < 6; ++i) {
      *weights[i] = weight_slices[static_cast<std::size_t>(i)];
      *grads[i] = grad_slices[static_cast<std::size_t>(i)];
      const float scale = std::sqrt(3.0f / static_cast<float>(fan_in[i])); // LeCun uniform
      PIPESCOPE_CUDA_CHECK(launchFillUniform(*weights[i],
                                             layout.weights[static_cast<std::size_t>(i)], scale,
                                             seed * 16 + static_cast<std::uint32_t>(i), stream_));
    }
    bf16 **buffers[] = {&input_,     &x_,          &y_,        &qkv_,     &scores_, &context_,
                        &projected_, &ffn_pre_,    &ffn_act_,  &logits_,  &dy_,     &dffn_act_,
                        &dffn_pre_,  &dprojected_, &dcontext_, &dscores_, &dqkv_,   &dx_};
    for (std::size_t i = 0; i < scratch.size(); ++i)
      *buffers[i] = scratch[i];
  }
  PIPESCOPE_CUDA_CHECK(
      launchFillUniform(input_, activationElements(), 1.0f, seed * 16 + 15, stream_));
  return Ok{};
}

// Row-major C = α·op(A)·op(B) + β·C, with the algorithm tuned for its shape (cuda_gemm.h).
Status CudaStage::gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                       const bf16 *a, int lda, const bf16 *b, int ldb, float beta, bf16 *c,
                       int ldc) {
  return gemms_->run({transpose_a, transpose_b, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc},
                     stream_);
}

// One pass through the stage's ops with tuning on, so every GEMM shape it runs has its algorithm
// before a step is timed; the pass's weight gradients are cleared afterwards.
Status CudaStage::tuneGemms() {
  gemms_->setTuning(true);
  Status status = forward(nullptr, nullptr, {});
  if (status) status = inputGrad(nullptr, nullptr, {});
  if (status) status = weightGrad();
  gemms_->setTuning(false);
  if (!status) return status.error();
  PIPESCOPE_CUDA_CHECK(cudaMemsetAsync(weight_grads_, 0, weight_count_ * sizeof(bf16), stream_));
  PIPESCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return Ok{};
}

Status CudaStage::batchedGemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                              const bf16 *a, int lda, long long stride_a, const bf16 *b, int ldb,
                              long long stride_b, float beta, bf16 *c, int ldc, long long stride_c,
                              int count) {
  PIPESCOPE_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  PIPESCOPE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, n,
      m, k, &alpha, b, CUDA_R_16BF, ldb, stride_b, a, CUDA_R_16BF, lda, stride_a, &beta, c,
      CUDA_R_16BF, ldc, stride_c, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return Ok{};
}

Status CudaStage::forward(const bf16 *input, bf16 *output, const CudaAllReduceSum &reduce) {
  const std::size_t bytes = activationElements() * sizeof(bf16);
  PIPESCOPE_CUDA_CHECK(
      cudaMemcpyAsync(x_, input ? input : input_, bytes, cudaMemcpyDeviceToDevice, stream_));
  if (work_.unit > 0) {
    const int n = work_.unit;
    for (int i = 0; i < work_.unit_forward; ++i) {
      PIPESCOPE_TRY(gemm(false, false, n, n, n, 1.0f, x_, n, wqkv_, n, 0.0f, y_, n));
      std::swap(x_, y_);
      if (i % 8 == 7) PIPESCOPE_CUDA_CHECK(launchNormalizeRows(x_, n, n, stream_));
    }
    PIPESCOPE_CUDA_CHECK(launchNormalizeRows(x_, n, n, stream_));
  } else {
    for (int layer = 0; layer < work_.layers; ++layer) {
      PIPESCOPE_TRY(layerForward(x_, y_, reduce));
      std::swap(x_, y_);
    }
    if (work_.head_vocab > 0) {
      const LayerShape &l = work_.layer;
      PIPESCOPE_TRY(gemm(false, false, l.tokens(), work_.head_vocab, l.hidden, 1.0f, x_, l.hidden,
                         head_, work_.head_vocab, 0.0f, logits_, work_.head_vocab));
    }
  }
  if (output)
    PIPESCOPE_CUDA_CHECK(cudaMemcpyAsync(output, x_, bytes, cudaMemcpyDeviceToDevice, stream_));
  return Ok{};
}

Status CudaStage::inputGrad(const bf16 *output_grad, bf16 *input_grad,
                            const CudaAllReduceSum &reduce) {
  const std::size_t bytes = activationElements() * sizeof(bf16);
  if (work_.unit > 0) {
    const int n = work_.unit;
    PIPESCOPE_CUDA_CHECK(cudaMemcpyAsync(dy_, output_grad ? output_grad : x_, bytes,
                                         cudaMemcpyDeviceToDevice, stream_));
    for (int i = 0; i < work_.unit_input_grad; ++i) {
      PIPESCOPE_TRY(gemm(false, true, n, n, n, 1.0f, dy_, n, wqkv_, n, 0.0f, dx_, n));
      std::swap(dy_, dx_);
      if (i % 8 == 7) PIPESCOPE_CUDA_CHECK(launchNormalizeRows(dy_, n, n, stream_));
    }
    PIPESCOPE_CUDA_CHECK(launchNormalizeRows(dy_, n, n, stream_));
    if (input_grad)
      PIPESCOPE_CUDA_CHECK(
          cudaMemcpyAsync(input_grad, dy_, bytes, cudaMemcpyDeviceToDevice, stream_));
    return Ok{};
  }
  const LayerShape &l = work_.layer;
  if (work_.head_vocab > 0) {
    PIPESCOPE_TRY(gemm(false, true, l.tokens(), l.hidden, work_.head_vocab, 1.0f, logits_,
                       work_.head_vocab, head_, work_.head_vocab, 0.0f, dy_, l.hidden));
    PIPESCOPE_CUDA_CHECK(launchNormalizeRows(dy_, l.tokens(), l.hidden, stream_));
  } else {
    PIPESCOPE_CUDA_CHECK(cudaMemcpyAsync(dy_, output_grad ? output_grad : x_, bytes,
                                         cudaMemcpyDeviceToDevice, stream_));
  }
  for (int layer = 0; layer < work_.layers; ++layer) {
    PIPESCOPE_TRY(layerInputGrad(dy_, dx_, reduce));
    if (layer + 1 < work_.layers) std::swap(dy_, dx_);
  }
  if (input_grad)
    PIPESCOPE_CUDA_CHECK(cudaMemcpyAsync(input_grad, work_.layers > 0 ? dx_ : dy_, bytes,
                                         cudaMemcpyDeviceToDevice, stream_));
  return Ok{};
}

Status CudaStage::weightGrad() {
  if (work_.unit > 0) {
    const int n = work_.unit;
    for (int i = 0; i < work_.unit_weight_grad; ++i)
      PIPESCOPE_TRY(gemm(true, false, n, n, n, 1.0f, x_, n, dy_, n, 1.0f, dwqkv_, n));
    return Ok{};
  }
  for (int layer = 0; layer < work_.layers; ++layer)
    PIPESCOPE_TRY(layerWeightGrad());
  if (work_.head_vocab > 0) {
    const LayerShape &l = work_.layer;
    PIPESCOPE_TRY(gemm(true, false, l.hidden, work_.head_vocab, l.tokens(), 1.0f, x_, l.hidden,
                       logits_, work_.head_vocab, 1.0f, dhead_, work_.head_vocab));
  }
  return Ok{};
}

Status CudaStage::layerForward(const bf16 *x, bf16 *y, const CudaAllReduceSum &reduce) {
  const LayerShape &l = work_.layer;
  const int t = l.tokens(), h = l.hidden, qkv = l.qkvWidth(), attn = l.attentionWidth(),
            s = l.sequence, d = l.head_dim, ffn = l.ffn, ffn_in = l.ffnInputWidth();
  const int group = std::max(1, l.heads / std::max(1, l.kv_heads));
  const std::ptrdiff_t dd = d; // head offsets into the rows, in the pointer's width
  PIPESCOPE_TRY(gemm(false, false, t, qkv, h, 1.0f, x, h, wqkv_, qkv, 0.0f, qkv_, qkv));
  // As on the CPU: scores scaled by 1/sqrt(d), a softmax over each row, then the context.
  const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
  const long long square = static_cast<long long>(s) * s;
  for (int b = 0; b < l.batch; ++b) {
    const bf16 *rows = qkv_ + static_cast<std::size_t>(b) * s * qkv;
    bf16 *context = context_ + static_cast<std::size_t>(b) * s * attn;
    // The query heads of one KV group share K and V: a batch with K's and V's stride 0.
    for (int kv = 0; kv < l.kv_heads; ++kv) {
      const bf16 *q = rows + static_cast<std::ptrdiff_t>(kv) * group * dd;
      const bf16 *k = rows + (l.heads + kv) * dd;
      const bf16 *v = rows + (l.heads + l.kv_heads + kv) * dd;
      PIPESCOPE_TRY(batchedGemm(false, true, s, s, d, alpha, q, qkv, d, k, qkv, 0, 0.0f, scores_, s,
                                square, group));
      PIPESCOPE_CUDA_CHECK(launchSoftmaxRows(scores_, group * s, s, stream_));
      PIPESCOPE_TRY(batchedGemm(false, false, s, d, s, 1.0f, scores_, s, square, v, qkv, 0, 0.0f,
                                context + static_cast<std::ptrdiff_t>(kv) * group * dd, attn, d,
                                group));
    }
  }
  PIPESCOPE_TRY(gemm(false, false, t, h, attn, 1.0f, context_, attn, wo_, h, 0.0f, projected_, h));
  if (reduce) PIPESCOPE_TRY(reduce(projected_, static_cast<std::size_t>(t) * h, stream_));
  PIPESCOPE_TRY(
      gemm(false, false, t, ffn_in, h, 1.0f, projected_, h, w1_, ffn_in, 0.0f, ffn_pre_, ffn_in));
  PIPESCOPE_CUDA_CHECK(l.gated ? launchBiasSwigluForward(ffn_pre_, b1_, ffn_act_, t, ffn, stream_)
                               : launchBiasGeluForward(ffn_pre_, b1_, ffn_act_, t, ffn, stream_));
  PIPESCOPE_TRY(gemm(false, false, t, h, ffn, 1.0f, ffn_act_, ffn, w2_, h, 0.0f, y, h));
  if (reduce) PIPESCOPE_TRY(reduce(y, static_cast<std::size_t>(t) * h, stream_));
  PIPESCOPE_CUDA_CHECK(launchNormalizeRows(y, t, h, stream_));
  return Ok{};
}

Status CudaStage::layerInputGrad(const bf16 *dy, bf16 *dx, const CudaAllReduceSum &reduce) {
  const LayerShape &l = work_.layer;
  const int t = l.tokens(), h = l.hidden, qkv = l.qkvWidth(), attn = l.attentionWidth(),
            s = l.sequence, d = l.head_dim, ffn = l.ffn, ffn_in = l.ffnInputWidth();
  const int group = std::max(1, l.heads / std::max(1, l.kv_heads));
  const std::ptrdiff_t dd = d; // head offsets into the rows, in the pointer's width
  PIPESCOPE_TRY(gemm(false, true, t, ffn, h, 1.0f, dy, h, w2_, h, 0.0f, dffn_act_, ffn));
  PIPESCOPE_CUDA_CHECK(
      l.gated ? launchBiasSwigluBackward(dffn_act_, ffn_pre_, b1_, dffn_pre_, t, ffn, stream_)
              : launchBiasGeluBackward(dffn_act_, ffn_pre_, b1_, dffn_pre_, t, ffn, stream_));
  PIPESCOPE_TRY(
      gemm(false, true, t, h, ffn_in, 1.0f, dffn_pre_, ffn_in, w1_, ffn_in, 0.0f, dprojected_, h));
  if (reduce) PIPESCOPE_TRY(reduce(dprojected_, static_cast<std::size_t>(t) * h, stream_));
  PIPESCOPE_TRY(gemm(false, true, t, attn, h, 1.0f, dprojected_, h, wo_, h, 0.0f, dcontext_, attn));
  const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
  const long long square = static_cast<long long>(s) * s;
  for (int b = 0; b < l.batch; ++b) {
    const bf16 *rows = qkv_ + static_cast<std::size_t>(b) * s * qkv;
    bf16 *drows = dqkv_ + static_cast<std::size_t>(b) * s * qkv;
    const bf16 *dcontext = dcontext_ + static_cast<std::size_t>(b) * s * attn;
    for (int kv = 0; kv < l.kv_heads; ++kv) {
      const bf16 *q = rows + static_cast<std::ptrdiff_t>(kv) * group * dd;
      const bf16 *k = rows + (l.heads + kv) * dd;
      const bf16 *v = rows + (l.heads + l.kv_heads + kv) * dd;
      const bf16 *dc = dcontext + static_cast<std::ptrdiff_t>(kv) * group * dd;
      bf16 *dq = drows + static_cast<std::ptrdiff_t>(kv) * group * dd;
      bf16 *dk = drows + (l.heads + kv) * dd;
      bf16 *dv = drows + (l.heads + l.kv_heads + kv) * dd;
      // dP = dC·Vᵀ, then dS = P·(dP − Σ dP·P) per row from the stored probabilities, and
      // dQ = dS·K, batched over the group's heads.
      PIPESCOPE_TRY(batchedGemm(false, true, s, s, d, 1.0f, dc, attn, d, v, qkv, 0, 0.0f, dscores_,
                                s, square, group));
      PIPESCOPE_CUDA_CHECK(launchSoftmaxRowsBackward(scores_, dscores_, group * s, s, stream_));
      PIPESCOPE_TRY(batchedGemm(false, false, s, d, s, alpha, dscores_, s, square, k, qkv, 0, 0.0f,
                                dq, qkv, d, group));
      // dV = Σ Pᵀ·dC and dK = Σ dSᵀ·Q accumulate over the heads of the group: one GEMM each.
      for (int i = 0; i < group; ++i) {
        const float beta = i == 0 ? 0.0f : 1.0f;
        PIPESCOPE_TRY(gemm(true, false, s, d, s, 1.0f, scores_ + i * square, s, dc + i * dd, attn,
                           beta, dv, qkv));
        PIPESCOPE_TRY(gemm(true, false, s, d, s, alpha, dscores_ + i * square, s, q + i * dd, qkv,
                           beta, dk, qkv));
      }
    }
  }
  PIPESCOPE_TRY(gemm(false, true, t, h, qkv, 1.0f, dqkv_, qkv, wqkv_, qkv, 0.0f, dx, h));
  if (reduce) PIPESCOPE_TRY(reduce(dx, static_cast<std::size_t>(t) * h, stream_));
  PIPESCOPE_CUDA_CHECK(launchNormalizeRows(dx, t, h, stream_));
  return Ok{};
}

Status CudaStage::layerWeightGrad() {
  const LayerShape &l = work_.layer;
  const int t = l.tokens(), h = l.hidden, qkv = l.qkvWidth(), attn = l.attentionWidth(),
            ffn = l.ffn, ffn_in = l.ffnInputWidth();
  PIPESCOPE_TRY(gemm(true, false, ffn, h, t, 1.0f, ffn_act_, ffn, dy_, h, 1.0f, dw2_, h));
  PIPESCOPE_CUDA_CHECK(launchAddColumnSums(dffn_pre_, t, ffn_in, db1_, stream_));
  PIPESCOPE_TRY(
      gemm(true, false, h, ffn_in, t, 1.0f, projected_, h, dffn_pre_, ffn_in, 1.0f, dw1_, ffn_in));
  PIPESCOPE_TRY(gemm(true, false, attn, h, t, 1.0f, context_, attn, dprojected_, h, 1.0f, dwo_, h));
  PIPESCOPE_TRY(gemm(true, false, h, qkv, t, 1.0f, x_, h, dqkv_, qkv, 1.0f, dwqkv_, qkv));
  return Ok{};
}

// ---------------------------------------------------------------------------------------------
// The one-time check against the CPU reference.

namespace {

// A device buffer that frees itself.
struct DeviceBuffer {
  void *pointer = nullptr;
  ~DeviceBuffer() {
    if (pointer) cudaFree(pointer);
  }
  template <typename T> T *as() const { return static_cast<T *>(pointer); }
};

std::vector<float> roundedValues(std::size_t count, std::uint32_t seed) {
  std::vector<float> values(count);
  std::uint32_t state = seed;
  for (auto &v : values) {
    state = state * 1664525u + 1013904223u;
    v = __bfloat162float(__float2bfloat16(static_cast<float>(state >> 8) / 8388608.0f - 1.0f));
  }
  return values;
}

Status upload(const std::vector<float> &values, DeviceBuffer &buffer) {
  std::vector<bf16> host(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    host[i] = __float2bfloat16(values[i]);
  PIPESCOPE_CUDA_CHECK(cudaMalloc(&buffer.pointer, host.size() * sizeof(bf16)));
  PIPESCOPE_CUDA_CHECK(
      cudaMemcpy(buffer.pointer, host.data(), host.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  return Ok{};
}

Result<std::vector<float>> download(const DeviceBuffer &buffer, std::size_t count) {
  std::vector<bf16> host(count);
  PIPESCOPE_CUDA_CHECK(
      cudaMemcpy(host.data(), buffer.pointer, count * sizeof(bf16), cudaMemcpyDeviceToHost));
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = __bfloat162float(host[i]);
  return values;
}

// bf16 keeps 8 significant bits: one rounding of the output is 2^-8 relative; the fp32
// accumulation adds little at these sizes.
constexpr double kTolerance = 2e-2;

Status expectClose(const char *what, const std::vector<float> &got, const std::vector<float> &want,
                   double *worst) {
  const double error = maxRelativeError(got.data(), want.data(), got.size());
  *worst = std::max(*worst, error);
  if (!(error <= kTolerance))
    return makeError(std::string("CUDA kernel check: ") + what +
                     " differs from the CPU reference " + "by " + std::to_string(error) +
                     " (tolerance " + std::to_string(kTolerance) + ")");
  return Ok{};
}

} // namespace

Status checkCudaKernels(double *worst) {
  *worst = 0;
  const int m = 48, n = 40, k = 72;
  StageWork work;
  work.unit = 8;
  auto stage = CudaStage::create(work, 1, nullptr); // for its cuBLAS handle and GEMM helper
  if (!stage) return stage.error();
  for (int variant = 0; variant < 4; ++variant) {
    const bool ta = variant & 1, tb = variant & 2;
    const auto a = roundedValues(static_cast<std::size_t>(m) * k, 11 + variant);
    const auto b = roundedValues(static_cast<std::size_t>(k) * n, 23 + variant);
    DeviceBuffer da, db, dc;
    PIPESCOPE_TRY(upload(a, da));
    PIPESCOPE_TRY(upload(b, db));
    PIPESCOPE_CUDA_CHECK(cudaMalloc(&dc.pointer, static_cast<std::size_t>(m) * n * sizeof(bf16)));
    const int lda = ta ? m : k, ldb = tb ? k : n;
    std::vector<float> want(static_cast<std::size_t>(m) * n);
    gemmReference(ta ? Transpose::Yes : Transpose::No, tb ? Transpose::Yes : Transpose::No, m, n, k,
                  1.0f, a.data(), lda, b.data(), ldb, 0.0f, want.data(), n);
    // The stage's call (tuned, so its shape is timed and decided first), then the default call
    // and every algorithm cuBLASLt proposes for the shape, each on its own: tuning may pick any.
    const GemmCall call{
        ta, tb, m, n, k, 1.0f, 0.0f, da.as<bf16>(), lda, db.as<bf16>(), ldb, dc.as<bf16>(), n};
    (*stage)->gemms().setTuning(true);
    Status tuned = (*stage)->gemm(ta, tb, m, n, k, 1.0f, da.as<bf16>(), lda, db.as<bf16>(), ldb,
                                  0.0f, dc.as<bf16>(), n);
    (*stage)->gemms().setTuning(false);
    if (!tuned) return tuned.error();
    auto candidates = (*stage)->gemms().candidateCount(call);
    if (!candidates) return candidates.error();
    for (int candidate = -2; candidate < *candidates; ++candidate) {
      if (candidate >= -1) {
        PIPESCOPE_CUDA_CHECK(cudaMemset(dc.pointer, 0, want.size() * sizeof(bf16)));
        PIPESCOPE_TRY((*stage)->gemms().runCandidate(call, candidate, nullptr));
      }
      PIPESCOPE_CUDA_CHECK(cudaDeviceSynchronize());
      auto got = download(dc, want.size());
      if (!got) return got.error();
      const std::string what =
          candidate == -2   ? "bf16 GEMM (tuned)"
          : candidate == -1 ? "bf16 GEMM (cublasGemmEx default)"
                            : "bf16 GEMM (cuBLASLt algorithm " + std::to_string(candidate) + ")";
      PIPESCOPE_TRY(expectClose(what.c_str(), *got, want, worst));
    }
  }
  // Fused bias + activation, forward and backward, against cpu_elementwise.
  const int rows = 16, columns = 40;
  const auto pre = roundedValues(static_cast<std::size_t>(rows) * 2 * columns, 5);
  const auto bias = roundedValues(static_cast<std::size_t>(2) * columns, 7);
  const auto dout = roundedValues(static_cast<std::size_t>(rows) * columns, 9);
  DeviceBuffer dpre, dbias, ddout, dresult;
  PIPESCOPE_TRY(upload(pre, dpre));
  PIPESCOPE_TRY(upload(bias, dbias));
  PIPESCOPE_TRY(upload(dout, ddout));
  PIPESCOPE_CUDA_CHECK(cudaMalloc(&dresult.pointer, pre.size() * sizeof(bf16)));
  for (int kernel = 0; kernel < 4; ++kernel) {
    const bool gated = kernel >= 2, backward = kernel % 2 == 1;
    std::vector<float> want(backward && gated ? pre.size() : dout.size());
    if (!gated && !backward) {
      PIPESCOPE_CUDA_CHECK(launchBiasGeluForward(dpre.as<bf16>(), dbias.as<bf16>(),
                                                 dresult.as<bf16>(), rows, 2 * columns, nullptr));
      want.resize(pre.size());
      biasGeluForward(pre.data(), bias.data(), want.data(), rows, 2 * columns);
    } else if (!gated) {
      // GELU backward over rows × columns, reading the first rows·columns of pre.
      PIPESCOPE_CUDA_CHECK(launchBiasGeluBackward(ddout.as<bf16>(), dpre.as<bf16>(),
                                                  dbias.as<bf16>(), dresult.as<bf16>(), rows,
                                                  columns, nullptr));
      biasGeluBackward(dout.data(), pre.data(), bias.data(), want.data(), rows, columns);
    } else if (!backward) {
      PIPESCOPE_CUDA_CHECK(launchBiasSwigluForward(dpre.as<bf16>(), dbias.as<bf16>(),
                                                   dresult.as<bf16>(), rows, columns, nullptr));
      biasSwigluForward(pre.data(), bias.data(), want.data(), rows, columns);
    } else {
      PIPESCOPE_CUDA_CHECK(launchBiasSwigluBackward(ddout.as<bf16>(), dpre.as<bf16>(),
                                                    dbias.as<bf16>(), dresult.as<bf16>(), rows,
                                                    columns, nullptr));
      biasSwigluBackward(dout.data(), pre.data(), bias.data(), want.data(), rows, columns);
    }
    PIPESCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    auto got = download(dresult, want.size());
    if (!got) return got.error();
    static const char *const names[] = {"bias+GELU forward", "bias+GELU backward",
                                        "bias+SwiGLU forward", "bias+SwiGLU backward"};
    PIPESCOPE_TRY(expectClose(names[kernel], *got, want, worst));
  }
  // The attention softmax, forward and backward (rows of scores scaled up so that they differ),
  // at widths that take each kernel: rows cached in shared memory (a multiple of 8 columns, up to
  // 11264; one vector per thread or several) and the strided ones (other widths, wider rows).
  const std::pair<int, int> softmax_shapes[] = {
      {rows, 2 * columns}, {3, 4096}, {3, 4100}, {2, 11264}, {2, 11272}};
  for (const auto &[softmax_rows, width] : softmax_shapes) {
    const std::size_t count = static_cast<std::size_t>(softmax_rows) * width;
    auto scores = roundedValues(count, 13);
    for (auto &v : scores)
      v *= 4.0f;
    DeviceBuffer dscores, dgrad;
    PIPESCOPE_TRY(upload(scores, dscores));
    PIPESCOPE_CUDA_CHECK(launchSoftmaxRows(dscores.as<bf16>(), softmax_rows, width, nullptr));
    PIPESCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    auto probs = download(dscores, count);
    if (!probs) return probs.error();
    std::vector<float> want = scores;
    softmaxRows(want.data(), softmax_rows, width);
    const std::string forward = "softmax forward, " + std::to_string(width) + " columns";
    PIPESCOPE_TRY(expectClose(forward.c_str(), *probs, want, worst));
    // The backward from the GPU's own probabilities, so both sides start from the same numbers.
    const auto grad = roundedValues(count, 17);
    PIPESCOPE_TRY(upload(grad, dgrad));
    PIPESCOPE_CUDA_CHECK(launchSoftmaxRowsBackward(dscores.as<bf16>(), dgrad.as<bf16>(),
                                                   softmax_rows, width, nullptr));
    PIPESCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    auto got = download(dgrad, count);
    if (!got) return got.error();
    want = grad;
    softmaxRowsBackward(probs->data(), want.data(), softmax_rows, width);
    const std::string backward = "softmax backward, " + std::to_string(width) + " columns";
    PIPESCOPE_TRY(expectClose(backward.c_str(), *got, want, worst));
  }
  return Ok{};
}

} // namespace pipescope::kernels
