// Fused bias + activation kernels of the synthetic layer: one pass over the GEMM output instead of
// a bias add and an activation, as Megatron-LM fuses them (bias_gelu / bias_swiglu). Grid-stride
// loops keep one launch shape for every size.
#include "kernels/cuda_kernels.h"

#include <cmath>
#include <cstdint>

#include <cuda_fp8.h>

namespace pipescope::kernels {

namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

unsigned blocksFor(std::size_t count) {
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

__device__ inline float load(const bf16 *p, std::size_t i) {
  return __bfloat162float(p[i]);
}
__device__ inline float sigmoidOf(float x) {
  return 1.0f / (1.0f + __expf(-x));
}

__device__ inline float geluOf(float x) {
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}
__device__ inline float geluDerivativeOf(float x) {
  const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}

#define GRID_STRIDE(i, n)                                                                          \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n);   \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

__global__ void biasGeluForward(const bf16 *pre, const bf16 *bias, bf16 *out, int rows,
                                int columns) {
  GRID_STRIDE(i, static_cast<std::size_t>(rows) * columns) {
    out[i] = __float2bfloat16(geluOf(load(pre, i) + load(bias, i % columns)));
  }
}

__global__ void biasGeluBackward(const bf16 *dout, const bf16 *pre, const bf16 *bias, bf16 *dpre,
                                 int rows, int columns) {
  GRID_STRIDE(i, static_cast<std::size_t>(rows) * columns) {
    dpre[i] =
        __float2bfloat16(load(dout, i) * geluDerivativeOf(load(pre, i) + load(bias, i % columns)));
  }
}

__global__ void biasSwigluForward(const bf16 *pre, const bf16 *bias, bf16 *out, int rows,
                                  int columns) {
  GRID_STRIDE(i, static_cast<std::size_t>(rows) * columns) {
    const std::size_t r = i / columns, c = i % columns,
                      width = 2 * static_cast<std::size_t>(columns);
    const float gate = load(pre, r * width + c) + load(bias, c);
    const float up = load(pre, r * width + columns + c) + load(bias, columns + c);
    out[i] = __float2bfloat16(gate * sigmoidOf(gate) * up);
  }
}

__global__ void biasSwigluBackward(const bf16 *dout, const bf16 *pre, const bf16 *bias, bf16 *dpre,
                                   int rows, int columns) {
  GRID_STRIDE(i, static_cast<std::size_t>(rows) * columns) {
    const std::size_t r = i / columns, c = i % columns,
                      width = 2 * static_cast<std::size_t>(columns);
    const float gate = load(pre, r * width + c) + load(bias, c);
    const float up = load(pre, r * width + columns + c) + load(bias, columns + c);
    const float s = sigmoidOf(gate), d = load(dout, i);
    dpre[r * width + c] = __float2bfloat16(d * up * s * (1.0f + gate * (1.0f - s)));
    dpre[r * width + columns + c] = __float2bfloat16(d * gate * s);
  }
}

// One thread per column, looping over rows: coalesced across the warp, enough for a bias.
__global__ void addColumnSums(const bf16 *matrix, int rows, int columns, bf16 *bias_grad) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < columns; c += gridDim.x * blockDim.x) {
    float sum = 0.0f;
    for (int r = 0; r < rows; ++r)
      sum += load(matrix, static_cast<std::size_t>(r) * columns + c);
    bias_grad[c] = __float2bfloat16(__bfloat162float(bias_grad[c]) + sum);
  }
}

// One block per row: a shared-memory tree reduction of the squares, then the scaling.
__global__ void normalizeRows(bf16 *matrix, int columns) {
  __shared__ float partial[kThreads];
  bf16 *row = matrix + static_cast<std::size_t>(blockIdx.x) * columns;
  float squares = 0.0f;
  for (int c = threadIdx.x; c < columns; c += blockDim.x) {
    const float x = __bfloat162float(row[c]);
    squares += x * x;
  }
  partial[threadIdx.x] = squares;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float rms = sqrtf(partial[0] / columns);
  const bool usable = rms > 1e-30f && isfinite(rms);
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    row[c] = usable ? __float2bfloat16(__bfloat162float(row[c]) / rms) : __float2bfloat16(1.0f);
}

