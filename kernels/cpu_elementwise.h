#pragma once
// Elementwise parts of the synthetic layer on the CPU: bias + activation fused into one pass, as
// the CUDA kernels do it. They are also the reference the CUDA kernels are checked against.
#include <cstddef>

namespace pipescope::kernels {

/// GELU, tanh approximation (Hendrycks & Gimpel 2016, "Gaussian Error Linear Units", eq. 2).
float gelu(float x);
/// d gelu(x) / dx of the same approximation.
float geluDerivative(float x);

/// out[r][c] = gelu(pre[r][c] + bias[c]); pre and out are rows × columns.
void biasGeluForward(const float *pre, const float *bias, float *out, int rows, int columns);
/// dpre = dout · gelu'(pre + bias).
void biasGeluBackward(const float *dout, const float *pre, const float *bias, float *dpre, int rows,
                      int columns);

/// SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer"): pre is rows × 2·columns holding the
/// gate then the up projection; out = silu(gate + bias_g) · (up + bias_u), rows × columns.
void biasSwigluForward(const float *pre, const float *bias, float *out, int rows, int columns);
/// dpre (rows × 2·columns) from dout (rows × columns).
void biasSwigluBackward(const float *dout, const float *pre, const float *bias, float *dpre,
                        int rows, int columns);

/// sums[c] = Σ_r matrix[r][c]: the bias gradient.
void columnSums(const float *matrix, int rows, int columns, float *sums);

/// Softmax of each row in place (the attention probabilities of Megatron-LM's unfused attention,
/// which scales, masks and normalizes the stored s×s scores): exp(x - max) / Σ exp(x - max).
void softmaxRows(float *matrix, int rows, int columns);
/// Its backward in place: grad = probs · (grad - Σ_c grad·probs) per row, from the stored
/// probabilities (the softmax output the forward kept).
void softmaxRowsBackward(const float *probs, float *grad, int rows, int columns);

/// Scales each row to unit root-mean-square (RMSNorm without a weight, Zhang & Sennrich 2019), so
/// values stay in range through many synthetic layers.
void normalizeRows(float *matrix, int rows, int columns);

} // namespace pipescope::kernels
