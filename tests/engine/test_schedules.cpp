// Schedules, lowering and simulation: every family over a grid of P, M, V, the closed forms,
// the known peak in-flight counts, the text forms, and refusals of impossible requests.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/evaluation.h"
#include "engine/pytorch_csv.h"
#include "tests/engine/schedule_checks.h"

using namespace pipescope;

namespace {

struct GridPoint {
  int pp, microbatches, chunks, group;
};

std::vector<GridPoint> gridFor(const ScheduleFamily &family) {
  std::vector<GridPoint> points;
  for (int pp : {1, 2, 3, 4, 5, 6, 8})
    for (int m : {1, 2, 3, 4, 5, 6, 8, 12, 16, 20}) {
      const std::vector<int> chunk_list =
          family.uses_chunks ? std::vector<int>{1, 2, 3, 4} : std::vector<int>{1};
      for (int v : chunk_list) {
        points.push_back({pp, m, v, 0});
        if (family.uses_microbatch_group && m > pp) points.push_back({pp, m, v, m});
      }
    }
  return points;
}

QString describe(const ScheduleRequest &r) {
  return QString::fromStdString(
      r.name + " P=" + std::to_string(r.pp) + " M=" + std::to_string(r.microbatches) +
      " V=" + std::to_string(r.chunks) + " G=" + std::to_string(r.microbatch_group));
}

Evaluation evaluateOrFail(const ScheduleRequest &request, const Costs &costs = {}) {
  auto e = evaluate(request, costs);
  if (!e) qFatal("%s: %s", qPrintable(describe(request)), e.error().message.c_str());
  return std::move(*e);
}

// Empty when the simulation equals the schedule's closed form (the makespan and every rank's
// peak in-flight chunks), else what differs.
QString closedFormMismatch(const ScheduleRequest &request, const Costs &costs = {}) {
  const auto e = evaluateOrFail(request, costs);
  if (!e.analytic) return describe(request) + ": no closed form";
  if (std::abs(e.simulation.makespan_us - e.analytic->makespan_us) >= 1e-9)
    return describe(request) + QString(": simulated %1, closed form %2")
                                   .arg(e.simulation.makespan_us)
                                   .arg(e.analytic->makespan_us);
  for (std::size_t r = 0; r < e.simulation.ranks.size(); ++r)
    if (e.simulation.ranks[r].peak_inflight != e.analytic->peak_inflight[r])
      return describe(request) + QString(": rank %1 holds %2 chunks, closed form %3")
                                     .arg(r)
                                     .arg(e.simulation.ranks[r].peak_inflight)
                                     .arg(e.analytic->peak_inflight[r]);
  return {};
}

Schedule customFromText(const std::string &csv) {
  auto lists = parsePytorchCsv(csv);
  if (!lists) qFatal("bad test CSV: %s", lists.error().message.c_str());
  auto schedule = makeCustomSchedule(std::move(*lists));
  if (!schedule) qFatal("bad test schedule: %s", schedule.error().message.c_str());
  return std::move(*schedule);
}

} // namespace

class TestSchedules : public QObject {
  Q_OBJECT

private slots:
  void everyFamilyOverGrid_data() {
    QTest::addColumn<QString>("name");
    for (const auto &family : scheduleFamilies())
      QTest::newRow(family.name.c_str()) << QString::fromStdString(family.name);
  }

  // Every required op once on its owning rank, no deadlock, every dependency respected, one op
  // at a time per rank, the same result twice; with free and with priced transfers.
  void everyFamilyOverGrid() {
    QFETCH(QString, name);
    const auto *family = findScheduleFamily(name.toStdString());
    QVERIFY(family);
    int accepted = 0;
    Costs priced;
    priced.p2p_latency_us = 0.37;
    for (const auto &point : gridFor(*family)) {
      ScheduleRequest request{family->name, point.pp, point.microbatches, point.chunks,
                              point.group};
      if (!checkScheduleRequest(request)) continue;
      ++accepted;
      for (const Costs &costs : {Costs{}, priced}) {
        auto first = evaluate(request, costs);
        QVERIFY2(first, qPrintable(describe(request) + ": " +
                                   QString::fromStdString(first ? "" : first.error().message)));
        const std::string violation = testing::findDependencyViolation(*first);
        QVERIFY2(violation.empty(),
                 qPrintable(describe(request) + ": " + QString::fromStdString(violation)));
        for (const auto &list : first->schedule.ranks)
          for (const auto &op : list) {
            const bool split = op.kind == OpKind::InputGrad || op.kind == OpKind::WeightGrad;
            if (split) QVERIFY2(family->splits_backward, qPrintable(describe(request)));
          }
        auto second = evaluate(request, costs);
        QVERIFY(second);
        QCOMPARE(second->simulation.makespan_us, first->simulation.makespan_us);
        for (std::size_t r = 0; r < first->simulation.op_times.size(); ++r)
          for (std::size_t i = 0; i < first->simulation.op_times[r].size(); ++i)
            QCOMPARE(second->simulation.op_times[r][i].start_us,
                     first->simulation.op_times[r][i].start_us);
        QVERIFY(first->simulation.bubble_fraction >= -1e-12 &&
                first->simulation.bubble_fraction < 1);
      }
    }
    QVERIFY2(accepted >= 10,
             qPrintable(name + " accepted only " + QString::number(accepted) + " grid points"));
  }