// A block-wide sum or maximum over kThreads values; every thread gets the result. Each warp
// reduces by shuffles, then every thread combines the warps' results from shared memory: two
// barriers, where a tree over shared memory takes one per halving (nine at 256 threads). In a
// 32-SM partition of an H200 the row-cached softmax forward, two reductions per row, went from
// 591 to 695 GB/s with it (docs/measurements/gpu-shared-h200.md).
__device__ float blockReduce(float value, float *partial, bool maximum) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = maximum ? fmaxf(value, other) : value + other;
  }
  const int warps = static_cast<int>(blockDim.x) / warpSize;
  __syncthreads(); // the previous use of `partial` is over
  if (threadIdx.x % warpSize == 0) partial[threadIdx.x / warpSize] = value;
  __syncthreads();
  value = partial[0];
  for (int w = 1; w < warps; ++w)
    value = maximum ? fmaxf(value, partial[w]) : value + partial[w];
  return value;
}

// One block per row of scores: the maximum, the sum of exponentials, then the probabilities
// (bf16 storage, fp32 math), as Megatron-LM's scaled softmax kernels keep a row in one block.
__global__ void softmaxRows(bf16 *matrix, int columns) {
  __shared__ float partial[kThreads];
  bf16 *row = matrix + static_cast<std::size_t>(blockIdx.x) * columns;
  float largest = -INFINITY;
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    largest = fmaxf(largest, __bfloat162float(row[c]));
  largest = blockReduce(largest, partial, true);
  float sum = 0.0f;
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    sum += __expf(__bfloat162float(row[c]) - largest);
  sum = blockReduce(sum, partial, false);
  const float inverse = 1.0f / sum;
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    row[c] = __float2bfloat16(__expf(__bfloat162float(row[c]) - largest) * inverse);
}

// grad = probs · (grad − Σ grad·probs) per row.
__global__ void softmaxRowsBackward(const bf16 *probs, bf16 *grad, int columns) {
  __shared__ float partial[kThreads];
  const std::size_t offset = static_cast<std::size_t>(blockIdx.x) * columns;
  const bf16 *p = probs + offset;
  bf16 *g = grad + offset;
  float dot = 0.0f;
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    dot += __bfloat162float(g[c]) * __bfloat162float(p[c]);
  dot = blockReduce(dot, partial, false);
  for (int c = threadIdx.x; c < columns; c += blockDim.x)
    g[c] = __float2bfloat16(__bfloat162float(p[c]) * (__bfloat162float(g[c]) - dot));
}

// The same softmax passes with each row read from memory once and written once, for rows whose
// width is a multiple of 8 (16-byte loads of 8 bf16) and at most kCachedColumns (shared memory):
// the attention rows of sequences up to 11264. The kernels above read a row three times (forward)
// or twice (backward) in 2-byte loads, where the cost model prices one read and one write of
// each; Megatron-LM's scaled_masked_softmax kernels likewise hold a row in registers between
// their passes. On one H200, 16384 rows of 4096 in one stage's 32 SMs: the forward 391 → 591
// GB/s, the backward 615 → 1769 GB/s, where a copy reaches 2795 GB/s, and the gpu-shared stages'
// steps ran 17-20 % faster (docs/measurements/gpu-shared-h200.md). Each thread keeps the vectors
// it loaded in shared memory at its own slots, so no pass reads another thread's values.
constexpr int kVectorWidth = 8; // bf16 values in one 16-byte load
// 44 KiB of fp32 a row: with the reduction's 1 KiB of static shared memory, under the 48 KiB a
// block may take without opting in.
constexpr int kCachedColumns = 11 << 10;

union PackedBf16 {
  uint4 vector;
  bf16 values[kVectorWidth];
};

__global__ void softmaxRowsCached(bf16 *matrix, int columns) {
  // Two float4 per vector of 8, at the loading thread's slots.
  extern __shared__ float4 exponentials[];
  __shared__ float partial[kThreads];
  uint4 *row = reinterpret_cast<uint4 *>(matrix + static_cast<std::size_t>(blockIdx.x) * columns);
  const int vectors = columns / kVectorWidth;
  float largest = -INFINITY;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    PackedBf16 packed;
    packed.vector = row[v];
    float x[kVectorWidth];
    for (int j = 0; j < kVectorWidth; ++j) {
      x[j] = __bfloat162float(packed.values[j]);
      largest = fmaxf(largest, x[j]);
    }
    exponentials[2 * v] = make_float4(x[0], x[1], x[2], x[3]);
    exponentials[2 * v + 1] = make_float4(x[4], x[5], x[6], x[7]);
  }
  largest = blockReduce(largest, partial, true);
  float sum = 0.0f;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x)
    for (int half = 0; half < 2; ++half) {
      float4 &e = exponentials[2 * v + half];
      e = make_float4(__expf(e.x - largest), __expf(e.y - largest), __expf(e.z - largest),
                      __expf(e.w - largest));
      sum += e.x + e.y + e.z + e.w;
    }
  sum = blockReduce(sum, partial, false);
  const float inverse = 1.0f / sum;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    const float4 a = exponentials[2 * v], b = exponentials[2 * v + 1];
    const float e[kVectorWidth] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    PackedBf16 packed;
    for (int j = 0; j < kVectorWidth; ++j)
      packed.values[j] = __float2bfloat16(e[j] * inverse);
    row[v] = packed.vector;
  }
}

