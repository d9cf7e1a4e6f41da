#include "gui/widgets/metrics_panel.h"

#include <QClipboard>
#include <QContextMenuEvent>
#include <QEvent>
#include <QGridLayout>
#include <QGuiApplication>
#include <QHash>
#include <QLabel>
#include <QLocale>
#include <QMenu>
#include <QTextDocumentFragment>
#include <QTimer>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <cmath>

#include "engine/model/speed_of_light.h"
#include "engine/model/validated_accuracy.h"
#include "gui/run/measurement.h"
#include "gui/timeline/palette.h"
#include "gui/timeline/time_mapping.h"

namespace pipescope::gui {

namespace {

/// A metric's value, word-wrapped: QLabel works out its height for a width by laying the text
/// out again on every call (a rich-text value as a QTextDocument, whose setTextWidth does not
/// check for an unchanged width). A slider move changes a dozen values and the panel's layout
/// asks every label for its height several times: remembered here for the text, width and font
/// it was worked out for, so only a changed value is laid out again.
///
/// While values change, a row only grows: a value that wraps onto fewer lines keeps its row's
/// height until releaseHeight(). Otherwise a drag that takes a value back and forth over a line
/// break (the M slider does that with a communication figure or the formula's agreement) moves
/// every row below it on every move: the panel's height changes, and the scroll area around it
/// resizes and repaints all of it (48 labels) where the move changed a dozen.
class ValueLabel : public QLabel {
public:
  using QLabel::QLabel;

  int heightForWidth(int width) const override {
    if (width != height_width_ || text() != height_text_) {
      height_ = QLabel::heightForWidth(width);
      height_width_ = width;
      height_text_ = text();
    }
    // A few widths at most (the panel with and without its scroll bar): any more, a resize.
    if (tallest_.size() > 4 && !tallest_.contains(width)) tallest_.clear();
    int &tallest = tallest_[width];
    tallest = std::max(tallest, height_);
    return tallest;
  }

  // A word-wrapped QLabel works out its size hints by laying its text out at several widths,
  // again after every change of text: two layouts a changed value on a move, a sixth of a move's
  // work. The grid needs neither: a value's row takes its height from heightForWidth at the
  // column's width, and the column takes what the dock (270-330 pixels) leaves beside the names.
  // So the hints ask a few characters' width; the window lays out as it did with the text's own
  // hints (the same pixels at 1000x700, 1280x800 and 1920x1080).
  QSize minimumSizeHint() const override {
    return {fontMetrics().averageCharWidth() * 8, fontMetrics().height()};
  }
  QSize sizeHint() const override { return minimumSizeHint(); }

