#include "gui/explorer/explorer_snapshot.h"

#include <QElapsedTimer>
#include <algorithm>
#include <exception>

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

// Bubble and rank-0 memory of the same plan with one request field changed; nothing when that
// variant is not a valid request.
std::optional<std::pair<double, int>> variantMetrics(const Costs &costs,
                                                     const ScheduleRequest &request) {
  if (!checkScheduleRequest(request)) return std::nullopt;
  auto evaluation = evaluate(request, costs);
  if (!evaluation) return std::nullopt;
  const auto &ranks = evaluation->simulation.ranks;
  return std::pair{evaluation->simulation.bubble_fraction,
                   ranks.empty() ? 0 : ranks[0].peak_inflight};
}

std::vector<SliderEffect> sliderEffectsOf(const Plan &plan, const Costs &costs,
                                          const Evaluation &current) {
  std::vector<SliderEffect> effects;
  if (plan.custom || estimatedOpCount(plan) > kResimulatedOpLimit) return effects;
  const auto *family = findScheduleFamily(plan.request.name);
  // Explicit costs only: a model's costs depend on the placement, so they would not carry over.
  if (plan.model) return effects;
  auto add = [&](const QString &control, int from, int to, const ScheduleRequest &request) {
    if (auto metrics = variantMetrics(costs, request)) {
      SliderEffect effect;
      effect.control = control;
      effect.from = from;
      effect.to = to;
      effect.bubble_fraction_from = current.simulation.bubble_fraction;
      effect.bubble_fraction_to = metrics->first;
      effect.peak_inflight_from =
          current.simulation.ranks.empty() ? 0 : current.simulation.ranks[0].peak_inflight;
      effect.peak_inflight_to = metrics->second;
      effects.push_back(effect);
    }
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
  // Explicit costs only (sliderEffectsOf refuses a model's): they do not depend on the placement.
  if (!snapshot.ok() || snapshot.plan.model) return {};
  auto costs = planCosts(snapshot.plan, snapshot.evaluation->schedule.placement, nullptr);
  if (!costs) return {};
  return sliderEffectsOf(snapshot.plan, *costs, *snapshot.evaluation);
}

} // namespace pipescope::gui
