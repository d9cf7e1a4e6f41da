#include "engine/evaluation.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <string>

namespace pipescope {

namespace {

// Fills the two bubble metrics from a makespan T and per-rank busy time under uniform ops.
AnalyticMetrics fromMakespan(double makespan, double busy_per_rank, int pp) {
  AnalyticMetrics metrics;
  // Outside its regime (e.g. ZB-V's formula, written for F = I = W, at other op times) a closed
  // form can fall below the work each rank does; no step is shorter than that work, so the
  // closed form is held at it rather than reporting a negative bubble.
  metrics.makespan_us = std::max(makespan, busy_per_rank);
  makespan = metrics.makespan_us;
  const double capacity = pp * makespan;
  const double busy = pp * busy_per_rank;
  metrics.bubble_fraction = capacity > 0 ? 1.0 - busy / capacity : 0.0;
  metrics.bubble_ratio = busy > 0 ? (capacity - busy) / busy : 0.0;
  return metrics;
}

} // namespace

std::optional<AnalyticMetrics> analyticMetrics(const Schedule &schedule, const Costs &costs) {
  const int P = schedule.pp();
  const int M = schedule.microbatches();
  const int V = schedule.chunks();
  // Where the schedule's family runs W as its own op, I carries the split extra (Costs) and a
  // microbatch's backward work is I + W.
  const ScheduleFamily *family = findScheduleFamily(schedule.name);
  const bool splits_weight_grad = family && family->splits_backward;
  const double F = costs.forward_us, W = costs.weight_us;
  const double I =
      costs.backward_us - W + (splits_weight_grad ? costs.input_grad_split_extra_us : 0.0);
  const double B = splits_weight_grad ? I + W : costs.backward_us;
  const std::string uniform = "uniform op times (no per-stage overrides), free transfers";
  const std::string &name = schedule.name;

  if (name == "naive") {
    // One microbatch occupies the whole pipe: each takes P(F+B), each rank works F+B of it.
    auto m = fromMakespan(M * P * (F + B), M * (F + B), P);
    m.bubble_formula = "bubble_fraction = (P-1)/P, bubble_ratio = P-1";
    m.memory_formula = "1 microbatch on every rank";
    m.peak_inflight.assign(static_cast<std::size_t>(P), 1);
    m.source = "seed article 000 (naive model parallelism)";
    m.exact_when = uniform;
    return m;
  }
  if (name == "gpipe" || name == "1f1b") {
    // Huang et al. 2019 (GPipe) and Narayanan et al. 2021 (PipeDream-Flush): fill and drain take
    // (P-1)(F+B), so T = (M+P-1)(F+B).
    auto m = fromMakespan((M + P - 1) * (F + B), M * (F + B), P);
    m.bubble_formula = "bubble_fraction = (P-1)/(M+P-1), bubble_ratio = (P-1)/M";
    m.peak_inflight.resize(static_cast<std::size_t>(P));
    for (int r = 0; r < P; ++r)
      m.peak_inflight[static_cast<std::size_t>(r)] = name == "gpipe" ? M : std::min(P - r, M);
    m.memory_formula =
        name == "gpipe" ? "M microbatches on every rank" : "min(P-r, M) microbatches on rank r";
    m.source = name == "gpipe" ? "Huang et al., GPipe (NeurIPS 2019)"
                               : "Narayanan et al., PipeDream-Flush (ICML 2021); Megatron-LM";
    m.exact_when = uniform;
    return m;
  }
  if (name == "interleaved-1f1b") {
    // Narayanan et al. 2021, §2.2.2: the bubble shrinks by V, T = M(F+B) + (P-1)(F+B)/V.
    auto m = fromMakespan(M * (F + B) + (P - 1) * (F + B) / V, M * (F + B), P);
    m.bubble_formula = "bubble_fraction = (P-1)/(V·M+P-1), bubble_ratio = (P-1)/(V·M)";
    const int G = schedule.microbatch_group > 0 ? schedule.microbatch_group : P;
    m.peak_inflight.resize(static_cast<std::size_t>(P));
    for (int r = 0; r < P; ++r) {
      // Warm-up forwards plus the first steady forward (Megatron-LM's warm-up count).
      const int warmup = std::min(2 * (P - 1 - r) + (V - 1) * G, M * V);
      m.peak_inflight[static_cast<std::size_t>(r)] = std::min(warmup + 1, M * V);
    }
    m.memory_formula = "min(2(P-1-r) + (V-1)·G + 1, V·M) chunks on rank r (each 1/V of a "
                       "microbatch's activations)";
    m.source = "Narayanan et al., Megatron-LM (SC 2021)";
    m.exact_when = uniform + ", M a multiple of P, G = P";
    return m;
  }
  if (name == "looped-bfs") {
    // Lamy-Poirier, Breadth-First Pipeline Parallelism (MLSys 2023): with M >= P the breadth-first
    // loop has the interleaved bubble, (P-1)(F+B)/V. With M < P each chunk's forwards wait for the
    // pipe to fill: a microbatch crosses the P ranks once per chunk, P(F+B) in all, and the other
    // M-1 follow 1/V of a rank share behind. Both cases, max(M,P)(F+B) + (min(M,P)-1)(F+B)/V,
    // match the simulation exactly (uniform ops, free transfers; checked in test_schedules).
    const int fill = std::min(M, P);
    auto m = fromMakespan(std::max(M, P) * (F + B) + (fill - 1) * (F + B) / V, M * (F + B), P);
    m.bubble_formula = "bubble per rank = (P-1)(F+B)/V for M >= P (the interleaved bubble); "
                       "(P-M)(F+B) + (M-1)(F+B)/V for M < P";
    m.peak_inflight.assign(static_cast<std::size_t>(P), V * M);
    m.memory_formula = "V·M chunks (all M microbatches) on every rank, as GPipe";
    m.source = "Lamy-Poirier, Breadth-First Pipeline Parallelism (MLSys 2023)";
    m.exact_when = uniform;
    return m;
  }
  if (name == "v-half" || name == "v-min") {
    // Qi et al. 2024 (controllable memory), Table 1 and the authors' summary: with F = I = W the
    // bubble rate is about P/(2M) for V-Half and 2P/(3M) for V-Min (1F1B: P/M), i.e. a bubble of
    // about P/2 and 2P/3 rank shares of F+B per rank; peak activations (P+2)//2 and (P+4)//3
    // microbatches, half-size chunks counted twice. The bubble is an approximation ("~"): the
    // simulated one lies below it by at most 7/6 (F+B) once M >= 2P (test_schedules).
    const bool half = name == "v-half";
    const double bubble = (half ? P / 2.0 : 2.0 * P / 3.0) * (F + B);
    auto m = fromMakespan(M * (F + B) + bubble, M * (F + B), P);
    m.bubble_formula = half ? "bubble per rank ≈ P(F+B)/2 (bubble rate ≈ P/(2M)) for F = I = W"
                            : "bubble per rank ≈ 2P(F+B)/3 (bubble rate ≈ 2P/(3M)) for F = I = W";
    const int microbatches_held = half ? (P + 2) / 2 : (P + 4) / 3;
    m.peak_inflight.assign(static_cast<std::size_t>(P), std::min(2 * microbatches_held, 2 * M));
    m.memory_formula = half ? "at most min((P+2)//2, M) microbatches (half-size chunks counted "
                              "twice) on a rank: about 1/2 of 1F1B's P"
                            : "at most min((P+4)//3, M) microbatches (half-size chunks counted "
                              "twice) on a rank: about 1/3 of 1F1B's P";
    m.source = "Qi et al., Pipeline Parallelism with Controllable Memory (NeurIPS 2024)";
    m.exact_when = "the busiest rank's peak once M >= P; the bubble only approximately (F = I = "
                   "W, M >= 2P: the simulation is at most 7/6 (F+B) below it)";
    return m;
  }
  if (name == "zb-h1") {
    // Qi et al. 2024, §3.1: W passes fill the cool-down. The simulation's exact makespan is
    // M(F+I+W) + (P-1)(F+I-min(F,I,W)), the paper's (P-1)(F+I-W) bubble when W <= min(F, I).
    auto m = fromMakespan(M * (F + B) + (P - 1) * (F + I - std::min({F, I, W})), M * (F + B), P);
    m.bubble_formula = "bubble per rank = (P-1)(F+I-W) (for W <= min(F, I)); bubble_fraction = "
                       "(P-1)(F+I-W) / (M(F+I+W) + (P-1)(F+I-W))";
    m.peak_inflight.assign(static_cast<std::size_t>(P), std::min(P, M));
    m.memory_formula = "min(P, M) microbatches on every rank (1F1B's peak)";
    m.source = "Qi et al., Zero Bubble Pipeline Parallelism (ICLR 2024)";
    m.exact_when = uniform + ", M >= P";
    return m;
  }
  if (name == "zb-h2") {
    // Qi et al. 2024, §3.1: 2P-1 warm-up forwards let W fill every gap inside a rank's span;
    // the step still carries the (P-1)F start offset of the last rank.
    const double tail = (P - 1) * std::max({F, I - F, F + I - 2 * W});
    auto m = fromMakespan(M * (F + B) + tail, M * (F + B), P);
    m.bubble_formula = "bubble per rank = (P-1)·max(F, I-F, F+I-2W): zero inside each rank's span "
                       "when F = I = W (the paper's (P-1)(F+I-2W) when positive), plus the (P-1)F "
                       "start offset";
    m.peak_inflight.assign(static_cast<std::size_t>(P), std::min(M, 2 * P - 1));
    m.memory_formula = "min(M, 2P-1) microbatches on every rank (about twice 1F1B)";
    m.source = "Qi et al., Zero Bubble Pipeline Parallelism (ICLR 2024)";
    m.exact_when = uniform + ", M >= 2P-1";
    return m;
  }
  if (name == "interleaved-zb") {
    // No closed form is published for PyTorch's interleaved zero bubble. This one is ZB-H1's step
    // (above) with the fill shrunk by V, as Narayanan et al. 2021 shrink 1F1B's: pipescope's
    // derivation, confirmed exactly by simulation (test_schedules) for M >= P.
    const double fill = (P - 1) * (F + I - std::min({F, I, W})) / V;
    auto m = fromMakespan(M * (F + B) + fill, M * (F + B), P);
    m.bubble_formula = "bubble per rank = (P-1)(F+I-min(F,I,W))/V, (P-1)(F+I-W)/V when W <= "
                       "min(F, I): ZB-H1's bubble shrunk by V (derived, not published)";
    // PyTorch's rounds: max(1, floor(M/P)) of R microbatches; the warm-up holds (V-1)R + P-1-r
    // chunks, and rank r's W's lag r behind its I's, so every rank peaks at (V-1)R + P.
    const int per_round = M / std::max(1, M / P);
    m.peak_inflight.assign(static_cast<std::size_t>(P), std::min(V * M, (V - 1) * per_round + P));
    m.memory_formula = "min(V·M, (V-1)R + P) chunks on every rank, R = M / max(1, floor(M/P)) "
                       "microbatches per round: V·P chunks (P microbatches, 1F1B's rank-0 peak) "
                       "when P divides M";
    m.source = "derived from Qi et al., Zero Bubble Pipeline Parallelism (ICLR 2024) and "
               "Narayanan et al. (SC 2021); PyTorch ScheduleInterleavedZeroBubble";
    m.exact_when = uniform + ", M >= P";
    return m;
  }
  if (name == "zb-v") {
    // Qi et al. 2024 (controllable memory): with F = I = W = t per rank share, the only idle
    // time is the start offset, T = 3Mt + max((P-1)t/2, (2P-1-M)t). Where they differ, t is
    // their mean, so 3Mt is still the rank's work (t = F claimed a bubble on one rank).
    const double t = (F + B) / 3;
    auto m =
        fromMakespan(3 * M * t + std::max((P - 1) * t / 2, (2 * P - 1 - M) * t), M * (F + B), P);
    m.bubble_formula = "bubble per rank = max((P-1)F/2, (2P-1-M)F) for F = I = W: zero inside each "
                       "rank's span once M >= 2P-1";
    m.peak_inflight.resize(static_cast<std::size_t>(P));
    for (int r = 0; r < P; ++r)
      m.peak_inflight[static_cast<std::size_t>(r)] = std::min({2 * P, 2 * M, M + r + 1});
    m.memory_formula = "min(2P, 2M, M+r+1) half-size chunks on rank r: at most P microbatches, "
                       "1F1B's peak";
    m.source = "Qi et al., Pipeline Parallelism with Controllable Memory (NeurIPS 2024)";
    m.exact_when = "F = I = W (B = 2F), free transfers";
    return m;
  }
  if (name == "dualpipe" || name == "dualpipev") {
    // DeepSeek-V3 report, Table 2: bubble (P/2-1)(F&B + B - 3W) for DualPipe; the DualPipe
    // repo's README gives (PP/2-1)(F&B + B - 3W) for DualPipeV with PP = 2P half-size stages.
    const double pair = costs.overlapped_us > 0 ? costs.overlapped_us : F + B;
    const bool v = name == "dualpipev";
    const int half_ranks = P / 2; // DualPipe accepts only even P
    // The closed form counts W passes filling the bubble; with W above (F&B + B)/3 it would
    // go negative, which no step can: idle time is at least 0.
    const double bubble =
        std::max(0.0, v ? (P - 1) * (pair + B - 3 * W) / 2 : (half_ranks - 1) * (pair + B - 3 * W));
    auto m = fromMakespan(M * (F + B) + bubble, M * (F + B), P);
    m.bubble_formula =
        v ? "bubble per rank = (P-1)(F&B + B - 3W)/2 (the README's (PP/2-1)(F&B+B-3W) "
            "with PP = 2P half-size stages)"
          : "bubble per rank = (P/2-1)(F&B + B - 3W)";
    m.peak_inflight.assign(static_cast<std::size_t>(P), v ? 2 * P + 1 : P + 1);
    m.memory_formula = v ? "2P+1 half-size chunks (P + 1/2 microbatches) on every rank; one copy "
                           "of the parameters"
                         : "P+1 microbatches on every rank; two stages' parameters per rank";
    m.source = v ? "deepseek-ai/DualPipe README (DualPipeV)"
                 : "DeepSeek-AI, DeepSeek-V3 Technical Report (2024), Table 2";
    m.exact_when = "F = I = W (B = 2F), F&B = F + B, free transfers";
    return m;
  }
  return std::nullopt;
}

namespace {

// "850 µs", "1.21 ms", "2.5 s": three significant figures.
std::string durationText(double us) {
  char buffer[32];
  if (std::abs(us) >= 1e6)
    std::snprintf(buffer, sizeof buffer, "%.3g s", us * 1e-6);
  else if (std::abs(us) >= 1e3)
    std::snprintf(buffer, sizeof buffer, "%.3g ms", us * 1e-3);
  else
    std::snprintf(buffer, sizeof buffer, "%.3g \u00b5s", us);
  return buffer;
}

// Equal up to the rounding of share-scaled times.
bool nearlyEqual(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)});
}

