#pragma once
// The teaching view: what the chosen schedule does, its bubble and memory formulas with their
// sources, and what each slider changes at the current settings.
#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QTextBrowser>

#include "gui/explorer/explorer_snapshot.h"

class QTimer;

namespace pipescope::gui {

/// The panel's HTML for a snapshot (painter-free, so tests read it directly).
QString explanationHtml(const ExplorerSnapshot &snapshot);

class ExplainPanel : public QTextBrowser {
  Q_OBJECT
public:
  explicit ExplainPanel(QWidget *parent = nullptr);
  /// Shows the snapshot's explanation; while the panel is hidden, when it is next shown (laying
  /// out rich text costs a slider move more than the timeline's whole repaint). During a drag the
  /// text follows at most every minimumUpdateMs(): a newer snapshot waits for the rest of that
  /// interval, and only the latest is laid out. Its text is written on a worker thread (on a
  /// plan of up to kResimulatedOpLimit ops the gap's shares and the "Try it" variants simulate
  /// the plan up to 15 and 3 more times, 10-30 ms), so a drag's frames never wait for it.
  void setSnapshot(const SnapshotPointer &snapshot);
  /// Lays out the latest snapshot now, waiting for its text if a worker is writing it (what a
  /// person sees once a drag rests).
  void flush();
  /// Whether a newer snapshot waits to be laid out (its text being written counts).
  bool hasPending() const { return pending_ != nullptr || writing_.isRunning(); }
  /// Whether a newer snapshot waits for the rest of the interval (not yet being written).
  bool waitsForInterval() const { return pending_ != nullptr; }

  /// 10 explanations a second while the values move: a reader sees them follow, and 5 of 6 moves
  /// of a 60 Hz drag skip the text's layout.
  static constexpr int kMinimumUpdateMs = 100;
  int minimumUpdateMs() const { return minimum_update_ms_; }
  void setMinimumUpdateMs(int ms) { minimum_update_ms_ = ms; }

protected:
  void showEvent(QShowEvent *event) override;

private:
  void applyPending(); ///< the waiting snapshot's text, written here and now
  void startWriting(); ///< the waiting snapshot's text, written on a worker
  void showText(const QString &html, quint64 sequence);
  SnapshotPointer pending_;
  QFutureWatcher<QString> writing_;
  quint64 next_sequence_ = 0;    ///< the number of the latest text started
  quint64 writing_sequence_ = 0; ///< the number of the text the worker writes
  quint64 shown_sequence_ = 0;   ///< the number of the text shown: an older one is dropped
  int minimum_update_ms_ = kMinimumUpdateMs;
  QElapsedTimer since_applied_;
  QTimer *coalesce_ = nullptr;
};

} // namespace pipescope::gui
