// pipescope-backend: runs a plan's lowered program on real devices and writes the measured trace
// (DESIGN.md §7). Only this file decides how the process ends (STYLE.md 18).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "backend/backend_run.h"
#include "backend/control_channel.h"
#include "backend/devices.h"
#include "backend/events.h"
#include "backend/gemm_bench.h"
#include "backend/launch.h"
#ifdef PIPESCOPE_HAVE_MPI
#include "backend/mpi_channel.h"
#endif
#include "backend/options.h"
#include "backend/tcp_channel.h"
#include "engine/output_file.h"
#include "engine/schedule.h"

using namespace pipescope;
using namespace pipescope::backend;

namespace {

// Exit codes (listed in --help): 0 the run completed; 1 a runtime fault (a rank died or timed out,
// a device or the MPI/rendezvous set-up failed, an internal error); 2 bad usage or bad input (an
// unknown option, a plan that cannot be read or evaluated, a plan without its lowered program, a
// launch that does not match the plan's mesh, a trace path that cannot be written).
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

/// Bad usage and bad input: the JSON error event on stdout for the programs that follow the run,
/// and the same reason as one line on stderr for the person at the terminal.
void reportBadInput(int rank, const std::string &message) {
  emitError(rank, message);
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::fprintf(stderr, "pipescope-backend: %s\n", line.c_str());
  std::fflush(stderr);
}

/// torchrun's agent serves its store on MASTER_PORT; the backend's own rendezvous takes the next
/// port unless PIPESCOPE_RENDEZVOUS_PORT says otherwise.
int rendezvousPort(const LaunchEnvironment &launch) {
  if (const char *port = std::getenv("PIPESCOPE_RENDEZVOUS_PORT"); port && *port)
    return std::atoi(port);
  return launch.master_port + 1;
}

} // namespace

