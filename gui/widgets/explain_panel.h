#pragma once
// The teaching view: what the chosen schedule does, its bubble and memory formulas with their
// sources, and what each slider changes at the current settings.
#include <QElapsedTimer>
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
  /// interval, and only the latest is laid out.
  void setSnapshot(const SnapshotPointer &snapshot);
  /// Lays out a snapshot still waiting now (what a person sees once a drag rests).
  void flush();
  /// Whether a newer snapshot waits to be laid out.
  bool hasPending() const { return pending_ != nullptr; }

  /// 10 explanations a second while the values move: a reader sees them follow, and 5 of 6 moves
  /// of a 60 Hz drag skip the text's layout.
  static constexpr int kMinimumUpdateMs = 100;
  int minimumUpdateMs() const { return minimum_update_ms_; }
  void setMinimumUpdateMs(int ms) { minimum_update_ms_ = ms; }

protected:
  void showEvent(QShowEvent *event) override;

private:
  void applyPending();
  SnapshotPointer pending_;
  int minimum_update_ms_ = kMinimumUpdateMs;
  QElapsedTimer since_applied_;
  QTimer *coalesce_ = nullptr;
};

} // namespace pipescope::gui
