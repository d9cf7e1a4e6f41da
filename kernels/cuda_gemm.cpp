#include "kernels/cuda_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "kernels/cuda_check.h"

namespace pipescope::kernels {

/// cuBLASLt's descriptors of one problem (the shape, transposes and alignment): host objects,
/// made once per decision and only read afterwards.
struct LtProblem {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~LtProblem() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (operation) cublasLtMatmulDescDestroy(operation);
  }
};

namespace {

struct Decision {
  GemmChoice choice;
  std::shared_ptr<LtProblem> problem;
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  bool tuned = false;
};

// Decisions of the whole process; stage threads of gpu-shared create stages one after another,
// but the cuda device's ranks are processes of their own, so the lock is only for safety.
std::mutex decisions_mutex;
std::map<GemmKey, Decision> decisions;
std::set<int> warmed_devices; // devices a tuning has warmed up in this process

/// The alignment cuBLASLt may assume for a matrix: of its pointer and of its leading dimension
/// in bytes (cublasLt.h, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES), at most the 256 it assumes by
/// default. Telling it less keeps it from proposing algorithms that cannot run on these buffers.
std::uint32_t alignmentOf(const void *pointer, int leading_dimension) {
  const auto bits = reinterpret_cast<std::uintptr_t>(pointer) |
                    static_cast<std::uintptr_t>(leading_dimension) * sizeof(bf16) |
                    std::uintptr_t{256};
  return static_cast<std::uint32_t>(bits & (~bits + 1)); // the lowest set bit
}

constexpr int kCandidatesToAsk = 16;

} // namespace

Result<std::unique_ptr<TunedGemm>> TunedGemm::create(int sm_count_target) {
  std::unique_ptr<TunedGemm> gemm(new TunedGemm());
  gemm->sm_count_target_ = std::max(0, sm_count_target);
  PIPESCOPE_CUDA_CHECK(cudaGetDevice(&gemm->device_));
  PIPESCOPE_CUBLAS_CHECK(cublasCreate(&gemm->cublas_));
  PIPESCOPE_CUBLAS_CHECK(cublasLtCreate(&gemm->lt_));
  PIPESCOPE_CUDA_CHECK(cudaMalloc(&gemm->workspace_, kGemmWorkspaceBytes));
  PIPESCOPE_CUDA_CHECK(cudaEventCreate(&gemm->start_));
  PIPESCOPE_CUDA_CHECK(cudaEventCreate(&gemm->stop_));
  return gemm;
}

TunedGemm::~TunedGemm() {
  if (stop_) cudaEventDestroy(stop_);
  if (start_) cudaEventDestroy(start_);
  if (workspace_) cudaFree(workspace_);
  if (lt_) cublasLtDestroy(lt_);
  if (cublas_) cublasDestroy(cublas_);
}

GemmKey TunedGemm::keyOf(const GemmCall &call) const {
  return {device_,
          sm_count_target_,
          call.transpose_a,
          call.transpose_b,
          call.beta != 0.0f,
          call.m,
          call.n,
          call.k,
          call.lda,
          call.ldb,
          call.ldc,
          alignmentOf(call.a, call.lda),
          alignmentOf(call.b, call.ldb),
          alignmentOf(call.c, call.ldc)};
}

