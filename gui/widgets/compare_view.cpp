#include "gui/widgets/compare_view.h"

#include <QCoreApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QSplitter>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <set>

#include "engine/model/layer_layout.h"
#include "gui/timeline/palette.h"
#include "gui/widgets/schedule_family_list.h"
#include "gui/widgets/timeline_widget.h"

namespace pipescope::gui {

ScheduleRequest comparisonRequest(const Plan &plan, const std::string &family_name) {
  ScheduleRequest request;
  request.name = family_name;
  request.pp = plan.request.pp;
  request.microbatches = plan.request.microbatches;
  const ScheduleFamily *family = findScheduleFamily(family_name);
  if (!family) return request;
  if (family->placement != PlacementKind::Loop)
    request.chunks = 2;
  else if (family->uses_chunks)
    request.chunks = std::max(2, plan.request.chunks);
  else
    request.chunks = 1;
  request.microbatch_group = 0;
  return request;
}

std::vector<int> microbatchLadder(int pp, int current_microbatches) {
  const int limit = std::clamp(std::max(4 * pp, 2 * current_microbatches), 8, 256);
  std::set<int> values;
  for (int m = 1; m <= limit;) {
    values.insert(m);
    m = m < 16 ? m + 1 : m + std::max(1, m / 4);
  }
  values.insert(limit);
  values.insert(std::min(current_microbatches, limit));
  // Multiples of P and 2P matter: several schedules accept only those.
  for (int m = pp; m <= limit; m += std::max(1, pp))
    values.insert(m);
  return {values.begin(), values.end()};
}

namespace {

/// The plan's model on `request`'s schedule. A layer layout of another stage count is spread
/// over this schedule's model stages, as the sliders spread it; `layout_stages` says how many
/// when that happened (else 0), for the section's title.
Result<Evaluation> evaluateFamily(const Plan &plan, const ScheduleRequest &request,
                                  int *layout_stages = nullptr) {
  if (auto status = checkScheduleRequest(request); !status) return status.error();
  Plan variant = plan;
  variant.request = request;
  variant.custom.reset();
  auto schedule = planSchedule(variant);
  if (!schedule) return schedule.error();
  if (variant.model && !variant.model->training.layout.empty()) {
    LayerLayout &layout = variant.model->training.layout;
    const int stages = schedule->placement.modelStageCount();
    if (static_cast<int>(layout.size()) != stages) {
      auto spread = resplitLayout(layout, stages);
      if (!spread) return spread.error();
      layout = std::move(*spread);
      if (layout_stages) *layout_stages = stages;
    }
  }
  auto costs = planCosts(variant, schedule->placement);
  if (!costs) return costs.error();
  return evaluateSchedule(std::move(*schedule), *costs);
}

} // namespace

ComparisonResult computeComparison(const Plan &plan, const QStringList &families,
                                   bool with_curves) {
  ComparisonResult result;
  for (const QString &name : families) {
    const auto request = comparisonRequest(plan, name.toStdString());
    const ScheduleFamily *family = findScheduleFamily(request.name);
    int layout_stages = 0;
    auto evaluation = evaluateFamily(plan, request, &layout_stages);
    const QString title = family ? QString::fromStdString(family->title) : name;
    if (!evaluation) {
      result.refused << QStringLiteral("%1: %2").arg(
          title, QString::fromStdString(evaluation.error().message));
      continue;
    }
    TimelineSection section;
    section.title = QObject::tr("%1 \u2014 step %2, bubble %3 %")
                        .arg(title, formatDuration(evaluation->simulation.makespan_us))
                        .arg(QString::number(evaluation->simulation.bubble_fraction * 100, 'f', 1));
    section.short_name = title;
    section.short_figures =
        QObject::tr("%1, %2 %")
            .arg(formatDuration(evaluation->simulation.makespan_us))
            .arg(QString::number(evaluation->simulation.bubble_fraction * 100, 'f', 1));
    if (family && family->uses_chunks) {
      section.title += QObject::tr(" (V = %1)").arg(request.chunks);
      section.short_figures += QObject::tr(", V = %1").arg(request.chunks);
    }
    if (layout_stages > 0) {
      section.title += QObject::tr(" \u2014 layout spread over its %1 stages").arg(layout_stages);
      section.short_figures += QObject::tr(", layout over %1").arg(layout_stages);
    }
    section.evaluation = std::make_shared<const Evaluation>(std::move(*evaluation));
    result.sections.push_back(std::move(section));
  }
  if (with_curves) {
    const auto ladder = microbatchLadder(plan.request.pp, plan.request.microbatches);
    for (const auto &family : scheduleFamilies()) {
      BubbleCurve curve;
      curve.name = QString::fromStdString(family.title);
      for (int microbatches : ladder) {
        Plan variant = plan;
        variant.request.microbatches = microbatches;
        const auto request = comparisonRequest(variant, family.name);
        if (!checkScheduleRequest(request)) continue;
        auto evaluation = evaluateFamily(variant, request);
        if (!evaluation) continue;
        curve.points.emplace_back(microbatches, evaluation->simulation.bubble_fraction * 100);
      }
      if (!curve.points.empty()) result.curves.push_back(std::move(curve));
    }
    result.subtitle = QObject::tr("P = %1, V = %2 where it applies")
                          .arg(plan.request.pp)
                          .arg(std::max(2, plan.request.chunks));
  }
  return result;
}

CompareView::CompareView(QWidget *parent) : QWidget(parent) {
  auto *layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto *left = new QVBoxLayout;
  auto *hint = new QLabel(tr("Schedules to stack:"), this);
  left->addWidget(hint);
  family_list_ = makeScheduleFamilyList(this, [](const ScheduleFamily &family) {
    return family.name == "1f1b" || family.name == "interleaved-1f1b" || family.name == "zb-h1" ||
           family.name == "zb-v" || family.name == "dualpipev";
  });
  family_list_->setMaximumWidth(150);
  left->addWidget(family_list_, 1);
  layout->addLayout(left);
  auto *splitter = new QSplitter(Qt::Horizontal, this);
  auto *timeline_box = new QWidget(splitter);
  auto *timeline_layout = new QVBoxLayout(timeline_box);
  timeline_layout->setContentsMargins(0, 0, 0, 0);
  timeline_ = new TimelineWidget(timeline_box);
  timeline_->setObjectName(QStringLiteral("compare_timeline"));
  refused_label_ = new QLabel(timeline_box);
  refused_label_->setWordWrap(true);
  refused_label_->setStyleSheet(QStringLiteral("color: %1;").arg(palette::refusedText().name()));
  timeline_layout->addWidget(timeline_, 1);
  timeline_layout->addWidget(refused_label_);
  bubble_chart_ = new BubbleCurveChart(splitter);
  splitter->addWidget(timeline_box);
  splitter->addWidget(bubble_chart_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  layout->addWidget(splitter, 1);
  connect(family_list_, &QListWidget::itemChanged, this, [this] {
    dirty_ = true;
    recompute();
  });
  connect(&watcher_, &QFutureWatcher<ComparisonResult>::finished, this, [this] {
    awaiting_result_ = false;
    result_ = watcher_.result();
    showResult();
    if (dirty_) recompute();
  });
}

QStringList CompareView::checkedFamilies() const {
  return checkedScheduleFamilies(family_list_);
}

void CompareView::setCheckedFamilies(const QStringList &families) {
  const QSignalBlocker blocker(family_list_);
  checkScheduleFamilies(family_list_, families);
  dirty_ = true;
  recompute();
}

void CompareView::setPlan(const Plan &plan) {
  const bool curves_change = !plan_ || plan_->request.pp != plan.request.pp ||
                             plan_->request.chunks != plan.request.chunks ||
                             plan_->request.microbatches != plan.request.microbatches ||
                             !(plan_->costs == plan.costs) ||
                             plan_->model.has_value() != plan.model.has_value();
  plan_ = plan;
  dirty_ = true;
  curves_dirty_ = curves_dirty_ || curves_change || plan.model.has_value();
  recompute();
}

void CompareView::followZoom(const TimeMapping &mapping) {
  // The same window in microseconds; the stacked schedules may end later than the one shown.
  ZoomStack *zoom = timeline_->zoomStack();
  zoom->setMapping(mapping.isFitted()
                       ? zoom->mapping().fitted()
                       : zoom->mapping().showing(mapping.viewStart(), mapping.viewEnd()));
}

void CompareView::showEvent(QShowEvent *event) {
  QWidget::showEvent(event);
  if (dirty_) recompute();
}

void CompareView::recompute() {
  // Only a visible compare view spends time; a hidden one catches up when shown.
  if (!plan_ || !isVisible() || awaiting_result_) return;
  dirty_ = false;
  const bool with_curves = curves_dirty_;
  curves_dirty_ = false;
  const Plan plan = *plan_;
  const QStringList families = checkedFamilies();
  awaiting_result_ = true;
  watcher_.setFuture(QtConcurrent::run(
      [plan, families, with_curves] { return computeComparison(plan, families, with_curves); }));
}

void CompareView::showResult() {
  timeline_->setModel(TimelineModel(result_.sections), true);
  refused_label_->setText(result_.refused.isEmpty()
                              ? QString()
                              : tr("Not shown \u2014 ") +
                                    result_.refused.join(QStringLiteral("; ")));
  refused_label_->setVisible(!result_.refused.isEmpty());
  if (!result_.curves.empty()) bubble_chart_->setCurves(result_.curves, result_.subtitle);
}

void CompareView::waitForIdle() {
  while (awaiting_result_ || (dirty_ && isVisible())) {
    if (!awaiting_result_) recompute();
    watcher_.waitForFinished();
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
  }
}

} // namespace pipescope::gui