// The widest spread of one kind of op time the schedule runs (F and B, or F, I and W where it
// splits the backward) over the virtual stages, as "F 98.1 ms to 121 ms"; empty when each kind
// is the same on every stage.
std::string stageSpread(const StageTimes &times, bool splits_backward) {
  std::string widest;
  double widest_ratio = 1;
  using Kind = std::pair<const char *, const std::vector<double> *>;
  const std::vector<Kind> kinds =
      splits_backward ? std::vector<Kind>{{"F", &times.forward},
                                          {"I", &times.input_grad},
                                          {"W", &times.weight_grad}}
                      : std::vector<Kind>{{"F", &times.forward}, {"B", &times.full_backward}};
  for (const auto &[letter, values] : kinds) {
    if (values->empty()) continue;
    const auto [low, high] = std::minmax_element(values->begin(), values->end());
    if (nearlyEqual(*low, *high)) continue;
    const double ratio = *low > 0 ? *high / *low : INFINITY;
    if (widest.empty() || ratio > widest_ratio) {
      widest_ratio = ratio;
      widest = std::string(letter) + " " + durationText(*low) + " to " + durationText(*high);
    }
  }
  return widest;
}

} // namespace

double closedFormGap(const Evaluation &evaluation) {
  if (!evaluation.analytic) return 0;
  return std::abs(evaluation.simulation.bubble_fraction - evaluation.analytic->bubble_fraction);
}

