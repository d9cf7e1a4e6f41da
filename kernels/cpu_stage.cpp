#include "kernels/cpu_stage.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu_elementwise.h"
#include "kernels/cpu_gemm.h"

namespace pipescope::kernels {

namespace {

constexpr Transpose N = Transpose::No;
constexpr Transpose T = Transpose::Yes;

std::size_t elements(long long rows, long long columns) {
  return static_cast<std::size_t>(std::max(0LL, rows) * std::max(0LL, columns));
}

// Uniform values in [-scale, scale] from a xorshift generator: reproducible, no <random> cost.
void fillUniform(float *data, std::size_t count, float scale, std::uint32_t &state) {
  for (std::size_t i = 0; i < count; ++i) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    data[i] = scale * (static_cast<float>(state) / 2147483648.0f - 1.0f);
  }
}

bool reduceIfAny(const AllReduceSum &reduce, std::vector<float> &buffer) {
  return !reduce || reduce(buffer.data(), buffer.size());
}

} // namespace

CpuStage::CpuStage(const StageWork &work, std::uint32_t seed) : work_(work) {
  std::uint32_t state = seed * 2654435761u + 1u;
  if (work_.unit > 0) {
    const std::size_t n2 = elements(work_.unit, work_.unit);
    weights_.resize(n2);
    weight_grads_.assign(n2, 0.0f);
    unit_w_ = weights_.data();
    unit_dw_ = weight_grads_.data();
    fillUniform(unit_w_, n2, 1.7f / std::sqrt(static_cast<float>(work_.unit)), state);
    input_.resize(n2);
    fillUniform(input_.data(), n2, 1.0f, state);
    for (auto *buffer : {&x_, &y_, &dy_, &dx_})
      buffer->assign(n2, 0.0f);
    return;
  }
  const LayerShape &l = work_.layer;
  const long long t = l.tokens(), h = l.hidden, qkv = l.qkvWidth(), attn = l.attentionWidth(),
                  ffn_in = l.ffnInputWidth(), ffn = l.ffn, s = l.sequence, vocab = work_.head_vocab;
  const std::size_t sizes[] = {elements(h, qkv),    elements(attn, h), elements(h, ffn_in),
                               elements(1, ffn_in), elements(ffn, h),  elements(h, vocab)};
  std::size_t total = 0;
  for (auto size : sizes)
    total += size;
  weights_.resize(total);
  weight_grads_.assign(total, 0.0f);
  float **slices[] = {&wqkv_, &wo_, &w1_, &b1_, &w2_, &head_};
  float **grad_slices[] = {&dwqkv_, &dwo_, &dw1_, &db1_, &dw2_, &dhead_};
  const long long fan_in[] = {h, attn, h, 1, ffn, h};
  std::size_t offset = 0;
  for (int i = 0; i < 6; ++i) {
    *slices[i] = weights_.data() + offset;
    *grad_slices[i] = weight_grads_.data() + offset;
    // Uniform ±sqrt(3/fan_in) has variance 1/fan_in (LeCun initialization).
    fillUniform(*slices[i], sizes[i], std::sqrt(3.0f / static_cast<float>(fan_in[i])), state);
    offset += sizes[i];
  }
  input_.resize(elements(t, h));
  fillUniform(input_.data(), input_.size(), 1.0f, state);
  x_.assign(elements(t, h), 0.0f);
  y_.assign(elements(t, h), 0.0f);
  qkv_.assign(elements(t, qkv), 0.0f);
  scores_.assign(elements(s, s), 0.0f);
  context_.assign(elements(t, attn), 0.0f);
  projected_.assign(elements(t, h), 0.0f);
  ffn_pre_.assign(elements(t, ffn_in), 0.0f);
  ffn_act_.assign(elements(t, ffn), 0.0f);
  logits_.assign(elements(t, vocab), 0.0f);
  dy_.assign(elements(t, h), 0.0f);
  dffn_act_.assign(elements(t, ffn), 0.0f);
  dffn_pre_.assign(elements(t, ffn_in), 0.0f);
  dprojected_.assign(elements(t, h), 0.0f);
  dcontext_.assign(elements(t, attn), 0.0f);
  dscores_.assign(elements(s, s), 0.0f);
  dqkv_.assign(elements(t, qkv), 0.0f);
  dx_.assign(elements(t, h), 0.0f);
  bias_sums_.assign(elements(1, ffn_in), 0.0f);
}

