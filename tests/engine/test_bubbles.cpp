// Every bubble explained: the causes of each idle interval, their sums, the chains of waits and
// the critical path, on simulations of every family (where the answers are known) and on traces
// made measured by delaying ops by known amounts.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/bubbles.h"
#include "engine/calibration.h"
#include "engine/dependencies.h"
#include "engine/plan_file.h"
#include "engine/trace_matching.h"

using namespace pipescope;

namespace {

ScheduleRequest requestFor(const ScheduleFamily &family, int pp = 4, int microbatches = 8) {
  ScheduleRequest request;
  request.name = family.name;
  request.pp = pp;
  request.microbatches = microbatches;
  request.chunks = family.uses_chunks ? 2 : 1;
  return request;
}

Evaluation evaluated(const ScheduleRequest &request, const Costs &costs) {
  auto evaluation = evaluate(request, costs);
  if (!evaluation) qFatal("%s", evaluation.error().message.c_str());
  return std::move(*evaluation);
}

BubbleAnalysis analysed(const Evaluation &evaluation) {
  auto analysis = explainBubbles(evaluation);
  if (!analysis) qFatal("%s", analysis.error().message.c_str());
  return std::move(*analysis);
}

Costs uneven() {
  Costs costs;
  costs.forward_us = 1.3;
  costs.backward_us = 2.9;
  costs.weight_us = 1.1;
  costs.overlapped_us = 3.5;
  costs.p2p_latency_us = 0.4;
  costs.gradient_sync_us = 2.5;
  return costs;
}

double tolerance(double makespan) {
  return 1e-9 * std::max(1.0, makespan);
}

// What must hold for any analysis: intervals inside the step, in order, disjoint from each other
// and from the rank's ops; per rank and in total, causes sum to idle = makespan - busy; the
// critical path tiles the step. Returns the first violation, or an empty string.
std::string checkInvariants(const Schedule &schedule, const StepTimeline &timeline,
                            const BubbleAnalysis &analysis) {
  const double makespan = analysis.makespanUs();
  const double eps = tolerance(makespan);
  double idle_total = 0;
  for (std::size_t r = 0; r < analysis.ranks.size(); ++r) {
    const RankBubbles &rank = analysis.ranks[r];
    double sum = 0, by_cause = 0, previous_end = analysis.step_start_us;
    for (const auto &interval : rank.intervals) {
      if (interval.start_us < previous_end - eps || interval.end_us <= interval.start_us ||
          interval.end_us > analysis.step_end_us + eps)
        return "rank " + std::to_string(r) + ": interval out of order or outside the step";
      previous_end = interval.end_us;
      sum += interval.durationUs();
      for (const auto &t : timeline.op_times[r])
        if (t.start_us < interval.end_us - eps && t.end_us > interval.start_us + eps)
          return "rank " + std::to_string(r) + ": an idle interval overlaps an op";
      if (interval.waits_for.valid()) {
        // The awaited op produces an input of the op that follows the interval.
        const Op &before = schedule.ranks[static_cast<std::size_t>(interval.before.rank)]
                                         [static_cast<std::size_t>(interval.before.position)];
        const Op &awaited = schedule.ranks[static_cast<std::size_t>(interval.waits_for.rank)]
                                          [static_cast<std::size_t>(interval.waits_for.position)];
        bool feeds = false;
        OpDependencies(schedule.placement).forEachInput(before, [&](const OpInput &input) {
          forEachOutput(awaited, [&](int stage, int microbatch, OpOutput output) {
            feeds = feeds || (stage == input.stage && microbatch == input.microbatch &&
                              output == input.output);
          });
        });
        if (!feeds) return "rank " + std::to_string(r) + ": waits for an op that is no input";
        const auto chain = waitChain(analysis, interval.waits_for);
        if (static_cast<int>(chain.size()) != interval.chain_length ||
            !(chain.back() == interval.chain_start))
          return "rank " + std::to_string(r) + ": chain length or start disagrees with waitChain";
      }
    }
    for (double c : rank.cause_us)
      by_cause += c;
    if (std::abs(sum - rank.idle_us) > eps || std::abs(by_cause - rank.idle_us) > eps ||
        std::abs(rank.idle_us - (makespan - rank.busy_us)) > eps)
      return "rank " + std::to_string(r) + ": causes " + std::to_string(by_cause) + ", intervals " +
             std::to_string(sum) + ", idle " + std::to_string(rank.idle_us) + ", makespan - busy " +
             std::to_string(makespan - rank.busy_us);
    idle_total += rank.idle_us;
  }
  double all_causes = 0;
  for (double c : analysis.cause_us)
    all_causes += c;
  if (std::abs(all_causes - idle_total) > eps * 10 ||
      std::abs(analysis.idle_us - idle_total) > eps * 10)
    return "the per-cause totals do not sum to the idle time";
  const CriticalPath &path = analysis.critical_path;
  if (path.segments.empty()) return "no critical path";
  double cursor = analysis.step_start_us, length = 0;
  for (const auto &segment : path.segments) {
    if (std::abs(segment.start_us - cursor) > eps) return "the critical path has a hole";
    cursor = segment.end_us;
    length += segment.end_us - segment.start_us;
    if (segment.kind == PathSegmentKind::Compute) {
      const OpTiming &t = timeline.op_times[static_cast<std::size_t>(segment.op.rank)]
                                           [static_cast<std::size_t>(segment.op.position)];
      if (std::abs(t.start_us - segment.start_us) > eps ||
          std::abs(t.end_us - segment.end_us) > eps)
        return "a compute segment is not its op's time";
    }
  }
  if (std::abs(cursor - analysis.step_end_us) > eps || std::abs(length - makespan) > eps)
    return "the critical path does not span the step";
  double kinds = 0;
  for (double k : path.kind_us)
    kinds += k;
  if (std::abs(kinds - makespan) > eps) return "the critical path's kinds do not sum to the step";
  return {};
}

StepTimeline timelineOf(const Evaluation &evaluation) {
  StepTimeline timeline;
  timeline.op_times = evaluation.simulation.op_times;
  timeline.transfers = evaluation.simulation.transfers;
  timeline.gradient_sync_us = evaluation.times.gradient_sync;
  return timeline;
}

double cause(const RankBubbles &rank, BubbleCause c) {
  return rank.cause_us[static_cast<std::size_t>(c)];
}

Trace measuredTraceOf(const Evaluation &evaluation, const ScheduleRequest &request,
                      const Costs &costs) {
  Plan plan;
  plan.request = request;
  plan.mesh.pp = request.pp;
  plan.costs = costs;
  Trace trace = traceFromEvaluation(plan, evaluation);
  trace.source = "measured";
  return trace;
}

BubbleAnalysis analysedTrace(const Trace &trace, const Evaluation &evaluation, int step = 0) {
  auto timeline = stepTimelineFromTrace(trace, evaluation.schedule, evaluation.program, step);
  if (!timeline) qFatal("%s", timeline.error().message.c_str());
  auto analysis = explainBubbles(evaluation.schedule, evaluation.program, *timeline);
  if (!analysis) qFatal("%s", analysis.error().message.c_str());
  const std::string problem = checkInvariants(evaluation.schedule, *timeline, *analysis);
  if (!problem.empty()) qFatal("%s", problem.c_str());
  return std::move(*analysis);
}

} // namespace