  /// Fits the row to its value again (the panel does this once the values have rested).
  void releaseHeight() {
    if (tallest_.isEmpty()) return;
    tallest_.clear();
    updateGeometry();
  }

protected:
  void changeEvent(QEvent *event) override {
    if (event->type() == QEvent::FontChange || event->type() == QEvent::StyleChange) {
      height_width_ = -1;
      tallest_.clear();
    }
    QLabel::changeEvent(event);
  }

private:
  mutable int height_width_ = -1;
  mutable int height_ = 0;
  mutable QString height_text_;
  mutable QHash<int, int> tallest_; ///< width -> the tallest height given since the release
};

} // namespace

QString analyticAgreement(const Evaluation &evaluation) {
  const AnalyticMetrics &analytic = *evaluation.analytic;
  if (!departsFromClosedForm(evaluation))
    return QObject::tr("The simulation matches the formula exactly.");
  QString text = QObject::tr("The simulation differs from the formula by %1 points")
                     .arg(QString::number(closedFormGap(evaluation) * 100, 'f', 2));
  const std::vector<AnalyticDeparture> departures = analyticDepartures(evaluation);
  if (!departures.empty()) {
    // "a, b and c": the assumptions this plan breaks, by name; their sizes, and each one's share
    // of the gap, are the Explain tab's (a row of nine lines here pushed the memory and
    // throughput rows out of a 800 px window).
    const auto name = [](const AnalyticDeparture &departure) {
      switch (departure.kind) {
      case DepartureKind::UnevenStages: return QObject::tr("uneven stages");
      case DepartureKind::Transfers: return QObject::tr("transfer times");
      case DepartureKind::GradientSync: return QObject::tr("the sync and optimizer tail");
      case DepartureKind::SharedDevice: return QObject::tr("a shared device");
      case DepartureKind::Microbatches: // short already: "M = 6 is not a multiple of P = 4"
      case DepartureKind::MicrobatchGroup: return QString::fromStdString(departure.text);
      case DepartureKind::UnequalOpKinds: return QObject::tr("unequal F, I, W");
      case DepartureKind::PairOverlap: return QObject::tr("the F&B pair's overlap");
      }
      return QString();
    };
    QString list;
    for (std::size_t i = 0; i < departures.size(); ++i) {
      if (i > 0) list += i + 1 == departures.size() ? QObject::tr(" and ") : QStringLiteral(", ");
      list += name(departures[i]);
    }
    return text + (departures.size() == 1
                       ? QObject::tr(": %1 (Explain says how much it moves the bubble).")
                       : QObject::tr(": %1 (Explain gives each one's share of the gap)."))
                      .arg(list);
  }
  if (!analytic.exact_when.empty())
    text += QObject::tr("; the formula is exact only when %1")
                .arg(QString::fromStdString(analytic.exact_when));
  return text + QLatin1Char('.');
}

MetricsPanel::MetricsPanel(QWidget *parent) : QWidget(parent) {
  // The "checked against" row predicts every shipped validation row once (about 0.1 s): done on
  // a worker now, so the first model plan shown does not wait for it.
  static const auto warm_up =
      QtConcurrent::run([] { return validatedAccuracy("", GemmPrecision::Bf16, false); });
  (void)warm_up;
  release_heights_ = new QTimer(this);
  release_heights_->setSingleShot(true);
  release_heights_->setInterval(400);
  connect(release_heights_, &QTimer::timeout, this, &MetricsPanel::fitRowsToValues);
  speed_of_light_delay_ = new QTimer(this);
  speed_of_light_delay_->setSingleShot(true);
  speed_of_light_delay_->setInterval(150);
  connect(speed_of_light_delay_, &QTimer::timeout, this, [this] {
    if (snapshot_ && snapshot_->report) startSpeedOfLight();
  });
  auto *outer = new QVBoxLayout(this);
  outer->setContentsMargins(6, 6, 6, 6);
  grid_ = new QGridLayout;
  grid_->setHorizontalSpacing(10);
  grid_->setVerticalSpacing(3);
  grid_->setColumnStretch(1, 1);
  outer->addLayout(grid_);
  outer->addStretch(1);

  addSection(tr("Step"));
  addRow(QStringLiteral("step_time"), tr("step time"),
         tr("Makespan T: first op start to last op end of one step."));
  addRow(QStringLiteral("speed_of_light"), tr("speed of light"),
         tr("The same plan with every kernel at the GPU's peak, every link at its line rate and "
            "nothing else (its bubble and the communication it cannot hide stay): no run of it "
            "can be faster. A plan far above it can gain from faster kernels and links; one close "
            "to it needs another layout. A measured run below it was not this plan."));
  addRow(QStringLiteral("ops"), tr("ops"), tr("Compute ops in the schedule (all ranks)."));
  addRow(QStringLiteral("published"), tr("published"),
         tr("The published run opened with File > Open published run: what was measured, "
            "beside this prediction while the settings are the ones it ran with."));
  setPublishedRun(std::nullopt);
  addRow(QStringLiteral("validated"), tr("checked against"),
         tr("How far the model's step time was from the published runs of this GPU type, GEMM "
            "precision and kind of model (docs/validation.md; pipescope compare --published "
            "all): the error to expect of this prediction. Plans closer than that are not "
            "known to differ."));
  addSection(tr("Bubble (idle share)"));
  addRow(QStringLiteral("bubble_fraction"), tr("fraction, simulated"),
         tr("bubble_fraction = 1 \u2212 \u03a3 busy / (P\u00b7T): idle share of the total time."));
  addRow(QStringLiteral("bubble_fraction_analytic"), tr("fraction, formula"),
         tr("The published closed form evaluated at this P, M, V and F, B, W."));
  addRow(QStringLiteral("bubble_ratio"), tr("ratio, simulated"),
         tr("bubble_ratio = (P\u00b7T \u2212 \u03a3 busy) / \u03a3 busy: idle time relative to "
            "compute. "
            "The literature quotes both kinds under the same name."));
  addRow(QStringLiteral("bubble_ratio_analytic"), tr("ratio, formula"),
         tr("The published closed form of the ratio."));
  addRow(QStringLiteral("formula"), tr("formula"),
         tr("The published bubble formula and its source."));
  addRow(QStringLiteral("agreement"), tr("agreement"),
         tr("Whether the simulation matches the formula."));
  addSection(tr("Memory"));
  addRow(QStringLiteral("peak_activations"), tr("peak activations"),
         tr("Most activation sets any rank holds at once: in chunks, in microbatch equivalents, "
            "and in bytes "
            "with a model."));
  addRow(QStringLiteral("memory_fit"), tr("fits in memory"),
         tr("Whether every rank's total fits its device memory."));
  addSection(tr("Communication per step"));
  addRow(QStringLiteral("communication_tp"), tr("TP"),
         tr("Tensor-parallel all-reduces inside each layer."));
  addRow(QStringLiteral("communication_pp"), tr("PP"),
         tr("Point-to-point activations and gradients between stages."));
  addRow(QStringLiteral("communication_dp"), tr("DP"),
         tr("The gradient all-reduce across data-parallel replicas."));
  addSection(tr("Throughput"));
  addRow(QStringLiteral("tokens_per_s"), tr("tokens/s"),
         tr("Tokens per second for the whole mesh."));
  addRow(QStringLiteral("mfu"), tr("MFU"),
         tr("Model FLOPs utilization: useful FLOPs (6·N per token plus attention) over the "
            "mesh's dense 16-bit peak; FP8 plans also against the FP8 peak."));
  addRow(QStringLiteral("evaluation_time"), tr("evaluated in"),
         tr("Wall time to schedule, lower and simulate."));
}

QLabel *MetricsPanel::addSection(const QString &title) {
  auto *label = new QLabel(QStringLiteral("<b>%1</b>").arg(title.toHtmlEscaped()), this);
  label->setContentsMargins(0, next_row_ == 0 ? 0 : 6, 0, 0);
  grid_->addWidget(label, next_row_++, 0, 1, 2);
  return label;
}

QLabel *MetricsPanel::addRow(const QString &key, const QString &name, const QString &tooltip) {
  auto *name_label = new QLabel(name, this);
  name_label->setToolTip(tooltip);
  name_label->setStyleSheet(QStringLiteral("color: %1;").arg(palette::secondaryText().name()));
  name_label->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  auto *value = new ValueLabel(QStringLiteral("\u2014"), this);
  value->setObjectName(QStringLiteral("metric_") + key);
  value->setToolTip(tooltip);
  value->setWordWrap(true);
  // At the top of its row: a row kept taller than its value (ValueLabel) leaves the room below.
  value->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  grid_->addWidget(name_label, next_row_, 0);
  grid_->addWidget(value, next_row_, 1);
  ++next_row_;
  values_.insert(key, value);
  names_.insert(key, name_label);
  return value;
}

QString MetricsPanel::valueText(const QString &key) const {
  auto it = values_.find(key);
  return it == values_.end() ? QString() : it.value()->text();
}

QString MetricsPanel::plainValueText(const QString &key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return {};
  const QString text = it.value()->text();
  return Qt::mightBeRichText(text) ? QTextDocumentFragment::fromHtml(text).toPlainText() : text;
}

QString MetricsPanel::copyableText() const {
  QString text;
  for (int row = 0; row < grid_->rowCount(); ++row) {
    const QLayoutItem *first = grid_->itemAtPosition(row, 0);
    auto *name = first ? qobject_cast<QLabel *>(first->widget()) : nullptr;
    if (!name || name->isHidden()) continue;
    const QString name_text = QTextDocumentFragment::fromHtml(name->text()).toPlainText();
    const QLayoutItem *second = grid_->itemAtPosition(row, 1);
    // A section title spans both columns: no value's label there.
    const QString key = values_.key(qobject_cast<QLabel *>(second ? second->widget() : nullptr));
    if (key.isEmpty()) {
      text += (text.isEmpty() ? QString() : QStringLiteral("\n")) + name_text + QLatin1Char('\n');
      continue;
    }
    text += QStringLiteral("  %1: %2\n").arg(name_text, plainValueText(key));
  }
  return text;
}

void MetricsPanel::contextMenuEvent(QContextMenuEvent *event) {
  QMenu menu(this);
  // The row under the pointer, by its value or its name.
  QString key;
  for (auto it = values_.cbegin(); it != values_.cend(); ++it) {
    const QLabel *name = names_.value(it.key());
    for (const QLabel *label : {static_cast<const QLabel *>(it.value()), name})
      if (label && label->isVisible() && label->rect().contains(label->mapFrom(this, event->pos())))
        key = it.key();
  }
  if (!key.isEmpty()) {
    const QString name = names_.value(key)->text();
    menu.addAction(tr("Copy %1").arg(name), this,
                   [this, key] { QGuiApplication::clipboard()->setText(plainValueText(key)); });
  }
  menu.addAction(tr("Copy all metrics"), this,
                 [this] { QGuiApplication::clipboard()->setText(copyableText()); });
  menu.exec(event->globalPos());
}

void MetricsPanel::setPublishedRun(const std::optional<PublishedRun> &run, const Plan &as_opened) {
  published_ = run;
  published_plan_ = run ? planToJson(as_opened) : nlohmann::json();
  const QString key = QStringLiteral("published");
  names_.value(key)->setVisible(run.has_value());
  values_.value(key)->setVisible(run.has_value());
  showPublishedRun();
}

// The measurement of the opened published run against the prediction on screen: only while the
// settings are the published ones is that a check of the cost model.
void MetricsPanel::showPublishedRun() {
  QLabel *label = values_.value(QStringLiteral("published"));
  if (!published_ || !snapshot_) {
    label->setText(QStringLiteral("\u2014"));
    return;
  }
  const ValidationCase &row = published_->row;
  const QString id =
      QStringLiteral("<b>%1</b>").arg(QString::fromStdString(row.id).toHtmlEscaped());
  const QString source = QStringLiteral("<br><span style='color:%1'>%2</span>")
                             .arg(palette::hintText().name(),
                                  QString::fromStdString(published_->set_title).toHtmlEscaped());
  QStringList measured;
  if (row.measured_step_s > 0)
    measured << tr("step %1").arg(formatDuration(row.measured_step_s * 1e6));
  if (row.measured_memory_gib)
    measured << tr("peak memory %1 GiB").arg(*row.measured_memory_gib, 0, 'f', 1);
  if (planToJson(snapshot_->plan) != published_plan_ || !snapshot_->report) {
    label->setText(tr("%1 measured %2 with its published settings; these settings differ, so "
                      "this prediction is not of that run")
                       .arg(id, measured.join(QStringLiteral(", "))) +
                   source);
    return;
  }
  const ModelReport &report = *snapshot_->report;
  QStringList against;
  if (row.measured_step_s > 0)
    against << tr("step %1 measured, %2 predicted (%3)")
                   .arg(formatDuration(row.measured_step_s * 1e6),
                        formatDuration(report.step_time_s * 1e6),
                        formatSignedPercent((report.step_time_s - row.measured_step_s) /
                                            row.measured_step_s));
  if (row.measured_memory_gib) {
    const double predicted = comparedMemoryGib(row, report);
    against << tr("peak memory %1 GiB measured, %2 GiB predicted (%3)")
                   .arg(*row.measured_memory_gib, 0, 'f', 1)
                   .arg(predicted, 0, 'f', 1)
                   .arg(formatSignedPercent((predicted - *row.measured_memory_gib) /
                                            *row.measured_memory_gib));
  }
  label->setText(id + QStringLiteral(": ") + against.join(QStringLiteral("; ")) + source);
}

// The published runs like this plan and the model's error on them; the whole sentence, with the
// sets it comes from, in the tooltip.
void MetricsPanel::showValidatedAccuracy(const ValidatedAccuracy &accuracy) {
  QLabel *label = values_.value(QStringLiteral("validated"));
  const QString sentence = QString::fromStdString(validatedAccuracyText(accuracy));
  label->setToolTip(sentence.left(1).toUpper() + sentence.mid(1) + QLatin1Char('.'));
  if (accuracy.step.runs == 0) {
    label->setText(
        tr("<span style='color:%2'>no published run on %1: this prediction is unchecked</span>")
            .arg(QString::fromStdString(accuracy.hardware).toHtmlEscaped(),
                 palette::badValue().name()));
    return;
  }
  QString on;
  if (accuracy.calibrated)
    on = accuracy.step.runs == 1 ? tr("on 1 measured run, held out")
                                 : tr("on %1 measured runs, each held out").arg(accuracy.step.runs);
  else
    on = accuracy.step.runs == 1 ? tr("on 1 published run")
                                 : tr("on %1 published runs").arg(accuracy.step.runs);
  QString differs;
  if (!accuracy.differs_from_preset.empty()) {
    QStringList fields;
    for (const auto &field : accuracy.differs_from_preset)
      fields << QString::fromStdString(field);
    // The preset's runs did not check what this file prices otherwise.
    differs = QStringLiteral("<br><span style='color:%1'>%2</span>")
                  .arg(palette::badValue().name(),
                       tr("runs of the preset; this file differs in %1")
                           .arg(fields.join(QStringLiteral(", ")).toHtmlEscaped()));
  }
  label->setText(
      tr("%1 mean, %2 worst error %3")
          .arg(formatPercent(accuracy.step.mean()), formatPercent(accuracy.step.worst), on) +
      QStringLiteral("<br><span style='color:%1'>%2</span>")
          .arg(palette::hintText().name(), QString::fromStdString(accuracy.scope).toHtmlEscaped()) +
      differs);
}

void MetricsPanel::startSpeedOfLight() {
  if (!speed_of_light_) {
    speed_of_light_ = new QFutureWatcher<std::optional<double>>(this);
    connect(speed_of_light_, &QFutureWatcherBase::finished, this, &MetricsPanel::showSpeedOfLight);
  }
  if (speed_of_light_->isRunning()) return; // showSpeedOfLight starts the newest when it ends
  speed_of_light_for_ = snapshot_;
  speed_of_light_->setFuture(QtConcurrent::run([plan = snapshot_->plan]() -> std::optional<double> {
    auto fastest = speedOfLightStepS(plan);
    return fastest ? std::optional<double>(*fastest) : std::nullopt;
  }));
}

void MetricsPanel::showSpeedOfLight() {
  if (!speed_of_light_ || !speed_of_light_for_ || speed_of_light_->isRunning()) return;
  const SnapshotPointer done = std::move(speed_of_light_for_);
  speed_of_light_for_.reset();
  const std::optional<double> fastest = speed_of_light_->result();
  // A newer model plan came while this one was worked out: work that one out instead.
  if (snapshot_ != done) {
    if (snapshot_ && snapshot_->report) startSpeedOfLight();
    return;
  }
  QLabel *label = values_.value(QStringLiteral("speed_of_light"));
  if (!fastest || !done->report) {
    label->setText(QStringLiteral("\u2014"));
    return;
  }
  label->setText(tr("%1: the step is %2\u00d7 it")
                     .arg(formatDuration(*fastest * 1e6))
                     .arg(QString::number(done->report->step_time_s / *fastest, 'f', 2)));
}

void MetricsPanel::waitForSpeedOfLight() {
  if (speed_of_light_delay_->isActive()) {
    speed_of_light_delay_->stop();
    startSpeedOfLight();
  }
  // Each finished evaluation may start the newest one; wait until none runs.
  while (speed_of_light_ && speed_of_light_for_) {
    speed_of_light_->waitForFinished();
    showSpeedOfLight();
  }
}

void MetricsPanel::fitRowsToValues() {
  release_heights_->stop();
  for (QLabel *label : std::as_const(values_))
    static_cast<ValueLabel *>(label)->releaseHeight();
}

void MetricsPanel::setSnapshot(const SnapshotPointer &snapshot) {
  if (!snapshot || !snapshot->evaluation) return;
  snapshot_ = snapshot;
  release_heights_->start();
  showPublishedRun();
  const Evaluation &evaluation = *snapshot->evaluation;
  const SimulationResult &simulation = evaluation.simulation;
  auto set = [this](const char *key, const QString &text) {
    values_.value(QString::fromLatin1(key))->setText(text);
  };
  QString step = formatDuration(simulation.makespan_us);
  // A calibrated file's step overhead is part of the step's tail: say how much.
  if (const auto &model = snapshot->plan.model; model && model->hardware.step_overhead_us > 0)
    step +=
        tr(", of which %1 the step overhead").arg(formatDuration(model->hardware.step_overhead_us));
  set("step_time", step);
  set("ops", QLocale().toString(static_cast<qulonglong>(evaluation.schedule.opCount())));
  set("bubble_fraction", formatPercent(simulation.bubble_fraction));
  set("bubble_ratio", formatPercent(simulation.bubble_ratio));
  if (evaluation.analytic) {
    const auto &analytic = *evaluation.analytic;
    set("bubble_fraction_analytic", formatPercent(analytic.bubble_fraction));
    set("bubble_ratio_analytic", formatPercent(analytic.bubble_ratio));
    set("formula", QStringLiteral("%1<br><span style='color:%3'>%2</span>")
                       .arg(QString::fromStdString(analytic.bubble_formula).toHtmlEscaped(),
                            QString::fromStdString(analytic.source).toHtmlEscaped(),
                            palette::hintText().name()));
    set("agreement", analyticAgreement(evaluation));
  } else {
    const QString none = tr("no published closed form for this schedule");
    set("bubble_fraction_analytic", QStringLiteral("\u2014"));
    set("bubble_ratio_analytic", QStringLiteral("\u2014"));
    set("formula", none);
    set("agreement", QStringLiteral("\u2014"));
  }
  int peak_chunks = 0;
  double peak_microbatches = 0, peak_bytes = 0;
  int peak_rank = 0;
  for (std::size_t rank = 0; rank < simulation.ranks.size(); ++rank) {
    const auto &stats = simulation.ranks[rank];
    if (stats.peak_inflight_microbatches > peak_microbatches) peak_rank = static_cast<int>(rank);
    peak_chunks = std::max(peak_chunks, stats.peak_inflight);
    peak_microbatches = std::max(peak_microbatches, stats.peak_inflight_microbatches);
    peak_bytes = std::max(peak_bytes, stats.peak_activation_bytes);
  }
  QString peak = (peak_chunks == 1 ? tr("1 chunk") : tr("%1 chunks").arg(peak_chunks)) +
                 QStringLiteral(" = ") +
                 (peak_microbatches == 1
                      ? tr("1 microbatch")
                      : tr("%1 microbatches").arg(QString::number(peak_microbatches, 'g', 4))) +
                 tr(" (rank %1)").arg(peak_rank);
  if (snapshot->report) {
    double report_peak = 0;
    for (const auto &memory : snapshot->report->memory)
      report_peak = std::max(report_peak, memory.activations_peak);
    peak += QStringLiteral(", ") + formatBytes(report_peak);
  }
  set("peak_activations", peak);
  if (snapshot->report) {
    const ModelReport &report = *snapshot->report;
    // The model's step adds what the timeline does not show (an unoverlapped DP sync).
    if (std::abs(report.step_time_s * 1e6 - simulation.makespan_us) > 1e-3 * simulation.makespan_us)
      set("step_time",
          step + tr(" (%1 with the DP sync)").arg(formatDuration(report.step_time_s * 1e6)));
    int over = 0;
    double worst = 0, capacity = 0;
    for (const auto &memory : report.memory) {
      over += memory.fits ? 0 : 1;
      if (memory.total > worst) {
        worst = memory.total;
        capacity = memory.capacity;
      }
    }
    set("memory_fit",
        over == 0
            ? tr("yes: largest rank %1 of %2").arg(formatBytes(worst), formatBytes(capacity))
            : tr("<span style='color:%3'><b>no</b>: %n rank(s) over; largest %1 of %2</span>",
                 nullptr, over)
                  .arg(formatBytes(worst), formatBytes(capacity), palette::badValue().name()));
    auto communication = [](const CommunicationKind &kind) {
      if (kind.bytes <= 0 && kind.time_s <= 0) return tr("none");
      return tr("%1, %2 per rank, %3")
          .arg(formatBytes(kind.bytes), formatDuration(kind.time_s * 1e6),
               QString::fromStdString(kind.link));
    };
    set("communication_tp", communication(report.tp));
    set("communication_pp", communication(report.pp));
    // The DP sync overlapped with the backward (and the next forward): what the step pays of it.
    QString dp = communication(report.dp);
    if (report.dp.time_s > 0 && report.dp.exposed_time_s < report.dp.time_s)
      dp += tr("; %1 exposed").arg(formatDuration(report.dp.exposed_time_s * 1e6));
    set("communication_dp", dp);
    set("speed_of_light", tr("working it out\u2026"));
    speed_of_light_delay_->start();
    set("tokens_per_s", QLocale().toString(report.tokens_per_s, 'f', 0));
    // An FP8 run's MFU against the 16-bit peak can pass 50 %: say which peak, and give both.
    set("mfu", report.mfu_fp8 > 0
                   ? tr("%1 of the 16-bit peak, %2 of the FP8 peak")
                         .arg(formatPercent(report.mfu), formatPercent(report.mfu_fp8))
                   : formatPercent(report.mfu));
    showValidatedAccuracy(validatedAccuracy(*snapshot->plan.model));
  } else {
    const QString needs_model = tr("needs a model + hardware preset");
    set("speed_of_light", needs_model);
    set("memory_fit", needs_model);
    set("validated", needs_model);
    values_.value(QStringLiteral("validated"))->setToolTip(QString());
    // Without a model only the pipeline transfers are known: count them.
    set("communication_tp", needs_model);
    set("communication_pp",
        tr("%1 transfers between ranks")
            .arg(QLocale().toString(static_cast<qulonglong>(evaluation.program.messages.size()))));
    set("communication_dp", needs_model);
    set("tokens_per_s", needs_model);
    set("mfu", needs_model);
  }
  set("evaluation_time",
      QStringLiteral("%1 ms").arg(QString::number(snapshot->compute_ms, 'f', 2)));
}

} // namespace pipescope::gui