bool CpuStage::forward(const float *input, float *output, const AllReduceSum &reduce) {
  const std::size_t count = activationElements();
  std::copy(input ? input : input_.data(), (input ? input : input_.data()) + count, x_.begin());
  if (work_.unit > 0) {
    const int n = work_.unit;
    for (int i = 0; i < work_.unit_forward; ++i) {
      multiply(N, N, n, n, n, 1.0f, x_.data(), n, unit_w_, n, 0.0f, y_.data(), n);
      std::swap(x_, y_);
      if (i % 8 == 7) normalizeRows(x_.data(), n, n);
    }
    normalizeRows(x_.data(), n, n);
  } else {
    for (int layer = 0; layer < work_.layers; ++layer) {
      if (!layerForward(x_.data(), y_.data(), reduce)) return false;
      std::swap(x_, y_);
    }
    if (work_.head_vocab > 0) {
      const LayerShape &l = work_.layer;
      multiply(N, N, l.tokens(), work_.head_vocab, l.hidden, 1.0f, x_.data(), l.hidden, head_,
               work_.head_vocab, 0.0f, logits_.data(), work_.head_vocab);
    }
  }
  if (output) std::copy(x_.begin(), x_.begin() + static_cast<std::ptrdiff_t>(count), output);
  return true;
}

bool CpuStage::inputGrad(const float *output_grad, float *input_grad, const AllReduceSum &reduce) {
  const std::size_t count = activationElements();
  if (work_.unit > 0) {
    const int n = work_.unit;
    std::copy(output_grad ? output_grad : x_.data(),
              (output_grad ? output_grad : x_.data()) + count, dy_.begin());
    for (int i = 0; i < work_.unit_input_grad; ++i) {
      multiply(N, T, n, n, n, 1.0f, dy_.data(), n, unit_w_, n, 0.0f, dx_.data(), n);
      std::swap(dy_, dx_);
      if (i % 8 == 7) normalizeRows(dy_.data(), n, n);
    }
    normalizeRows(dy_.data(), n, n);
    if (input_grad)
      std::copy(dy_.begin(), dy_.begin() + static_cast<std::ptrdiff_t>(count), input_grad);
    return true;
  }
  const LayerShape &l = work_.layer;
  if (work_.head_vocab > 0) {
    // The logits stand in for their own loss gradient: the head's input-grad GEMM.
    multiply(N, T, l.tokens(), l.hidden, work_.head_vocab, 1.0f, logits_.data(), work_.head_vocab,
             head_, work_.head_vocab, 0.0f, dy_.data(), l.hidden);
    normalizeRows(dy_.data(), l.tokens(), l.hidden);
  } else {
    const float *source = output_grad ? output_grad : x_.data();
    std::copy(source, source + count, dy_.begin());
  }
  for (int layer = 0; layer < work_.layers; ++layer) {
    if (!layerInputGrad(dy_.data(), dx_.data(), reduce)) return false;
    // The next (earlier) layer's output gradient is this layer's input gradient; dy_ keeps the
    // last layer's for the weight-grad pass.
    if (layer + 1 < work_.layers) std::swap(dy_, dx_);
  }
  if (input_grad) {
    const auto &result = work_.layers > 0 ? dx_ : dy_;
    std::copy(result.begin(), result.begin() + static_cast<std::ptrdiff_t>(count), input_grad);
  }
  return true;
}

