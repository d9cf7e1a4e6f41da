#pragma once
// The device mesh as a grid of GPUs grouped by node and colored by pipeline stage, each cell
// naming its pipeline rank (and CP index and expert shard when CP or EP split). Hovering a GPU
// outlines its TP, CP, PP, DP and EP groups and says which link each group uses: the picture of
// why the rank order matters. A mesh whose GPUs would be drawn under kMinGpuCellPx is drawn one
// square per node instead, striped by the pipeline ranks its GPUs hold; hovering a node stands
// for its first GPU, and the outlines mark the nodes each of its groups reaches.
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

  /// The GPU (global rank) drawn at a point, or -1; in the node view, the node's first GPU.
  int gpuAt(QPoint position) const;
  /// Rectangle of a GPU cell under the current size; in the node view, its node's square.
  QRectF gpuRect(int rank) const;
  /// Whether the mesh is drawn one square per node (too many GPUs to draw one by one).
  bool drawsNodes() const;
  /// The hover text for a GPU: coordinates, and each group with its ranks and link.
  QString describeGpu(int rank) const;
  /// Shows a GPU as hovered (the mouse does this; tests and screenshots call it directly).
  void setHoveredGpu(int rank);

  /// Smallest GPU cell drawn; below it (or above kMaxDrawnGpus) the view draws nodes.
  static constexpr double kMinGpuCellPx = 8;
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
  Layout computeLayout() const;
  /// The node view's squares: columns, side and gap.
  struct NodeGrid {
    int columns = 1;
    double side = 4, gap = 2, top = 30;
  };
  NodeGrid computeNodeGrid() const;
  struct Geometry {
    Layout gpus;
    NodeGrid nodes;
    bool draws_nodes = false;
  };
  /// The grids at the current size (computed again after a resize or a new mesh).
  const Geometry &geometry() const;
  QRectF nodeRect(int node) const;
  void paintNodes(class QPainter &painter);
  void paintGroupLegend(class QPainter &painter);

  Mesh mesh_;
  int hovered_ = -1;
  mutable std::optional<Geometry> geometry_;
  mutable QSize geometry_size_;
};

} // namespace pipescope::gui