std::vector<AnalyticDeparture> analyticDepartures(const Evaluation &evaluation,
                                                  double step_overhead_us) {
  std::vector<AnalyticDeparture> departures;
  const auto add = [&](DepartureKind kind, std::string text) {
    departures.push_back({kind, std::move(text)});
  };
  if (!evaluation.analytic) return departures;
  const Schedule &schedule = evaluation.schedule;
  const StageTimes &times = evaluation.times;
  const std::string &name = schedule.name;
  const int P = schedule.pp(), M = schedule.microbatches();
  const std::string p_text = std::to_string(P), m_text = std::to_string(M);
  // Every closed form assumes uniform op times and free transfers (the `uniform` of
  // analyticMetrics, or "F = I = W, free transfers" where stronger).
  const ScheduleFamily *family = findScheduleFamily(name);
  if (const std::string spread = stageSpread(times, family && family->splits_backward);
      !spread.empty())
    add(DepartureKind::UnevenStages, "the stages' op times differ (" + spread + " a stage)");
  double transfer = 0;
  for (const auto *sends : {&times.send_forward, &times.send_backward})
    for (double t : *sends)
      transfer = std::max(transfer, t);
  if (transfer > 0) add(DepartureKind::Transfers, "transfers take up to " + durationText(transfer));
  if (times.gradient_sync > 0) {
    const double overhead = std::clamp(step_overhead_us, 0.0, times.gradient_sync);
    const double sync = times.gradient_sync - overhead;
    std::string tail =
        overhead <= 0
            ? "the gradient sync and optimizer step add " + durationText(times.gradient_sync)
        : sync <= 0 ? "the step overhead adds " + durationText(overhead)
                    : "the gradient sync and optimizer step add " + durationText(sync) +
                          " and the step overhead " + durationText(overhead);
    add(DepartureKind::GradientSync, tail + " after each rank's last op");
  }
  if (!times.concurrency_slowdown.empty())
    add(DepartureKind::SharedDevice,
        "ranks share a device, so an op's time depends on what runs beside it");
  // The schedule's own conditions.
  const int G = schedule.microbatch_group > 0 ? schedule.microbatch_group : P;
  if (name == "interleaved-1f1b") {
    if (M % P != 0)
      add(DepartureKind::Microbatches, "M = " + m_text + " is not a multiple of P = " + p_text);
    if (G != P)
      add(DepartureKind::MicrobatchGroup, "G = " + std::to_string(G) + ", not P = " + p_text);
  }
  if ((name == "zb-h1" || name == "interleaved-zb") && M < P)
    add(DepartureKind::Microbatches, "M = " + m_text + " is below P = " + p_text);
  if ((name == "v-half" || name == "v-min") && M < 2 * P)
    add(DepartureKind::Microbatches, "M = " + m_text + " is below 2P = " + std::to_string(2 * P));
  if (name == "zb-h2" && M < 2 * P - 1)
    add(DepartureKind::Microbatches,
        "M = " + m_text + " is below 2P-1 = " + std::to_string(2 * P - 1));
  const bool equal_thirds = name == "zb-v" || name == "v-half" || name == "v-min" ||
                            name == "dualpipe" || name == "dualpipev";
  if (equal_thirds && !times.forward.empty()) {
    // Per stage F = I = W; the stages are alike once the spread above is empty, so stage 0
    // says it.
    const double f = times.forward.front(), i = times.input_grad.front(),
                 w = times.weight_grad.front();
    if (!nearlyEqual(f, i) || !nearlyEqual(f, w))
      add(DepartureKind::UnequalOpKinds, "F, I and W differ (" + durationText(f) + ", " +
                                             durationText(i) + " and " + durationText(w) +
                                             " on stage 0)");
  }
  if ((name == "dualpipe" || name == "dualpipev") && !nearlyEqual(times.overlap_factor, 1))
    add(DepartureKind::PairOverlap,
        "an overlapped F&B pair takes " +
            std::to_string(static_cast<int>(std::lround(times.overlap_factor * 100))) +
            " % of F + B");
  return departures;
}

