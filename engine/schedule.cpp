#include "engine/schedule.h"

#include <algorithm>
#include <cstdint>

#include "engine/generators/generators.h"

namespace pipescope {

std::size_t Schedule::opCount() const {
  std::size_t count = 0;
  for (const auto &ops : ranks)
    count += ops.size();
  return count;
}

namespace {

struct FamilyEntry {
  ScheduleFamily family;
  Status (*check)(const ScheduleRequest &);
  generators::RankOps (*generate)(const ScheduleRequest &, const Placement &);
};

const std::vector<FamilyEntry> &familyEntries() {
  static const std::vector<FamilyEntry> entries = {
      {{"naive", "Naive",
        "One microbatch at a time travels through every stage forward and back before the next "
        "one starts; P-1 of every P ranks are idle at any moment.",
        "any P >= 1, M >= 1; V = 1", "textbook baseline (seed article 000)", PlacementKind::Loop,
        false, false, false},
       generators::checkNaive,
       generators::naive},
      {{"gpipe", "GPipe",
        "All forwards, then all backwards (AFAB). Bubble (P-1)/(M+P-1) of the step, but every rank "
        "holds the activations of all M microbatches.",
        "any P >= 1, M >= 1; V = 1", "Huang et al., GPipe (NeurIPS 2019)", PlacementKind::Loop,
        false, false, false},
       generators::checkGpipe,
       generators::gpipe},
      {{"1f1b", "1F1B",
        "Warm-up forwards, then one forward / one backward, then cool-down backwards. Same bubble "
        "as GPipe, but rank r holds at most min(P-r, M) microbatches.",
        "any P >= 1, M >= 1; V = 1", "Narayanan et al., PipeDream-Flush (ICML 2021); Megatron-LM",
        PlacementKind::Loop, false, false, false},
       generators::checkOneFOneB,
       generators::oneFOneB},
      {{"interleaved-1f1b", "Interleaved 1F1B",
        "Each rank holds V model chunks (stage s on rank s mod P); 1F1B over chunks in groups of "
        "G microbatches. The bubble shrinks by V at the cost of V times the P2P traffic. G = P is "
        "Megatron's depth-first order, G = M Megatron's breadth-first interleaving (still 1F1B "
        "in its steady state; PyTorch's ScheduleLoopedBFS is looped-bfs). Orders equal PyTorch's "
        "ScheduleInterleaved1F1B at every M, as Megatron-LM's have since November 2024 (before, "
        "Megatron ran all V*M forwards first at M = P).",
        "P >= 2, V >= 2, M >= P; microbatch group G with P <= G <= M dividing M (default P, so M a "
        "multiple of P)",
        "Narayanan et al., Efficient Large-Scale Language Model Training on GPU Clusters Using "
        "Megatron-LM (SC 2021); Lamy-Poirier, Breadth-First Pipeline Parallelism (2023)",
        PlacementKind::Loop, true, true, false},
       generators::checkInterleaved,
       generators::interleaved},
      {{"combined-1f1b", "Combined 1F1B (EP all-to-all overlap)",
        "Megatron-Core's schedule for MoE with --overlap-moe-expert-parallel-comm: interleaved "
        "1F1B with one more warm-up forward, then every steady-state forward runs overlapped with "
        "a backward of another microbatch, so each one's expert-parallel all-to-all hides behind "
        "the other's compute (DualPipe's F&B overlap inside an interleaved pipeline). At P = 1: "
        "F0, then (F1, B0), (F2, B1), ... and the last backward.",
        "P = 1 with V = 1; or as interleaved-1f1b: P >= 2, V >= 2, M >= P, microbatch group G "
        "with P <= G <= M dividing M",
        "NVIDIA Megatron-Core, megatron/core/pipeline_parallel/combined_1f1b.py (MCore v0.14, "
        "\"batch-level overlapping to hide EP-A2A communication\")",
        PlacementKind::Loop, true, true, false, true, true},
       generators::checkCombinedOneFOneB,
       generators::combinedOneFOneB},
      {{"looped-bfs", "Looped BFS",
        "Each rank holds V model chunks (stage s on rank s mod P) and runs every forward of a "
        "chunk "
        "before the next chunk, all forwards before any backward, then the backwards chunk by "
        "chunk in reverse (last microbatch first). GPipe's memory (all V*M chunk activations per "
        "rank) with the interleaved bubble of the fill; suits FSDP, where each chunk's "
        "parameters are gathered once per step.",
        "any P >= 1, M >= 1; V >= 2 (for V = 1 use gpipe)",
        "Lamy-Poirier, Breadth-First Pipeline Parallelism (MLSys 2023); PyTorch ScheduleLoopedBFS",
        PlacementKind::Loop, true, false, false},
       generators::checkLoopedBfs,
       generators::loopedBfs},
      {{"zb-h1", "ZB-H1",
        "1F1B with the backward split into input-grad (I) and weight-grad (W); W passes are "
        "deferred to fill the cool-down bubbles. Bubble (P-1)(F+I-W) when W <= min(F, I), peak "
        "memory of 1F1B.",
        "any P >= 1, M >= 1; V = 1", "Qi et al., Zero Bubble Pipeline Parallelism (ICLR 2024)",
        PlacementKind::Loop, false, false, true},
       generators::checkZeroBubbleH1,
       generators::zeroBubbleH1},
      {{"zb-h2", "ZB-H2",
        "Zero-bubble schedule with extra warm-up forwards so W passes fill the warm-up bubble as "
        "well: zero bubble inside each rank's span when F = I = W (the step still spans the (P-1)F "
        "start offset), about twice 1F1B's activations.",
        "any P >= 1, M >= 1; V = 1 (the full ZB-H2 needs M >= 2P-1; with fewer it moves towards "
        "ZB-H1, which it equals for M <= P)",
        "Qi et al., Zero Bubble Pipeline Parallelism (ICLR 2024)", PlacementKind::Loop, false,
        false, true},
       generators::checkZeroBubbleH2,
       generators::zeroBubbleH2},
      {{"interleaved-zb", "Interleaved zero bubble",
        "ZB-H1 over V looped chunks per rank (stage s on rank s mod P): interleaved warm-up of "
        "(V-1)R + P-1-r forwards, then F, I, W with each rank's weight-grads r steps behind its "
        "input-grads, so W fills the cool-down. About 1F1B-interleaved memory, a smaller bubble.",
        "any P >= 1; V >= 2 (V = 1 is zb-h1); M split into max(1, floor(M/P)) equal rounds of R "
        "microbatches (any M <= P, any multiple of P, ...)",
        "Qi et al., Zero Bubble Pipeline Parallelism (ICLR 2024); PyTorch "
        "ScheduleInterleavedZeroBubble",
        PlacementKind::Loop, true, false, true},
       generators::checkInterleavedZeroBubble,
       generators::interleavedZeroBubble},
      {{"zb-v", "ZB-V",
        "V-shape placement (rank 0 holds the first and the last stage) with split backward; "
        "1F1B-level memory and a near-zero bubble.",
        "any P >= 1, M >= 1; V = 2 (fixed by the V-shape)",
        "Qi et al., Pipeline Parallelism with Controllable Memory (NeurIPS 2024); PyTorch "
        "ScheduleZBVZeroBubble",
        PlacementKind::VShape, false, false, true},
       generators::checkZeroBubbleV,
       generators::zeroBubbleV},
      {{"v-half", "V-Half",
        "V-shape building block (one microbatch every 6 slots of F, f, B, b, W, w) whose "
        "activations live about 6P slots, squeezed greedily without raising memory: about half "
        "of 1F1B's activations ((P+2)/2 microbatches) and about half its bubble when F = I = W.",
        "any P >= 1, M >= 1; V = 2 (fixed by the V-shape)",
        "Qi et al., Pipeline Parallelism with Controllable Memory (NeurIPS 2024); "
        "sail-sg/zero-bubble-pipeline-parallelism (zbv_greedy, 'half')",
        PlacementKind::VShape, false, false, true},
       generators::checkControllableMemoryV,
       generators::vHalf},
      {{"v-min", "V-Min",
        "V-shape building block whose activations live about 4P slots, squeezed greedily without "
        "raising memory: about a third of 1F1B's activations ((P+4)/3 microbatches) with a "
        "bubble of about 2/3 of 1F1B's when F = I = W.",
        "any P >= 1, M >= 1; V = 2 (fixed by the V-shape)",
        "Qi et al., Pipeline Parallelism with Controllable Memory (NeurIPS 2024); "
        "sail-sg/zero-bubble-pipeline-parallelism (zbv_greedy, 'min')",
        PlacementKind::VShape, false, false, true},
       generators::checkControllableMemoryV,
       generators::vMin},
      {{"dualpipe", "DualPipe",
        "Two pipelines in opposite directions over the same ranks; forward of one direction "
        "overlapped with backward of the other. Every rank holds two stages' parameters.",
        "P even >= 2, M even >= 2P; V = 2 (the two directions)",
        "DeepSeek-AI, DeepSeek-V3 Technical Report (2024); deepseek-ai/DualPipe",
        PlacementKind::Bidirectional, false, false, true, true},
       generators::checkDualPipe,
       generators::dualPipe},
      {{"dualpipev", "DualPipeV",
        "DualPipe cut in half and folded onto a V-shape: one copy of the parameters, overlapped "
        "F&B pairs in the steady state.",
        "P >= 1, M >= 2P; V = 2 (fixed by the V-shape)",
        "deepseek-ai/DualPipe (DualPipeV, 2025); Sea AI Lab's cut-in-half note",
        PlacementKind::VShape, false, false, true, true},
       generators::checkDualPipeV,
       generators::dualPipeV},
  };
  return entries;
}

const FamilyEntry *findEntry(const std::string &name) {
  for (const auto &entry : familyEntries())
    if (entry.family.name == name) return &entry;
  return nullptr;
}

std::string familyNames() {
  std::string names;
  for (const auto &entry : familyEntries()) {
    if (!names.empty()) names += ", ";
    names += entry.family.name;
  }
  return names;
}

} // namespace

const std::vector<ScheduleFamily> &scheduleFamilies() {
  static const std::vector<ScheduleFamily> families = [] {
    std::vector<ScheduleFamily> list;
    for (const auto &entry : familyEntries())
      list.push_back(entry.family);
    return list;
  }();
  return families;
}

int modelStageCount(const ScheduleRequest &request) {
  const ScheduleFamily *family = findScheduleFamily(request.name);
  if (family && family->placement == PlacementKind::Bidirectional) return request.pp;
  return request.pp * std::max(1, request.chunks);
}

const ScheduleFamily *findScheduleFamily(const std::string &name) {
  const auto *entry = findEntry(name);
  return entry ? &entry->family : nullptr;
}

Status checkScheduleRequest(const ScheduleRequest &request) {
  const auto *entry = findEntry(request.name);
  if (entry == nullptr) {
    if (request.name == "custom")
      return makeError("schedule 'custom' is loaded from a file, not generated; use --plan FILE "
                       "or 'pipescope validate FILE'");
    return makeError("unknown schedule '" + request.name + "'; choose one of: " + familyNames());
  }
  if (request.pp < 1 || request.pp > kMaxPipelineRanks)
    return makeError("P (pipeline ranks) must be between 1 and " +
                     std::to_string(kMaxPipelineRanks) + ", got " + std::to_string(request.pp));
  if (request.microbatches < 1 || request.microbatches > kMaxMicrobatches)
    return makeError("M (microbatches) must be between 1 and " + std::to_string(kMaxMicrobatches) +
                     ", got " + std::to_string(request.microbatches));
  if (request.chunks < 1 || request.chunks > kMaxChunks)
    return makeError("V (chunks per rank) must be between 1 and " + std::to_string(kMaxChunks) +
                     ", got " + std::to_string(request.chunks));
  const int chunks = entry->family.placement == PlacementKind::Loop ? request.chunks : 2;
  const auto ops_per_stage_microbatch = entry->family.splits_backward ? 3u : 2u;
  const auto ops = static_cast<std::uint64_t>(request.pp) * static_cast<std::uint64_t>(chunks) *
                   static_cast<std::uint64_t>(request.microbatches) * ops_per_stage_microbatch;
  if (ops > kMaxScheduleOps)
    return makeError(
        "P=" + std::to_string(request.pp) + ", M=" + std::to_string(request.microbatches) +
        ", V=" + std::to_string(chunks) + " would make " + std::to_string(ops) +
        " ops; pipescope simulates at most " + std::to_string(kMaxScheduleOps) + " (lower M or P)");
  return entry->check(request);
}

Result<Schedule> generateSchedule(const ScheduleRequest &request) {
  if (auto status = checkScheduleRequest(request); !status) return status.error();
  const auto *entry = findEntry(request.name);
  Schedule schedule;
  schedule.name = request.name;
  schedule.placement = Placement::make(
      entry->family.placement, request.pp,
      entry->family.placement == PlacementKind::Loop ? request.chunks : 2, request.microbatches);
  schedule.microbatch_group =
      entry->family.uses_microbatch_group
          ? (request.microbatch_group > 0 ? request.microbatch_group : request.pp)
          : 0;
  schedule.ranks = entry->generate(request, schedule.placement);
  return schedule;
}

namespace {

// Per (stage, microbatch): how many times each part appears.
struct PartCounts {
  std::uint8_t forward = 0, full_backward = 0, input_grad = 0, weight_grad = 0;
};

std::string where(int rank, std::size_t index, const Op &op) {
  return "rank " + std::to_string(rank) + ", step " + std::to_string(index) + " (" + formatOp(op) +
         ")";
}

} // namespace

Status checkOpCoverage(const Schedule &schedule) {
  const Placement &placement = schedule.placement;
  const int stages = placement.stageCount();
  const int microbatches = placement.microbatches;
  if (static_cast<int>(schedule.ranks.size()) != placement.pp)
    return makeError("schedule has " + std::to_string(schedule.ranks.size()) +
                     " rank lists but P = " + std::to_string(placement.pp));
  std::vector<PartCounts> counts(static_cast<std::size_t>(stages) *
                                 static_cast<std::size_t>(microbatches));
  auto check_part = [&](int rank, std::size_t index, const Op &op, int stage,
                        int microbatch) -> Status {
    if (stage < 0 || stage >= stages)
      return makeError(where(rank, index, op) + ": stage " + std::to_string(stage) +
                       " does not exist (stages are 0.." + std::to_string(stages - 1) + ")");
    if (microbatch < 0 || microbatch >= microbatches)
      return makeError(where(rank, index, op) + ": microbatch " + std::to_string(microbatch) +
                       " does not exist (microbatches are 0.." + std::to_string(microbatches - 1) +
                       ")");
    if (placement.rankOf(stage) != rank)
      return makeError(where(rank, index, op) + ": stage " + std::to_string(stage) +
                       " lives on rank " + std::to_string(placement.rankOf(stage)) +
                       "; move the op to that rank's list");
    if (!placement.onRoute(stage, microbatch))
      return makeError(where(rank, index, op) + ": microbatch " + std::to_string(microbatch) +
                       " does not pass through stage " + std::to_string(stage) + " in the " +
                       std::string(placementName(placement.kind)) + " placement");
    return Ok{};
  };
  for (int rank = 0; rank < placement.pp; ++rank) {
    const auto &ops = schedule.ranks[static_cast<std::size_t>(rank)];
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op &op = ops[i];
      if (auto s = check_part(rank, i, op, op.stage, op.microbatch); !s) return s;
      auto &c = counts[static_cast<std::size_t>(op.stage) * microbatches + op.microbatch];
      std::uint8_t *slot = nullptr;
      switch (op.kind) {
      case OpKind::Forward: slot = &c.forward; break;
      case OpKind::InputGrad: slot = &c.input_grad; break;
      case OpKind::WeightGrad: slot = &c.weight_grad; break;
      case OpKind::FullBackward: slot = &c.full_backward; break;
      case OpKind::OverlappedPair: {
        slot = &c.forward;
        if (auto s = check_part(rank, i, op, op.backward_stage, op.backward_microbatch); !s)
          return s;
        auto &b = counts[static_cast<std::size_t>(op.backward_stage) * microbatches +
                         op.backward_microbatch];
        if (b.full_backward != 0 || b.input_grad != 0)
          return makeError(where(rank, i, op) + ": the backward of stage " +
                           std::to_string(op.backward_stage) + " microbatch " +
                           std::to_string(op.backward_microbatch) + " appears twice");
        b.full_backward = 1;
        break;
      }
      }
      if (*slot != 0)
        return makeError(where(rank, i, op) + ": duplicated; each op must appear exactly once");
      *slot = 1;
    }
  }
  for (int stage = 0; stage < stages; ++stage) {
    for (int m = 0; m < microbatches; ++m) {
      if (!placement.onRoute(stage, m)) continue;
      const auto &c = counts[static_cast<std::size_t>(stage) * microbatches + m];
      const int rank = placement.rankOf(stage);
      auto missing = [&](const char *letter, const char *what) {
        return makeError("rank " + std::to_string(rank) + " is missing " + std::to_string(stage) +
                         letter + std::to_string(m) + " (" + what + " of stage " +
                         std::to_string(stage) + ", microbatch " + std::to_string(m) +
                         "); add it to rank " + std::to_string(rank) + "'s list");
      };
      if (c.forward == 0) return missing("F", "forward");
      if (c.full_backward != 0 && (c.input_grad != 0 || c.weight_grad != 0))
        return makeError("rank " + std::to_string(rank) + " has both B and I/W for stage " +
                         std::to_string(stage) + ", microbatch " + std::to_string(m) +
                         "; use either one full backward or one I plus one W");
      if (c.full_backward == 0) {
        if (c.input_grad == 0)
          return missing(c.weight_grad ? "I" : "B", c.weight_grad ? "input-grad" : "backward");
        if (c.weight_grad == 0) return missing("W", "weight-grad");
      }
    }
  }
  return Ok{};
}

