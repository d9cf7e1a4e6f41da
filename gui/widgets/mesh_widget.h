#pragma once
// The device mesh as a grid of GPUs grouped by node and colored by pipeline stage, each cell
// naming its pipeline rank (and CP index and expert shard when CP or EP split). Hovering a GPU
// outlines its TP, CP, PP, DP and EP groups and says which link each group uses: the picture of
// why the rank order matters.
#include <QWidget>
#include <optional>

#include "engine/mesh.h"
#include "gui/timeline/palette.h"

namespace pipescope::gui {

class MeshWidget : public QWidget {
  Q_OBJECT
public:
  explicit MeshWidget(QWidget *parent = nullptr);

  void setMesh(const Mesh &mesh);
  const Mesh &mesh() const { return mesh_; }

  /// The GPU (global rank) drawn at a point, or -1.
  int gpuAt(QPoint position) const;
  /// Rectangle of a GPU cell under the current size.
  QRectF gpuRect(int rank) const;
  /// The hover text for a GPU: coordinates, and each group with its ranks and link.
  QString describeGpu(int rank) const;
  /// Shows a GPU as hovered (the mouse does this; tests and screenshots call it directly).
  void setHoveredGpu(int rank);

  /// Above this many GPUs the grid is not drawn cell by cell (it would be unreadable).
  static constexpr int kMaxDrawnGpus = 4096;

signals:
  void hoverTextChanged(const QString &text);

protected:
  void paintEvent(QPaintEvent *event) override;
  void mouseMoveEvent(QMouseEvent *event) override;
  void leaveEvent(QEvent *event) override;

private:
  struct Layout {
    int node_columns = 1;
    int cells_per_row = 1; ///< GPU cells per row inside a node box
    int cell_rows = 1;     ///< rows of cells per node box
    double cell = 10;      ///< cell size in pixels
    double node_width = 0, node_height = 0;
    double gap = 8, padding = 4, title = 14;
    double top = 30; ///< below the legend line
  };
  Layout layout() const;

  Mesh mesh_;
  int hovered_ = -1;
};

} // namespace pipescope::gui
