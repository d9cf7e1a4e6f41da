#include "kernels/cpu_gemm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pipescope::kernels {

namespace {

// Block sizes in the manner of Goto & van de Geijn ("Anatomy of High-Performance Matrix
// Multiplication", ACM TOMS 2008): a KC×NC panel of B stays in L2, an MC×KC block of A in L1/L2,
// and the innermost loop streams one contiguous row of the B panel so the compiler vectorizes it.
constexpr int kBlockM = 64;
constexpr int kBlockK = 128;
constexpr int kBlockN = 512;

inline float elementOf(const float *matrix, int ld, Transpose transpose, int row, int column) {
  return transpose == Transpose::No
             ? matrix[static_cast<std::size_t>(row) * static_cast<std::size_t>(ld) +
                      static_cast<std::size_t>(column)]
             : matrix[static_cast<std::size_t>(column) * static_cast<std::size_t>(ld) +
                      static_cast<std::size_t>(row)];
}

// Copies op(X)[row0.., col0..] (rows × columns) into a dense row-major block.
void pack(const float *matrix, int ld, Transpose transpose, int row0, int col0, int rows,
          int columns, float *out) {
  for (int i = 0; i < rows; ++i) {
    float *dst = out + static_cast<std::size_t>(i) * static_cast<std::size_t>(columns);
    if (transpose == Transpose::No) {
      const float *src = matrix +
                         static_cast<std::size_t>(row0 + i) * static_cast<std::size_t>(ld) +
                         static_cast<std::size_t>(col0);
      std::copy(src, src + columns, dst);
    } else {
      for (int j = 0; j < columns; ++j)
        dst[j] = elementOf(matrix, ld, transpose, row0 + i, col0 + j);
    }
  }
}

// C block (rows × columns, stride ldc) += A block (rows × depth) · B panel (depth × columns).
// Four rows at a time share each load of the B row.
void multiplyBlock(const float *a, const float *b, float *c, int ldc, int rows, int depth,
                   int columns) {
  const auto cols = static_cast<std::size_t>(columns);
  const auto dep = static_cast<std::size_t>(depth);
  int i = 0;
  for (; i + 4 <= rows; i += 4) {
    float *c0 = c + static_cast<std::size_t>(i) * static_cast<std::size_t>(ldc);
    float *c1 = c0 + ldc;
    float *c2 = c1 + ldc;
    float *c3 = c2 + ldc;
    const float *a0 = a + static_cast<std::size_t>(i) * dep;
    for (std::size_t p = 0; p < dep; ++p) {
      const float x0 = a0[p], x1 = a0[dep + p], x2 = a0[2 * dep + p], x3 = a0[3 * dep + p];
      const float *row = b + p * cols;
      for (std::size_t j = 0; j < cols; ++j) {
        const float y = row[j];
        c0[j] += x0 * y;
        c1[j] += x1 * y;
        c2[j] += x2 * y;
        c3[j] += x3 * y;
      }
    }
  }
  for (; i < rows; ++i) {
    float *c0 = c + static_cast<std::size_t>(i) * static_cast<std::size_t>(ldc);
    const float *a0 = a + static_cast<std::size_t>(i) * dep;
    for (std::size_t p = 0; p < dep; ++p) {
      const float x0 = a0[p];
      const float *row = b + p * cols;
      for (std::size_t j = 0; j < cols; ++j)
        c0[j] += x0 * row[j];
    }
  }
}

void scale(float *c, int ldc, int m, int n, float beta) {
  for (int i = 0; i < m; ++i) {
    float *row = c + static_cast<std::size_t>(i) * static_cast<std::size_t>(ldc);
    if (beta == 0.0f)
      std::fill(row, row + n, 0.0f);
    else if (beta != 1.0f)
      for (int j = 0; j < n; ++j)
        row[j] *= beta;
  }
}

} // namespace

void gemm(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, float alpha,
          const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  if (m <= 0 || n <= 0) return;
  scale(c, ldc, m, n, beta);
  if (k <= 0 || alpha == 0.0f) return;
  // Per-thread scratch: one B panel and one A block, reused across calls.
  thread_local std::vector<float> panel, block;
  panel.resize(static_cast<std::size_t>(kBlockK) * kBlockN);
  block.resize(static_cast<std::size_t>(kBlockM) * kBlockK);
  for (int j0 = 0; j0 < n; j0 += kBlockN) {
    const int columns = std::min(kBlockN, n - j0);
    for (int p0 = 0; p0 < k; p0 += kBlockK) {
      const int depth = std::min(kBlockK, k - p0);
      pack(b, ldb, transpose_b, p0, j0, depth, columns, panel.data());
      for (int i0 = 0; i0 < m; i0 += kBlockM) {
        const int rows = std::min(kBlockM, m - i0);
        pack(a, lda, transpose_a, i0, p0, rows, depth, block.data());
        if (alpha != 1.0f)
          for (std::size_t x = 0; x < static_cast<std::size_t>(rows) * depth; ++x)
            block[x] *= alpha;
        multiplyBlock(block.data(), panel.data(),
                      c + static_cast<std::size_t>(i0) * static_cast<std::size_t>(ldc) +
                          static_cast<std::size_t>(j0),
                      ldc, rows, depth, columns);
      }
    }
  }
}

void gemmReference(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c,
                   int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p)
        sum += static_cast<double>(elementOf(a, lda, transpose_a, i, p)) *
               static_cast<double>(elementOf(b, ldb, transpose_b, p, j));
      float &out = c[static_cast<std::size_t>(i) * static_cast<std::size_t>(ldc) +
                     static_cast<std::size_t>(j)];
      out = static_cast<float>(alpha * sum + (beta == 0.0f ? 0.0 : beta * out));
    }
}

double maxRelativeError(const float *x, const float *y, std::size_t n) {
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double error = std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i])) /
                         (1.0 + std::fabs(static_cast<double>(y[i])));
    if (std::isnan(error)) return INFINITY; // a NaN is the worst error there is
    worst = std::max(worst, error);
  }
  return worst;
}

} // namespace pipescope::kernels