  void closedFormsAreExact_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<double>("forward");
    QTest::addColumn<double>("backward");
    for (const char *name : {"gpipe", "1f1b", "naive"}) {
      QTest::newRow((std::string(name) + " F=1 B=2").c_str()) << name << 1.0 << 2.0;
      QTest::newRow((std::string(name) + " F=1.5 B=2.25").c_str()) << name << 1.5 << 2.25;
    }
  }

  // With uniform op times and free transfers the simulation equals the published closed form.
  void closedFormsAreExact() {
    QFETCH(QString, name);
    QFETCH(double, forward);
    QFETCH(double, backward);
    Costs costs;
    costs.forward_us = forward;
    costs.backward_us = backward;
    costs.weight_us = backward / 2;
    for (int pp = 1; pp <= 8; ++pp)
      for (int m = 1; m <= 16; ++m) {
        const auto e = evaluateOrFail({name.toStdString(), pp, m, 1, 0}, costs);
        QVERIFY(e.analytic);
        QCOMPARE(e.simulation.makespan_us, e.analytic->makespan_us);
        QVERIFY(std::abs(e.simulation.bubble_fraction - e.analytic->bubble_fraction) < 1e-12);
        QVERIFY(std::abs(e.simulation.bubble_ratio - e.analytic->bubble_ratio) < 1e-12);
      }
  }

  // The zero-bubble and DualPipe closed forms hold exactly in the regime each states.
  void publishedClosedFormsHoldInTheirRegime_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("minimumMicrobatches"); // as a multiple: 1 = P, 2 = 2P-1
    QTest::newRow("zb-h1") << "zb-h1" << 1;
    QTest::newRow("zb-h2") << "zb-h2" << 2;
    QTest::newRow("zb-v") << "zb-v" << 0;
    QTest::newRow("dualpipe") << "dualpipe" << 0;
    QTest::newRow("dualpipev") << "dualpipev" << 0;
  }
  void publishedClosedFormsHoldInTheirRegime() {
    QFETCH(QString, name);
    QFETCH(int, minimumMicrobatches);
    int checked = 0;
    for (int pp = 1; pp <= 8; ++pp)
      for (int m = 1; m <= 24; ++m) {
        if (minimumMicrobatches == 1 && m < pp) continue;
        if (minimumMicrobatches == 2 && m < 2 * pp - 1) continue;
        const ScheduleRequest request{name.toStdString(), pp, m, 1, 0};
        if (!checkScheduleRequest(request)) continue;
        const QString mismatch = closedFormMismatch(request); // F = I = W = 1, F&B = F + B
        QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
        ++checked;
      }
    QVERIFY(checked >= 20);
  }

  // analyticDepartures names what a plan breaks of its closed form's regime: wherever it names
  // nothing, the closed form is exact (V-Half and V-Min, approximate by construction, aside);
  // each broken assumption is named with its size.
  void departuresNameWhatBreaksTheClosedForm() {
    Costs uneven_thirds; // F = 1.5, I = 1.25, W = 1
    uneven_thirds.forward_us = 1.5;
    uneven_thirds.backward_us = 2.25;
    Costs priced;
    priced.p2p_latency_us = 0.37;
    Costs synced;
    synced.gradient_sync_us = 2;
    const Costs variants[] = {Costs{}, uneven_thirds, priced, synced};
    int exact = 0, departing = 0;
    for (const auto &family : scheduleFamilies()) {
      if (family.name == "v-half" || family.name == "v-min" || family.name == "custom") continue;
      for (const auto &point : gridFor(family)) {
        const ScheduleRequest request{family.name, point.pp, point.microbatches, point.chunks,
                                      point.group};
        if (!checkScheduleRequest(request)) continue;
        for (std::size_t c = 0; c < std::size(variants); ++c) {
          const Evaluation e = evaluateOrFail(request, variants[c]);
          if (!e.analytic) continue;
          const std::vector<AnalyticDeparture> departures = analyticDepartures(e);
          const bool matches =
              std::abs(e.simulation.bubble_fraction - e.analytic->bubble_fraction) < 1e-9;
          QString named;
          for (const auto &d : departures)
            named += QString::fromStdString(d.text) + QStringLiteral("; ");
          QVERIFY2(matches || !departures.empty(),
                   qPrintable(describe(request) + QStringLiteral(" costs %1: simulated %2, "
                                                                 "closed form %3, nothing named")
                                                      .arg(c)
                                                      .arg(e.simulation.bubble_fraction)
                                                      .arg(e.analytic->bubble_fraction)));
          if (c == 2 && point.pp > 1)
            QVERIFY2(named.contains(QStringLiteral("transfers take up to 0.37 \u00b5s")),
                     qPrintable(describe(request) + QStringLiteral(": ") + named));
          if (c == 3)
            QVERIFY2(named.contains(QStringLiteral("add 2 \u00b5s after each rank's last op")),
                     qPrintable(describe(request) + QStringLiteral(": ") + named));
          // Priced transfers or a sync tail alone: without it the plan is in the formula's
          // regime at the same F, B, W, so the simulated bubble is the formula's.
          if ((c == 2 || c == 3) && departures.size() == 1) {
            const auto without = bubbleFractionWithout(e, departures.front().kind);
            QVERIFY(without);
            QVERIFY2(std::abs(*without - e.analytic->bubble_fraction) < 1e-9,
                     qPrintable(describe(request) + QStringLiteral(": without %1, formula %2")
                                                        .arg(*without)
                                                        .arg(e.analytic->bubble_fraction)));
          }
          if (departures.empty())
            ++exact;
          else
            ++departing;
        }
      }
    }
    QVERIFY(exact >= 300 && departing >= 300);

    // The schedule's own conditions, and uneven stages.
    const auto named = [](const ScheduleRequest &request, const Costs &costs = {}) {
      std::string all;
      for (const auto &d : analyticDepartures(evaluateOrFail(request, costs)))
        all += d.text + "; ";
      return all;
    };
    QCOMPARE(named({"interleaved-1f1b", 4, 6, 2, 6}),
             std::string("M = 6 is not a multiple of P = 4; G = 6, not P = 4; "));
    QCOMPARE(named({"zb-h2", 4, 5, 1, 0}), std::string("M = 5 is below 2P-1 = 7; "));
    QCOMPARE(named({"zb-v", 4, 8, 2, 0}, uneven_thirds),
             std::string("F, I and W differ (0.75 \u00b5s, 0.625 \u00b5s and 0.5 \u00b5s on "
                         "stage 0); "));
    // ZB-V's formula at unequal thirds takes their mean, so a one-rank plan has no bubble (with
    // t = F it claimed 17 %).
    QCOMPARE(evaluateOrFail({"zb-v", 1, 1, 1, 0}, uneven_thirds).analytic->bubble_fraction, 0.0);
    Costs last_stage_slow;
    last_stage_slow.stage_overrides.assign(4, StageCost{1, 2, 1, 0});
    last_stage_slow.stage_overrides.back() = StageCost{1, 3.5, 1, 0};
    QCOMPARE(named({"1f1b", 4, 8, 1, 0}, last_stage_slow),
             std::string("the stages' op times differ (B 2 \u00b5s to 3.5 \u00b5s a stage); "));
    Costs paired;
    paired.overlapped_us = 2.4;
    QCOMPARE(named({"dualpipev", 4, 8, 2, 0}, paired),
             std::string("an overlapped F&B pair takes 80 % of F + B; "));
    QVERIFY(named({"1f1b", 4, 8, 1, 0}).empty());

    // Stages uneven around the plan's own B (1.5, 2.5, 2, 2): evened out, the formula's bubble.
    Costs around = Costs{};
    around.stage_overrides = {StageCost{1, 1.5, 1, 0}, StageCost{1, 2.5, 1, 0},
                              StageCost{1, 2, 1, 0}, StageCost{1, 2, 1, 0}};
    const Evaluation uneven = evaluateOrFail({"1f1b", 4, 8, 1, 0}, around);
    QVERIFY(uneven.simulation.bubble_fraction > uneven.analytic->bubble_fraction + 0.01);
    const auto evened = bubbleFractionWithout(uneven, DepartureKind::UnevenStages);
    QVERIFY(evened);
    QCOMPARE(*evened, uneven.analytic->bubble_fraction);
    // M and G change the schedule itself: no re-simulation stands for them.
    const Evaluation off_group = evaluateOrFail({"interleaved-1f1b", 4, 6, 2, 6});
    QVERIFY(!bubbleFractionWithout(off_group, DepartureKind::Microbatches));
    QVERIFY(!bubbleFractionWithout(off_group, DepartureKind::MicrobatchGroup));
  }

  // closedFormGapShares divides the gap among the cost departures so that the shares add up:
  // over every family's grid with uneven F, I, W, priced transfers and a sync tail at once, the
  // shares sum to the simulated bubble minus the bubble with all of them removed, which is the
  // formula's wherever only costs are named. One at a time the effects need not add up.
  void gapSharesAddUpToTheGap() {
    Costs costs;
    costs.forward_us = 1.5;
    costs.backward_us = 2.25;
    costs.p2p_latency_us = 0.37;
    costs.gradient_sync_us = 2;
    int checked = 0, only_costs = 0, overlapping = 0;
    for (const auto &family : scheduleFamilies()) {
      if (family.name == "custom") continue;
      for (const auto &point : gridFor(family)) {
        const ScheduleRequest request{family.name, point.pp, point.microbatches, point.chunks,
                                      point.group};
        if (!checkScheduleRequest(request)) continue;
        const Evaluation e = evaluateOrFail(request, costs);
        if (!e.analytic) continue;
        const std::vector<AnalyticDeparture> departures = analyticDepartures(e);
        const std::optional<GapShares> shares = closedFormGapShares(e, departures);
        if (departures.empty()) continue;
        QVERIFY2(shares, qPrintable(describe(request)));
        QCOMPARE(shares->shares.size(), departures.size());
        double sum = 0, alone = 0;
        bool costs_only = true;
        for (std::size_t i = 0; i < departures.size(); ++i) {
          const auto without = bubbleFractionWithout(e, departures[i].kind);
          QCOMPARE(shares->shares[i].has_value(), without.has_value());
          QCOMPARE(shares->without_alone[i], without); // the same simulation, not run twice
          if (!without) {
            costs_only = false;
            continue;
          }
          sum += *shares->shares[i];
          alone += e.simulation.bubble_fraction - *without;
        }
        const double gap = e.simulation.bubble_fraction - shares->without_all;
        QVERIFY2(std::abs(sum - gap) < 1e-9,
                 qPrintable(describe(request) +
                            QStringLiteral(": shares %1, gap %2").arg(sum).arg(gap)));
        // DualPipe's formula reads F&B, B and W themselves: at unequal ones its figure is not
        // the one at the equal thirds the bubble is re-simulated with.
        const bool reads_thirds =
            (family.name == "dualpipe" || family.name == "dualpipev") &&
            std::any_of(departures.begin(), departures.end(), [](const AnalyticDeparture &d) {
              return d.kind == DepartureKind::UnequalOpKinds;
            });
        if (costs_only && !reads_thirds && family.name != "v-half" && family.name != "v-min") {
          QVERIFY2(std::abs(shares->without_all - e.analytic->bubble_fraction) < 1e-9,
                   qPrintable(describe(request) + QStringLiteral(": without all %1, formula %2")
                                                      .arg(shares->without_all)
                                                      .arg(e.analytic->bubble_fraction)));
          ++only_costs;
        }
        if (std::abs(alone - gap) > 1e-6) ++overlapping;
        ++checked;
      }
    }
    QVERIFY(checked >= 100 && only_costs >= 100);
    QVERIFY(overlapping >= 10); // plans where one-at-a-time effects miss the gap

    // One cost alone: its share is the whole gap, and what removing it alone gives.
    Costs synced;
    synced.gradient_sync_us = 2;
    const Evaluation tail = evaluateOrFail({"1f1b", 4, 8, 1, 0}, synced);
    const auto tail_departures = analyticDepartures(tail);
    QCOMPARE(tail_departures.size(), std::size_t{1});
    const auto tail_shares = closedFormGapShares(tail, tail_departures);
    QVERIFY(tail_shares && tail_shares->shares[0]);
    QVERIFY(*tail_shares->shares[0] > 0.03); // 3/11 of 33 us, 11/35 with the 2 us tail
    QVERIFY(std::abs(*tail_shares->shares[0] - closedFormGap(tail)) < 1e-12);
    // M and G alone are no costs: nothing to share. A budget below 2^n - 1 simulations of the
    // plan: nothing either, rather than a slow answer.
    const Evaluation off_group = evaluateOrFail({"interleaved-1f1b", 4, 6, 2, 6});
    QVERIFY(!closedFormGapShares(off_group, analyticDepartures(off_group)));
    const Evaluation two = evaluateOrFail({"1f1b", 4, 8, 1, 0}, costs); // transfers, tail
    QCOMPARE(analyticDepartures(two).size(), std::size_t{2});
    const auto ops = static_cast<double>(two.schedule.opCount());
    QVERIFY(closedFormGapShares(two, analyticDepartures(two), 3 * ops));
    QVERIFY(!closedFormGapShares(two, analyticDepartures(two), 2.9 * ops));
  }

  // Looped BFS and interleaved zero bubble: their closed forms are exact for uniform op times
  // and free transfers (looped BFS at every M, interleaved-zb for M >= P), peaks included.
  void loopedClosedFormsAreExact_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<double>("forward");
    QTest::addColumn<double>("backward");
    QTest::addColumn<double>("weight");
    for (const char *name : {"looped-bfs", "interleaved-zb"}) {
      QTest::newRow((std::string(name) + " F=I=W").c_str()) << name << 1.0 << 2.0 << 1.0;
      QTest::newRow((std::string(name) + " F=1.5 I=1.25 W=1").c_str())
          << name << 1.5 << 2.25 << 1.0;
      QTest::newRow((std::string(name) + " W > I").c_str()) << name << 1.0 << 2.0 << 1.5;
    }
  }
  void loopedClosedFormsAreExact() {
    QFETCH(QString, name);
    QFETCH(double, forward);
    QFETCH(double, backward);
    QFETCH(double, weight);
    Costs costs;
    costs.forward_us = forward;
    costs.backward_us = backward;
    costs.weight_us = weight;
    int checked = 0;
    for (int pp = 1; pp <= 8; ++pp)
      for (int m = 1; m <= 16; ++m)
        for (int v = 2; v <= 4; ++v) {
          if (name == "interleaved-zb" && m < pp) continue; // its stated regime: M >= P
          const ScheduleRequest request{name.toStdString(), pp, m, v, 0};
          if (!checkScheduleRequest(request)) continue;
          const QString mismatch = closedFormMismatch(request, costs);
          QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
          ++checked;
        }
    QVERIFY(checked >= 200);
  }

  // Interleaving the zero-bubble schedule divides its bubble by V; it beats interleaved 1F1B at
  // the same P, M, V, with no more memory on any rank.
  void interleavedZeroBubbleBeatsInterleavedOneFOneB() {
    for (int pp : {2, 4, 8})
      for (int v : {2, 3, 4})
        for (int m : {pp, 2 * pp, 4 * pp}) {
          const auto zb = evaluateOrFail({"interleaved-zb", pp, m, v, 0});
          const auto one = evaluateOrFail({"interleaved-1f1b", pp, m, v, 0});
          QVERIFY(zb.simulation.bubble_fraction < one.simulation.bubble_fraction);
          int zb_peak = 0, one_peak = 0;
          for (int r = 0; r < pp; ++r) {
            zb_peak = std::max(zb_peak, zb.simulation.ranks[r].peak_inflight);
            one_peak = std::max(one_peak, one.simulation.ranks[r].peak_inflight);
          }
          QVERIFY(zb_peak <= one_peak);
        }
  }

  // Looped BFS runs every forward of a chunk before any backward: GPipe's memory, V*M chunks.
  void loopedBfsHoldsEveryMicrobatch() {
    const auto e = evaluateOrFail({"looped-bfs", 4, 8, 3, 0});
    for (int r = 0; r < 4; ++r) {
      QCOMPARE(e.simulation.ranks[r].peak_inflight, 24);
      QCOMPARE(e.simulation.ranks[r].peak_inflight_microbatches, 8.0);
      const auto &ops = e.schedule.ranks[r];
      for (std::size_t i = 0; i < ops.size(); ++i)
        QCOMPARE(ops[i].kind == OpKind::Forward, i < ops.size() / 2);
      QVERIFY(ops[24] == fullBackwardOp(8 + r, 7)); // last chunk, last microbatch first
    }
  }

  // Qi et al. 2024 (Table 1 and the authors' summary): V-Half holds (P+2)//2 and V-Min (P+4)//3
  // microbatches at peak, about 1/2 and 1/3 of 1F1B's P, with a bubble of about P/2 and 2P/3
  // rank shares of F+B (1F1B: P-1) when F = I = W.
  void controllableMemoryPeaksAndBubbles() {
    int checked = 0;
    for (int pp = 2; pp <= 16; ++pp)
      for (int m : {2 * pp, 3 * pp, 4 * pp}) {
        const auto one = evaluateOrFail({"1f1b", pp, m, 1, 0});
        const double one_bubble = one.simulation.makespan_us - m * 3.0;
        for (const char *name : {"v-half", "v-min"}) {
          const bool half = std::string(name) == "v-half";
          const auto e = evaluateOrFail({name, pp, m, 2, 0}); // F = I = W = 1, F + B = 3
          QVERIFY(e.analytic);
          double peak = 0;
          int peak_chunks = 0;
          for (const auto &rank : e.simulation.ranks) {
            peak = std::max(peak, rank.peak_inflight_microbatches);
            peak_chunks = std::max(peak_chunks, rank.peak_inflight);
          }
          const int published = half ? (pp + 2) / 2 : (pp + 4) / 3;
          QVERIFY2(peak == published, qPrintable(QString("%1 P=%2 M=%3: peak %4, published %5")
                                                     .arg(name)
                                                     .arg(pp)
                                                     .arg(m)
                                                     .arg(peak)
                                                     .arg(published)));
          QCOMPARE(peak_chunks, e.analytic->peak_inflight[0]);
          // About 1/2 and 1/3 of 1F1B's peak of P microbatches (the +2 and +4 fade as P grows).
          const double share = peak / pp;
          if (pp >= 8) QVERIFY(half ? share <= 0.625 : share <= 0.5);
          if (pp == 16) QVERIFY(half ? share == 9.0 / 16 : share == 6.0 / 16);
          // The bubble: at most the published approximation, at most 7/6 (F+B) below it, and
          // below 1F1B's.
          const double bubble = e.simulation.makespan_us - m * 3.0;
          const double approximation = e.analytic->makespan_us - m * 3.0;
          QCOMPARE(approximation, (half ? pp / 2.0 : 2.0 * pp / 3.0) * 3.0);
          QVERIFY2(bubble <= approximation + 1e-9 && bubble >= approximation - 3.5 - 1e-9,
                   qPrintable(QString("%1 P=%2 M=%3: bubble %4, published about %5")
                                  .arg(name)
                                  .arg(pp)
                                  .arg(m)
                                  .arg(bubble)
                                  .arg(approximation)));
          QVERIFY(bubble < one_bubble);
          ++checked;
        }
      }
    QCOMPARE(checked, 90);
    // V-Min trades bubble for memory against V-Half.
    const auto half = evaluateOrFail({"v-half", 16, 64, 2, 0});
    const auto minimum = evaluateOrFail({"v-min", 16, 64, 2, 0});
    QVERIFY(minimum.simulation.ranks[3].peak_inflight < half.simulation.ranks[3].peak_inflight);
    QVERIFY(minimum.simulation.makespan_us > half.simulation.makespan_us);
  }

  void zeroBubbleBeatsOneFOneB() {
    for (int pp : {2, 4, 8})
      for (int m : {pp, 2 * pp, 4 * pp}) {
        const double one = evaluateOrFail({"1f1b", pp, m, 1, 0}).simulation.bubble_fraction;
        for (const char *name : {"zb-h1", "zb-h2", "zb-v"})
          QVERIFY(evaluateOrFail({name, pp, m, 1, 0}).simulation.bubble_fraction < one);
      }
  }

  void gpipeAndOneFOneBTextbookFormulas() {
    for (int pp : {2, 4, 8})
      for (int m : {1, 4, 8, 32}) {
        const double fraction = double(pp - 1) / (m + pp - 1), ratio = double(pp - 1) / m;
        for (const char *name : {"gpipe", "1f1b"}) {
          const auto e = evaluateOrFail({name, pp, m, 1, 0});
          QVERIFY(std::abs(e.simulation.bubble_fraction - fraction) < 1e-12);
          QVERIFY(std::abs(e.simulation.bubble_ratio - ratio) < 1e-12);
        }
      }
  }

  void interleavedMatchesMegatronFormula() {
    for (int pp : {2, 4, 8})
      for (int v : {2, 3, 4})
        for (int m : {pp, 2 * pp, 4 * pp}) {
          const auto e = evaluateOrFail({"interleaved-1f1b", pp, m, v, 0});
          const double fraction = double(pp - 1) / (v * m + pp - 1);
          const double ratio = double(pp - 1) / (v * m);
          QVERIFY2(std::abs(e.simulation.bubble_fraction - fraction) < 1e-12,
                   qPrintable(QString("P=%1 M=%2 V=%3: %4 vs %5")
                                  .arg(pp)
                                  .arg(m)
                                  .arg(v)
                                  .arg(e.simulation.bubble_fraction)
                                  .arg(fraction)));
          QVERIFY(std::abs(e.simulation.bubble_ratio - ratio) < 1e-12);
          QVERIFY(e.analytic);
          for (int r = 0; r < pp; ++r)
            QCOMPARE(e.simulation.ranks[r].peak_inflight, e.analytic->peak_inflight[r]);
        }
  }

  // Megatron-Core's combined 1F1B: Megatron's interleaved warm-up plus one forward, then every
  // steady-state forward paired with the backward the interleaved order runs after it.
  void combinedOneFOneBPairsTheSteadyState() {
    const auto single = evaluateOrFail({"combined-1f1b", 1, 4, 1, 0});
    const std::vector<Op> expected{forwardOp(0, 0), overlappedOp(0, 1, 0, 0),
                                   overlappedOp(0, 2, 0, 1), overlappedOp(0, 3, 0, 2),
                                   fullBackwardOp(0, 3)};
    QVERIFY(single.schedule.ranks[0] == expected);
    for (int pp : {2, 4, 8})
      for (int v : {2, 4})
        for (int m : {2 * pp, 4 * pp}) {
          const auto combined = evaluateOrFail({"combined-1f1b", pp, m, v, 0});
          const auto plain = evaluateOrFail({"interleaved-1f1b", pp, m, v, 0});
          for (int r = 0; r < pp; ++r) {
            const auto &ops = combined.schedule.ranks[static_cast<std::size_t>(r)];
            const int warmup = std::min(2 * (pp - 1 - r) + (v - 1) * pp + 1, m * v);
            int leading = 0;
            while (leading < static_cast<int>(ops.size()) &&
                   ops[static_cast<std::size_t>(leading)].kind == OpKind::Forward)
              ++leading;
            QCOMPARE(leading, warmup);
            int pairs = 0;
            for (const Op &op : ops)
              pairs += op.kind == OpKind::OverlappedPair;
            QCOMPARE(pairs, m * v - warmup);
            // The same backward order as interleaved-1f1b.
            std::vector<std::pair<int, int>> combined_backwards, plain_backwards;
            for (const Op &op : ops)
              if (op.kind == OpKind::OverlappedPair)
                combined_backwards.emplace_back(op.backward_stage, op.backward_microbatch);
              else if (op.kind == OpKind::FullBackward)
                combined_backwards.emplace_back(op.stage, op.microbatch);
            for (const Op &op : plain.schedule.ranks[static_cast<std::size_t>(r)])
              if (op.kind == OpKind::FullBackward)
                plain_backwards.emplace_back(op.stage, op.microbatch);
            QVERIFY(combined_backwards == plain_backwards);
          }
          // Overlap that saves time shortens the step; none (F&B = F + B) costs the longer
          // warm-up at most.
          Costs overlapped;
          overlapped.overlapped_us = 2.4; // F + B = 3
          QVERIFY(
              evaluateOrFail({"combined-1f1b", pp, m, v, 0}, overlapped).simulation.makespan_us <
              plain.simulation.makespan_us);
        }
  }

  void breadthFirstGroupHoldsMoreActivations() {
    const auto depth = evaluateOrFail({"interleaved-1f1b", 4, 16, 2, 4});
    const auto breadth = evaluateOrFail({"interleaved-1f1b", 4, 16, 2, 16});
    QVERIFY(breadth.simulation.ranks[0].peak_inflight > depth.simulation.ranks[0].peak_inflight);
    QVERIFY(breadth.schedule.ranks[0][1] == forwardOp(0, 1));
    QVERIFY(breadth.schedule.ranks[0][15] == forwardOp(0, 15));
    QVERIFY(breadth.schedule.ranks[0][16] == forwardOp(4, 0));
  }

  void knownPeakInflightCounts() {
    for (int pp = 1; pp <= 8; ++pp)
      for (int m = 1; m <= 12; ++m) {
        const auto gpipe = evaluateOrFail({"gpipe", pp, m, 1, 0});
        const auto one = evaluateOrFail({"1f1b", pp, m, 1, 0});
        for (int r = 0; r < pp; ++r) {
          QCOMPARE(gpipe.simulation.ranks[r].peak_inflight, m);
          QCOMPARE(one.simulation.ranks[r].peak_inflight, std::min(pp - r, m));
          QCOMPARE(one.simulation.ranks[r].peak_inflight_microbatches, double(std::min(pp - r, m)));
        }
        if (!checkScheduleRequest({"zb-h1", pp, m, 1, 0})) continue;
        const auto zb = evaluateOrFail({"zb-h1", pp, m, 1, 0});
        int zb_peak = 0, one_peak = 0;
        for (int r = 0; r < pp; ++r) {
          zb_peak = std::max(zb_peak, zb.simulation.ranks[r].peak_inflight);
          one_peak = std::max(one_peak, one.simulation.ranks[r].peak_inflight);
        }
        QVERIFY2(zb_peak <= one_peak, qPrintable(QString("zb-h1 P=%1 M=%2 holds %3 > %4")
                                                     .arg(pp)
                                                     .arg(m)
                                                     .arg(zb_peak)
                                                     .arg(one_peak)));
      }
  }

  void dualPipeHoldsTwoStagesPerRank() {
    for (int pp : {2, 4, 8}) {
      const ScheduleRequest request{"dualpipe", pp, 4 * pp, 1, 0};
      if (!checkScheduleRequest(request)) QSKIP("dualpipe generator refuses the request");
      const auto e = evaluateOrFail(request);
      for (int r = 0; r < pp; ++r) {
        std::set<int> model_stages;
        for (int s = 0; s < e.schedule.placement.stageCount(); ++s)
          if (e.schedule.placement.rankOf(s) == r)
            model_stages.insert(e.schedule.placement.model_stage[s]);
        QCOMPARE(int(model_stages.size()), 2);
        QVERIFY(model_stages.count(r) && model_stages.count(pp - 1 - r));
      }
    }
  }

  void opTextRoundTrips_data() {
    QTest::addColumn<QString>("text");
    for (const char *text : {"2F0", "1I3", "0W2", "3B1", "(0F7;7B3)OVERLAP_F_B", "120F4095"})
      QTest::newRow(text) << text;
  }
  void opTextRoundTrips() {
    QFETCH(QString, text);
    const auto op = parseOp(text.toStdString());
    QVERIFY(op);
    QCOMPARE(QString::fromStdString(formatOp(*op)), text);
  }

  void badOpTextIsRefused() {
    for (const char *text : {"", "F0", "2X0", "2F", "-1F0", "2F0x", "(0F7;7F3)OVERLAP_F_B",
                             "(0F7)OVERLAP_F_B", "2F99999999999"})
      QVERIFY2(!parseOp(text), text);
  }

  void pytorchCsvRoundTripsEverySchedule() {
    for (const auto &family : scheduleFamilies()) {
      ScheduleRequest request{family.name, 4, 8, family.uses_chunks ? 2 : 1, 0};
      if (!checkScheduleRequest(request)) continue;
      const auto original = generateSchedule(request);
      QVERIFY(original);
      const std::string csv = scheduleToPytorchCsv(*original);
      const auto lists = parsePytorchCsv(csv);
      QVERIFY2(lists, family.name.c_str());
      QVERIFY(*lists == original->ranks);
      auto custom = makeCustomSchedule(*lists);
      QVERIFY(custom);
      QCOMPARE(int(custom->placement.kind), int(original->placement.kind));
      QCOMPARE(custom->placement.stage_rank, original->placement.stage_rank);
      const auto simulated = evaluateSchedule(std::move(*custom), Costs{});
      QVERIFY(simulated);
      QCOMPARE(simulated->simulation.makespan_us, evaluateOrFail(request).simulation.makespan_us);
    }
  }

  void csvSkipsIdleCellsAndCommunication() {
    const auto lists = parsePytorchCsv("0F0,,0SEND_F0,0WAIT_SEND_F0,0B0,0REDUCE_GRAD,0WAIT_REDUCE_"
                                       "GRAD\n,1RECV_F0,1F0,1B0,1SEND_B0,1WAIT_SEND_B0\n");
    QVERIFY(lists);
    QCOMPARE(int(lists->size()), 2);
    QVERIFY((*lists)[0] == (std::vector<Op>{forwardOp(0, 0), fullBackwardOp(0, 0)}));
    QVERIFY((*lists)[1] == (std::vector<Op>{forwardOp(1, 0), fullBackwardOp(1, 0)}));
    const auto bad = parsePytorchCsv("0F0,0Q1\n");
    QVERIFY(!bad);
    QVERIFY(bad.error().message.find("row 1") != std::string::npos);
    QVERIFY(bad.error().message.find("column 2") != std::string::npos);
  }

  void impossibleRequestsAreRefusedWithWhatWouldWork_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("microbatches");
    QTest::addColumn<int>("chunks");
    QTest::addColumn<QString>("expected");
    QTest::newRow("unknown") << "zb-h9" << 4 << 8 << 1 << "choose one of";
    QTest::newRow("P=0") << "1f1b" << 0 << 8 << 1 << "P (pipeline ranks) must be between 1";
    QTest::newRow("M=0") << "gpipe" << 4 << 0 << 1 << "M (microbatches) must be between 1";
    QTest::newRow("V=2 on 1f1b") << "1f1b" << 4 << 8 << 2 << "use interleaved-1f1b";
    QTest::newRow("V=1 interleaved") << "interleaved-1f1b" << 4 << 8 << 1 << "needs V >= 2";
    QTest::newRow("V=1 combined") << "combined-1f1b" << 4 << 8 << 1
                                  << "virtual_pipeline_model_parallel_size must be specified";
    QTest::newRow("P=1 V=2 combined") << "combined-1f1b" << 1 << 8 << 2 << "use V = 1";
    QTest::newRow("M<P combined") << "combined-1f1b" << 4 << 2 << 2
                                  << "combined-1f1b needs M >= P microbatches";
    QTest::newRow("M<P interleaved")
        << "interleaved-1f1b" << 8 << 4 << 2 << "raise M to at least 8";
    QTest::newRow("absurd P") << "1f1b" << 1000000 << 8 << 1 << "must be between 1 and 16384";
    QTest::newRow("absurd M") << "gpipe" << 4 << 2000000000 << 1 << "must be between 1 and";
    QTest::newRow("too many ops") << "interleaved-1f1b" << 4096 << 4096 << 8
                                  << "ops; pipescope simulates at most";
    QTest::newRow("custom") << "custom" << 4 << 8 << 1 << "loaded from a file";
    QTest::newRow("V=1 looped-bfs") << "looped-bfs" << 4 << 8 << 1 << "for V = 1 use gpipe";
    QTest::newRow("V=1 interleaved-zb") << "interleaved-zb" << 4 << 8 << 1 << "use zb-h1";
    QTest::newRow("rounds interleaved-zb")
        << "interleaved-zb" << 4 << 9 << 2 << "use M = 8 or 10, or any multiple of P = 4";
    QTest::newRow("rounds interleaved-zb 3")
        << "interleaved-zb" << 4 << 13 << 2 << "its number of rounds, max(1, floor(M/P)) = 3";
    QTest::newRow("large P v-min") << "v-min" << 600 << 8 << 2 << "or zb-v for a V-shape schedule";
    QTest::newRow("large P v-half") << "v-half" << 513 << 8 << 2 << "P <= 512";
  }
  void impossibleRequestsAreRefusedWithWhatWouldWork() {
    QFETCH(QString, name);
    QFETCH(int, pp);
    QFETCH(int, microbatches);
    QFETCH(int, chunks);
    QFETCH(QString, expected);
    const auto result = generateSchedule({name.toStdString(), pp, microbatches, chunks, 0});
    QVERIFY(!result);
    QVERIFY2(result.error().message.find(expected.toStdString()) != std::string::npos,
             result.error().message.c_str());
  }

  void microbatchGroupOutsideRangeIsRefused() {
    const auto low = generateSchedule({"interleaved-1f1b", 4, 8, 2, 2});
    QVERIFY(!low);
    QVERIFY(low.error().message.find("P <= G <= M") != std::string::npos);
    QVERIFY(!generateSchedule({"interleaved-1f1b", 4, 8, 2, 9}));
    const auto remainder = generateSchedule({"interleaved-1f1b", 4, 10, 2, 0});
    QVERIFY(!remainder);
    QVERIFY2(remainder.error().message.find("use M = 8 or 12, or G = M") != std::string::npos,
             remainder.error().message.c_str());
  }

  void customScheduleProblemsNameRankAndOp_data() {
    QTest::addColumn<QString>("csv");
    QTest::addColumn<QString>("expected");
    QTest::newRow("missing backward") << "0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n"
                                      << "rank 0 is missing 0B1";
    QTest::newRow("duplicated") << "0F0,0F0,0B0\n1F0,1B0\n"
                                << "rank 0, step 1 (0F0): duplicated";
    QTest::newRow("misplaced") << "0F0,0B0,1F1\n1F0,1B0,0F1,0B1,1B1\n"
                               << "stage 1 lives on rank 1";
    QTest::newRow("B and I/W") << "0F0,0B0,0I0,0W0\n1F0,1B0\n"
                               << "has both B and I/W";
    QTest::newRow("W without I") << "0F0,0W0\n1F0,1B0\n"
                                 << "rank 0 is missing 0I0";
  }
  void customScheduleProblemsNameRankAndOp() {
    QFETCH(QString, csv);
    QFETCH(QString, expected);
    const auto schedule = customFromText(csv.toStdString());
    const auto status = checkOpCoverage(schedule);
    QVERIFY(!status);
    QVERIFY2(status.error().message.find(expected.toStdString()) != std::string::npos,
             status.error().message.c_str());
  }

  // A schedule whose ranks wait on each other is refused with the blocked ranks, what they wait
  // for, and the grid with the failing steps marked — never a hang.
  void deadlockIsReportedWithTheGrid() {
    // Rank 0 wants the gradient of microbatch 0 before sending the activation of microbatch 1,
    // while rank 1 runs microbatch 1's forward first.
    const auto schedule = customFromText("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
    const auto e = evaluateSchedule(schedule, Costs{});
    QVERIFY(!e);
    const std::string &message = e.error().message;
    QVERIFY2(message.find("the schedule deadlocks") == 0, message.c_str());
    QVERIFY2(
        message.find("rank 0 at step 1 (0B0) waits for the gradient from stage 1, microbatch 0") !=
            std::string::npos,
        message.c_str());
    QVERIFY2(message.find("rank 1 at step 0 (1F1) waits for the activation of 0F1") !=
                 std::string::npos,
             message.c_str());
    QVERIFY2(message.find("[0B0]") != std::string::npos &&
                 message.find("[1F1]") != std::string::npos,
             message.c_str());
  }

  // Huge stage or microbatch ids with few ops are refused before any table is sized by them
  // (a fuzzer found "23330I00000000000000000000002761788" allocating gigabytes).
  void sparseIdsAreRefusedCheaply() {
    auto lists = parsePytorchCsv("23330I00000000000000000000002761788\n");
    QVERIFY(lists);
    const auto schedule = makeCustomSchedule(std::move(*lists));
    QVERIFY(!schedule);
    QVERIFY2(schedule.error().message.find("at most 64 stages per rank") != std::string::npos,
             schedule.error().message.c_str());
    auto sparse = parsePytorchCsv("0F0,0B0,0F3000000,0B3000000\n");
    QVERIFY(sparse);
    const auto refused = makeCustomSchedule(std::move(*sparse));
    QVERIFY(!refused);
    QVERIFY2(refused.error().message.find("need at least 3000001") != std::string::npos,
             refused.error().message.c_str());
  }

  void selfDeadlockOnOneRank() {
    const auto schedule = customFromText("0B0,0F0\n");
    const auto e = evaluateSchedule(schedule, Costs{});
    QVERIFY(!e);
    QVERIFY2(e.error().message.find("later in rank 0's own list") != std::string::npos,
             e.error().message.c_str());
  }

  void transfersDelayCrossRankDependencies() {
    Costs costs;
    costs.p2p_latency_us = 1;
    costs.p2p_bandwidth_gbps = 100;
    costs.activation_bytes = 50e3; // 0.5 us at 100 GB/s
    const auto e = evaluateOrFail({"gpipe", 2, 1, 1, 0}, costs);
    // F0 on rank 0 [0,1], transfer 1.5, F0 on rank 1 [2.5,3.5], B0 rank 1 [3.5,5.5],
    // gradient 1.5, B0 on rank 0 [7, 9].
    QCOMPARE(e.simulation.op_times[1][0].start_us, 2.5);
    QCOMPARE(e.simulation.op_times[0][1].start_us, 7.0);
    QCOMPARE(e.simulation.makespan_us, 9.0);
  }

  void gradientSyncExtendsTheStep() {
    Costs costs;
    costs.gradient_sync_us = 5;
    const auto base = evaluateOrFail({"1f1b", 4, 8, 1, 0});
    const auto synced = evaluateOrFail({"1f1b", 4, 8, 1, 0}, costs);
    QCOMPARE(synced.simulation.makespan_us, base.simulation.makespan_us + 5);
  }

  void badCostsAreRefused() {
    Costs costs;
    costs.weight_us = 3; // more than B = 2
    const auto e = evaluate({"zb-h1", 4, 8, 1, 0}, costs);
    QVERIFY(!e);
    costs.weight_us = 1;
    costs.forward_us = std::nan("");
    const auto n = evaluate({"1f1b", 4, 8, 1, 0}, costs);
    QVERIFY(!n);
    QVERIFY(n.error().message.find("forward") == 0);
  }

  void memoryTimelineMatchesPeaks() {
    SimulationOptions options;
    options.memory_timeline = true;
    const auto e = evaluate({"1f1b", 4, 8, 1, 0}, Costs{}, options);
    QVERIFY(e);
    for (int r = 0; r < 4; ++r) {
      int peak = 0;
      for (const auto &point : e->simulation.memory[r])
        peak = std::max(peak, point.inflight_chunks);
      QCOMPARE(peak, e->simulation.ranks[r].peak_inflight);
      QCOMPARE(e->simulation.memory[r].back().inflight_chunks, 0);
    }
  }
};

QTEST_APPLESS_MAIN(TestSchedules)
#include "test_schedules.moc"
