#include "gui/widgets/timeline_widget.h"

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QPixmap>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>

namespace pipescope::gui {

namespace {

// An op's microbatch ("3", or "3/5" for an overlapped pair) centred in its box, when it fits.
void drawOpLabel(QPainter &painter, TextCache &texts, const QRectF &rect, const Op &op,
                 double alpha) {
  QString label = QString::number(op.microbatch);
  if (op.kind == OpKind::OverlappedPair)
    label += QLatin1Char('/') + QString::number(op.backward_microbatch);
  if (texts.width(painter.font(), label) + 4 > rect.width()) return;
  painter.setPen(alpha < 0.5 ? palette::opLabelFaded() : palette::opLabel());
  texts.draw(painter, rect, Qt::AlignCenter, label);
}

constexpr double kMinRowHeight = 3;
constexpr double kMaxRowHeight = 44;
constexpr double kFadedAlpha = 0.22;

} // namespace

TimelineWidget::TimelineWidget(QWidget *parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(200, 120);
  setFocusPolicy(Qt::WheelFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  morph_timer_.setInterval(16);
  connect(&morph_timer_, &QTimer::timeout, this, [this] {
    if (morph_clock_.elapsed() >= kMorphDurationMs) finishMorph();
    draw_list_valid_ = false;
    update();
  });
  setZoomStack(new ZoomStack(this));
  updatePixelSpan();
}

void TimelineWidget::setZoomStack(ZoomStack *stack) {
  if (zoom_) disconnect(zoom_, nullptr, this, nullptr);
  zoom_ = stack;
  connect(zoom_, &ZoomStack::zoomChanged, this, &TimelineWidget::followZoom);
  followZoom(zoom_->mapping());
}

void TimelineWidget::followZoom(const TimeMapping &mapping) {
  const TimeMapping next = mapping.withPixelSpan(mapping_.xLeft(), mapping_.widthPx());
  if (next == mapping_) return;
  // Fitting the step shows every row again too.
  if (next.isFitted() && !mapping_.isFitted()) vertical_offset_ = 0;
  mapping_ = next;
  draw_list_valid_ = false;
  update();
}

void TimelineWidget::setModel(TimelineModel model, bool animate) {
  const bool was_fitted = mapping_.isFitted() || model_.empty();
  previous_model_ = std::move(model_);
  model_ = std::move(model);
  morph_from_end_us_ = previous_model_.empty() ? model_.endTime() : previous_model_.endTime();
  morph_ = animate ? LayoutMorph(previous_model_, model_) : LayoutMorph();
  if (morph_.active()) {
    morph_clock_.start();
    morph_timer_.start();
  } else {
    morph_timer_.stop();
    previous_model_ = TimelineModel();
  }
  const double end = std::max(model_.endTime(), 1e-6);
  if (was_fitted && !zoom_->mapping().isFitted()) zoom_->setMapping(zoom_->mapping().fitted());
  zoom_->setFullRange(0, end);
  // A highlight follows its microbatch while it still exists.
  if (highlighted_microbatch_ >= 0)
    setHighlightedMicrobatch(highlighted_section_, highlighted_microbatch_);
  clampVerticalOffset();
  hovered_.reset();
  hover_text_.clear();
  // The analyses belong to the old evaluations; they are recomputed when next asked for.
  bubbles_.assign(model_.sections().size(), nullptr);
  bubbles_tried_.assign(model_.sections().size(), 0);
  critical_ops_.assign(model_.sections().size(), {});
  draw_list_valid_ = false;
  update();
}

const BubbleAnalysis *TimelineWidget::bubbles(int section) {
  if (section < 0 || static_cast<std::size_t>(section) >= model_.sections().size()) return nullptr;
  const auto index = static_cast<std::size_t>(section);
  if (bubbles_tried_.size() != model_.sections().size()) {
    bubbles_.assign(model_.sections().size(), nullptr);
    bubbles_tried_.assign(model_.sections().size(), 0);
    critical_ops_.assign(model_.sections().size(), {});
  }
  if (!bubbles_tried_[index]) {
    bubbles_tried_[index] = 1;
    const TimelineSection &shown = model_.sections()[index];
    const auto &evaluation = shown.evaluation;
    // A prediction carries the lowered program the analysis follows; a measured step shown as its
    // own section does not, and brings its analysis with it (RunSession::measuredBubbles).
    if (evaluation && !evaluation->program.ranks.empty()) {
      if (auto analysis = explainBubbles(*evaluation); analysis.ok())
        bubbles_[index] = std::make_shared<const BubbleAnalysis>(std::move(*analysis));
    } else {
      bubbles_[index] = shown.measured_bubbles;
    }
    if (const auto &analysis = bubbles_[index]; analysis && evaluation) {
      auto &flags = critical_ops_[index];
      flags.resize(evaluation->schedule.ranks.size());
      for (std::size_t r = 0; r < flags.size(); ++r)
        flags[r].assign(evaluation->schedule.ranks[r].size(), 0);
      for (const auto &segment : analysis->critical_path.segments)
        if (segment.kind == PathSegmentKind::Compute && segment.op.valid() &&
            static_cast<std::size_t>(segment.op.rank) < flags.size() &&
            static_cast<std::size_t>(segment.op.position) <
                flags[static_cast<std::size_t>(segment.op.rank)].size())
          flags[static_cast<std::size_t>(segment.op.rank)]
               [static_cast<std::size_t>(segment.op.position)] = 1;
    }
  }
  return bubbles_[index].get();
}

std::vector<OpLocation> TimelineWidget::criticalPathOps(int section) {
  std::vector<OpLocation> ops;
  if (const BubbleAnalysis *analysis = bubbles(section))
    for (const auto &segment : analysis->critical_path.segments)
      if (segment.kind == PathSegmentKind::Compute && segment.op.valid())
        ops.push_back({section, segment.op.rank, segment.op.position});
  return ops;
}

void TimelineWidget::setCriticalPathShown(bool shown) {
  if (shown == critical_path_shown_) return;
  critical_path_shown_ = shown;
  update();
}

bool TimelineWidget::onCriticalPath(const OpLocation &location) const {
  const auto section = static_cast<std::size_t>(location.section);
  if (section >= critical_ops_.size()) return false;
  const auto &ranks = critical_ops_[section];
  const auto rank = static_cast<std::size_t>(location.rank);
  return rank < ranks.size() && static_cast<std::size_t>(location.index) < ranks[rank].size() &&
         ranks[rank][static_cast<std::size_t>(location.index)] != 0;
}

QString TimelineWidget::idleTextAt(int section, int rank, double time_us) {
  if (section < 0 || static_cast<std::size_t>(section) >= model_.sections().size()) return {};
  // Where a measured step is drawn (over the prediction or as its own section), its idle time is
  // what the pointer is on.
  const TimelineSection &shown = model_.sections()[static_cast<std::size_t>(section)];
  const bool measured = shown.measured_bubbles != nullptr;
  const BubbleAnalysis *analysis = measured ? shown.measured_bubbles.get() : bubbles(section);
  if (!analysis || rank < 0 || static_cast<std::size_t>(rank) >= analysis->ranks.size()) return {};
  // The model's times start at the step's start (T0 = 0 for a simulation).
  const double t = time_us + analysis->step_start_us;
  const auto &intervals = analysis->ranks[static_cast<std::size_t>(rank)].intervals;
  const auto after = std::upper_bound(
      intervals.begin(), intervals.end(), t,
      [](double time, const IdleInterval &interval) { return time < interval.start_us; });
  if (after == intervals.begin()) return {};
  const IdleInterval &interval = *std::prev(after);
  if (t > interval.end_us || interval.durationUs() <= 0) return {};
  const auto &schedule = model_.sections()[static_cast<std::size_t>(section)].evaluation->schedule;
  return tr("<b>idle</b>%1 on pipeline rank %2<br>%3 to %4 (%5)<br>%6")
      .arg(measured ? tr(" (measured)") : QString())
      .arg(rank)
      .arg(formatDuration(interval.start_us - analysis->step_start_us),
           formatDuration(interval.end_us - analysis->step_start_us),
           formatDuration(interval.durationUs()),
           QString::fromStdString(describeIdleInterval(schedule, *analysis, interval))
               .toHtmlEscaped());
}

void TimelineWidget::finishMorph() {
  morph_timer_.stop();
  morph_ = LayoutMorph();
  previous_model_ = TimelineModel();
  draw_list_valid_ = false;
  update();
}

void TimelineWidget::setMapping(const TimeMapping &mapping) {
  zoom_->setMapping(mapping.withPixelSpan(mapping_.xLeft(), mapping_.widthPx()));
}

void TimelineWidget::updatePixelSpan() {
  // A little right margin so the last op's edge and the last tick label stay inside.
  mapping_ = mapping_.withPixelSpan(kHeaderWidth + 4, std::max(1, width() - kHeaderWidth - 16));
  draw_list_valid_ = false;
}

double TimelineWidget::rowHeight() const {
  const int sections = static_cast<int>(model_.sections().size());
  const double titles = sections > 1 ? sections * kSectionTitleHeight : 0;
  const double available = height() - kAxisHeight - titles - 4;
  if (model_.rowCount() == 0) return kMaxRowHeight;
  return std::clamp(available / model_.rowCount(), kMinRowHeight, kMaxRowHeight);
}

double TimelineWidget::rowTop(double row, int section) const {
  const double titles = model_.sections().size() > 1 ? (section + 1) * kSectionTitleHeight : 0;
  return kAxisHeight + 2 + titles + row * rowHeight() - vertical_offset_;
}

double TimelineWidget::rowCenterY(int row) const {
  const auto [section, rank] = model_.sectionAndRank(row);
  (void)rank;
  return rowTop(row, std::max(section, 0)) + rowHeight() / 2;
}

int TimelineWidget::rowAt(double y) const {
  const double height = rowHeight();
  for (int section = 0; section < static_cast<int>(model_.sections().size()); ++section) {
    const int first = model_.sectionFirstRow(section);
    const int count = model_.sections()[static_cast<std::size_t>(section)].rankCount();
    const double top = rowTop(first, section);
    if (y >= top && y < top + count * height) return first + static_cast<int>((y - top) / height);
  }
  return -1;
}

QRectF TimelineWidget::opRect(const OpLocation &location) const {
  const auto &timing = model_.timing(location);
  const int row = model_.sectionFirstRow(location.section) + location.rank;
  const double x0 = mapping_.mapTimeToX(timing.start_us);
  const double x1 = mapping_.mapTimeToX(timing.end_us);
  return QRectF(x0, rowTop(row, location.section) + 1, std::max(1.0, x1 - x0), rowHeight() - 2);
}

void TimelineWidget::clampVerticalOffset() {
  const int sections = static_cast<int>(model_.sections().size());
  const double titles = sections > 1 ? sections * kSectionTitleHeight : 0;
  const double content = model_.rowCount() * rowHeight() + titles;
  const double available = height() - kAxisHeight - 4;
  vertical_offset_ = std::clamp(vertical_offset_, 0.0, std::max(0.0, content - available));
}

void TimelineWidget::rebuildDrawList() {
  if (draw_list_valid_) return;
  if (morphing()) {
    const double progress =
        easeInOut(static_cast<double>(morph_clock_.elapsed()) / kMorphDurationMs);
    // The time axis eases between the old and the new step length as well.
    TimeMapping morph_mapping = mapping_;
    if (mapping_.isFitted()) {
      const double end = morph_from_end_us_ + (model_.endTime() - morph_from_end_us_) * progress;
      morph_mapping = TimeMapping(0, std::max(end, 1e-6), mapping_.xLeft(), mapping_.widthPx());
    }
    draw_list_ = morph_.interpolate(model_, morph_mapping, progress);
  } else {
    DrawListOptions options;
    // Cull rows off screen.
    options.first_row = std::max(0, rowAt(kAxisHeight + 2) - 1);
    const int last = rowAt(height() - 1);
    options.last_row = last < 0 ? model_.rowCount() - 1 : last + 1;
    if (options.first_row < 0) options.first_row = 0;
    draw_list_ = buildDrawList(model_, mapping_, options);
  }
  measured_draw_list_ = DrawList();
  if (hasMeasuredOverlay() && !morphing()) {
    DrawListOptions options;
    options.first_row = std::max(0, rowAt(kAxisHeight + 2) - 1);
    const int last = rowAt(height() - 1);
    options.last_row = last < 0 ? model_.rowCount() - 1 : last + 1;
    options.measured = true;
    measured_draw_list_ = buildDrawList(model_, mapping_, options);
  }
  draw_list_valid_ = true;
}

const DrawList &TimelineWidget::drawList() {
  rebuildDrawList();
  return draw_list_;
}

const DrawList &TimelineWidget::measuredDrawList() {
  rebuildDrawList();
  return measured_draw_list_;
}

bool TimelineWidget::hasMeasuredOverlay() const {
  return std::any_of(model_.sections().begin(), model_.sections().end(),
                     [](const TimelineSection &section) { return section.measured != nullptr; });
}

bool TimelineWidget::sectionHasMeasured(int section) const {
  return section >= 0 && static_cast<std::size_t>(section) < model_.sections().size() &&
         model_.sections()[static_cast<std::size_t>(section)].measured != nullptr;
}

std::optional<OpLocation> TimelineWidget::opAt(QPoint position) {
  const int row = rowAt(position.y());
  if (row < 0 || position.x() < kHeaderWidth) return std::nullopt;
  const DrawItem *item = drawList().itemAt(row, position.x(), 1.5);
  if (!item || item->folded()) return std::nullopt;
  return item->first;
}

void TimelineWidget::setHighlightedMicrobatch(int section, int microbatch) {
  highlighted_section_ = section;
  highlighted_microbatch_ = microbatch;
  highlighted_path_.clear();
  if (microbatch >= 0) highlighted_path_ = model_.microbatchPath(section, microbatch);
  if (microbatch >= 0 && highlighted_path_.empty() &&
      model_.microbatchOps(section, microbatch).empty())
    highlighted_microbatch_ = -1;
  update();
}

void TimelineWidget::setPlayhead(double time_us) {
  if (std::isnan(time_us) && std::isnan(playhead_us_)) return;
  playhead_us_ = time_us;
  update();
}

void TimelineWidget::resizeEvent(QResizeEvent *event) {
  QWidget::resizeEvent(event);
  updatePixelSpan();
  clampVerticalOffset();
}

void TimelineWidget::wheelEvent(QWheelEvent *event) {
  const double delta =
      event->angleDelta().y() != 0 ? event->angleDelta().y() : event->angleDelta().x();
  if (event->modifiers() & Qt::ShiftModifier) {
    setMapping(mapping_.pannedByPixels(delta / 2));
  } else {
    // One notch (120) zooms by about 20%.
    zoom_->zoomTo(mapping_.zoomedAround(event->position().x(), std::pow(1.0015, delta)));
  }
  event->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent *event) {
  if (event->button() != Qt::LeftButton) return;
  press_position_ = event->pos();
  last_drag_position_ = event->pos();
  dragging_ = false;
}

void TimelineWidget::mouseMoveEvent(QMouseEvent *event) {
  if (event->buttons() & Qt::LeftButton) {
    if (!dragging_ && (event->pos() - press_position_).manhattanLength() > 3) {
      dragging_ = true;
      setCursor(Qt::ClosedHandCursor);
      QToolTip::hideText();
    }
    if (dragging_) {
      const QPoint delta = event->pos() - last_drag_position_;
      last_drag_position_ = event->pos();
      vertical_offset_ -= delta.y();
      clampVerticalOffset();
      draw_list_valid_ = false;
      setMapping(mapping_.pannedByPixels(delta.x()));
      update();
      return;
    }
  }
  showHoverAt(event->pos());
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent *event) {
  if (event->button() != Qt::LeftButton) return;
  if (dragging_) {
    dragging_ = false;
    unsetCursor();
    return;
  }
  // A click: highlight the clicked op's microbatch, or clear the highlight on empty space.
  if (auto location = opAt(event->pos())) {
    const Op &op = model_.op(*location);
    int microbatch = op.microbatch;
    // For an overlapped pair, a click on its lower half picks the backward part's microbatch.
    if (op.kind == OpKind::OverlappedPair &&
        event->pos().y() > rowCenterY(model_.sectionFirstRow(location->section) + location->rank))
      microbatch = op.backward_microbatch;
    if (microbatch == highlighted_microbatch_ && location->section == highlighted_section_)
      microbatch = -1;
    setHighlightedMicrobatch(location->section, microbatch);
    emit microbatchHighlighted(location->section, microbatch);
  } else if (highlighted_microbatch_ >= 0) {
    setHighlightedMicrobatch(highlighted_section_, -1);
    emit microbatchHighlighted(highlighted_section_, -1);
  }
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent *event) {
  if (event->button() != Qt::LeftButton) return;
  vertical_offset_ = 0;
  zoom_->resetZoom();
  update();
}

void TimelineWidget::leaveEvent(QEvent *event) {
  QWidget::leaveEvent(event);
  if (hovered_ || !hover_text_.isEmpty()) {
    hovered_.reset();
    hover_text_.clear();
    emit hoverTextChanged(QString());
    update();
  }
}

QString TimelineWidget::describeItem(const DrawItem &item) const {
  QString text;
  if (!item.folded()) {
    const auto &section = model_.sections()[static_cast<std::size_t>(item.first.section)];
    const Op &op = model_.op(item.first);
    const OpTiming &timing = model_.timing(item.first);
    text = describeOp(op, timing, item.first.rank);
    // A model plan's op: what its (predicted) time is made of on its stage.
    if (section.cost_breakdown)
      if (const auto parts =
              describeOpCost(*section.cost_breakdown, op, timing.end_us - timing.start_us,
                             section.pair_compute_stretch))
        text += QStringLiteral("<br>") + QString::fromStdString(*parts).toHtmlEscaped();
    if (const OpTiming *measured = model_.measuredTiming(item.first)) {
      const auto &predicted = model_.timing(item.first);
      const double planned = predicted.end_us - predicted.start_us;
      const double took = measured->end_us - measured->start_us;
      text.replace(QStringLiteral("<br>start"), QStringLiteral("<br><i>predicted</i> start"));
      text += QStringLiteral("<br><i>measured</i> start %1 &nbsp;end %2<br>duration %3")
                  .arg(formatDuration(measured->start_us), formatDuration(measured->end_us),
                       formatDuration(took));
      if (planned > 0)
        text += QStringLiteral(" (%1%2 % against the prediction)")
                    .arg(took >= planned ? QStringLiteral("+") : QString())
                    .arg((took - planned) / planned * 100, 0, 'f', 1);
    }
    if (model_.sections().size() > 1)
      text = QStringLiteral("<i>%1</i><br>").arg(section.title.toHtmlEscaped()) + text;
  } else {
    const auto &first = model_.timing(item.first);
    OpLocation last = item.first;
    last.index += item.op_count - 1;
    text = QStringLiteral("<b>%1 ops too small to display</b> (zoom in)<br>pipeline rank %2<br>"
                          "%3 to %4<br>compute %5% of that span")
               .arg(item.op_count)
               .arg(item.first.rank)
               .arg(formatDuration(first.start_us), formatDuration(model_.timing(last).end_us))
               .arg(qRound(item.busy_share * 100));
  }
  return text;
}

std::optional<DrawItem> TimelineWidget::itemUnder(QPoint position) {
  const int row = rowAt(position.y());
  if (row < 0 || position.x() < kHeaderWidth || morphing()) return std::nullopt;
  // Over a measured overlay, the measured bar under the pointer wins: it is what was drawn on top.
  const DrawItem *measured = measuredDrawList().itemAt(row, position.x(), 0.5);
  if (measured && !measured->folded()) return *measured;
  if (const DrawItem *item = drawList().itemAt(row, position.x(), 1.5)) return *item;
  return std::nullopt;
}

QString TimelineWidget::hoverTextAt(QPoint position) {
  if (const auto item = itemUnder(position)) return describeItem(*item);
  const int row = rowAt(position.y());
  if (row < 0 || position.x() < kHeaderWidth || morphing()) return {};
  // A gap: the idle interval under the pointer, with its cause.
  const auto [section, rank] = model_.sectionAndRank(row);
  return idleTextAt(section, rank, mapping_.mapXToTime(position.x()));
}

void TimelineWidget::showHoverAt(QPoint position) {
  hovered_ = itemUnder(position);
  const QString text = hoverTextAt(position);
  if (text == hover_text_) return;
  hover_text_ = text;
  emit hoverTextChanged(text);
  if (text.isEmpty())
    QToolTip::hideText();
  else
    QToolTip::showText(mapToGlobal(position), text, this);
  update();
}

void TimelineWidget::paintEvent(QPaintEvent *) {
  QPainter painter(this);
  painter.fillRect(rect(), palette::background());
  if (model_.empty()) {
    painter.setPen(palette().color(QPalette::PlaceholderText));
    painter.drawText(rect(), Qt::AlignCenter, tr("No schedule to show"));
    return;
  }
  rebuildDrawList();
  const QRect content(kHeaderWidth, kAxisHeight, width() - kHeaderWidth, height() - kAxisHeight);
  painter.save();
  painter.setClipRect(content);
  paintRows(painter, content);
  paintItems(painter, content);
  paintMeasured(painter);
  paintPath(painter);
  paintCriticalPath(painter);
  painter.restore();
  paintAxis(painter);

  // Row names, in the header column.
  painter.save();
  painter.setClipRect(QRect(0, kAxisHeight, width(), height() - kAxisHeight));
  QFont font = painter.font();
  font.setPointSizeF(std::min(font.pointSizeF(), 8.5));
  painter.setFont(font);
  const double row_height = rowHeight();
  const int label_every = std::max(1, static_cast<int>(std::ceil(12.0 / row_height)));
  drawn_section_titles_.clear();
  for (int section = 0; section < static_cast<int>(model_.sections().size()); ++section) {
    const auto &info = model_.sections()[static_cast<std::size_t>(section)];
    const int first = model_.sectionFirstRow(section);
    if (model_.sections().size() > 1) {
      painter.setPen(palette::sectionTitle());
      QFont bold = font;
      bold.setBold(true);
      painter.setFont(bold);
      // "Interleaved 1F1B — step 5.648 s, bubble 13.3 % (V = 2)" was cut at the right edge of a
      // narrow compare view, figures first: there the short title, elided if need be.
      const QFontMetrics metrics(bold);
      const int room = width() - 12;
      QString title = info.title;
      if (metrics.horizontalAdvance(title) > room && !info.short_figures.isEmpty()) {
        const QString figures = QStringLiteral(": ") + info.short_figures;
        title = metrics.elidedText(info.short_name, Qt::ElideMiddle,
                                   std::max(0, room - metrics.horizontalAdvance(figures))) +
                figures;
      }
      title = metrics.elidedText(title, Qt::ElideRight, room);
      drawn_section_titles_ << title;
      texts_.draw(
          painter,
          QRectF(6, rowTop(first, section) - kSectionTitleHeight, room, kSectionTitleHeight),
          Qt::AlignLeft | Qt::AlignVCenter, title);
      painter.setFont(font);
    }
    painter.setPen(palette::rowLabel());
    for (int rank = 0; rank < info.rankCount(); rank += label_every) {
      const double top = rowTop(first + rank, section);
      if (top + row_height < kAxisHeight || top > height()) continue;
      texts_.draw(painter, QRectF(4, top, kHeaderWidth - 10, std::max(row_height, 12.0)),
                  Qt::AlignRight | Qt::AlignVCenter, tr("rank %1").arg(rank));
    }
  }
  painter.restore();

  if (!std::isnan(playhead_us_)) {
    const double x = mapping_.mapTimeToX(playhead_us_);
    if (x >= kHeaderWidth) {
      painter.setPen(QPen(palette::playhead(), 2));
      painter.drawLine(QPointF(x, kAxisHeight - 6), QPointF(x, height()));
    }
  }
}

namespace {

// A row's idle time: the row colour under diagonal hatching, as one opaque 8 x 8 tile. Filling
// with it takes the raster engine's tiled-copy path; a pattern brush over a solid fill blended
// every pixel twice and cost a slider move's repaint more than all the ops drawn on top.
const QBrush &idleRowBrush() {
  static const QBrush brush = [] {
    QPixmap tile(8, 8);
    tile.fill(palette::rowBackground());
    QPainter tile_painter(&tile);
    tile_painter.fillRect(tile.rect(), QBrush(palette::idleHatch(), Qt::BDiagPattern));
    return QBrush(tile);
  }();
  return brush;
}

} // namespace

void TimelineWidget::paintRows(QPainter &painter, const QRect &) {
  const double row_height = rowHeight();
  for (int section = 0; section < static_cast<int>(model_.sections().size()); ++section) {
    const auto &info = model_.sections()[static_cast<std::size_t>(section)];
    if (!info.evaluation) continue;
    const int first = model_.sectionFirstRow(section);
    const double x0 = mapping_.mapTimeToX(0);
    // Under a measured overlay the row spans whichever step is longer.
    const double end = std::max(info.evaluation->simulation.makespan_us,
                                info.measured ? info.measured->simulation.makespan_us : 0.0);
    const double x1 = mapping_.mapTimeToX(end);
    for (int rank = 0; rank < info.rankCount(); ++rank) {
      const double top = rowTop(first + rank, section);
      if (top + row_height < kAxisHeight || top > height()) continue;
      const QRectF row(x0, top + 1, x1 - x0, std::max(1.0, row_height - 2));
      // Idle time inside the step shows as hatched bubble behind the ops.
      painter.fillRect(row, row_height >= 6 ? idleRowBrush() : QBrush(palette::rowBackground()));
    }
  }
}

void TimelineWidget::paintItems(QPainter &painter, const QRect &) {
  const double row_height = rowHeight();
  const bool highlighting = highlighted_microbatch_ >= 0;
  const double playhead_x = std::isnan(playhead_us_) ? 1e30 : mapping_.mapTimeToX(playhead_us_);
  const QFontMetrics metrics(painter.font());
  const bool labels = row_height >= metrics.height() - 2 && !morphing();
  painter.setRenderHint(QPainter::Antialiasing, false);
  for (const DrawItem &item : draw_list_.items) {
    const double top = rowTop(item.row, item.first.section) + 1;
    const double height = std::max(1.0, row_height - (row_height >= 6 ? 2 : 1));
    if (top + height < kAxisHeight || top > this->height()) continue;
    QColor color = item.folded() ? opKindColor(item.kind) : opColor(item.kind, item.microbatch);
    double alpha = item.alpha;
    if (item.folded()) alpha *= 0.35 + 0.65 * item.busy_share;
    if (highlighting) {
      const bool on_path = !item.folded() && item.first.section == highlighted_section_ &&
                           opTouchesMicrobatch(model_.op(item.first), highlighted_microbatch_);
      if (!on_path) alpha *= kFadedAlpha;
    }
    if (critical_path_shown_ && (item.folded() || !onCriticalPath(item.first)))
      alpha *= kFadedAlpha;
    const QRectF rect(item.x0, top, std::max(1.0f, item.x1 - item.x0), height);
    if (sectionHasMeasured(item.first.section) && !morphing()) {
      // The prediction under a measurement: a pale fill and an outline in the kind's color, so
      // the measured bar inside reads as "what happened" against "what was planned".
      QColor fill = color;
      fill.setAlphaF(static_cast<float>(alpha * 0.22));
      painter.fillRect(rect, fill);
      if (rect.width() >= 3 && height >= 4) {
        QColor outline = opKindColor(item.kind);
        outline.setAlphaF(static_cast<float>(alpha * 0.9));
        painter.setPen(QPen(outline, 1));
        painter.setBrush(Qt::NoBrush);
        painter.drawRect(rect.adjusted(0.5, 0.5, -0.5, -0.5));
      }
      continue;
    }
    if (playhead_x < item.x1) {
      // Ops after the playhead are still to come: faded, with the running op split at it.
      QColor future = color;
      future.setAlphaF(static_cast<float>(alpha * kFadedAlpha));
      painter.fillRect(rect, future);
      if (playhead_x > item.x0) {
        color.setAlphaF(static_cast<float>(alpha));
        painter.fillRect(QRectF(item.x0, top, playhead_x - item.x0, height), color);
      }
      continue;
    }
    color.setAlphaF(static_cast<float>(alpha));
    if (item.folded() && height >= 4) {
      // Stacked stripes, one per kind, as tall as the kind's share of the run's compute.
      double stripe_top = top;
      for (int kind = 0; kind < kOpKindCount; ++kind) {
        const double share = item.kind_share[static_cast<std::size_t>(kind)];
        if (share <= 0) continue;
        QColor stripe = opKindColor(static_cast<OpKind>(kind));
        stripe.setAlphaF(static_cast<float>(alpha));
        const double stripe_height = share * height;
        painter.fillRect(QRectF(item.x0, stripe_top, rect.width(), stripe_height), stripe);
        stripe_top += stripe_height;
      }
      continue;
    }
    painter.fillRect(rect, color);
    if (labels && !item.folded() && rect.width() >= 14) {
      drawOpLabel(painter, texts_, rect, model_.op(item.first), alpha);
    }
  }
  if (hovered_ && !morphing()) {
    const double top = rowTop(hovered_->row, hovered_->first.section) + 0.5;
    painter.setPen(QPen(palette::path(), 1.5));
    painter.drawRect(
        QRectF(hovered_->x0, top, std::max(1.0f, hovered_->x1 - hovered_->x0), row_height - 1));
  }
}

void TimelineWidget::paintMeasured(QPainter &painter) {
  if (measured_draw_list_.items.empty() || morphing()) return;
  const double row_height = rowHeight();
  // A bar through the middle of the row: tall enough to read, short enough that the ghost's
  // outline above and below still shows where the prediction put the op.
  const double inset = row_height >= 10 ? row_height * 0.22 : 0;
  const double height = std::max(1.0, row_height - 2 - 2 * inset);
  const bool highlighting = highlighted_microbatch_ >= 0;
  const QFontMetrics metrics(painter.font());
  const bool labels = height >= metrics.height() - 3;
  painter.setRenderHint(QPainter::Antialiasing, false);
  for (const DrawItem &item : measured_draw_list_.items) {
    const double top = rowTop(item.row, item.first.section) + 1 + inset;
    if (top + height < kAxisHeight || top > this->height()) continue;
    double alpha = 1;
    if (item.folded()) alpha *= 0.45 + 0.55 * item.busy_share;
    if (highlighting && (item.folded() || item.first.section != highlighted_section_ ||
                         !opTouchesMicrobatch(model_.op(item.first), highlighted_microbatch_)))
      alpha *= kFadedAlpha;
    const QRectF rect(item.x0, top, std::max(1.0f, item.x1 - item.x0), height);
    if (item.folded()) {
      double stripe_top = top;
      for (int kind = 0; kind < kOpKindCount; ++kind) {
        const double share = item.kind_share[static_cast<std::size_t>(kind)];
        if (share <= 0) continue;
        QColor stripe = opKindColor(static_cast<OpKind>(kind)).darker(115);
        stripe.setAlphaF(static_cast<float>(alpha));
        painter.fillRect(QRectF(item.x0, stripe_top, rect.width(), share * height), stripe);
        stripe_top += share * height;
      }
      continue;
    }
    QColor color = opColor(item.kind, item.microbatch).darker(112);
    color.setAlphaF(static_cast<float>(alpha));
    painter.fillRect(rect, color);
    if (rect.width() >= 4 && height >= 5) {
      QColor edge = palette::measuredEdge();
      edge.setAlphaF(static_cast<float>(alpha * 0.55));
      painter.setPen(QPen(edge, 1));
      painter.setBrush(Qt::NoBrush);
      painter.drawRect(rect.adjusted(0.5, 0.5, -0.5, -0.5));
    }
    if (labels && rect.width() >= 14) {
      drawOpLabel(painter, texts_, rect, model_.op(item.first), alpha);
    }
  }
}

void TimelineWidget::paintCriticalPath(QPainter &painter) {
  if (!critical_path_shown_ || morphing()) return;
  const QRectF visible(kHeaderWidth, kAxisHeight, width() - kHeaderWidth, height() - kAxisHeight);
  QColor edge = palette::criticalPath();
  edge.setAlpha(210);
  const QPen outline(palette::criticalPath(), 2);
  const QPen hand_over(edge, 1.6);
  painter.setBrush(Qt::NoBrush);
  for (int section = 0; section < static_cast<int>(model_.sections().size()); ++section) {
    const std::vector<OpLocation> ops = criticalPathOps(section);
    // Each op outlined (axis-aligned: no antialiasing needed), and each hand-over from one op to
    // the next on another rank drawn as a line: the dependency (or transfer) the next op waited
    // for. Only what is on screen is drawn.
    painter.setRenderHint(QPainter::Antialiasing, false);
    painter.setPen(outline);
    for (const auto &location : ops)
      if (const QRectF rect = opRect(location).adjusted(-1, -1, 1, 1); rect.intersects(visible))
        painter.drawRect(rect);
    painter.setRenderHint(QPainter::Antialiasing, true);
    painter.setPen(hand_over);
    for (std::size_t i = 1; i < ops.size(); ++i) {
      if (ops[i].rank == ops[i - 1].rank) continue;
      const QRectF from = opRect(ops[i - 1]);
      const QRectF to = opRect(ops[i]);
      if (!from.united(to).intersects(visible)) continue;
      // Measured ops may overlap their producer a little (CPU spans include waiting, clocks
      // differ): the hand-over is then drawn straight down at the consumer's start.
      painter.drawLine(QPointF(std::min(from.right(), to.left()), from.center().y()),
                       QPointF(to.left(), to.center().y()));
    }
  }
  painter.setRenderHint(QPainter::Antialiasing, false);
}

void TimelineWidget::paintPath(QPainter &painter) {
  if (highlighted_microbatch_ < 0 || morphing()) return;
  painter.setRenderHint(QPainter::Antialiasing, true);
  // Outline every op of the microbatch, then draw its dependency edges as arrows.
  painter.setPen(QPen(palette::path(), 1.5));
  painter.setBrush(Qt::NoBrush);
  for (const auto &location : model_.microbatchOps(highlighted_section_, highlighted_microbatch_))
    painter.drawRect(opRect(location));
  QColor edge_color = palette::path();
  edge_color.setAlpha(200);
  painter.setPen(QPen(edge_color, 1.4));
  for (const auto &edge : highlighted_path_) {
    const QRectF from = opRect(edge.from);
    const QRectF to = opRect(edge.to);
    const QPointF start(from.right(), from.center().y());
    const QPointF end(to.left(), to.center().y());
    painter.drawLine(start, end);
    // A small arrow head at the consumer.
    const QPointF direction = end - start;
    const double length = std::hypot(direction.x(), direction.y());
    if (length < 6) continue;
    const QPointF unit = direction / length;
    const QPointF normal(-unit.y(), unit.x());
    QPolygonF head;
    head << end << end - unit * 6 + normal * 3 << end - unit * 6 - normal * 3;
    painter.setBrush(palette::path());
    painter.drawPolygon(head);
    painter.setBrush(Qt::NoBrush);
  }
  painter.setRenderHint(QPainter::Antialiasing, false);
}

void TimelineWidget::paintAxis(QPainter &painter) {
  painter.fillRect(QRect(0, 0, width(), kAxisHeight), palette::axisBackground());
  painter.setPen(palette::axisLine());
  painter.drawLine(0, kAxisHeight - 1, width(), kAxisHeight - 1);
  QFont font = painter.font();
  font.setPointSizeF(std::min(font.pointSizeF(), 8.5));
  painter.setFont(font);
  const auto ticks = axisTicks(mapping_, 90);
  axis_label_rects_.clear();
  for (const auto &tick : ticks) {
    if (tick.x < kHeaderWidth) continue;
    painter.setPen(palette::minorTick());
    painter.drawLine(QPointF(tick.x, kAxisHeight - 7), QPointF(tick.x, kAxisHeight - 1));
    // A faint grid line through the rows.
    painter.setPen(palette::gridLine());
    painter.drawLine(QPointF(tick.x, kAxisHeight), QPointF(tick.x, height()));
    // A label that would run past the right edge is left out, not cut to its first digits
    // ("1" of "15 µs").
    const double label_width = texts_.width(font, tick.label);
    if (tick.x + 3 + label_width > width()) continue;
    axis_label_rects_.append(QRectF(tick.x + 3, 2, label_width, kAxisHeight - 8));
    painter.setPen(palette::text());
    texts_.draw(painter, QRectF(tick.x + 3, 2, 120, kAxisHeight - 8),
                Qt::AlignLeft | Qt::AlignVCenter, tick.label);
  }
  painter.setPen(palette::rowLabel());
  texts_.draw(painter, QRectF(4, 2, kHeaderWidth - 8, kAxisHeight - 6),
              Qt::AlignLeft | Qt::AlignVCenter, tr("time"));
}

} // namespace pipescope::gui