static int runMain(int argc, char **argv) {
  const LaunchEnvironment launch = detectLaunch();
  auto options = parseOptions(argc, argv);
  if (!options) {
    // Every process parses the same command line: one of them says what is wrong.
    if (launch.rank == 0) reportBadInput(0, options.error().message);
    return kExitUsage;
  }
  if (options->help) {
    if (launch.rank == 0) std::fputs(usageText().c_str(), stdout);
    return 0;
  }
  // gpu-shared with overlapped pairs runs three streams per stage (compute, side, copies): 12 for
  // P = 4, more than the 8 hardware work queues CUDA gives a process by default, and streams that
  // share a queue wait for each other's work (green contexts share the process's queues too). On
  // one H100, DualPipeV's pairs and copies stalled behind unrelated stages' work with 8 queues
  // (+22 % against the prediction) and not with 32 (+7 %; docs/measurements/gpu-shared-h100.md).
  // Up to 32 queues, before CUDA starts, unless the caller chose a number.
  if (options->device == DeviceKind::SharedGpu) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  if (options->list_devices) {
    if (launch.rank == 0) emitJsonLine(listDevices());
    return 0;
  }
  if (options->gemm_bench) {
    auto benchmark = benchmarkGemms(options->device, launch.local_rank, options->sustain_s);
    if (!benchmark) {
      emitError(launch.rank, benchmark.error().message);
      return kExitFailure;
    }
    for (auto &event : gemmBenchmarkEvents(*benchmark)) {
      event["rank"] = launch.rank;
      emitJsonLine(event);
    }
    if (!options->save_hardware_path.empty() && launch.rank == 0) {
      std::string base_name = options->base_hardware;
      if (base_name.empty() && benchmark->datasheet_preset)
        base_name = *benchmark->datasheet_preset;
      if (base_name.empty()) {
        reportBadInput(0, "--save-hardware: this device matches no hardware preset; give the "
                          "file to start from (links, memory, peak) with --hardware NAME|FILE");
        return kExitUsage;
      }
      auto base = loadHardwareSpec(base_name);
      if (!base) {
        reportBadInput(0, "--hardware: " + base.error().message);
        return kExitUsage;
      }
      auto hardware = hardwareFromBenchmark(*benchmark, *base);
      if (!hardware) {
        emitError(launch.rank, hardware.error().message);
        return kExitFailure;
      }
      if (auto written =
              writeTextFile(options->save_hardware_path, toJson(*hardware).dump(2) + "\n");
          !written) {
        reportBadInput(0, "--save-hardware: " + written.error().message);
        return kExitUsage;
      }
      nlohmann::json saved = {{"event", "hardware_saved"},
                              {"rank", launch.rank},
                              {"path", options->save_hardware_path},
                              {"points", hardware->gemm_efficiency.size()},
                              {"fp8_points", hardware->gemm_efficiency_fp8.size()},
                              {"base", base->name}};
      saved.update(savedAgainstBaseFields(*benchmark, *hardware, *base));
      emitJsonLine(saved);
    }
    return 0;
  }
  installTerminationReport();
  setActivity(launch.rank, "starting up");

  std::unique_ptr<ControlChannel> channel;
  MpiChannel *mpi = nullptr;
#ifndef PIPESCOPE_HAVE_MPI
  if (launch.usesMpi()) {
    emitError(launch.rank,
              std::string(launch.name()) + " started this process, but " + kBuiltWithoutMpi);
    return kExitFailure;
  }
#endif
  if (launch.launcher == Launcher::Torchrun) {
    auto connected = connectTcpChannel(launch.rank, launch.world_size, launch.master_addr,
                                       rendezvousPort(launch), options->timeout_s);
    if (!connected) {
      emitError(launch.rank, "torchrun rendezvous: " + connected.error().message);
      return kExitFailure;
    }
    channel = std::move(*connected);
  } else if (launch.launcher == Launcher::Single && options->device == DeviceKind::SharedGpu) {
    channel = makeSingleProcessChannel(); // one process, no MPI needed
  } else {
#ifdef PIPESCOPE_HAVE_MPI
    auto initialized = MpiChannel::initialize(&argc, &argv);
    if (!initialized) {
      emitError(launch.rank, initialized.error().message);
      return kExitFailure;
    }
    mpi = initialized->get();
    channel = std::move(*initialized);
#else
    channel = makeSingleProcessChannel(); // one process: cuda on one GPU; cpu is refused later
#endif
  }

  const auto failure = runBackend(*options, launch, *channel, mpi);
  if (!failure) {
    channel->finish();
    return 0;
  }
  const auto report = [&](int rank) {
    if (failure->bad_input)
      reportBadInput(rank, failure->message);
    else
      emitError(rank, failure->message);
  };
  const int code = failure->bad_input ? kExitUsage : kExitFailure;
  // Every rank ends on its own here; the launcher may stop the slower ones once the first exits
  // non-zero, and that is no second failure to report.
  if (failure->scope != FailureScope::ThisRank) clearActivity();
  switch (failure->scope) {
  case FailureScope::AllRanks:
    if (channel->rank() == 0) report(0);
    channel->finish();
    return code;
  case FailureScope::Agreed:
    if (channel->rank() == failure->reporter) report(channel->rank());
    channel->finish();
    return code;
  case FailureScope::ThisRank: break;
  }
  // A failure in the middle of the run: say which rank and what, then stop every rank (the
  // others may be blocked waiting on this one).
  emitError(channel->rank(), failure->message);
  channel->abortAll(kExitFailure);
  return kExitFailure; // not reached: abortAll ends the process
}

int main(int argc, char **argv) {
  // The engine and the devices report errors as values; what can still throw is the standard
  // library running out of memory. Say so, as every other error, rather than abort silently.
  try {
    return runMain(argc, argv);
  } catch (const std::bad_alloc &) {
    // One line on stderr, without allocating: the plan (at most kMaxScheduleOps ops) with its
    // lowered program and the measured trace did not fit in this machine's free memory.
    std::fprintf(stderr,
                 "pipescope-backend: out of memory while building the plan's program or the "
                 "measured trace (plans hold at most %zu ops, which needs up to about %zu MB); "
                 "run a smaller plan or free memory\n",
                 kMaxScheduleOps, kMaxScheduleOps * kPeakBytesPerOp / 1000000);
    return kExitUsage;
  } catch (const std::exception &e) {
    emitError(detectLaunch().rank, std::string("internal error: ") + e.what());
    return kExitFailure;
  }
}
