#include "kernels/cpu_elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pipescope::kernels {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

inline std::size_t at(int row, int column, int columns) {
  return static_cast<std::size_t>(row) * static_cast<std::size_t>(columns) +
         static_cast<std::size_t>(column);
}
inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
} // namespace

float gelu(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

float geluDerivative(float x) {
  const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = std::tanh(inner);
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}

void biasGeluForward(const float *pre, const float *bias, float *out, int rows, int columns) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < columns; ++c)
      out[at(r, c, columns)] = gelu(pre[at(r, c, columns)] + bias[c]);
}

void biasGeluBackward(const float *dout, const float *pre, const float *bias, float *dpre, int rows,
                      int columns) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < columns; ++c)
      dpre[at(r, c, columns)] =
          dout[at(r, c, columns)] * geluDerivative(pre[at(r, c, columns)] + bias[c]);
}

void biasSwigluForward(const float *pre, const float *bias, float *out, int rows, int columns) {
  const int width = 2 * columns;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < columns; ++c) {
      const float gate = pre[at(r, c, width)] + bias[c];
      const float up = pre[at(r, columns + c, width)] + bias[columns + c];
      out[at(r, c, columns)] = gate * sigmoid(gate) * up;
    }
}

void biasSwigluBackward(const float *dout, const float *pre, const float *bias, float *dpre,
                        int rows, int columns) {
  const int width = 2 * columns;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < columns; ++c) {
      const float gate = pre[at(r, c, width)] + bias[c];
      const float up = pre[at(r, columns + c, width)] + bias[columns + c];
      const float s = sigmoid(gate);
      const float d = dout[at(r, c, columns)];
      // d silu(g)/dg = σ(g)·(1 + g·(1 − σ(g))).
      dpre[at(r, c, width)] = d * up * s * (1.0f + gate * (1.0f - s));
      dpre[at(r, columns + c, width)] = d * gate * s;
    }
}

void columnSums(const float *matrix, int rows, int columns, float *sums) {
  for (int c = 0; c < columns; ++c)
    sums[c] = 0.0f;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < columns; ++c)
      sums[c] += matrix[at(r, c, columns)];
}

void softmaxRows(float *matrix, int rows, int columns) {
  for (int r = 0; r < rows; ++r) {
    float *row = matrix + at(r, 0, columns);
    float largest = -std::numeric_limits<float>::infinity();
    for (int c = 0; c < columns; ++c)
      largest = std::max(largest, row[c]);
    double sum = 0;
    for (int c = 0; c < columns; ++c)
      sum += std::exp(static_cast<double>(row[c] - largest));
    for (int c = 0; c < columns; ++c)
      row[c] = static_cast<float>(std::exp(static_cast<double>(row[c] - largest)) / sum);
  }
}

void softmaxRowsBackward(const float *probs, float *grad, int rows, int columns) {
  for (int r = 0; r < rows; ++r) {
    const float *p = probs + at(r, 0, columns);
    float *g = grad + at(r, 0, columns);
    double dot = 0;
    for (int c = 0; c < columns; ++c)
      dot += static_cast<double>(g[c]) * p[c];
    for (int c = 0; c < columns; ++c)
      g[c] = static_cast<float>(p[c] * (g[c] - dot));
  }
}

void normalizeRows(float *matrix, int rows, int columns) {
  for (int r = 0; r < rows; ++r) {
    float *row = matrix + at(r, 0, columns);
    double squares = 0;
    for (int c = 0; c < columns; ++c)
      squares += static_cast<double>(row[c]) * row[c];
    const double rms = std::sqrt(squares / columns);
    // A row of zeros (or non-finite values) is reset rather than divided by zero.
    const float factor = rms > 1e-30 && std::isfinite(rms) ? static_cast<float>(1.0 / rms) : 0.0f;
    for (int c = 0; c < columns; ++c)
      row[c] = factor == 0.0f ? 1.0f : row[c] * factor;
  }
}

} // namespace pipescope::kernels