class TestBubbles : public QObject {
  Q_OBJECT

private slots:
  // The lowering's recvs are exactly the inputs dependencies.h says cross ranks, op by op.
  void theLoweringReceivesExactlyTheCrossRankInputs() {
    for (const auto &family : scheduleFamilies()) {
      const Evaluation e = evaluated(requestFor(family), Costs{});
      for (std::size_t r = 0; r < e.program.ranks.size(); ++r) {
        std::vector<std::int32_t> pending; // recvs since the last compute
        for (const Instruction &instruction : e.program.ranks[r]) {
          if (instruction.kind == InstructionKind::Recv) pending.push_back(instruction.index);
          if (instruction.kind != InstructionKind::Compute) continue;
          const Op &op = e.schedule.ranks[r][static_cast<std::size_t>(instruction.index)];
          std::size_t crossing = 0;
          OpDependencies(e.schedule.placement).forEachInput(op, [&](const OpInput &input) {
            if (!input.crosses_ranks) {
              QCOMPARE(e.schedule.placement.rankOf(input.stage), static_cast<int>(r));
              return;
            }
            ++crossing;
            bool received = false;
            for (const std::int32_t id : pending) {
              const Message &m = e.program.messages[static_cast<std::size_t>(id)];
              received = received || (m.stage == input.stage && m.microbatch == input.microbatch &&
                                      m.gradient == (input.output == OpOutput::BackwardInput));
            }
            QVERIFY2(received,
                     qPrintable(QString::fromStdString(family.name + " " + formatOp(op))));
          });
          QCOMPARE(pending.size(), crossing);
          pending.clear();
        }
      }
    }
  }