namespace {

// Which placement a set of per-rank lists implies: loop if every stage s is on rank s mod P;
// otherwise V-shape or bidirectional with stage ids 0..2P-1 (bidirectional when no microbatch
// runs through both stage 0 and stage P).
Result<Placement> inferPlacement(const std::vector<std::vector<Op>> &ranks) {
  const int pp = static_cast<int>(ranks.size());
  int max_stage = -1, max_microbatch = -1;
  for (const auto &ops : ranks)
    for (const auto &op : ops) {
      max_stage = std::max({max_stage, op.stage, op.backward_stage});
      max_microbatch = std::max({max_microbatch, op.microbatch, op.backward_microbatch});
    }
  if (max_stage < 0) return makeError("the schedule has no ops");
  const int stages = max_stage + 1;
  if (stages % pp != 0)
    return makeError("the schedule uses " + std::to_string(stages) + " stages on " +
                     std::to_string(pp) + " ranks; the stage count must be a multiple of P");
  const int chunks = stages / pp;
  bool loop = true;
  for (int r = 0; r < pp && loop; ++r)
    for (const auto &op : ranks[static_cast<std::size_t>(r)])
      if (op.stage % pp != r) {
        loop = false;
        break;
      }
  if (loop || chunks != 2)
    return Placement::make(PlacementKind::Loop, pp, chunks, max_microbatch + 1);
  // Distinguish V-shape from bidirectional by whether microbatch 0 reaches stage P.
  bool microbatch0_on_both = false, microbatch0_on_first = false;
  for (const auto &ops : ranks)
    for (const auto &op : ops) {
      if (op.microbatch == 0 && op.stage == 0) microbatch0_on_first = true;
      if (op.microbatch == 0 && op.stage == pp) microbatch0_on_both = true;
    }
  const auto kind = (microbatch0_on_first && microbatch0_on_both) ? PlacementKind::VShape
                                                                  : PlacementKind::Bidirectional;
  return Placement::make(kind, pp, 2, max_microbatch + 1);
}

} // namespace

