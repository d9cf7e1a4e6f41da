#include "gui/timeline/zoom_stack.h"

#include <QAction>

namespace pipescope::gui {

namespace {

// Wheel steps closer together than this are one gesture: one history entry, one zoomBack.
constexpr int kGesturePauseMs = 600;
constexpr std::size_t kMaxHistory = 50;

QAction *makeAction(QObject *parent, const QString &text, const QString &keys, const QString &tip) {
  auto *action = new QAction(text, parent);
  action->setShortcut(QKeySequence(keys));
  action->setShortcutContext(Qt::WindowShortcut);
  action->setToolTip(tip);
  return action;
}

} // namespace

ZoomStack::ZoomStack(QObject *parent) : QObject(parent) {
  zoom_in_ = makeAction(this, tr("Zoom &in"), QStringLiteral("Ctrl+="),
                        tr("Zoom in (Ctrl+=); the wheel zooms around the cursor"));
  zoom_out_ = makeAction(this, tr("Zoom &out"), QStringLiteral("Ctrl+-"), tr("Zoom out (Ctrl+-)"));
  reset_zoom_ = makeAction(this, tr("&Fit the step"), QStringLiteral("Ctrl+0"),
                           tr("Show the whole step (Ctrl+0, or double-click the timeline)"));
  zoom_back_ = makeAction(this, tr("Zoom &back"), QStringLiteral("Alt+Left"),
                          tr("Back to the view before the last zoom (Alt+Left)"));
  connect(zoom_in_, &QAction::triggered, this, &ZoomStack::zoomIn);
  connect(zoom_out_, &QAction::triggered, this, &ZoomStack::zoomOut);
  connect(reset_zoom_, &QAction::triggered, this, &ZoomStack::resetZoom);
  connect(zoom_back_, &QAction::triggered, this, &ZoomStack::zoomBack);
}

void ZoomStack::setFullRange(double start_us, double end_us) {
  const TimeMapping next = mapping_.isFitted()
                               ? TimeMapping(start_us, end_us, mapping_.xLeft(), mapping_.widthPx())
                               : mapping_.withFullRange(start_us, end_us);
  for (auto &view : history_)
    view = view.withFullRange(start_us, end_us);
  mapping_ = next;
  // Always said: a new step is a new picture even when its window is the same.
  emit zoomChanged(mapping_);
}

void ZoomStack::setMapping(const TimeMapping &mapping) {
  show(mapping);
}

void ZoomStack::zoomTo(const TimeMapping &mapping) {
  remember();
  show(mapping);
}

void ZoomStack::zoomIn() {
  zoomTo(mapping_.zoomedAround(mapping_.xLeft() + mapping_.widthPx() / 2, kZoomStep));
}

void ZoomStack::zoomOut() {
  zoomTo(mapping_.zoomedAround(mapping_.xLeft() + mapping_.widthPx() / 2, 1 / kZoomStep));
}

void ZoomStack::resetZoom() {
  if (!mapping_.isFitted()) {
    last_zoom_.invalidate();
    remember();
  }
  show(mapping_.fitted());
}

void ZoomStack::zoomBack() {
  if (history_.empty()) return;
  const TimeMapping previous = history_.back();
  history_.pop_back();
  last_zoom_.invalidate();
  show(previous.withPixelSpan(mapping_.xLeft(), mapping_.widthPx()));
}

void ZoomStack::remember() {
  if (!last_zoom_.isValid() || last_zoom_.elapsed() > kGesturePauseMs) {
    history_.push_back(mapping_);
    if (history_.size() > kMaxHistory) history_.erase(history_.begin());
  }
  last_zoom_.start();
}

void ZoomStack::show(const TimeMapping &mapping) {
  if (mapping == mapping_) return;
  mapping_ = mapping;
  emit zoomChanged(mapping_);
}

} // namespace pipescope::gui
