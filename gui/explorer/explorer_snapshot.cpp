#include "gui/explorer/explorer_snapshot.h"

#include <QElapsedTimer>
#include <algorithm>
#include <exception>

#include "engine/model/layer_layout.h"
#include "resources/embedded_resources.h"

namespace pipescope::gui {

std::size_t estimatedOpCount(const Plan &plan) {
  if (plan.custom) return plan.custom->opCount();
  const auto *family = findScheduleFamily(plan.request.name);
  const std::size_t chunks = family && family->placement != PlacementKind::Loop
                                 ? 2
                                 : static_cast<std::size_t>(std::max(1, plan.request.chunks));
  const std::size_t ops_per_stage = family && family->splits_backward ? 3 : 2;
  return static_cast<std::size_t>(std::max(1, plan.request.pp)) *
         static_cast<std::size_t>(std::max(1, plan.request.microbatches)) * chunks * ops_per_stage;
}

namespace {

QString fromEngine(const Error &error) {
  return QString::fromStdString(error.message);
}

// The largest rank's memory in a model report, in GiB.
double largestRankGib(const ModelReport &report) {
  double largest = 0;
  for (const RankMemory &rank : report.memory)
    largest = std::max(largest, rank.total);
  return largest / (1024.0 * 1024.0 * 1024.0);
}

std::vector<SliderEffect> sliderEffectsOf(const ExplorerSnapshot &current) {
  std::vector<SliderEffect> effects;
  const Plan &plan = current.plan;
  if (plan.custom || estimatedOpCount(plan) > kResimulatedOpLimit) return effects;
  const auto *family = findScheduleFamily(plan.request.name);
  const auto rank0Peak = [](const Evaluation &evaluation) {
    const auto &ranks = evaluation.simulation.ranks;
    return ranks.empty() ? 0 : ranks[0].peak_inflight;
  };
  auto add = [&](const QString &control, int from, int to, const ScheduleRequest &request) {
    if (!checkScheduleRequest(request)) return;
    Plan variant = plan;
    variant.request = request;
    variant.mesh.pp = request.pp;
    // A layer layout is per stage: another P or V spreads it over the new stages, as the
    // sliders do.
    if (variant.model)
      variant.model->training.layout =
          layoutForStages(variant.model->training.layout, modelStageCount(request));
    const SnapshotPointer tried = computeSnapshot(variant);
    if (!tried->ok()) return;
    SliderEffect effect;
    effect.control = control;
    effect.from = from;
    effect.to = to;
    effect.bubble_fraction_from = current.evaluation->simulation.bubble_fraction;
    effect.bubble_fraction_to = tried->evaluation->simulation.bubble_fraction;
    effect.peak_inflight_from = rank0Peak(*current.evaluation);
    effect.peak_inflight_to = rank0Peak(*tried->evaluation);
    if (current.report && tried->report) {
      effect.with_model = true;
      effect.step_s_from = current.report->step_time_s;
      effect.step_s_to = tried->report->step_time_s;
      effect.tokens_per_gpu_from = current.report->tokens_per_s / plan.mesh.worldSize();
      effect.tokens_per_gpu_to = tried->report->tokens_per_s / variant.mesh.worldSize();
      effect.peak_gib_from = largestRankGib(*current.report);
      effect.peak_gib_to = largestRankGib(*tried->report);
    }
    effects.push_back(effect);
  };
  ScheduleRequest more_microbatches = plan.request;
  more_microbatches.microbatches *= 2;
  add(QStringLiteral("M"), plan.request.microbatches, more_microbatches.microbatches,
      more_microbatches);
  ScheduleRequest more_ranks = plan.request;
  more_ranks.pp *= 2;
  if (family && family->uses_microbatch_group && more_ranks.microbatches < more_ranks.pp)
    more_ranks.microbatches = more_ranks.pp;
  if (more_ranks.microbatches == plan.request.microbatches)
    add(QStringLiteral("P"), plan.request.pp, more_ranks.pp, more_ranks);
  if (family && family->uses_chunks) {
    ScheduleRequest more_chunks = plan.request;
    more_chunks.chunks += 1;
    add(QStringLiteral("V"), plan.request.chunks, more_chunks.chunks, more_chunks);
  }
  return effects;
}

SnapshotPointer computeSnapshotUnchecked(const Plan &plan) {
  auto snapshot = std::make_shared<ExplorerSnapshot>();
  snapshot->plan = plan;
  QElapsedTimer timer;
  timer.start();
  if (auto status = plan.mesh.check(); !status) {
    snapshot->error = fromEngine(status.error());
    return snapshot;
  }
  if (!plan.custom) {
    if (auto status = checkScheduleRequest(plan.request); !status) {
      snapshot->error = fromEngine(status.error());
      return snapshot;
    }
  }
  auto schedule = planSchedule(plan);
  if (!schedule) {
    snapshot->error = fromEngine(schedule.error());
    return snapshot;
  }
  ModelDerivation derivation;
  auto costs = planCosts(plan, schedule->placement, plan.model ? &derivation : nullptr);
  if (!costs) {
    snapshot->error = fromEngine(costs.error());
    return snapshot;
  }
  SimulationOptions options;
  options.memory_timeline = true;
  if (plan.model) {
    options.stage_activation_bytes = derivation.stage_activation_bytes;
    options.stage_activation_granule_bytes = derivation.stage_activation_granule_bytes;
  }
  auto evaluation = evaluatePlanSchedule(plan, std::move(*schedule), *costs, options);
  if (!evaluation) {
    snapshot->error = fromEngine(evaluation.error());
    return snapshot;
  }
  auto shared = std::make_shared<const Evaluation>(std::move(*evaluation));
  if (plan.model) {
    snapshot->report =
        reportModel(*plan.model, plan.mesh, shared->schedule, derivation, shared->simulation);
    snapshot->derivation = std::move(derivation);
  }
  snapshot->evaluation = shared;
  snapshot->compute_ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
  return snapshot;
}

} // namespace

SnapshotPointer computeSnapshot(const Plan &plan) {
  // The engine reports errors as values; this guard only keeps an unexpected allocation
  // failure on a worker thread from taking the whole window down.
  try {
    return computeSnapshotUnchecked(plan);
  } catch (const std::exception &exception) {
    auto snapshot = std::make_shared<ExplorerSnapshot>();
    snapshot->plan = plan;
    snapshot->error =
        QStringLiteral("evaluation failed: %1").arg(QString::fromUtf8(exception.what()));
    return snapshot;
  }
}

Plan examplePlan() {
  if (auto text = findEmbeddedResource("plans/example-1f1b.json")) {
    if (auto json = parseJsonLimited(*text); json.ok()) {
      if (auto plan = planFromJson(*json); plan.ok()) return std::move(*plan);
    }
  }
  Plan plan;
  plan.request.name = "1f1b";
  plan.request.pp = 4;
  plan.request.microbatches = 8;
  plan.mesh.pp = 4;
  return plan;
}

double activationsAt(const SimulationResult &simulation, int rank, double time_us, bool bytes) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= simulation.memory.size()) return 0;
  const auto &points = simulation.memory[static_cast<std::size_t>(rank)];
  // Last change at or before the time.
  auto it = std::upper_bound(
      points.begin(), points.end(), time_us,
      [](double value, const MemoryPoint &point) { return value < point.time_us; });
  if (it == points.begin()) return 0;
  --it;
  return bytes ? it->activation_bytes : it->inflight_microbatches;
}

std::vector<SliderEffect> sliderEffects(const ExplorerSnapshot &snapshot) {
  if (!snapshot.ok()) return {};
  return sliderEffectsOf(snapshot);
}

} // namespace pipescope::gui
