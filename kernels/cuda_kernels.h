#pragma once
// Fused elementwise CUDA kernels of the synthetic layer (bf16 storage, fp32 math). Each launcher
// enqueues on `stream` and returns the launch status. The math matches cpu_elementwise.h, which
// is their reference.
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace pipescope::kernels {

using bf16 = __nv_bfloat16;

/// out = gelu(pre + bias), rows × columns.
cudaError_t launchBiasGeluForward(const bf16 *pre, const bf16 *bias, bf16 *out, int rows,
                                  int columns, cudaStream_t stream);
/// dpre = dout · gelu'(pre + bias).
cudaError_t launchBiasGeluBackward(const bf16 *dout, const bf16 *pre, const bf16 *bias, bf16 *dpre,
                                   int rows, int columns, cudaStream_t stream);
/// out = silu(gate + bias_g) · (up + bias_u); pre is rows × 2·columns (gate, then up).
cudaError_t launchBiasSwigluForward(const bf16 *pre, const bf16 *bias, bf16 *out, int rows,
                                    int columns, cudaStream_t stream);
/// dpre (rows × 2·columns) from dout (rows × columns).
cudaError_t launchBiasSwigluBackward(const bf16 *dout, const bf16 *pre, const bf16 *bias,
                                     bf16 *dpre, int rows, int columns, cudaStream_t stream);
/// bias_grad[c] += Σ_r matrix[r][c].
cudaError_t launchAddColumnSums(const bf16 *matrix, int rows, int columns, bf16 *bias_grad,
                                cudaStream_t stream);
/// Softmax of each row in place; its backward in place from the stored probabilities
/// (cpu_elementwise.h softmaxRows / softmaxRowsBackward).
cudaError_t launchSoftmaxRows(bf16 *matrix, int rows, int columns, cudaStream_t stream);
cudaError_t launchSoftmaxRowsBackward(const bf16 *probs, bf16 *grad, int rows, int columns,
                                      cudaStream_t stream);
/// Each row scaled to unit root-mean-square (RMSNorm without a weight).
cudaError_t launchNormalizeRows(bf16 *matrix, int rows, int columns, cudaStream_t stream);
/// Uniform values in [-scale, scale] from a counter-based hash of (seed, index).
cudaError_t launchFillUniform(bf16 *data, std::size_t count, float scale, std::uint32_t seed,
                              cudaStream_t stream);
/// The same values as launchFillUniform, rounded to FP8 E4M3 (one byte each): the operands of
/// --gemm-bench's FP8 rungs.
cudaError_t launchFillUniformFp8(void *data, std::size_t count, float scale, std::uint32_t seed,
                                 cudaStream_t stream);
/// `channels` CTAs that each hold one SM until *stop (device memory) becomes non-zero, each
/// adding 1 to *started (mapped host memory) once resident: the footprint of an NCCL
/// collective's channels, for --gemm-bench's measure of what a resident collective costs the
/// GEMMs beside it. The caller sets *stop from another stream and waits on `stream`.
inline constexpr int kResidentChannelThreads = 512;
inline constexpr int kResidentChannelSharedBytes = 120 << 10; // over half an SM's 228 KiB
cudaError_t launchResidentChannels(int channels, const int *stop, int *started,
                                   cudaStream_t stream);
/// bf16 → fp32 and fp32 → bf16 copies (for the checks).
cudaError_t launchToFloat(const bf16 *in, float *out, std::size_t count, cudaStream_t stream);
cudaError_t launchToBf16(const float *in, bf16 *out, std::size_t count, cudaStream_t stream);

} // namespace pipescope::kernels
