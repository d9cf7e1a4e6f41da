#include "backend/control_channel.h"

#include <cstdlib>

namespace pipescope::backend {

namespace {

class SingleProcessChannel final : public ControlChannel {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single process"; }
  Result<int> firstFailure(bool ok, double) override { return ok ? -1 : 0; }
  Status barrier(double) override { return Ok{}; }
  Status broadcast(std::vector<char> &, double) override { return Ok{}; }
  Result<std::vector<std::vector<double>>> gather(const std::vector<double> &values,
                                                  double) override {
    return std::vector<std::vector<double>>{values};
  }
  Status sendTo(int peer, const std::vector<double> &, double) override {
    return makeError("no rank " + std::to_string(peer) + " in a single-process run");
  }
  Result<std::vector<double>> receiveFrom(int peer, double) override {
    return makeError("no rank " + std::to_string(peer) + " in a single-process run");
  }
  [[noreturn]] void abortAll(int exit_code) override { std::_Exit(exit_code); }
  void finish() override {}
};

} // namespace

std::unique_ptr<ControlChannel> makeSingleProcessChannel() {
  return std::make_unique<SingleProcessChannel>();
}

} // namespace pipescope::backend