void CpuStage::weightGrad() {
  if (work_.unit > 0) {
    const int n = work_.unit;
    for (int i = 0; i < work_.unit_weight_grad; ++i)
      multiply(T, N, n, n, n, 1.0f, x_.data(), n, dy_.data(), n, 1.0f, unit_dw_, n);
    return;
  }
  const LayerShape &l = work_.layer;
  for (int layer = 0; layer < work_.layers; ++layer)
    layerWeightGrad();
  if (work_.head_vocab > 0)
    multiply(T, N, l.hidden, work_.head_vocab, l.tokens(), 1.0f, x_.data(), l.hidden,
             logits_.data(), work_.head_vocab, 1.0f, dhead_, work_.head_vocab);
}

bool CpuStage::layerForward(const float *x, float *y, const AllReduceSum &reduce) {
  const LayerShape &l = work_.layer;
  const int t = l.tokens(), h = l.hidden, qkv = l.qkvWidth(), attn = l.attentionWidth(),
            s = l.sequence, d = l.head_dim, ffn = l.ffn, ffn_in = l.ffnInputWidth();
  const int group = std::max(1, l.heads / std::max(1, l.kv_heads));
  const std::ptrdiff_t dd = d; // head offsets into the rows, in the pointer's width
  multiply(N, N, t, qkv, h, 1.0f, x, h, wqkv_, qkv, 0.0f, qkv_.data(), qkv);
  // Scaled dot-product attention (Vaswani et al. 2017) as Megatron-LM's unfused attention runs it:
  // the s×s scores scaled by 1/sqrt(d), a softmax over each row, then the context.
  const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
  for (int b = 0; b < l.batch; ++b) {
    const float *rows = qkv_.data() + static_cast<std::size_t>(b) * s * qkv;
    float *context = context_.data() + static_cast<std::size_t>(b) * s * attn;
    for (int head = 0; head < l.heads; ++head) {
      const int kv = head / group;
      const float *q = rows + head * dd;
      const float *k = rows + (l.heads + kv) * dd;
      const float *v = rows + (l.heads + l.kv_heads + kv) * dd;
      multiply(N, T, s, s, d, alpha, q, qkv, k, qkv, 0.0f, scores_.data(), s);
      softmaxRows(scores_.data(), s, s);
      multiply(N, N, s, d, s, 1.0f, scores_.data(), s, v, qkv, 0.0f, context + head * dd, attn);
    }
  }
  multiply(N, N, t, h, attn, 1.0f, context_.data(), attn, wo_, h, 0.0f, projected_.data(), h);
  if (!reduceIfAny(reduce, projected_)) return false;
  multiply(N, N, t, ffn_in, h, 1.0f, projected_.data(), h, w1_, ffn_in, 0.0f, ffn_pre_.data(),
           ffn_in);
  if (l.gated)
    biasSwigluForward(ffn_pre_.data(), b1_, ffn_act_.data(), t, ffn);
  else
    biasGeluForward(ffn_pre_.data(), b1_, ffn_act_.data(), t, ffn);
  multiply(N, N, t, h, ffn, 1.0f, ffn_act_.data(), ffn, w2_, h, 0.0f, y, h);
  if (reduce && !reduce(y, static_cast<std::size_t>(t) * h)) return false;
  normalizeRows(y, t, h);
  return true;
}