  // Every family, uniform and uneven costs (transfers and gradient sync included): the causes sum
  // to the simulator's idle time on every rank, a simulation has no unexplained time, and the
  // critical path is ops and transfers only, summing to the makespan.
  void causesSumToIdleForEveryFamily_data() {
    QTest::addColumn<QString>("family");
    QTest::addColumn<bool>("uniform");
    for (const auto &family : scheduleFamilies()) {
      QTest::newRow((family.name + " uniform").c_str())
          << QString::fromStdString(family.name) << true;
      QTest::newRow((family.name + " uneven").c_str())
          << QString::fromStdString(family.name) << false;
    }
  }
  void causesSumToIdleForEveryFamily() {
    QFETCH(QString, family);
    QFETCH(bool, uniform);
    const ScheduleFamily *found = findScheduleFamily(family.toStdString());
    QVERIFY(found);
    const Evaluation e = evaluated(requestFor(*found), uniform ? Costs{} : uneven());
    const BubbleAnalysis analysis = analysed(e);
    const std::string problem = checkInvariants(e.schedule, timelineOf(e), analysis);
    QVERIFY2(problem.empty(), problem.c_str());
    const double eps = tolerance(e.simulation.makespan_us);
    QVERIFY(std::abs(analysis.makespanUs() - e.simulation.makespan_us) < eps);
    for (std::size_t r = 0; r < analysis.ranks.size(); ++r) {
      QVERIFY(std::abs(analysis.ranks[r].idle_us - e.simulation.ranks[r].idle_us) < eps);
      QVERIFY(std::abs(analysis.ranks[r].busy_us - e.simulation.ranks[r].busy_us) < eps);
      QCOMPARE(cause(analysis.ranks[r], BubbleCause::Unexplained), 0.0);
      if (uniform) {
        QCOMPARE(cause(analysis.ranks[r], BubbleCause::Transfer), 0.0);
        QCOMPARE(cause(analysis.ranks[r], BubbleCause::GradientSync), 0.0);
      } else {
        QVERIFY(std::abs(cause(analysis.ranks[r], BubbleCause::GradientSync) - 2.5) < eps);
      }
    }
    const auto &kinds = analysis.critical_path.kind_us;
    QCOMPARE(kinds[static_cast<std::size_t>(PathSegmentKind::Overhead)], 0.0);
    if (!uniform) QVERIFY(kinds[static_cast<std::size_t>(PathSegmentKind::Transfer)] > 0);
  }

