#pragma once
// What one virtual stage computes for one microbatch: synthetic transformer layers shaped like the
// plan's model (scaled), or, for plans without a model, repeated square GEMMs whose count sets the
// op's duration. The cpu and CUDA implementations both read this description.
#include <cstdint>

namespace pipescope::kernels {

/// One transformer layer as one tensor-parallel rank computes it (Megatron-LM's split, Shoeybi et
/// al. 2019): attention heads and the FFN width are divided by tp; hidden is whole.
struct LayerShape {
  int batch = 1;     ///< b, sequences per microbatch
  int sequence = 64; ///< s
  int hidden = 64;   ///< h, the layer's input and output width
  int heads = 4;     ///< query heads on this TP rank
  int kv_heads = 4;  ///< key/value heads on this TP rank (grouped-query attention when fewer)
  int head_dim = 16; ///< h / a of the model
  int ffn = 256;     ///< FFN width on this TP rank
  bool gated = true; ///< SwiGLU (Shazeer 2020) with two input matrices; else GELU

  int tokens() const { return batch * sequence; }
  int qkvWidth() const { return (heads + 2 * kv_heads) * head_dim; }
  int attentionWidth() const { return heads * head_dim; }
  int ffnInputWidth() const { return gated ? 2 * ffn : ffn; }

  /// Matmul FLOPs, 2·m·n·k per GEMM, of the weight GEMMs (QKV, output projection, FFN).
  double linearFlops() const {
    const double t = tokens();
    return 2 * t * hidden * (qkvWidth() + ffnInputWidth()) + 2 * t * attentionWidth() * hidden +
           2 * t * ffn * hidden;
  }
  /// Scores Q·Kᵀ and context S·V: 4·b·s²·(heads·head_dim) (Narayanan et al. 2021, eq. 3).
  double attentionFlops() const {
    return 4.0 * batch * static_cast<double>(sequence) * sequence * attentionWidth();
  }
  double forwardFlops() const { return linearFlops() + attentionFlops(); }
  /// Every weight GEMM once more for the input gradient, and the attention matmuls twice (the
  /// zero-bubble paper's split, Qi et al. 2024).
  double inputGradFlops() const { return linearFlops() + 2 * attentionFlops(); }
  double weightGradFlops() const { return linearFlops(); }
};

/// The work of one virtual stage.
struct StageWork {
  // Plans with a model: `layers` synthetic layers, and the output head on the model's last stage.
  int layers = 0;
  LayerShape layer;
  int head_vocab = 0; ///< vocabulary columns of the output head on this TP rank (0: no head)

  // Plans without a model: each op runs its count of unit GEMMs (unit×unit times unit×unit).
  int unit = 0; ///< 0 when the stage has model layers
  int unit_forward = 0;
  int unit_input_grad = 0;
  int unit_weight_grad = 0;

  /// Rows and columns of the activation that crosses a stage boundary.
  int activationRows() const { return unit > 0 ? unit : layer.tokens(); }
  int activationColumns() const { return unit > 0 ? unit : layer.hidden; }
  std::int64_t activationElements() const {
    return static_cast<std::int64_t>(activationRows()) * activationColumns();
  }

  double forwardFlops() const {
    if (unit > 0) return 2.0 * unit * unit * static_cast<double>(unit) * unit_forward;
    return layers * layer.forwardFlops() + headFlops();
  }
  double inputGradFlops() const {
    if (unit > 0) return 2.0 * unit * unit * static_cast<double>(unit) * unit_input_grad;
    return layers * layer.inputGradFlops() + headFlops();
  }
  double weightGradFlops() const {
    if (unit > 0) return 2.0 * unit * unit * static_cast<double>(unit) * unit_weight_grad;
    return layers * layer.weightGradFlops() + headFlops();
  }
  double headFlops() const {
    return 2.0 * layer.tokens() * static_cast<double>(layer.hidden) * head_vocab;
  }
};

} // namespace pipescope::kernels