// Row-major C = α·op(A)·op(B) + β·C as the column-major product Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLAS's
// first operand is B (n×k after its op), its second A (k×m), its output n×m.
Status TunedGemm::runDefault(const GemmCall &call, cudaStream_t stream) {
  PIPESCOPE_CUBLAS_CHECK(cublasSetStream(cublas_, stream));
  PIPESCOPE_CUBLAS_CHECK(cublasGemmEx(cublas_, call.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      call.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, call.n, call.m,
                                      call.k, &call.alpha, call.b, CUDA_R_16BF, call.ldb, call.a,
                                      CUDA_R_16BF, call.lda, &call.beta, call.c, CUDA_R_16BF,
                                      call.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return Ok{};
}

namespace {

// The same column-major product as runDefault, described to cuBLASLt; every decision's
// descriptors and the heuristic's proposals for them.
Status describe(const GemmCall &call, int sm_count_target, cublasLtHandle_t lt,
                Decision &decision) {
  auto problem = std::make_shared<LtProblem>();
  PIPESCOPE_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&problem->operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t first = call.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second = call.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      problem->operation, CUBLASLT_MATMUL_DESC_TRANSA, &first, sizeof first));
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      problem->operation, CUBLASLT_MATMUL_DESC_TRANSB, &second, sizeof second));
  if (sm_count_target > 0) {
    const std::int32_t sms = sm_count_target;
    PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        problem->operation, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
  }
  // Stored (before the op) shapes, column-major: B is n×k (k×n when transposed), A is k×m
  // (m×k when transposed), C is n×m.
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&problem->a, CUDA_R_16BF,
                                                    call.transpose_b ? call.k : call.n,
                                                    call.transpose_b ? call.n : call.k, call.ldb));
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&problem->b, CUDA_R_16BF,
                                                    call.transpose_a ? call.m : call.k,
                                                    call.transpose_a ? call.k : call.m, call.lda));
  PIPESCOPE_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&problem->c, CUDA_R_16BF, call.n, call.m, call.ldc));

  cublasLtMatmulPreference_t preference = nullptr;
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const std::uint64_t workspace = kGemmWorkspaceBytes;
  const std::uint32_t alignments[] = {alignmentOf(call.b, call.ldb), alignmentOf(call.a, call.lda),
                                      alignmentOf(call.c, call.ldc), alignmentOf(call.c, call.ldc)};
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  for (int i = 0; i < 4 && status == CUBLAS_STATUS_SUCCESS; ++i)
    status = cublasLtMatmulPreferenceSetAttribute(preference, alignment_attributes[i],
                                                  &alignments[i], sizeof alignments[i]);
  cublasLtMatmulHeuristicResult_t proposed[kCandidatesToAsk] = {};
  int returned = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(lt, problem->operation, problem->a, problem->b,
                                            problem->c, problem->c, preference, kCandidatesToAsk,
                                            proposed, &returned);
  cublasLtMatmulPreferenceDestroy(preference);
  // NOT_SUPPORTED: no algorithm for this problem; the default call still runs it.
  if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED)
    return makeError(
        callFailure("cublasLtMatmulAlgoGetHeuristic", cublasErrorText(status), __FILE__, __LINE__));
  decision.problem = std::move(problem);
  decision.candidates.clear();
  for (int i = 0; i < returned && status == CUBLAS_STATUS_SUCCESS; ++i)
    if (proposed[i].state == CUBLAS_STATUS_SUCCESS &&
        proposed[i].workspaceSize <= kGemmWorkspaceBytes)
      decision.candidates.push_back(proposed[i]);
  return Ok{};
}

// The decision for a call's key, described (not yet tuned) if it is new.
Result<Decision *> decisionFor(const GemmKey &key, const GemmCall &call, int sm_count_target,
                               cublasLtHandle_t lt) {
  std::lock_guard<std::mutex> lock(decisions_mutex);
  auto [it, inserted] = decisions.try_emplace(key);
  if (inserted) {
    if (auto described = describe(call, sm_count_target, lt, it->second); !described) {
      decisions.erase(it);
      return described.error();
    }
  }
  return &it->second;
}

} // namespace

Status TunedGemm::runAlgorithm(const GemmCall &call, const LtProblem &p,
                               const cublasLtMatmulAlgo_t &algorithm, std::size_t workspace_bytes,
                               cudaStream_t stream) {
  PIPESCOPE_CUBLAS_CHECK(cublasLtMatmul(lt_, p.operation, &call.alpha, call.b, p.a, call.a, p.b,
                                        &call.beta, call.c, p.c, call.c, p.c, &algorithm,
                                        workspace_, workspace_bytes, stream));
  return Ok{};
}