  // The published bubble: with uniform ops and free transfers, GPipe's and 1F1B's idle is
  // (P-1)(F+B) on every rank, all of it fill and drain. For 1F1B, rank r fills r·F (the first
  // forward coming down) + (P-1-r)·B (the first gradient coming back) and drains the rest.
  void gpipeAnd1f1bIdleIsAllFillAndDrain_data() {
    QTest::addColumn<QString>("family");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("microbatches");
    for (const char *family : {"gpipe", "1f1b"})
      for (const auto &[pp, microbatches] : {std::pair(4, 8), std::pair(8, 8), std::pair(6, 13)})
        QTest::newRow(qPrintable(QString("%1 P=%2 M=%3").arg(family).arg(pp).arg(microbatches)))
            << QString(family) << pp << microbatches;
  }
  void gpipeAnd1f1bIdleIsAllFillAndDrain() {
    QFETCH(QString, family);
    QFETCH(int, pp);
    QFETCH(int, microbatches);
    Costs costs;
    costs.forward_us = 1.5;
    costs.backward_us = 2.75;
    costs.weight_us = 1;
    const Evaluation e = evaluated({family.toStdString(), pp, microbatches, 1, 0}, costs);
    const BubbleAnalysis analysis = analysed(e);
    const double bubble = (pp - 1) * (costs.forward_us + costs.backward_us);
    for (int r = 0; r < pp; ++r) {
      const RankBubbles &rank = analysis.ranks[static_cast<std::size_t>(r)];
      QVERIFY(std::abs(rank.idle_us - bubble) < 1e-9);
      QVERIFY(std::abs(cause(rank, BubbleCause::Fill) + cause(rank, BubbleCause::Drain) - bubble) <
              1e-9);
      QCOMPARE(cause(rank, BubbleCause::Dependency), 0.0);
      if (family == "1f1b") {
        const double fill = r * costs.forward_us + (pp - 1 - r) * costs.backward_us;
        QVERIFY2(std::abs(cause(rank, BubbleCause::Fill) - fill) < 1e-9,
                 qPrintable(QString("rank %1 fill %2, expected %3")
                                .arg(r)
                                .arg(cause(rank, BubbleCause::Fill))
                                .arg(fill)));
      }
    }
    const auto &kinds = analysis.critical_path.kind_us;
    QVERIFY(std::abs(kinds[static_cast<std::size_t>(PathSegmentKind::Compute)] -
                     e.simulation.makespan_us) < 1e-9);
  }

  // Interleaved 1F1B's bubble shrinks by V: (P-1)(F+B)/V per rank (Narayanan et al. 2021), and the
  // causes still account for every microsecond of it.
  void interleavedBubbleIsSplitByV() {
    const Evaluation e = evaluated({"interleaved-1f1b", 4, 8, 2, 0}, Costs{});
    const BubbleAnalysis analysis = analysed(e);
    for (const auto &rank : analysis.ranks) {
      QVERIFY(std::abs(rank.idle_us - 3.0 * 3.0 / 2.0) < 1e-9);
      QVERIFY(cause(rank, BubbleCause::Fill) > 0);
      QVERIFY(cause(rank, BubbleCause::Drain) > 0);
    }
  }

  // The chain from the issue: the last rank's first bubble waits for F(2,0) on rank 2, which
  // waited for F(1,0) on rank 1, started by F(0,0) on rank 0. With latency L per transfer it is
  // cut into waiting for the op (until F(2,0) ends at 3F + 2L) and the transfer (L more).
  void theLastRanksFirstBubbleWaitsForTheFirstForward() {
    Costs costs;
    costs.p2p_latency_us = 0.25;
    const Evaluation e = evaluated({"1f1b", 4, 8, 1, 0}, costs);
    const BubbleAnalysis analysis = analysed(e);
    const auto &intervals = analysis.ranks[3].intervals;
    QVERIFY(intervals.size() >= 2);
    const IdleInterval &wait = intervals[0], &transfer = intervals[1];
    QCOMPARE(wait.cause, BubbleCause::Fill);
    QCOMPARE(wait.start_us, 0.0);
    QVERIFY(std::abs(wait.end_us - 3.5) < 1e-12);
    const Op &awaited = e.schedule.ranks[2][static_cast<std::size_t>(wait.waits_for.position)];
    QCOMPARE(wait.waits_for.rank, 2);
    QCOMPARE(awaited, forwardOp(2, 0));
    QCOMPARE(wait.chain_length, 3);
    QCOMPARE(wait.chain_start.rank, 0);
    QCOMPARE(e.schedule.ranks[0][static_cast<std::size_t>(wait.chain_start.position)],
             forwardOp(0, 0));
    QCOMPARE(transfer.cause, BubbleCause::Transfer);
    QVERIFY(std::abs(transfer.durationUs() - 0.25) < 1e-12);
    QCOMPARE(transfer.waits_for, wait.waits_for);
    const std::string text = describeIdleInterval(e.schedule, analysis, wait);
    QVERIFY2(text.find("fill: waits for F(2,0) on rank 2, which waited for F(1,0) on rank 1") == 0,
             text.c_str());
    QVERIFY2(text.find("started by F(0,0) on rank 0") != std::string::npos, text.c_str());
  }