__global__ void softmaxRowsBackwardCached(const bf16 *probs, bf16 *grad, int columns) {
  extern __shared__ uint4 loaded[]; // the row's probabilities, then its gradients, as loaded
  __shared__ float partial[kThreads];
  const std::size_t offset = static_cast<std::size_t>(blockIdx.x) * columns;
  const uint4 *p = reinterpret_cast<const uint4 *>(probs + offset);
  uint4 *g = reinterpret_cast<uint4 *>(grad + offset);
  const int vectors = columns / kVectorWidth;
  float dot = 0.0f;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    PackedBf16 pv, gv;
    pv.vector = p[v];
    gv.vector = g[v];
    for (int j = 0; j < kVectorWidth; ++j)
      dot += __bfloat162float(gv.values[j]) * __bfloat162float(pv.values[j]);
    loaded[v] = pv.vector;
    loaded[vectors + v] = gv.vector;
  }
  dot = blockReduce(dot, partial, false);
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    PackedBf16 pv, gv, out;
    pv.vector = loaded[v];
    gv.vector = loaded[vectors + v];
    for (int j = 0; j < kVectorWidth; ++j)
      out.values[j] =
          __float2bfloat16(__bfloat162float(pv.values[j]) * (__bfloat162float(gv.values[j]) - dot));
    g[v] = out.vector;
  }
}

// Whether rows of `columns` starting at these pointers can take the cached kernels.
bool cachedRows(int columns, const void *a, const void *b = nullptr) {
  const auto aligned = [](const void *pointer) {
    return reinterpret_cast<std::uintptr_t>(pointer) % sizeof(uint4) == 0;
  };
  return columns % kVectorWidth == 0 && columns <= kCachedColumns && aligned(a) &&
         (b == nullptr || aligned(b));
}

// Uniform in [-scale, scale] from a 32-bit integer hash (Wang hash variant) of the index mixed
// with the seed.
__device__ float uniformAt(std::size_t i, float scale, std::uint32_t seed) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 747796405u + seed * 2891336453u + 1u;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return scale * (static_cast<float>(x) / 2147483648.0f - 1.0f);
}

__global__ void fillUniform(bf16 *data, std::size_t count, float scale, std::uint32_t seed) {
  GRID_STRIDE(i, count) {
    data[i] = __float2bfloat16(uniformAt(i, scale, seed));
  }
}

__global__ void fillUniformFp8(__nv_fp8_e4m3 *data, std::size_t count, float scale,
                               std::uint32_t seed) {
  GRID_STRIDE(i, count) {
    data[i] = __nv_fp8_e4m3(uniformAt(i, scale, seed));
  }
}

__global__ void toFloat(const bf16 *in, float *out, std::size_t count) {
  GRID_STRIDE(i, count) {
    out[i] = __bfloat162float(in[i]);
  }
}

__global__ void toBf16(const float *in, bf16 *out, std::size_t count) {
  GRID_STRIDE(i, count) {
    out[i] = __float2bfloat16(in[i]);
  }
}

// One stand-in for a collective's channel: a CTA that stays resident on its SM until `*stop`
// is set, as an NCCL kernel's CTAs do for the length of a collective (mostly waiting on the
// network). 512 threads and more than half an SM's shared memory keep it alone on its SM, as a
// Hopper GEMM CTA is alone on its. One thread polls the flag, a few microseconds apart, and
// counts the CTA in through `started` (host memory the host reads).
__global__ void __launch_bounds__(kResidentChannelThreads, 1)
    residentChannel(const volatile int *stop, int *started) {
  extern __shared__ unsigned char reserved[];
  __shared__ int done;
  if (threadIdx.x == 0) {
    reserved[0] = 0;
    atomicAdd_system(started, 1);
  }
  for (;;) {
    if (threadIdx.x == 0) {
      done = *stop;
      if (!done) __nanosleep(4000);
    }
    __syncthreads();
    if (done) break;
    __syncthreads();
  }
}

std::size_t cells(int rows, int columns) {
  return static_cast<std::size_t>(rows > 0 ? rows : 0) *
         static_cast<std::size_t>(columns > 0 ? columns : 0);
}

} // namespace

