#pragma once
// The teaching view: what the chosen schedule does, its bubble and memory formulas with their
// sources, and what each slider changes at the current settings.
#include <QTextBrowser>

#include "gui/explorer/explorer_snapshot.h"

namespace pipescope::gui {

/// The panel's HTML for a snapshot (painter-free, so tests read it directly).
QString explanationHtml(const ExplorerSnapshot &snapshot);

class ExplainPanel : public QTextBrowser {
  Q_OBJECT
public:
  explicit ExplainPanel(QWidget *parent = nullptr);
  /// Shows the snapshot's explanation; while the panel is hidden, when it is next shown (laying
  /// out rich text costs a slider move more than the timeline's whole repaint).
  void setSnapshot(const SnapshotPointer &snapshot);

protected:
  void showEvent(QShowEvent *event) override;

private:
  void applyPending();
  SnapshotPointer pending_;
};

} // namespace pipescope::gui