  // A trace marked measured with one op started late by a known delay: exactly that much time is
  // unexplained, on that rank, and the critical path carries it as overhead when the op is on it.
  void aLateOpIsUnexplainedTime() {
    const ScheduleRequest request{"1f1b", 4, 8, 1, 0};
    const Evaluation e = evaluated(request, Costs{});
    Trace trace = measuredTraceOf(e, request, Costs{});
    // Rank 0's last op, B(0,7), has no dependents and ends the step: delay it by 0.75.
    constexpr double kDelay = 0.75;
    for (auto &op : trace.ops)
      if (op.rank == 0 && op.kind == OpKind::FullBackward && op.microbatch == 7) {
        op.start_us += kDelay;
        op.end_us += kDelay;
      }
    const BubbleAnalysis analysis = analysedTrace(trace, e);
    QVERIFY(analysis.measured);
    QCOMPARE(analysis.makespanUs(), e.simulation.makespan_us + kDelay);
    QVERIFY(std::abs(cause(analysis.ranks[0], BubbleCause::Unexplained) - kDelay) < 1e-12);
    const auto late = std::find_if(
        analysis.ranks[0].intervals.begin(), analysis.ranks[0].intervals.end(),
        [](const IdleInterval &interval) { return interval.cause == BubbleCause::Unexplained; });
    QVERIFY(late != analysis.ranks[0].intervals.end());
    const std::string text = describeIdleInterval(e.schedule, analysis, *late);
    QVERIFY2(text == "unexplained: B(0,7)'s inputs had arrived and rank 0 was free, yet it had not "
                     "started (host, launch or framework overhead)",
             text.c_str());
    for (std::size_t r = 1; r < 4; ++r) {
      QCOMPARE(cause(analysis.ranks[r], BubbleCause::Unexplained), 0.0);
      // Everyone else waits the delay longer for the step to end.
      QVERIFY(std::abs(analysis.ranks[r].idle_us - (e.simulation.ranks[r].idle_us + kDelay)) <
              1e-9);
    }
    QVERIFY(
        std::abs(
            analysis.critical_path.kind_us[static_cast<std::size_t>(PathSegmentKind::Overhead)] -
            kDelay) < 1e-12);
  }

  // A consumer that starts before the transfer record says its input arrived (clock error) and a
  // trace with no transfer records at all: still a tiling, nothing negative.
  void clockErrorAndMissingTransfersStillTile() {
    const ScheduleRequest request{"zb-h1", 4, 8, 1, 0};
    Costs costs;
    costs.p2p_latency_us = 0.5;
    const Evaluation e = evaluated(request, costs);
    Trace trace = measuredTraceOf(e, request, costs);
    for (auto &transfer : trace.transfers)
      transfer.end_us += 0.2; // arrivals recorded late: beyond the consumers' starts
    const BubbleAnalysis skewed = analysedTrace(trace, e);
    QVERIFY(skewed.critical_path.kind_us[static_cast<std::size_t>(PathSegmentKind::Transfer)] > 0);
    trace.transfers.clear();
    const BubbleAnalysis blind = analysedTrace(trace, e);
    // Without records, time in flight cannot be told from overhead.
    double transfer = 0, unexplained = 0;
    for (const auto &rank : blind.ranks) {
      transfer += cause(rank, BubbleCause::Transfer);
      unexplained += cause(rank, BubbleCause::Unexplained);
    }
    QCOMPARE(transfer, 0.0);
    QVERIFY(unexplained > 0);
  }

