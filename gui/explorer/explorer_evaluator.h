#pragma once
// Evaluates settings into snapshots without blocking the window: small settings inline (so a
// slider move re-simulates and repaints within one frame), large ones on a worker thread. While
// a worker runs, newer requests replace each other and only the latest is evaluated next.
#include <QFutureWatcher>
#include <QObject>
#include <optional>

#include "gui/explorer/explorer_snapshot.h"

namespace pipescope::gui {

class ExplorerEvaluator : public QObject {
  Q_OBJECT
public:
  explicit ExplorerEvaluator(QObject *parent = nullptr);
  ~ExplorerEvaluator() override;

  /// Plans with at most this many ops are evaluated inline.
  void setInlineOpLimit(std::size_t ops) { inline_op_limit_ = ops; }
  std::size_t inlineOpLimit() const { return inline_op_limit_; }

  /// Evaluates the plan; snapshotReady follows (at once when inline).
  void request(const Plan &plan);
  bool busy() const { return worker_active_; }
  /// Blocks until no evaluation is running or pending (tests and the screenshot mode).
  void waitForIdle();

signals:
  void snapshotReady(pipescope::gui::SnapshotPointer snapshot);
  /// A worker evaluation started (true) or the last one finished (false).
  void busyChanged(bool busy);

private:
  void startWorker(const Plan &plan);
  void workerFinished();

  QFutureWatcher<SnapshotPointer> watcher_;
  std::optional<Plan> pending_;
  /// From starting a worker until its finished signal is handled. The watcher stops running
  /// before that queued signal arrives, so isRunning() alone would drop results.
  bool worker_active_ = false;
  std::size_t inline_op_limit_ = 100000;
  quint64 generation_ = 0;        ///< bumped on every request
  quint64 worker_generation_ = 0; ///< the request the running worker answers
};

} // namespace pipescope::gui