namespace {

// Makes one departure's costs as the closed form assumes; false for M and G, which change the
// schedule itself. The kinds commute: evening the stages and sharing each stage's work equally
// among F, I and W give the same times in either order.
bool makeAsFormulaAssumes(StageTimes &times, DepartureKind kind) {
  const auto mean = [](const std::vector<double> &values) {
    double sum = 0;
    for (double v : values)
      sum += v;
    return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
  };
  switch (kind) {
  case DepartureKind::UnevenStages:
    for (auto *values :
         {&times.forward, &times.input_grad, &times.weight_grad, &times.full_backward})
      values->assign(values->size(), mean(*values));
    return true;
  case DepartureKind::Transfers:
    std::fill(times.send_forward.begin(), times.send_forward.end(), 0.0);
    std::fill(times.send_backward.begin(), times.send_backward.end(), 0.0);
    return true;
  case DepartureKind::GradientSync: times.gradient_sync = 0; return true;
  case DepartureKind::SharedDevice: times.concurrency_slowdown.clear(); return true;
  case DepartureKind::UnequalOpKinds:
    // The stage's F + I + W shared equally: its work, and so the step's, is kept.
    for (std::size_t s = 0; s < times.forward.size(); ++s) {
      const double third = (times.forward[s] + times.input_grad[s] + times.weight_grad[s]) / 3;
      times.forward[s] = times.input_grad[s] = times.weight_grad[s] = third;
      times.full_backward[s] = 2 * third;
    }
    return true;
  case DepartureKind::PairOverlap: times.overlap_factor = 1; return true;
  case DepartureKind::Microbatches:
  case DepartureKind::MicrobatchGroup: return false;
  }
  return false;
}

} // namespace

