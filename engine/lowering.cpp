#include "engine/lowering.h"

#include <limits>

namespace pipescope {

std::size_t LoweredProgram::instructionCount() const {
  std::size_t count = 0;
  for (const auto &program : ranks)
    count += program.size();
  return count;
}

namespace {

// Per virtual stage: the rank that receives its output (forward: the next stage's rank,
// backward: the previous stage's), or -1 when the consumer is on the same rank or absent.
struct StageLinks {
  std::vector<std::int32_t> forward_to, backward_to;

  explicit StageLinks(const Placement &placement) {
    const auto stages = static_cast<std::size_t>(placement.stageCount());
    forward_to.assign(stages, -1);
    backward_to.assign(stages, -1);
    for (int s = 0; s < placement.stageCount(); ++s) {
      const auto i = static_cast<std::size_t>(s);
      const int next = placement.nextStage(s), prev = placement.previousStage(s);
      if (next >= 0 && placement.rankOf(next) != placement.rankOf(s))
        forward_to[i] = placement.rankOf(next);
      if (prev >= 0 && placement.rankOf(prev) != placement.rankOf(s))
        backward_to[i] = placement.rankOf(prev);
    }
  }
};

} // namespace

namespace {

// Appends one rank's instructions; small enough to inline into the loop over ops.
class ProgramWriter {
public:
  ProgramWriter(const Placement &placement, const StageLinks &links,
                const std::vector<std::int32_t> &message_id, const std::vector<Message> &messages,
                std::vector<Instruction> &out)
      : placement_(placement), links_(links), message_id_(message_id), messages_(messages),
        microbatches_(static_cast<std::size_t>(placement.microbatches)), out_(out) {}

  void recvActivation(int stage, int microbatch) {
    const int prev = placement_.previousStage(stage);
    if (prev >= 0 && links_.forward_to[static_cast<std::size_t>(prev)] >= 0)
      recv(message_id_[key(prev, microbatch) * 2]);
  }
  void recvGradient(int stage, int microbatch) {
    const int next = placement_.nextStage(stage);
    if (next >= 0 && links_.backward_to[static_cast<std::size_t>(next)] >= 0)
      recv(message_id_[key(next, microbatch) * 2 + 1]);
  }
  void sendActivation(int stage, int microbatch) {
    if (links_.forward_to[static_cast<std::size_t>(stage)] >= 0)
      send(message_id_[key(stage, microbatch) * 2]);
  }
  void sendGradient(int stage, int microbatch) {
    if (links_.backward_to[static_cast<std::size_t>(stage)] >= 0)
      send(message_id_[key(stage, microbatch) * 2 + 1]);
  }
  void compute(std::size_t index) {
    out_.push_back({static_cast<std::int32_t>(index), -1, InstructionKind::Compute});
  }

private:
  std::size_t key(int stage, int microbatch) const {
    return static_cast<std::size_t>(stage) * microbatches_ + static_cast<std::size_t>(microbatch);
  }
  void recv(std::int32_t id) {
    out_.push_back({id,
                    static_cast<std::int16_t>(messages_[static_cast<std::size_t>(id)].from_rank),
                    InstructionKind::Recv});
  }
  void send(std::int32_t id) {
    out_.push_back({id, static_cast<std::int16_t>(messages_[static_cast<std::size_t>(id)].to_rank),
                    InstructionKind::Send});
  }

  const Placement &placement_;
  const StageLinks &links_;
  const std::vector<std::int32_t> &message_id_;
  const std::vector<Message> &messages_;
  std::size_t microbatches_;
  std::vector<Instruction> &out_;
};

} // namespace

LoweredProgram lowerSchedule(const Schedule &schedule) {
  const Placement &placement = schedule.placement;
  const StageLinks links(placement);
  const auto microbatches = static_cast<std::size_t>(placement.microbatches);
  // Compact message id of each produced output, indexed by (stage·M + microbatch)·2 + gradient.
  std::vector<std::int32_t> message_id(
      static_cast<std::size_t>(placement.stageCount()) * microbatches * 2, -1);

  LoweredProgram program;
  program.ranks.resize(schedule.ranks.size());
  program.messages.reserve(schedule.opCount());

  // Pass 1: every send gets its id in the producer's program order, so ids are deterministic.
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    const auto rank = static_cast<std::int32_t>(r);
    for (const Op &op : schedule.ranks[r]) {
      if (op.kind == OpKind::WeightGrad) continue;
      const bool pair = op.kind == OpKind::OverlappedPair;
      if (op.kind == OpKind::Forward || pair) {
        const std::int32_t to = links.forward_to[static_cast<std::size_t>(op.stage)];
        if (to >= 0) {
          message_id[(static_cast<std::size_t>(op.stage) * microbatches +
                      static_cast<std::size_t>(op.microbatch)) *
                     2] = static_cast<std::int32_t>(program.messages.size());
          program.messages.push_back({rank, to, op.stage, op.microbatch, false});
        }
      }
      if (op.kind != OpKind::Forward) {
        const int stage = pair ? op.backward_stage : op.stage;
        const int microbatch = pair ? op.backward_microbatch : op.microbatch;
        const std::int32_t to = links.backward_to[static_cast<std::size_t>(stage)];
        if (to >= 0) {
          message_id[(static_cast<std::size_t>(stage) * microbatches +
                      static_cast<std::size_t>(microbatch)) *
                         2 +
                     1] = static_cast<std::int32_t>(program.messages.size());
          program.messages.push_back({rank, to, stage, microbatch, true});
        }
      }
    }
  }

  // Pass 2: recvs just before their consumer, sends just after their producer.
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    const auto &ops = schedule.ranks[r];
    auto &out = program.ranks[r];
    out.reserve(ops.size() * 3);
    ProgramWriter writer(placement, links, message_id, program.messages, out);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op &op = ops[i];
      switch (op.kind) {
      case OpKind::Forward:
        writer.recvActivation(op.stage, op.microbatch);
        writer.compute(i);
        writer.sendActivation(op.stage, op.microbatch);
        break;
      case OpKind::InputGrad:
      case OpKind::FullBackward:
        writer.recvGradient(op.stage, op.microbatch);
        writer.compute(i);
        writer.sendGradient(op.stage, op.microbatch);
        break;
      case OpKind::WeightGrad: writer.compute(i); break;
      case OpKind::OverlappedPair:
        writer.recvActivation(op.stage, op.microbatch);
        writer.recvGradient(op.backward_stage, op.backward_microbatch);
        writer.compute(i);
        writer.sendActivation(op.stage, op.microbatch);
        writer.sendGradient(op.backward_stage, op.backward_microbatch);
        break;
      }
    }
  }
  return program;
}

} // namespace pipescope
