// The CUDA kernels and stages against the CPU reference. Built where the toolkit and NCCL are;
// every test skips cleanly on a machine without a GPU.
#include <QtTest>

#include <cuda_runtime_api.h>

#include <cmath>

#include "backend/cuda_device.h"
#include "kernels/cuda_stage.h"

using namespace pipescope;

namespace {

bool haveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

} // namespace

class TestBackendCuda : public QObject {
  Q_OBJECT

private slots:
  void init() {
    if (!haveGpu()) QSKIP("no CUDA GPU on this machine");
  }

  void gemmsAndFusedKernelsMatchTheReference() {
    double worst = -1;
    auto status = kernels::checkCudaKernels(&worst);
    QVERIFY2(status, status ? "" : status.error().message.c_str());
    QVERIFY(worst >= 0 && worst < 2e-2);
  }

  void aStageRunsItsSplitBackward() {
    kernels::StageWork work;
    work.layers = 2;
    work.layer.batch = 1, work.layer.sequence = 128, work.layer.heads = 8;
    work.layer.kv_heads = 2, work.layer.head_dim = 32, work.layer.hidden = 256;
    work.layer.ffn = 512, work.layer.gated = true;
    work.head_vocab = 1000;
    auto stage = kernels::CudaStage::create(work, 7, nullptr);
    QVERIFY2(stage, stage ? "" : stage.error().message.c_str());
    const std::size_t count = (*stage)->activationElements();
    void *output_memory = nullptr, *input_grad_memory = nullptr;
    QCOMPARE(cudaMalloc(&output_memory, count * sizeof(kernels::bf16)), cudaSuccess);
    QCOMPARE(cudaMalloc(&input_grad_memory, count * sizeof(kernels::bf16)), cudaSuccess);
    auto *output = static_cast<kernels::bf16 *>(output_memory);
    auto *input_grad = static_cast<kernels::bf16 *>(input_grad_memory);
    QVERIFY((*stage)->forward(nullptr, output, {}));
    QVERIFY((*stage)->inputGrad(nullptr, input_grad, {}));
    QVERIFY((*stage)->weightGrad());
    QCOMPARE(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<kernels::bf16> host(count);
    QCOMPARE(
        cudaMemcpy(host.data(), input_grad, count * sizeof(kernels::bf16), cudaMemcpyDeviceToHost),
        cudaSuccess);
    for (const auto &value : host)
      QVERIFY(std::isfinite(__bfloat162float(value)));
    cudaFree(output);
    cudaFree(input_grad);
  }

  void speedIsMeasured() {
    auto speed = backend::measureCudaSpeed(0);
    QVERIFY2(speed, speed ? "" : speed.error().message.c_str());
    QVERIFY(speed->unit_gemm_us > 0 && speed->flops_per_us > 1e6); // > 1 TFLOP/s
  }
};

QTEST_GUILESS_MAIN(TestBackendCuda)
#include "test_backend_cuda.moc"