  // Several steps in one trace: each step's transfer records are found by time, and a repeated
  // step explains exactly as the first.
  void eachStepOfATraceIsExplainedOnItsOwn() {
    const ScheduleRequest request{"dualpipev", 4, 8, 2, 0};
    const Costs costs = uneven();
    const Evaluation e = evaluated(request, costs);
    Trace trace = measuredTraceOf(e, request, costs);
    const std::size_t ops = trace.ops.size(), transfers = trace.transfers.size();
    const double shift = e.simulation.makespan_us + 10;
    for (std::size_t k = 0; k < ops; ++k) {
      TraceOp op = trace.ops[k];
      op.step = 1;
      op.start_us += shift;
      op.end_us += shift;
      trace.ops.push_back(op);
    }
    for (std::size_t k = 0; k < transfers; ++k) {
      TraceTransfer t = trace.transfers[k];
      t.start_us += shift;
      t.end_us += shift;
      trace.transfers.push_back(t);
    }
    QCOMPARE(traceSteps(trace), (std::vector<int>{0, 1}));
    const BubbleAnalysis first = analysedTrace(trace, e, 0);
    const BubbleAnalysis second = analysedTrace(trace, e, 1);
    QVERIFY(std::abs(second.step_start_us - first.step_start_us - shift) < 1e-9);
    for (int c = 0; c < kBubbleCauseCount; ++c)
      QVERIFY(std::abs(first.cause_us[static_cast<std::size_t>(c)] -
                       second.cause_us[static_cast<std::size_t>(c)]) < 1e-9);
    QVERIFY(first.cause_us[static_cast<std::size_t>(BubbleCause::Transfer)] > 0);
  }

  // Real measured runs (tests/data/measured: pipescope-backend on the cpu device): every step of
  // every file explained, the causes summing to each rank's idle time as the trace's own records
  // give it, and real host overhead showing up as unexplained time.
  void realMeasuredTracesAreExplained_data() {
    QTest::addColumn<QString>("file");
    for (const char *file : {"measured-1f1b-p4-m8.json.gz", "measured-zb-h1-p3-m6.json.gz",
                             "measured-dualpipev-p2-m4.json.gz"})
      QTest::newRow(file) << QString(file);
  }
  void realMeasuredTracesAreExplained() {
    QFETCH(QString, file);
    auto trace = loadTrace(std::string(PIPESCOPE_TEST_DATA "/measured/") + file.toStdString());
    QVERIFY2(trace, trace ? "" : trace.error().message.c_str());
    QCOMPARE(trace->source, std::string("measured"));
    auto e = evaluatePlan(trace->plan);
    QVERIFY2(e, e ? "" : e.error().message.c_str());
    QVERIFY(checkTraceMatchesSchedule(*trace, e->schedule));
    const auto steps = traceStepMetrics(*trace);
    QCOMPARE(traceSteps(*trace).size(), steps.size());
    QVERIFY(steps.size() >= 2);
    for (const auto &metrics : steps) {
      auto timeline = stepTimelineFromTrace(*trace, e->schedule, e->program, metrics.step);
      QVERIFY2(timeline, timeline ? "" : timeline.error().message.c_str());
      QVERIFY(timeline->measured);
      auto analysis = explainBubbles(e->schedule, e->program, *timeline);
      QVERIFY2(analysis, analysis ? "" : analysis.error().message.c_str());
      const std::string problem = checkInvariants(e->schedule, *timeline, *analysis);
      QVERIFY2(problem.empty(), problem.c_str());
      const double eps = 1e-9 * metrics.makespan_us;
      QVERIFY(std::abs(analysis->makespanUs() - metrics.makespan_us) < eps);
      // Busy time from the records themselves (an overlapped pair's two records count once).
      std::vector<double> busy(e->schedule.ranks.size(), 0.0);
      for (const auto &op : trace->ops)
        if (op.step == metrics.step && !(op.overlapped && op.kind == OpKind::FullBackward))
          busy[static_cast<std::size_t>(op.rank)] += op.end_us - op.start_us;
      for (std::size_t r = 0; r < busy.size(); ++r) {
        double causes = 0;
        for (double c : analysis->ranks[r].cause_us)
          causes += c;
        QVERIFY(std::abs(causes - (metrics.makespan_us - busy[r])) < eps);
      }
      QVERIFY(analysis->cause_us[static_cast<std::size_t>(BubbleCause::Unexplained)] > 0);
      QCOMPARE(analysis->cause_us[static_cast<std::size_t>(BubbleCause::GradientSync)], 0.0);
    }
  }