Result<GemmChoice> TunedGemm::tune(const GemmCall &call, cudaStream_t stream) {
  auto found = decisionFor(keyOf(call), call, sm_count_target_, lt_);
  if (!found) return found.error();
  Decision &decision = **found;
  if (decision.tuned) return decision.choice;

  // Every option (the default call, then each candidate) is timed in batches of about 2 ms, in
  // three rounds that visit them all in turn, and each keeps its best batch. A stage is tuned
  // right after it is made, often the first work the GPU sees: its clocks are still rising, so
  // timing one option after another favoured whichever came last (on one H100 the tuned 1024³
  // path then lost 11-13 % to cuBLASLt's best in the ladder after it). Round-robin spreads the
  // drift over all options, and a warm-up lifts the clocks first.
  const auto enqueueOption = [&](int option) -> Status {
    if (option < 0) return runDefault(call, stream);
    const auto &candidate = decision.candidates[static_cast<std::size_t>(option)];
    return runAlgorithm(call, *decision.problem, candidate.algo, candidate.workspaceSize, stream);
  };
  const auto timeBatch = [&](int option, int repetitions) -> Result<double> {
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(start_, stream));
    for (int i = 0; i < repetitions; ++i)
      PIPESCOPE_TRY(enqueueOption(option));
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(stop_, stream));
    PIPESCOPE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    PIPESCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return 1000.0 * static_cast<double>(ms) / repetitions;
  };
  const auto repetitionsFor = [](double us, double batch_us) {
    return std::clamp(static_cast<int>(batch_us / std::max(1.0, us)), 1, 4096);
  };
  auto first_us = timeBatch(-1, 1);
  if (!first_us) return first_us.error();
  // The process's first tuning on this device warms it for about a quarter of a second (an idle
  // H100 sits at 345 MHz), every later one for 20 ms. On one H100 the longer warm-up alone did
  // not make the 1024³ choice reliable (docs/measurements/gpu-shared-h100.md, call 3); the
  // finalists' sustained rounds below did, and were measured with it.
  bool first_on_device = false;
  {
    std::lock_guard<std::mutex> lock(decisions_mutex);
    first_on_device = warmed_devices.insert(device_).second;
  }
  double warmed_us = 0;
  do {
    auto warm = timeBatch(-1, repetitionsFor(*first_us, 20000.0));
    if (!warm) return warm.error();
    warmed_us += *warm * repetitionsFor(*first_us, 20000.0);
  } while (first_on_device && warmed_us < 250000.0);
  auto estimate_us = timeBatch(-1, repetitionsFor(*first_us, 2000.0));
  if (!estimate_us) return estimate_us.error();
  const int repetitions = repetitionsFor(*estimate_us, 2000.0);

  // Options that run: an algorithm the heuristic proposes may still refuse the problem at launch.
  std::vector<int> options{-1};
  for (int i = 0; i < static_cast<int>(decision.candidates.size()); ++i)
    if (enqueueOption(i)) options.push_back(i);
  std::vector<double> best_us(options.size(), 1e300);
  const auto timeRounds = [&](const std::vector<std::size_t> &which, int rounds,
                              int batch_repetitions) -> Status {
    for (int round = 0; round < rounds; ++round)
      for (std::size_t o : which) {
        auto us = timeBatch(options[o], batch_repetitions);
        if (!us) return us.error();
        best_us[o] = std::min(best_us[o], *us);
      }
    return Ok{};
  };
  std::vector<std::size_t> all(options.size());
  for (std::size_t o = 0; o < all.size(); ++o)
    all[o] = o;
  PIPESCOPE_TRY(timeRounds(all, 3, repetitions));
  // The two fastest are timed again, on their own, in three rounds of 30 ms batches, and the
  // faster under that sustained load is kept: at 1024³ the best few lie within a few per cent,
  // and short batches with a host wait between them run at other clocks than a stage's
  // back-to-back GEMMs do (on one H100 a choice made on 2 and 5 ms batches was 8-10 % slower than
  // cuBLASLt's best in 30 ms batches in three ladders of eleven).
  const auto faster = [&](std::size_t x, std::size_t y) { return best_us[x] < best_us[y]; };
  std::vector<std::size_t> finalists = all;
  std::sort(finalists.begin(), finalists.end(), faster);
  if (finalists.size() > 2) finalists.erase(finalists.begin() + 2, finalists.end());
  if (finalists.size() > 1) {
    for (std::size_t o : finalists)
      best_us[o] = 1e300;
    PIPESCOPE_TRY(timeRounds(finalists, 3, repetitionsFor(*estimate_us, 30000.0)));
  }
  const std::size_t winner = *std::min_element(finalists.begin(), finalists.end(), faster);

  GemmChoice choice;
  // The default call's best batch: of the sustained rounds if it was a finalist, else of the
  // short ones (for the summary of what tuning saved).
  choice.default_us = best_us[0];
  choice.us = best_us[winner];
  choice.candidates = static_cast<int>(options.size()) - 1;
  choice.default_call = options[winner] < 0;
  if (!choice.default_call) {
    const auto &candidate = decision.candidates[static_cast<std::size_t>(options[winner])];
    choice.algorithm = candidate.algo;
    choice.workspace_bytes = candidate.workspaceSize;
  }
  // A refused launch leaves no sticky error, but a later check must not see one either.
  PIPESCOPE_CUDA_CHECK(cudaGetLastError());
  std::lock_guard<std::mutex> lock(decisions_mutex);
  decision.choice = choice;
  decision.tuned = true;
  return choice;
}