bool CpuStage::layerInputGrad(const float *dy, float *dx, const AllReduceSum &reduce) {
  const LayerShape &l = work_.layer;
  const int t = l.tokens(), h = l.hidden, qkv = l.qkvWidth(), attn = l.attentionWidth(),
            s = l.sequence, d = l.head_dim, ffn = l.ffn, ffn_in = l.ffnInputWidth();
  const int group = std::max(1, l.heads / std::max(1, l.kv_heads));
  const std::ptrdiff_t dd = d; // head offsets into the rows, in the pointer's width
  multiply(N, T, t, ffn, h, 1.0f, dy, h, w2_, h, 0.0f, dffn_act_.data(), ffn);
  if (l.gated)
    biasSwigluBackward(dffn_act_.data(), ffn_pre_.data(), b1_, dffn_pre_.data(), t, ffn);
  else
    biasGeluBackward(dffn_act_.data(), ffn_pre_.data(), b1_, dffn_pre_.data(), t, ffn);
  multiply(N, T, t, h, ffn_in, 1.0f, dffn_pre_.data(), ffn_in, w1_, ffn_in, 0.0f,
           dprojected_.data(), h);
  if (!reduceIfAny(reduce, dprojected_)) return false;
  multiply(N, T, t, attn, h, 1.0f, dprojected_.data(), h, wo_, h, 0.0f, dcontext_.data(), attn);
  const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
  for (int b = 0; b < l.batch; ++b) {
    const float *rows = qkv_.data() + static_cast<std::size_t>(b) * s * qkv;
    float *drows = dqkv_.data() + static_cast<std::size_t>(b) * s * qkv;
    const float *dcontext = dcontext_.data() + static_cast<std::size_t>(b) * s * attn;
    for (int head = 0; head < l.heads; ++head) {
      const int kv = head / group;
      // The first head of a KV group overwrites dK and dV; the others of the group add to them.
      const float beta_kv = head % group == 0 ? 0.0f : 1.0f;
      const float *q = rows + head * dd;
      const float *k = rows + (l.heads + kv) * dd;
      const float *v = rows + (l.heads + l.kv_heads + kv) * dd;
      float *dq = drows + head * dd;
      float *dk = drows + (l.heads + kv) * dd;
      float *dv = drows + (l.heads + l.kv_heads + kv) * dd;
      const float *dc = dcontext + head * dd;
      multiply(N, T, s, s, d, 1.0f, dc, attn, v, qkv, 0.0f, dscores_.data(), s);    // dP = dC·Vᵀ
      multiply(T, N, s, d, s, 1.0f, scores_.data(), s, dc, attn, beta_kv, dv, qkv); // dV = Pᵀ·dC
      // dS = P·(dP − Σ dP·P) per row, from the stored probabilities; then dQ and dK from dS.
      softmaxRowsBackward(scores_.data(), dscores_.data(), s, s);
      multiply(N, N, s, d, s, alpha, dscores_.data(), s, k, qkv, 0.0f, dq, qkv);    // dQ = dS·K
      multiply(T, N, s, d, s, alpha, dscores_.data(), s, q, qkv, beta_kv, dk, qkv); // dK = dSᵀ·Q
    }
  }
  multiply(N, T, t, h, qkv, 1.0f, dqkv_.data(), qkv, wqkv_, qkv, 0.0f, dx, h);
  if (reduce && !reduce(dx, static_cast<std::size_t>(t) * h)) return false;
  normalizeRows(dx, t, h);
  return true;
}

void CpuStage::layerWeightGrad() {
  const LayerShape &l = work_.layer;
  const int t = l.tokens(), h = l.hidden, qkv = l.qkvWidth(), attn = l.attentionWidth(),
            ffn = l.ffn, ffn_in = l.ffnInputWidth();
  multiply(T, N, ffn, h, t, 1.0f, ffn_act_.data(), ffn, dy_.data(), h, 1.0f, dw2_, h);
  columnSums(dffn_pre_.data(), t, ffn_in, bias_sums_.data());
  for (int c = 0; c < ffn_in; ++c)
    db1_[c] += bias_sums_[static_cast<std::size_t>(c)];
  multiply(T, N, h, ffn_in, t, 1.0f, projected_.data(), h, dffn_pre_.data(), ffn_in, 1.0f, dw1_,
           ffn_in);
  multiply(T, N, attn, h, t, 1.0f, context_.data(), attn, dprojected_.data(), h, 1.0f, dwo_, h);
  multiply(T, N, h, qkv, t, 1.0f, x_.data(), h, dqkv_.data(), qkv, 1.0f, dwqkv_, qkv);
}

} // namespace pipescope::kernels

namespace pipescope::kernels {

void CpuStage::multiply(Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
                        float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                        float *c, int ldc) {
  gemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (progress_) progress_();
}

} // namespace pipescope::kernels