std::optional<double> bubbleFractionWithout(const Evaluation &evaluation, DepartureKind kind) {
  StageTimes times = evaluation.times;
  if (!makeAsFormulaAssumes(times, kind)) return std::nullopt;
  auto simulation = simulate(evaluation.schedule, evaluation.program, times);
  if (!simulation) return std::nullopt;
  return simulation->bubble_fraction;
}

std::optional<GapShares> closedFormGapShares(const Evaluation &evaluation,
                                             const std::vector<AnalyticDeparture> &departures,
                                             double max_simulated_ops) {
  std::vector<std::size_t> costs; // indices into departures of those that are costs
  for (std::size_t i = 0; i < departures.size(); ++i) {
    StageTimes probe; // empty times: only whether the kind is a cost is asked
    if (makeAsFormulaAssumes(probe, departures[i].kind)) costs.push_back(i);
  }
  const std::size_t n = costs.size();
  if (n == 0 || n > 16) return std::nullopt;
  const std::size_t subsets = std::size_t{1} << n;
  if (static_cast<double>(subsets - 1) * static_cast<double>(evaluation.schedule.opCount()) >
      max_simulated_ops)
    return std::nullopt;
  // bubble[S]: the bubble with the departures in subset S made as the formula assumes.
  std::vector<double> bubble(subsets);
  bubble[0] = evaluation.simulation.bubble_fraction;
  for (std::size_t subset = 1; subset < subsets; ++subset) {
    StageTimes times = evaluation.times;
    for (std::size_t j = 0; j < n; ++j)
      if (subset >> j & 1) makeAsFormulaAssumes(times, departures[costs[j]].kind);
    auto simulation = simulate(evaluation.schedule, evaluation.program, times);
    if (!simulation) return std::nullopt;
    bubble[subset] = simulation->bubble_fraction;
  }
  // Shapley's weight of a subset of size k not holding the departure: k! (n-k-1)! / n!.
  std::vector<double> weight(n);
  for (std::size_t k = 0; k < n; ++k) {
    double w = 1.0 / static_cast<double>(n);
    for (std::size_t i = 1; i <= k; ++i)
      w *= static_cast<double>(i) / static_cast<double>(n - i);
    weight[k] = w;
  }
  GapShares result;
  result.shares.assign(departures.size(), std::nullopt);
  result.without_alone.assign(departures.size(), std::nullopt);
  result.without_all = bubble[subsets - 1];
  for (std::size_t j = 0; j < n; ++j) {
    double share = 0;
    for (std::size_t subset = 0; subset < subsets; ++subset) {
      if (subset >> j & 1) continue;
      const auto k = static_cast<std::size_t>(std::popcount(subset));
      share += weight[k] * (bubble[subset] - bubble[subset | std::size_t{1} << j]);
    }
    result.shares[costs[j]] = share;
    result.without_alone[costs[j]] = bubble[std::size_t{1} << j];
  }
  return result;
}