  void timelinesThatDoNotFitAreRefused() {
    const Evaluation e = evaluated({"1f1b", 4, 8, 1, 0}, Costs{});
    StepTimeline timeline = timelineOf(e);
    timeline.op_times[2].pop_back();
    auto refused = explainBubbles(e.schedule, e.program, timeline);
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("rank 2") != std::string::npos,
             refused.error().message.c_str());
    Trace trace = measuredTraceOf(e, {"1f1b", 4, 8, 1, 0}, Costs{});
    trace.ops.pop_back();
    auto missing = stepTimelineFromTrace(trace, e.schedule, e.program, 0);
    QVERIFY(!missing);
    QVERIFY2(missing.error().message.find("step 0 has 63 of the 64 ops") != std::string::npos,
             missing.error().message.c_str());
    // GPipe has 1F1B's ops in another order: a 1F1B trace is not a GPipe run.
    const Evaluation gpipe = evaluated({"gpipe", 4, 8, 1, 0}, Costs{});
    auto reordered = stepTimelineFromTrace(measuredTraceOf(e, {"1f1b", 4, 8, 1, 0}, Costs{}),
                                           gpipe.schedule, gpipe.program, 0);
    QVERIFY(!reordered);
    QVERIFY2(reordered.error().message.find(
                 "runs F(0,7) first: the trace is of another schedule") != std::string::npos,
             reordered.error().message.c_str());
  }

  // The JSON form reads back with the same totals and names every waited-for op.
  void jsonReadsBack() {
    const Evaluation e = evaluated({"dualpipe", 4, 8, 1, 0}, uneven());
    const BubbleAnalysis analysis = analysed(e);
    std::string text;
    streamBubbleJson([&](std::string_view piece) { text += piece; }, e.schedule, analysis,
                     {{"schedule", "dualpipe"}});
    const auto json = nlohmann::json::parse(text);
    QCOMPARE(json["schedule"].get<std::string>(), std::string("dualpipe"));
    QCOMPARE(json["ranks"].size(), std::size_t{4});
    double idle = 0;
    for (const auto &rank : json["ranks"]) {
      double sum = 0;
      for (const auto &interval : rank["intervals"]) {
        sum += interval["end_us"].get<double>() - interval["start_us"].get<double>();
        if (interval.contains("waits_for"))
          QVERIFY(interval["waits_for"].contains("stage") && interval.contains("chain_start"));
      }
      QVERIFY(std::abs(sum - rank["idle_us"].get<double>()) < 1e-9);
      idle += rank["idle_us"].get<double>();
    }
    QVERIFY(std::abs(idle - json["idle_us"].get<double>()) < 1e-9);
    double length = 0;
    for (const auto &segment : json["critical_path"]) {
      length += segment["end_us"].get<double>() - segment["start_us"].get<double>();
      if (segment["type"] == "compute")
        QVERIFY(segment.contains("rank") && segment.contains("kind") && segment.contains("stage") &&
                segment.contains("microbatch"));
    }
    QVERIFY(std::abs(length - json["makespan_us"].get<double>()) < 1e-9);
  }
};

QTEST_GUILESS_MAIN(TestBubbles)
#include "test_bubbles.moc"