Result<GemmChoice> TunedGemm::choiceFor(const GemmCall &call, cudaStream_t stream) {
  return tune(call, stream);
}

Status TunedGemm::run(const GemmCall &call, cudaStream_t stream) {
  if (tuning_) {
    auto choice = tune(call, stream);
    if (!choice) return choice.error();
  }
  // One look-up: the decision's choice and its descriptors (decisions are never removed).
  GemmChoice choice;
  const LtProblem *problem = nullptr;
  {
    std::lock_guard<std::mutex> lock(decisions_mutex);
    auto it = decisions.find(keyOf(call));
    if (it != decisions.end() && it->second.tuned) {
      choice = it->second.choice;
      problem = it->second.problem.get();
    }
  }
  if (choice.default_call || !problem) return runDefault(call, stream);
  return runAlgorithm(call, *problem, choice.algorithm, choice.workspace_bytes, stream);
}

Result<int> TunedGemm::candidateCount(const GemmCall &call) {
  auto decision = decisionFor(keyOf(call), call, sm_count_target_, lt_);
  if (!decision) return decision.error();
  return static_cast<int>((*decision)->candidates.size());
}

Status TunedGemm::runCandidate(const GemmCall &call, int index, cudaStream_t stream) {
  if (index < 0) return runDefault(call, stream);
  auto decision = decisionFor(keyOf(call), call, sm_count_target_, lt_);
  if (!decision) return decision.error();
  const auto &candidates = (*decision)->candidates;
  if (index >= static_cast<int>(candidates.size()))
    return makeError("GEMM candidate " + std::to_string(index) + " of " +
                     std::to_string(candidates.size()) + " does not exist");
  const auto &candidate = candidates[static_cast<std::size_t>(index)];
  return runAlgorithm(call, *(*decision)->problem, candidate.algo, candidate.workspaceSize, stream);
}

std::string gemmTuningSummary() {
  std::lock_guard<std::mutex> lock(decisions_mutex);
  int shapes = 0, algorithms = 0;
  double chosen_us = 0, default_us = 0;
  for (const auto &[key, decision] : decisions) {
    if (!decision.tuned) continue;
    ++shapes;
    algorithms += decision.choice.default_call ? 0 : 1;
    chosen_us += decision.choice.us;
    default_us += decision.choice.default_us;
  }
  if (shapes == 0) return "";
  char saved[32];
  std::snprintf(saved, sizeof saved, "%.1f",
                default_us > 0 ? 100.0 * (1.0 - chosen_us / default_us) : 0.0);
  return "GEMM algorithms tuned per shape: " + std::to_string(shapes) + " shapes, " +
         std::to_string(algorithms) + " on a cuBLASLt algorithm, " + saved +
         " % faster than cublasGemmEx's default over one call of each";
}

} // namespace pipescope::kernels