namespace {

std::string figureText(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

// Why a makespan is not finite: the cost that makes one op or transfer take forever.
std::string infiniteCause(const Costs &costs, const StageTimes &times) {
  if (costs.p2p_bandwidth_gbps > 0 && costs.activation_bytes > 0) {
    const double transfer = costs.activation_bytes / (costs.p2p_bandwidth_gbps * 1e3);
    if (!std::isfinite(transfer) || transfer > kMaxCostMicroseconds)
      return ": the p2p bandwidth " + figureText(costs.p2p_bandwidth_gbps) + " GB/s makes a " +
             figureText(costs.activation_bytes) + "-byte transfer take " + figureText(transfer) +
             " us; use a bandwidth of at least " +
             figureText(costs.activation_bytes / (kMaxCostMicroseconds * 1e3)) + " GB/s";
  }
  for (std::size_t s = 0; s < times.forward.size(); ++s)
    for (double t :
         {times.forward[s], times.full_backward[s], times.send_forward[s], times.send_backward[s]})
      if (!std::isfinite(t) || t > kMaxCostMicroseconds)
        return ": stage " + std::to_string(s) + " has an op or transfer of " + figureText(t) +
               " us; give op times and transfers of at most " + figureText(kMaxCostMicroseconds) +
               " us";
  return ": the op times add up beyond what a double holds; use smaller op times or fewer "
         "microbatches";
}

} // namespace

Status checkEvaluationFigures(const Evaluation &evaluation, const Costs &costs) {
  const auto &sim = evaluation.simulation;
  const auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
  if (!std::isfinite(sim.makespan_us))
    return makeError("the makespan is infinite" + infiniteCause(costs, evaluation.times));
  if (bad(sim.makespan_us))
    return makeError("the makespan is " + figureText(sim.makespan_us) +
                     " us; a step cannot take negative time (check the op times)");
  for (std::size_t r = 0; r < sim.ranks.size(); ++r) {
    const auto &rank = sim.ranks[r];
    const std::string where = "rank " + std::to_string(r) + ": ";
    if (bad(rank.busy_us) || bad(rank.idle_us))
      return makeError(where + "busy " + figureText(rank.busy_us) + " us and idle " +
                       figureText(rank.idle_us) +
                       " us must be finite and non-negative; an overlapped F&B pair shorter "
                       "than its parts, or op times that add up beyond a double, make them so");
    if (bad(rank.peak_inflight_microbatches) || bad(rank.peak_activation_bytes))
      return makeError(where + "the peak activations (" +
                       figureText(rank.peak_inflight_microbatches) + " microbatches, " +
                       figureText(rank.peak_activation_bytes) +
                       " bytes) must be finite and non-negative");
  }
  if (bad(sim.bubble_fraction) || bad(sim.bubble_ratio))
    return makeError("the bubble (fraction " + figureText(sim.bubble_fraction) + ", ratio " +
                     figureText(sim.bubble_ratio) +
                     ") must be finite and non-negative; the ranks were busy longer than the "
                     "step, which an overlapped F&B pair shorter than its F or B parts causes");
  if (const auto &a = evaluation.analytic;
      a && (bad(a->makespan_us) || bad(a->bubble_fraction) || bad(a->bubble_ratio)))
    return makeError("the closed form " + a->bubble_formula + " gives a makespan of " +
                     figureText(a->makespan_us) + " us and a bubble fraction of " +
                     figureText(a->bubble_fraction) + "; its op times are out of its range");
  return Ok{};
}

namespace {

Result<Evaluation> lowerAndSimulate(Schedule schedule, const Costs &costs,
                                    const SimulationOptions &options) {
  auto times = resolveStageTimes(costs, schedule.placement);
  if (!times) return times.error();
  Evaluation evaluation;
  evaluation.program = lowerSchedule(schedule);
  auto simulation = simulate(schedule, evaluation.program, *times, options);
  if (!simulation) return simulation.error();
  evaluation.analytic = analyticMetrics(schedule, costs);
  evaluation.schedule = std::move(schedule);
  evaluation.times = std::move(*times);
  evaluation.simulation = std::move(*simulation);
  if (auto status = checkEvaluationFigures(evaluation, costs); !status) return status.error();
  return evaluation;
}

} // namespace

Result<Evaluation> evaluateSchedule(Schedule schedule, const Costs &costs,
                                    const SimulationOptions &options) {
  if (auto status = checkOpCoverage(schedule); !status) return status.error();
  return lowerAndSimulate(std::move(schedule), costs, options);
}

Result<Evaluation> evaluateGenerated(Schedule schedule, const Costs &costs,
                                     const SimulationOptions &options) {
  return lowerAndSimulate(std::move(schedule), costs, options);
}

Result<Evaluation> evaluate(const ScheduleRequest &request, const Costs &costs,
                            const SimulationOptions &options) {
  auto schedule = generateSchedule(request);
  if (!schedule) return schedule.error();
  return evaluateGenerated(std::move(*schedule), costs, options);
}

} // namespace pipescope
