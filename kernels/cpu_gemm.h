#pragma once
// Single-precision matrix multiply for the backend's cpu device: real work whose time scales with
// m·n·k, cache-blocked so that a laptop core sustains several GFLOP/s without any BLAS library.
#include <cstddef>

namespace pipescope::kernels {

enum class Transpose { No, Yes };

/// C = alpha · op(A) · op(B) + beta · C, all row-major. op(A) is m×k and op(B) is k×n; A is stored
/// m×k (Transpose::No) or k×m (Transpose::Yes) with row stride lda, likewise B with ldb.
/// beta = 0 overwrites C (its old contents may be anything, even NaN).
void gemm(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, float alpha,
          const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/// The same product by the textbook triple loop with double accumulation: the reference the
/// blocked version is checked against.
void gemmReference(Transpose transpose_a, Transpose transpose_b, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/// Largest |x - y| / (1 + |y|) over n elements: the relative error the checks compare.
double maxRelativeError(const float *x, const float *y, std::size_t n);

} // namespace pipescope::kernels