cudaError_t launchBiasGeluForward(const bf16 *pre, const bf16 *bias, bf16 *out, int rows,
                                  int columns, cudaStream_t stream) {
  biasGeluForward<<<blocksFor(cells(rows, columns)), kThreads, 0, stream>>>(pre, bias, out, rows,
                                                                            columns);
  return cudaGetLastError();
}

cudaError_t launchBiasGeluBackward(const bf16 *dout, const bf16 *pre, const bf16 *bias, bf16 *dpre,
                                   int rows, int columns, cudaStream_t stream) {
  biasGeluBackward<<<blocksFor(cells(rows, columns)), kThreads, 0, stream>>>(dout, pre, bias, dpre,
                                                                             rows, columns);
  return cudaGetLastError();
}

cudaError_t launchBiasSwigluForward(const bf16 *pre, const bf16 *bias, bf16 *out, int rows,
                                    int columns, cudaStream_t stream) {
  biasSwigluForward<<<blocksFor(cells(rows, columns)), kThreads, 0, stream>>>(pre, bias, out, rows,
                                                                              columns);
  return cudaGetLastError();
}

cudaError_t launchBiasSwigluBackward(const bf16 *dout, const bf16 *pre, const bf16 *bias,
                                     bf16 *dpre, int rows, int columns, cudaStream_t stream) {
  biasSwigluBackward<<<blocksFor(cells(rows, columns)), kThreads, 0, stream>>>(dout, pre, bias,
                                                                               dpre, rows, columns);
  return cudaGetLastError();
}

cudaError_t launchAddColumnSums(const bf16 *matrix, int rows, int columns, bf16 *bias_grad,
                                cudaStream_t stream) {
  addColumnSums<<<blocksFor(cells(1, columns)), kThreads, 0, stream>>>(matrix, rows, columns,
                                                                       bias_grad);
  return cudaGetLastError();
}

cudaError_t launchNormalizeRows(bf16 *matrix, int rows, int columns, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  normalizeRows<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(matrix, columns);
  return cudaGetLastError();
}

cudaError_t launchSoftmaxRows(bf16 *matrix, int rows, int columns, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (cachedRows(columns, matrix))
    softmaxRowsCached<<<static_cast<unsigned>(rows), kThreads,
                        static_cast<std::size_t>(columns) * sizeof(float), stream>>>(matrix,
                                                                                     columns);
  else
    softmaxRows<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(matrix, columns);
  return cudaGetLastError();
}

cudaError_t launchSoftmaxRowsBackward(const bf16 *probs, bf16 *grad, int rows, int columns,
                                      cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (cachedRows(columns, probs, grad))
    softmaxRowsBackwardCached<<<static_cast<unsigned>(rows), kThreads,
                                static_cast<std::size_t>(columns) * 2 * sizeof(bf16), stream>>>(
        probs, grad, columns);
  else
    softmaxRowsBackward<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(probs, grad, columns);
  return cudaGetLastError();
}

cudaError_t launchFillUniform(bf16 *data, std::size_t count, float scale, std::uint32_t seed,
                              cudaStream_t stream) {
  fillUniform<<<blocksFor(count), kThreads, 0, stream>>>(data, count, scale, seed);
  return cudaGetLastError();
}

cudaError_t launchFillUniformFp8(void *data, std::size_t count, float scale, std::uint32_t seed,
                                 cudaStream_t stream) {
  fillUniformFp8<<<blocksFor(count), kThreads, 0, stream>>>(static_cast<__nv_fp8_e4m3 *>(data),
                                                            count, scale, seed);
  return cudaGetLastError();
}

cudaError_t launchToFloat(const bf16 *in, float *out, std::size_t count, cudaStream_t stream) {
  toFloat<<<blocksFor(count), kThreads, 0, stream>>>(in, out, count);
  return cudaGetLastError();
}

cudaError_t launchToBf16(const float *in, bf16 *out, std::size_t count, cudaStream_t stream) {
  toBf16<<<blocksFor(count), kThreads, 0, stream>>>(in, out, count);
  return cudaGetLastError();
}

cudaError_t launchResidentChannels(int channels, const int *stop, int *started,
                                   cudaStream_t stream) {
  const cudaError_t status = cudaFuncSetAttribute(
      residentChannel, cudaFuncAttributeMaxDynamicSharedMemorySize, kResidentChannelSharedBytes);
  if (status != cudaSuccess) return status;
  residentChannel<<<channels, kResidentChannelThreads, kResidentChannelSharedBytes, stream>>>(
      stop, started);
  return cudaGetLastError();
}

} // namespace pipescope::kernels
