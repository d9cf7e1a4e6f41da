#include "gui/explorer/explorer_evaluator.h"

#include <QCoreApplication>
#include <QtConcurrent/QtConcurrentRun>

namespace pipescope::gui {

ExplorerEvaluator::ExplorerEvaluator(QObject *parent) : QObject(parent) {
  qRegisterMetaType<pipescope::gui::SnapshotPointer>("pipescope::gui::SnapshotPointer");
  connect(&watcher_, &QFutureWatcher<SnapshotPointer>::finished, this,
          &ExplorerEvaluator::workerFinished);
}

ExplorerEvaluator::~ExplorerEvaluator() {
  watcher_.waitForFinished();
}

void ExplorerEvaluator::request(const Plan &plan) {
  ++generation_;
  if (worker_active_) {
    // The running evaluation is stale; evaluate only the newest request after it.
    pending_ = plan;
    return;
  }
  if (estimatedOpCount(plan) <= inline_op_limit_) {
    pending_.reset();
    emit snapshotReady(computeSnapshot(plan));
    return;
  }
  startWorker(plan);
}

void ExplorerEvaluator::startWorker(const Plan &plan) {
  worker_generation_ = generation_;
  worker_active_ = true;
  emit busyChanged(true);
  watcher_.setFuture(QtConcurrent::run([plan] { return computeSnapshot(plan); }));
}

void ExplorerEvaluator::workerFinished() {
  worker_active_ = false;
  SnapshotPointer snapshot = watcher_.result();
  const bool stale = worker_generation_ != generation_;
  if (!stale) emit snapshotReady(snapshot);
  if (pending_) {
    Plan next = std::move(*pending_);
    pending_.reset();
    if (estimatedOpCount(next) <= inline_op_limit_) {
      emit busyChanged(false);
      emit snapshotReady(computeSnapshot(next));
    } else {
      startWorker(next);
    }
    return;
  }
  emit busyChanged(false);
}

void ExplorerEvaluator::waitForIdle() {
  while (worker_active_ || pending_) {
    watcher_.waitForFinished();
    // Deliver the finished signal (and start any pending request).
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
  }
}

} // namespace pipescope::gui
