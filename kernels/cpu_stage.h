#pragma once
// One virtual stage's synthetic compute on the CPU in fp32: the forward, the input-grad and the
// weight-grad passes as separate sets of GEMMs, so that a zero-bubble schedule can run W apart
// from I exactly as it is scheduled.
//
// The stage keeps one set of weights shared by its layers and one set of intermediate buffers
// shared by its microbatches: every GEMM of the model runs with its real shape, so the work and the
// time are the model's, while memory stays bounded (the numbers that flow are not a trained
// model's). Activations and gradients are renormalized at each layer boundary to stay finite.
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cpu_gemm.h"
#include "kernels/stage_work.h"

namespace pipescope::kernels {

/// Sums a buffer over the tensor-parallel group in place; returns false when the collective
/// failed. Empty when tp = 1.
using AllReduceSum = std::function<bool(float *data, std::size_t count)>;

class CpuStage {
public:
  CpuStage(const StageWork &work, std::uint32_t seed);

  const StageWork &work() const { return work_; }
  std::size_t activationElements() const {
    return static_cast<std::size_t>(work_.activationElements());
  }

  /// output = stage(input). input == nullptr: the first stage's own (embedded) input.
  bool forward(const float *input, float *output, const AllReduceSum &reduce);
  /// input_grad = ∂loss/∂input from output_grad. output_grad == nullptr: the last stage, whose
  /// loss gradient stands in from its forward output. input_grad may be nullptr (first stage).
  bool inputGrad(const float *output_grad, float *input_grad, const AllReduceSum &reduce);
  /// Accumulates the weight gradients from the last input-grad pass's intermediates.
  void weightGrad();
  /// Called after every GEMM: lets the caller drive its transfers while the stage computes (an
  /// MPI library moves a large message only while one of its calls runs on the sender).
  void setProgressHook(std::function<void()> hook) { progress_ = std::move(hook); }
  /// The accumulated weight gradients (for the DP all-reduce at the end of a step).
  std::vector<float> &weightGradients() { return weight_grads_; }

private:
  bool layerForward(const float *x, float *y, const AllReduceSum &reduce);
  bool layerInputGrad(const float *dy, float *dx, const AllReduceSum &reduce);
  void layerWeightGrad();
  void multiply(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

  StageWork work_;
  std::function<void()> progress_;
  // Weights and their gradients, each a slice of one allocation (so the DP all-reduce is one call).
  std::vector<float> weights_, weight_grads_;
  float *wqkv_ = nullptr, *wo_ = nullptr, *w1_ = nullptr, *b1_ = nullptr, *w2_ = nullptr,
        *head_ = nullptr, *unit_w_ = nullptr;
  float *dwqkv_ = nullptr, *dwo_ = nullptr, *dw1_ = nullptr, *db1_ = nullptr, *dw2_ = nullptr,
        *dhead_ = nullptr, *unit_dw_ = nullptr;
  // Intermediates shared by the stage's layers and microbatches.
  std::vector<float> input_, x_, y_, qkv_, scores_, context_, projected_, ffn_pre_, ffn_act_,
      logits_, dy_, dffn_act_, dffn_pre_, dprojected_, dcontext_, dscores_, dqkv_, dx_, bias_sums_;
};

} // namespace pipescope::kernels