Result<Schedule> makeCustomSchedule(std::vector<std::vector<Op>> ranks,
                                    const std::string *placement_name) {
  if (ranks.empty()) return makeError("a custom schedule needs at least one rank");
  if (static_cast<int>(ranks.size()) > kMaxPipelineRanks)
    return makeError("a custom schedule may have at most " + std::to_string(kMaxPipelineRanks) +
                     " ranks");
  std::size_t ops = 0;
  for (const auto &list : ranks)
    ops += list.size();
  if (ops > kMaxScheduleOps)
    return makeError("a custom schedule may have at most " + std::to_string(kMaxScheduleOps) +
                     " ops");
  auto inferred = inferPlacement(ranks);
  if (!inferred) return inferred.error();
  Placement placement = *inferred;
  if (placement_name != nullptr && *placement_name != std::string(placementName(placement.kind))) {
    const int pp = placement.pp;
    if (*placement_name == "loop")
      placement =
          Placement::make(PlacementKind::Loop, pp, placement.chunks, placement.microbatches);
    else if (*placement_name == "v-shape" || *placement_name == "bidirectional") {
      if (placement.stageCount() != 2 * pp)
        return makeError("placement '" + *placement_name + "' needs stage ids 0.." +
                         std::to_string(2 * pp - 1));
      placement = Placement::make(*placement_name == "v-shape" ? PlacementKind::VShape
                                                               : PlacementKind::Bidirectional,
                                  pp, 2, placement.microbatches);
    } else
      return makeError("unknown placement '" + *placement_name +
                       "'; use loop, v-shape or bidirectional");
  }
  // A complete schedule has a forward and a backward for every stage on every microbatch's
  // route (one op when DualPipe overlaps them), so fewer ops than stages on the route ×
  // microbatches cannot pass coverage. Refusing here also bounds the tables
  // that coverage, lowering and simulation size by stages × microbatches.
  if (placement.chunks > kMaxChunks)
    return makeError("a custom schedule may have at most " + std::to_string(kMaxChunks) +
                     " stages per rank; this one uses " + std::to_string(placement.stageCount()) +
                     " stages on " + std::to_string(placement.pp) + " ranks");
  const auto needed = static_cast<std::uint64_t>(placement.routeLength()) *
                      static_cast<std::uint64_t>(placement.microbatches);
  if (needed > ops)
    return makeError("the schedule has " + std::to_string(ops) + " ops, but " +
                     std::to_string(placement.stageCount()) + " stages and " +
                     std::to_string(placement.microbatches) +
                     " microbatches (the largest ids used, plus one) need at least " +
                     std::to_string(needed) +
                     "; add the missing ops or renumber the stages and "
                     "microbatches from 0");
  Schedule schedule;
  schedule.name = "custom";
  schedule.placement = std::move(placement);
  schedule.ranks = std::move(ranks);
  return schedule;
}

} // namespace pipescope
