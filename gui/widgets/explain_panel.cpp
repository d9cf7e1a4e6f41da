#include "gui/widgets/explain_panel.h"

#include <QLocale>
#include <QScrollBar>
#include <QTimer>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <cmath>

#include "gui/timeline/timeline_model.h"
#include "gui/widgets/metrics_panel.h"

namespace pipescope::gui {

namespace {

QString escaped(const std::string &text) {
  return QString::fromStdString(text).toHtmlEscaped();
}

// Where the simulation and the closed form part: by how much, each assumption this plan breaks,
// and (on a small plan, where re-simulating is cheap on the GUI thread, as the "Try it" variants
// are) each one's share of the gap, Shapley's, so the shares add up, and what the simulated
// bubble would be without it alone. Empty where they agree or nothing is named.
QString departuresHtml(const ExplorerSnapshot &snapshot) {
  const Evaluation &evaluation = *snapshot.evaluation;
  if (!departsFromClosedForm(evaluation)) return {};
  const std::vector<AnalyticDeparture> departures = analyticDepartures(
      evaluation, snapshot.plan.model ? snapshot.plan.model->hardware.step_overhead_us : 0);
  if (departures.empty()) return {};
  const bool resimulate = estimatedOpCount(snapshot.plan) <= kResimulatedOpLimit;
  const std::optional<GapShares> shares =
      resimulate ? closedFormGapShares(evaluation, departures) : std::nullopt;
  const QString gap = QString::number(closedFormGap(evaluation) * 100, 'f', 2);
  QString html =
      QObject::tr("<p>The simulation differs from the formula by %1 points; here:</p><ul>")
          .arg(gap);
  for (std::size_t i = 0; i < departures.size(); ++i) {
    html += QStringLiteral("<li>") + escaped(departures[i].text);
    if (shares && shares->shares[i])
      html += QObject::tr(": %1 %2 points")
                  .arg(*shares->shares[i] < 0 ? QObject::tr("takes") : QObject::tr("adds"))
                  .arg(QString::number(std::abs(*shares->shares[i]) * 100, 'f', 2));
    const auto without = shares       ? shares->without_alone[i]
                         : resimulate ? bubbleFractionWithout(evaluation, departures[i].kind)
                                      : std::nullopt;
    if (without)
      html += QObject::tr("; without it alone the simulated bubble would be %1")
                  .arg(formatPercent(*without));
    html += QStringLiteral("</li>");
  }
  html += QStringLiteral("</ul>");
  if (shares) {
    // What is left once every cost is as the formula assumes: the schedule's own conditions (M,
    // G), or the formula's figure itself read at op times it takes to be equal.
    const double rest = shares->without_all - evaluation.analytic->bubble_fraction;
    const bool schedule_conditions =
        std::any_of(departures.begin(), departures.end(), [](const AnalyticDeparture &d) {
          return d.kind == DepartureKind::Microbatches || d.kind == DepartureKind::MicrobatchGroup;
        });
    const QString how = QObject::tr("each is what that cost adds averaged over every order of "
                                    "taking the costs away (Shapley's value), as one at a time "
                                    "their effects overlap");
    const auto points = [](double fraction) { return QString::number(fraction * 100, 'f', 2); };
    html += std::abs(rest) < 1e-6
                ? QObject::tr("<p>The shares add up to the gap: %1.</p>").arg(how)
                : QObject::tr("<p>The shares add up to %1 points, the simulated bubble less the "
                              "%2 it would be with every cost as the formula assumes: %3. That "
                              "%2 is %4 points %5 the formula's %6: %7.</p>")
                      .arg(points(evaluation.simulation.bubble_fraction - shares->without_all),
                           formatPercent(shares->without_all), how, points(std::abs(rest)),
                           rest < 0 ? QObject::tr("below") : QObject::tr("above"),
                           formatPercent(evaluation.analytic->bubble_fraction),
                           schedule_conditions
                               ? QObject::tr("the schedule's own conditions above")
                               : QObject::tr("the formula's own figure, read at this plan's "
                                             "op times where it assumes them equal"));
  }
  return html;
}

} // namespace

QString explanationHtml(const ExplorerSnapshot &snapshot) {
  const Plan &plan = snapshot.plan;
  QString html;
  const ScheduleFamily *family = plan.custom ? nullptr : findScheduleFamily(plan.request.name);
  if (family) {
    html += QStringLiteral("<h3>%1</h3><p>%2</p>")
                .arg(escaped(family->title), escaped(family->summary));
    html += QObject::tr("<p><b>Accepts:</b> %1<br><b>Reference:</b> %2</p>")
                .arg(escaped(family->constraints), escaped(family->reference));
  } else {
    html += QObject::tr(
        "<h3>Custom schedule</h3><p>Per-rank op lists loaded from a file; pipescope checks that "
        "every required op appears once on the rank that owns its stage, then simulates it.</p>");
  }
  const int P = plan.request.pp, M = plan.request.microbatches;
  if (snapshot.evaluation) {
    const auto &evaluation = *snapshot.evaluation;
    const auto &simulation = evaluation.simulation;
    if (evaluation.analytic) {
      const auto &analytic = *evaluation.analytic;
      html +=
          QObject::tr(
              "<p><b>Bubble:</b> %1 (the idle share of the step) \u2014 %2 here; simulated %3.<br>"
              "<b>Memory:</b> %4<br><b>Source:</b> %5<br><b>Exact when:</b> %6</p>")
              .arg(escaped(analytic.bubble_formula), formatPercent(analytic.bubble_fraction),
                   formatPercent(simulation.bubble_fraction), escaped(analytic.memory_formula),
                   escaped(analytic.source), escaped(analytic.exact_when));
      // The assumptions this plan breaks, each with its effect; else the agreement in words.
      if (const QString departures = departuresHtml(snapshot); !departures.isEmpty())
        html += departures;
      else
        html += QStringLiteral("<p>%1</p>").arg(analyticAgreement(evaluation).toHtmlEscaped());
    }
    html +=
        QObject::tr("<p><b>Two bubble metrics.</b> The fraction 1 \u2212 \u03a3busy/(P\u00b7T) = "
                    "%1 is the idle share "
                    "of all rank time; the ratio (P\u00b7T \u2212 \u03a3busy)/\u03a3busy = %2 is "
                    "idle time relative to "
                    "compute. Papers quote both as \u201cthe bubble\u201d: GPipe and 1F1B give "
                    "(P\u22121)/(M+P\u22121) and "
                    "(P\u22121)/M.</p>")
            .arg(formatPercent(simulation.bubble_fraction), formatPercent(simulation.bubble_ratio));
  }
  html += QObject::tr("<h4>What the sliders change now</h4><ul>");
  html += QObject::tr("<li><b>P = %1</b> pipeline ranks: each holds L/P of the layers. The warm-up "
                      "and cool-down "
                      "cost about P\u22121 op slots, so the bubble grows with P.</li>")
              .arg(P);
  html += QObject::tr("<li><b>M = %1</b> microbatches per step: the fill and drain are paid once "
                      "per step, so more "
                      "microbatches shrink the bubble; with 1F1B-style schedules the activations "
                      "held stay bounded by P, "
                      "with GPipe they grow with M.</li>")
              .arg(M);
  if (family && family->uses_chunks)
    html += QObject::tr("<li><b>V = %1</b> chunks per rank: each op does 1/V of the work, so the "
                        "fill and drain "
                        "shrink by V; the price is V times the point-to-point traffic.</li>")
                .arg(plan.request.chunks);
  else if (family && family->placement != PlacementKind::Loop)
    html += QObject::tr("<li><b>V</b> is fixed at 2 by the %1 placement.</li>")
                .arg(QString::fromUtf8(placementName(family->placement).data(),
                                       static_cast<int>(placementName(family->placement).size())));
  if (family && family->splits_backward)
    html += QObject::tr(
        "<li><b>W</b> (weight-grad) ops can run late: this schedule uses them to fill bubbles, "
        "so the op times F, B and W decide how much of the bubble is left.</li>");
  if (plan.model)
    html += QObject::tr(
                "<li><b>DP %1 \u00d7 CP %2 \u00d7 TP %3</b> (EP %4) with rank order %5: TP divides "
                "each layer's work and adds all-reduces on the critical path, CP splits each "
                "sequence and passes K/V around its ring, EP splits the experts and adds "
                "all-to-alls; the rank order decides which groups cross nodes. "
                "<b>Recomputation</b> trades backward time for activation memory.</li>")
                .arg(plan.mesh.dp)
                .arg(plan.mesh.cp)
                .arg(plan.mesh.tp)
                .arg(plan.mesh.ep)
                .arg(QString::fromStdString(plan.mesh.orderName()));
  else
    html += QObject::tr("<li><b>DP, CP, EP, TP, GPUs per node, rank order</b> shape the mesh view; "
                        "they change op times "
                        "only with a model + hardware preset.</li>");
  html += QStringLiteral("</ul>");
  if (const auto effects = sliderEffects(snapshot); !effects.empty()) {
    html += QObject::tr("<h4>Try it</h4><ul>");
    for (const auto &effect : effects) {
      html += QObject::tr("<li>%1 from %2 to %3: bubble %4 \u2192 %5")
                  .arg(effect.control)
                  .arg(effect.from)
                  .arg(effect.to)
                  .arg(formatPercent(effect.bubble_fraction_from),
                       formatPercent(effect.bubble_fraction_to));
      // With a model the bubble is one term of the step: what it buys in tokens/s per GPU (the
      // GPUs move with P) and costs in memory, in GiB rather than activation sets.
      if (effect.with_model)
        html += QObject::tr("; step %1 \u2192 %2, %3 \u2192 %4 tokens/s per GPU; the largest rank "
                            "holds %5 \u2192 %6 GiB.</li>")
                    .arg(formatDuration(effect.step_s_from * 1e6),
                         formatDuration(effect.step_s_to * 1e6))
                    .arg(QLocale().toString(effect.tokens_per_gpu_from, 'f', 0),
                         QLocale().toString(effect.tokens_per_gpu_to, 'f', 0))
                    .arg(effect.peak_gib_from, 0, 'f', 1)
                    .arg(effect.peak_gib_to, 0, 'f', 1);
      else
        html += QObject::tr("; rank 0 holds %1 \u2192 %2 activation sets at its peak.</li>")
                    .arg(effect.peak_inflight_from)
                    .arg(effect.peak_inflight_to);
    }
    html += QStringLiteral("</ul>");
  }
  html += QObject::tr("<h4>Letters</h4><p>");
  for (OpKind kind : {OpKind::Forward, OpKind::InputGrad, OpKind::WeightGrad, OpKind::FullBackward,
                      OpKind::OverlappedPair})
    html += QStringLiteral("<span style='color:%1'>\u25a0</span> %2<br>")
                .arg(opKindColor(kind).name(), opKindLegend(kind).toHtmlEscaped());
  html += QObject::tr("The zero-bubble paper calls the input-grad pass \u201cB\u201d; pipescope "
                      "follows PyTorch: I, W, "
                      "and B = I + W.</p>");
  return html;
}

ExplainPanel::ExplainPanel(QWidget *parent) : QTextBrowser(parent) {
  setOpenExternalLinks(true);
  setFrameShape(QFrame::NoFrame);
  // A new text empties the document first, so a scroll bar shown as needed went away and came
  // back on every slider move, and each time the text was laid out again at the other width:
  // three layouts a move, two fifths of a move with this tab in view. Always shown, once.
  setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
  coalesce_ = new QTimer(this);
  coalesce_->setSingleShot(true);
  connect(coalesce_, &QTimer::timeout, this, &ExplainPanel::startWriting);
  connect(&writing_, &QFutureWatcher<QString>::finished, this, [this] {
    showText(writing_.result(), writing_sequence_);
    // A snapshot that came while the worker wrote waits its turn as a drag's next one would.
    if (pending_) setSnapshot(pending_);
  });
}

void ExplainPanel::setSnapshot(const SnapshotPointer &snapshot) {
  if (!snapshot) return;
  pending_ = snapshot;
  if (!isVisible()) return;
  const qint64 since =
      since_applied_.isValid() ? since_applied_.elapsed() : qint64{minimum_update_ms_};
  if (since >= minimum_update_ms_)
    startWriting();
  else if (!coalesce_->isActive())
    coalesce_->start(static_cast<int>(minimum_update_ms_ - since));
}

void ExplainPanel::flush() {
  if (!isVisible()) return;
  if (writing_.isRunning()) {
    writing_.waitForFinished();
    showText(writing_.result(), writing_sequence_); // its finished signal then finds it shown
  }
  applyPending();
}

void ExplainPanel::showEvent(QShowEvent *event) {
  QTextBrowser::showEvent(event);
  // A tab switch, not a drag: the text at once, rather than a blank panel for a moment.
  applyPending();
}

void ExplainPanel::startWriting() {
  coalesce_->stop();
  if (!pending_ || writing_.isRunning()) return; // the running one's finish starts the next
  const SnapshotPointer snapshot = std::move(pending_);
  pending_.reset();
  since_applied_.start();
  writing_sequence_ = ++next_sequence_;
  // The snapshot is immutable and explanationHtml reads only it.
  writing_.setFuture(QtConcurrent::run([snapshot] { return explanationHtml(*snapshot); }));
}

void ExplainPanel::applyPending() {
  coalesce_->stop();
  if (!pending_) return;
  const SnapshotPointer snapshot = std::move(pending_);
  pending_.reset();
  showText(explanationHtml(*snapshot), ++next_sequence_);
  since_applied_.start();
}

void ExplainPanel::showText(const QString &html, quint64 sequence) {
  if (sequence <= shown_sequence_) return; // a newer text is on screen already
  shown_sequence_ = sequence;
  const int scroll = verticalScrollBar() ? verticalScrollBar()->value() : 0;
  setHtml(html);
  if (verticalScrollBar()) verticalScrollBar()->setValue(scroll);
}

} // namespace pipescope::gui
