#include "backend/backend_run.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/clock.h"
#include "backend/clock_sync.h"
#include "backend/devices.h"
#include "backend/events.h"
#include "backend/measured_trace.h"
#include "backend/program_runner.h"
#include "engine/trace_file.h"

namespace pipescope::backend {

namespace {

Failure everyRank(std::string message) {
  return {std::move(message), FailureScope::AllRanks, 0};
}
// The plan, the options or the launch is wrong: every rank found it, the exit says bad input.
Failure badInput(std::string message) {
  return {std::move(message), FailureScope::AllRanks, 0, true};
}
Failure thisRank(std::string message) {
  return {std::move(message), FailureScope::ThisRank, 0};
}

// Several records (the local ranks of one process) in one vector of doubles.
std::vector<double> encodeRecords(const std::vector<RankStepRecord> &records) {
  std::vector<double> out{static_cast<double>(records.size())};
  for (const auto &record : records) {
    const auto values = encodeRecord(record);
    out.push_back(static_cast<double>(values.size()));
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

Result<std::vector<RankStepRecord>> decodeRecords(const std::vector<double> &values) {
  std::vector<RankStepRecord> records;
  if (values.empty()) return makeError("an empty step record");
  std::size_t at = 1;
  for (int i = 0; i < static_cast<int>(values[0]); ++i) {
    if (at >= values.size()) return makeError("a step record is cut short");
    const auto length = static_cast<std::size_t>(values[at++]);
    if (at + length > values.size()) return makeError("a step record is cut short");
    auto record = decodeRecord(std::vector<double>(
        values.begin() + static_cast<long>(at), values.begin() + static_cast<long>(at + length)));
    if (!record) return record.error();
    records.push_back(std::move(*record));
    at += length;
  }
  return records;
}

// Rank 0 checks it can write the trace before any work is done.
Status checkWritable(const std::string &path) {
  const std::string probe = path + ".tmp";
  {
    std::ofstream file(probe, std::ios::binary | std::ios::trunc);
    if (!file)
      return makeError("--trace: cannot write '" + path + "': the folder is missing or read-only");
  }
  std::remove(probe.c_str());
  return Ok{};
}

nlohmann::json metricsJson(double makespan, double fraction, double ratio) {
  return {{"makespan_us", makespan}, {"bubble_fraction", fraction}, {"bubble_ratio", ratio}};
}

class Run {
public:
  Run(const BackendOptions &options, const LaunchEnvironment &launch, ControlChannel &channel,
      MpiChannel *mpi)
      : options_(options), launch_(launch), channel_(channel), mpi_(mpi) {}

  std::optional<Failure> run() {
    if (auto failure = prepare()) return failure;
    if (auto failure = warmUp()) return failure;
    return measure();
  }

private:
  int rank() const { return channel_.rank(); }

  // A status every rank computed for itself: if any failed, the lowest failing rank reports.
  std::optional<Failure> agree(const Status &local, bool bad_input = false) {
    auto first = channel_.firstFailure(local.ok(), options_.timeout_s);
    if (!first) return thisRank(first.error().message);
    if (*first < 0) return std::nullopt;
    return Failure{local.ok() ? std::string() : local.error().message, FailureScope::Agreed, *first,
                   bad_input};
  }

  std::optional<Failure> prepare() {
    auto loaded = loadPlan(options_.plan_path);
    if (!loaded) return badInput("cannot run the plan: " + loaded.error().message);
    plan_ = std::move(*loaded);
    if (!plan_.program)
      return badInput(options_.plan_path +
                      ": the plan has no lowered program (\"program\"); the backend runs exactly "
                      "a plan's program, so write one with `pipescope simulate --plan " +
                      options_.plan_path + " --save-plan PLAN` (or Save plan in the GUI)");
    auto evaluated = evaluatePlan(plan_, {}, &derivation_);
    if (!evaluated) return badInput("cannot run the plan: " + evaluated.error().message);
    evaluation_ = std::move(*evaluated);
    // The device itself, on every rank (a missing GPU is refused here, before any work), then
    // whether the launch fits the plan's mesh.
    if (auto failure = agree(checkDeviceAvailable(options_.device, launch_.local_rank)))
      return failure;
    if (auto failure = checkLaunch()) return failure;
    if (auto failure = agree(rank() == 0 ? checkWritable(options_.trace_path) : Status(Ok{}), true))
      return failure;

    // Rank 0 times its device; every rank sizes the work from the same numbers.
    DeviceSpeed speed;
    Status measured = Ok{};
    if (rank() == 0) {
      auto result = measureDeviceSpeed(options_.device, launch_.local_rank, plan_.mesh.pp);
      if (result) reference_gemm_tflops_ = result->flops_per_us * 1e-6;
      if (result && options_.size_scale <= 0)
        result = refineSpeedForModel(options_.device, plan_, evaluation_, derivation_, *result);
      if (result)
        speed = *result;
      else
        measured = result.error();
    }
    if (auto failure = agree(measured)) return failure;
    std::vector<char> bytes(sizeof speed);
    std::memcpy(bytes.data(), &speed, sizeof speed);
    if (auto status = channel_.broadcast(bytes, options_.timeout_s); !status)
      return thisRank(status.error().message);
    std::memcpy(&speed, bytes.data(), std::min(bytes.size(), sizeof speed));
    auto workload =
        planWorkload(plan_, evaluation_, derivation_, options_.device, options_.size_scale, speed);
    if (!workload) return everyRank(workload.error().message);
    workload_ = std::move(*workload);
    // The stages compute attention as two batched GEMMs through an s×s score tensor (no fused
    // kernel), which the cost model prices only for "materialized" attention.
    if (rank() == 0 && plan_.model && plan_.model->model.attention == "flash")
      emitWarning(0, "the plan's model has flash attention, but the backend's stages write and "
                     "read the s x s attention scores (two batched GEMMs, no fused kernel), so "
                     "ops run slower than this plan predicts; for a like-for-like comparison give "
                     "the model \"attention\": \"materialized\"");

    makeSetups();
    auto devices = createDevices(options_.device, setups_, channel_, mpi_);
    if (auto failure = agree(devices ? Status(Ok{}) : Status(devices.error()))) return failure;
    devices_ = std::move(*devices);
    for (const auto &setup : setups_)
      faults_.push_back(FaultInjection::fromEnvironment(
          setup.world_rank, options_.device == DeviceKind::SharedGpu && setups_.size() > 1));

    auto check = checkDeviceKernels(options_.device, launch_.local_rank);
    if (auto failure = agree(check ? Status(Ok{}) : Status(check.error()))) return failure;
    if (rank() == 0)
      emitEvent(CheckEvent{0, "GEMMs and fused kernels against the naive reference", *check, true});

    // Device descriptions, one per rank, for the trace.
    std::string described;
    for (std::size_t i = 0; i < devices_.size(); ++i)
      described += (i ? "\n" : "") + devices_[i]->description();
    auto gathered = channel_.gather(encodeText(described), options_.timeout_s);
    if (!gathered) return thisRank(gathered.error().message);
    if (rank() == 0) {
      std::vector<std::string> devices;
      for (const auto &values : *gathered) {
        const std::string text = decodeText(values);
        std::size_t start = 0;
        for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
          devices.push_back(text.substr(start, end - start));
        devices.push_back(text.substr(start));
      }
      builder_.emplace(plan_, evaluation_.schedule, *plan_.program, std::move(devices),
                       static_cast<double>(workload_.stages.front().activationElements()) *
                           (options_.device == DeviceKind::Cpu ? 4.0 : 2.0));
      timing_overhead_us_ = timingOverheadMicroseconds(options_.device);
      emitStart();
    }
    auto domains = findClockDomains(channel_, options_.timeout_s);
    if (!domains) return thisRank(domains.error().message);
    clock_domains_ = std::move(*domains);
    return std::nullopt;
  }

  std::optional<Failure> checkLaunch() {
    const Mesh &mesh = plan_.mesh;
    // The backend runs dense pipelines: its stages have no K/V ring and no expert all-to-all.
    if (mesh.cp > 1 || mesh.ep > 1)
      return badInput("the plan's mesh has cp " + std::to_string(mesh.cp) + " and ep " +
                      std::to_string(mesh.ep) +
                      ", but pipescope-backend runs dense pipeline plans without context or "
                      "expert parallelism; set the mesh's cp and ep to 1 (pipescope simulate "
                      "--cp 1 --ep 1 --save-plan FILE) to measure the pipeline");
    const int world = channel_.size(), needed = mesh.worldSize();
    const std::string mesh_text = std::to_string(needed) + " processes (dp " +
                                  std::to_string(mesh.dp) + " x tp " + std::to_string(mesh.tp) +
                                  " x pp " + std::to_string(mesh.pp) + ")";
    if (options_.device == DeviceKind::SharedGpu) {
      if (mesh.dp * mesh.tp != 1)
        return badInput("--device gpu-shared runs one pipeline on one GPU, but the plan's mesh "
                        "has dp " +
                        std::to_string(mesh.dp) + " x tp " + std::to_string(mesh.tp) +
                        "; use a plan with dp = tp = 1, or --device cuda");
      if (world != 1)
        return badInput("--device gpu-shared runs all " + std::to_string(mesh.pp) +
                        " stages in one process, but the launch started " + std::to_string(world) +
                        "; start it without mpirun (or with -np 1)");
      single_replica_ = false;
      return std::nullopt;
    }
    if (world == needed) return std::nullopt;
    if (options_.device == DeviceKind::Cpu && world == mesh.pp) {
      single_replica_ = true;
      if (rank() == 0)
        emitWarning(0, "the plan's mesh has " + mesh_text + " but the launch started " +
                           std::to_string(world) +
                           ": running one pipeline replica, with the shapes of one TP rank and "
                           "without the TP and DP collectives");
      return std::nullopt;
    }
    return badInput(
        "the plan's mesh needs " + mesh_text + " but the launch started " + std::to_string(world) +
        "; start " + std::to_string(needed) + " (mpirun -np " + std::to_string(needed) + " ...)" +
        (options_.device == DeviceKind::Cpu && needed != mesh.pp
             ? ", or " + std::to_string(mesh.pp) + " for one pipeline replica on the cpu device"
             : ""));
  }

  void makeSetups() {
    const auto base = [&](int world_rank, RankCoords coords) {
      RankSetup setup;
      setup.plan = &plan_;
      setup.schedule = &evaluation_.schedule;
      setup.program = &*plan_.program;
      setup.mesh = plan_.mesh;
      setup.single_replica = single_replica_;
      setup.world_rank = world_rank;
      setup.world_size = channel_.size();
      setup.local_rank = launch_.local_rank;
      setup.coords = coords;
      setup.stages = workload_.stages;
      setup.timeout_s = options_.timeout_s;
      return setup;
    };
    if (options_.device == DeviceKind::SharedGpu) {
      for (int p = 0; p < plan_.mesh.pp; ++p)
        setups_.push_back(base(p, {0, p, 0}));
      return;
    }
    const RankCoords coords =
        single_replica_ ? RankCoords{0, rank(), 0} : plan_.mesh.coordsOf(rank());
    setups_.push_back(base(rank(), coords));
  }

  void emitStart() {
    const auto &simulation = evaluation_.simulation;
    StartEvent start;
    start.device = deviceKindName(options_.device);
    start.launch = launch_.name();
    start.channel = channel_.name();
    start.world_size = channel_.size();
    start.plan_path = options_.plan_path;
    start.schedule = evaluation_.schedule.name;
    start.pp = evaluation_.schedule.pp();
    start.microbatches = evaluation_.schedule.microbatches();
    start.virtual_stages = evaluation_.schedule.chunks();
    start.mesh_dp = plan_.mesh.dp;
    start.mesh_tp = plan_.mesh.tp;
    start.mesh_pp = plan_.mesh.pp;
    start.warmup_steps = options_.warmup_steps;
    start.measured_steps = options_.measured_steps;
    start.workload = workload_.toJson();
    start.simulated = {simulation.makespan_us, simulation.bubble_fraction, simulation.bubble_ratio};
    emitEvent(start);
  }

  // Runs one step of every local rank (one thread each when there are several). With threads
  // (gpu-shared), a stage that fails, dies or hangs must not leave the others waiting for it:
  // the first failure makes every device abandon its step, and a thread still running a grace
  // period after --timeout is left behind (the process exits on the error) instead of joined.
  Result<std::vector<RankStepRecord>> runLocalStep() {
    const std::size_t count = setups_.size();
    const auto recordOf = [this](std::size_t i, StepTimings timings) {
      RankStepRecord record;
      record.pipeline_rank = setups_[i].pipelineRank();
      record.coords = setups_[i].coords;
      record.timings = std::move(timings);
      return record;
    };
    if (count == 1) {
      auto timings = runProgramStep(*devices_[0], setups_[0], faults_[0]);
      if (!timings) return timings.error();
      return std::vector<RankStepRecord>{recordOf(0, std::move(*timings))};
    }
    // Shared with the threads by pointer, so that a thread left behind never outlives it.
    struct StepState {
      std::mutex mutex;
      std::condition_variable changed;
      std::vector<RankStepRecord> records;
      std::vector<std::optional<Error>> errors;
      std::vector<char> finished, died;
      std::size_t done = 0;
      int first_failure = -1; ///< the stage whose error or death came first: the cause
      bool abandoned = false;
    };
    auto state = std::make_shared<StepState>();
    state->records.resize(count);
    state->errors.resize(count);
    state->finished.assign(count, 0);
    state->died.assign(count, 0);
    const auto abandonAll = [this, state] {
      // Called with state->mutex held; devices only set a flag and wake their waiters.
      if (state->abandoned) return;
      state->abandoned = true;
      for (auto &device : devices_)
        device->abandonStep();
    };
    const auto one = [this, state, abandonAll, recordOf](std::size_t i) {
      RankStepRecord record;
      std::optional<Error> error;
      bool died = false;
      try {
        auto timings = runProgramStep(*devices_[i], setups_[i], faults_[i]);
        if (timings)
          record = recordOf(i, std::move(*timings));
        else
          error = timings.error();
      } catch (const StageThreadKilled &) {
        died = true; // no result and no error: the runner must see it by itself
      }
      std::lock_guard<std::mutex> lock(state->mutex);
      state->records[i] = std::move(record);
      state->errors[i] = std::move(error);
      state->died[i] = died;
      state->finished[i] = 1;
      ++state->done;
      if (died || state->errors[i]) {
        if (state->first_failure < 0) state->first_failure = static_cast<int>(i);
        abandonAll();
      }
      state->changed.notify_all();
    };
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < count; ++i)
      threads.emplace_back(one, i);
    // Each stage fails by itself past --timeout without progress; a thread that has not returned
    // a grace period later is stuck where no deadline reaches (a hang outside the device calls).
    const auto grace = std::chrono::duration<double>(options_.timeout_s + 2.0);
    const auto limit = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(grace);
    std::unique_lock<std::mutex> lock(state->mutex);
    state->changed.wait_until(lock, limit, [&] { return state->done == count; });
    std::vector<std::size_t> stuck;
    for (std::size_t i = 0; i < count; ++i)
      if (!state->finished[i]) stuck.push_back(i);
    if (!stuck.empty()) abandonAll();
    lock.unlock();
    for (std::size_t i = 0; i < count; ++i)
      if (state->finished[i])
        threads[i].join();
      else
        threads[i].detach(); // exits with the process, which ends on this error
    const auto rankName = [&](std::size_t i) {
      return "pipeline rank " + std::to_string(setups_[i].pipelineRank());
    };
    // The cause first: a stage that hung or died, then the first stage's own error; the others'
    // "stopped waiting" errors follow from it.
    std::lock_guard<std::mutex> relock(state->mutex);
    if (!stuck.empty())
      return makeError(rankName(stuck.front()) + "'s stage thread made no progress for " +
                       std::to_string(static_cast<int>(options_.timeout_s)) +
                       " s and never finished its step (hung); the other stages stopped waiting "
                       "for it. Raise --timeout if its ops really take that long");
    if (state->first_failure >= 0) {
      const auto i = static_cast<std::size_t>(state->first_failure);
      if (state->died[i])
        return makeError(rankName(i) +
                         "'s stage thread ended in the middle of a step without finishing its "
                         "program or reporting an error; the other stages stopped waiting for it");
      return *state->errors[i];
    }
    return std::move(state->records);
  }

  std::optional<Failure> warmUp() {
    for (int step = 0; step < options_.warmup_steps; ++step) {
      const double start = nowMicroseconds();
      auto records = runLocalStep();
      if (!records) return thisRank(records.error().message);
      setActivity(rank(), "waiting at the barrier after a warm-up step");
      if (auto status = channel_.barrier(options_.timeout_s); !status)
        return thisRank(status.error().message);
      if (rank() == 0)
        emitEvent(ProgressEvent{"warmup", step, options_.warmup_steps, nowMicroseconds() - start});
    }
    return std::nullopt;
  }

  std::optional<Failure> measure() {
    for (int step = 0; step < options_.measured_steps; ++step) {
      setActivity(rank(), "aligning clocks with rank 0");
      auto alignment = alignClocks(channel_, clock_domains_, options_.timeout_s);
      if (!alignment) return thisRank(alignment.error().message);
      if (auto status = channel_.barrier(options_.timeout_s); !status)
        return thisRank(status.error().message);
      auto records = runLocalStep();
      if (!records) return thisRank(records.error().message);
      setActivity(rank(), "sending the step's timings to rank 0");
      auto gathered = channel_.gather(encodeRecords(*records), options_.timeout_s);
      if (!gathered) return thisRank(gathered.error().message);
      if (rank() != 0) continue;
      std::vector<RankStepRecord> all;
      for (std::size_t r = 0; r < gathered->size(); ++r) {
        auto decoded = decodeRecords((*gathered)[r]);
        if (!decoded) return thisRank(decoded.error().message);
        // Onto rank 0's clock.
        const double offset = r < alignment->offsets_us.size() ? alignment->offsets_us[r] : 0.0;
        for (auto &record : *decoded) {
          for (auto &op : record.timings.ops) {
            op.start_us -= offset;
            op.end_us -= offset;
          }
          for (auto *list : {&record.timings.sends, &record.timings.arrivals})
            for (auto &entry : *list)
              entry.second -= offset;
          all.push_back(std::move(record));
        }
      }
      if (auto status = builder_->addStep(step, all, alignment->error_us); !status)
        return thisRank(status.error().message);
      StepEvent event = builder_->stepEvent(builder_->steps().back());
      event.of = options_.measured_steps;
      event.clock_error_us = alignment->error_us;
      emitEvent(event);
      // The trace so far: a run stopped later keeps every step measured up to here.
      if (auto status = writeTrace(); !status) return thisRank(status.error().message);
    }
    if (rank() == 0) emitDone();
    return std::nullopt;
  }

  nlohmann::json backendInfo() const {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto &metrics : builder_->steps())
      steps.push_back(builder_->stepMetricsJson(metrics));
    return {{"device", deviceKindName(options_.device)},
            {"launch", launch_.name()},
            {"world_size", channel_.size()},
            {"single_replica", single_replica_},
            {"warmup_steps", options_.warmup_steps},
            {"measured_steps", options_.measured_steps},
            {"workload", workload_.toJson()},
            {"timing_overhead_us_per_op", timing_overhead_us_},
            {"throughput", throughputJson()},
            {"steps", std::move(steps)},
            {"simulated",
             metricsJson(evaluation_.simulation.makespan_us, evaluation_.simulation.bubble_fraction,
                         evaluation_.simulation.bubble_ratio)}};
  }

  Status writeTrace() const {
    return saveTrace(options_.trace_path, builder_->trace(), {{"backend", backendInfo()}});
  }

  // Achieved GEMM-work throughput of the measured ops (each op's FLOPs from its stage's work over
  // its measured time), per op kind and overall, against the rate of one large square GEMM that
  // rank 0 timed at startup. An overlapped pair counts both halves' FLOPs over its one interval.
  nlohmann::json throughputJson() const {
    std::map<std::string, std::pair<double, double>> by_kind; // flops, microseconds
    double flops = 0, busy = 0;
    for (const auto &op : builder_->trace().ops) {
      if (op.stage < 0 || static_cast<std::size_t>(op.stage) >= workload_.stages.size()) continue;
      const kernels::StageWork &work = workload_.stages[static_cast<std::size_t>(op.stage)];
      double op_flops = 0;
      switch (op.kind) {
      case OpKind::Forward: op_flops = work.forwardFlops(); break;
      case OpKind::InputGrad: op_flops = work.inputGradFlops(); break;
      case OpKind::WeightGrad: op_flops = work.weightGradFlops(); break;
      case OpKind::FullBackward:
      case OpKind::OverlappedPair: op_flops = work.inputGradFlops() + work.weightGradFlops(); break;
      }
      const double us =
          op.overlapped && op.kind == OpKind::FullBackward ? 0 : op.end_us - op.start_us;
      flops += op_flops;
      busy += us;
      auto &entry =
          by_kind[op.overlapped ? std::string("overlapped") : std::string(opKindName(op.kind))];
      entry.first += op_flops;
      entry.second += us;
    }
    const auto tflops = [](double f, double us) { return us > 0 ? f / us * 1e-6 : 0.0; };
    nlohmann::json kinds = nlohmann::json::object();
    for (const auto &[kind, entry] : by_kind)
      kinds[kind] = tflops(entry.first, entry.second);
    const double overall = tflops(flops, busy);
    return {{"tflops", overall},
            {"tflops_by_kind", std::move(kinds)},
            {"gemm_reference_tflops", reference_gemm_tflops_},
            {"fraction_of_gemm_reference",
             reference_gemm_tflops_ > 0 ? overall / reference_gemm_tflops_ : 0.0}};
  }

  void emitDone() const {
    const Trace &trace = builder_->trace();
    double busy = 0, ops = 0;
    for (const auto &op : trace.ops)
      if (!(op.overlapped && op.kind == OpKind::FullBackward)) {
        busy += op.end_us - op.start_us;
        ++ops;
      }
    const double mean_op_us = ops > 0 ? busy / ops : 0;
    const auto metrics = [](const SimulationResult &s) -> RunMetrics {
      return {s.makespan_us, s.bubble_fraction, s.bubble_ratio};
    };
    DoneEvent done;
    done.trace_path = options_.trace_path;
    done.steps = static_cast<int>(builder_->steps().size());
    done.measured = {trace.makespan_us, trace.bubble_fraction, trace.bubble_ratio};
    done.simulated = metrics(evaluation_.simulation);
    done.expected_makespan_us = evaluation_.simulation.makespan_us * workload_.expected_time_factor;
    const Costs &planned = plan_.model ? derivation_.costs : plan_.costs;
    if (auto refit = builder_->calibrated(planned)) done.calibrated = metrics(refit->simulation);
    done.clock_error_us = trace.clock_error_us;
    done.mean_op_us = mean_op_us;
    done.throughput = throughputJson();
    done.timing_overhead_fraction = mean_op_us > 0 ? timing_overhead_us_ / mean_op_us : 0.0;
    emitEvent(done);
  }

  const BackendOptions &options_;
  const LaunchEnvironment &launch_;
  ControlChannel &channel_;
  MpiChannel *mpi_;
  Plan plan_;
  ModelDerivation derivation_;
  Evaluation evaluation_;
  Workload workload_;
  bool single_replica_ = false;
  std::vector<RankSetup> setups_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<FaultInjection> faults_;
  std::optional<MeasuredTraceBuilder> builder_;
  ClockDomains clock_domains_;
  double timing_overhead_us_ = 0;
  double reference_gemm_tflops_ = 0; ///< rank 0's large square GEMM rate at startup
};

} // namespace

std::optional<Failure> runBackend(const BackendOptions &options, const LaunchEnvironment &launch,
                                  ControlChannel &channel, MpiChannel *mpi) {
  Run run(options, launch, channel, mpi);
  return run.run();
}

} // namespace pipescope::backend
