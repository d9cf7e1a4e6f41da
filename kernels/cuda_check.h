#pragma once
// Check macros for CUDA runtime and cuBLAS calls, in the manner of nccl-tests (src/common.h): a
// failed call becomes an Error naming the host, the file and line, the call and the library's
// message, and returns up the stack; only main decides to exit.
#include <string>

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "engine/result.h"

namespace pipescope::kernels {

/// "host: file:line: call failed: message".
std::string callFailure(const char *call, const std::string &message, const char *file, int line);
std::string cudaErrorText(cudaError_t error);
std::string cublasErrorText(cublasStatus_t status);

} // namespace pipescope::kernels

#define PIPESCOPE_CUDA_CHECK(call)                                                                 \
  do {                                                                                             \
    const cudaError_t pipescope_status_ = (call);                                                  \
    if (pipescope_status_ != cudaSuccess)                                                          \
      return ::pipescope::makeError(::pipescope::kernels::callFailure(                             \
          #call, ::pipescope::kernels::cudaErrorText(pipescope_status_), __FILE__, __LINE__));     \
  } while (0)

#define PIPESCOPE_CUBLAS_CHECK(call)                                                               \
  do {                                                                                             \
    const cublasStatus_t pipescope_status_ = (call);                                               \
    if (pipescope_status_ != CUBLAS_STATUS_SUCCESS)                                                \
      return ::pipescope::makeError(::pipescope::kernels::callFailure(                             \
          #call, ::pipescope::kernels::cublasErrorText(pipescope_status_), __FILE__, __LINE__));   \
  } while (0)

/// For a Status-returning call: passes its error up.
#define PIPESCOPE_TRY(call)                                                                        \
  do {                                                                                             \
    auto pipescope_result_ = (call);                                                               \
    if (!pipescope_result_) return pipescope_result_.error();                                      \
  } while (0)
