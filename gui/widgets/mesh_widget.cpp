#include "gui/widgets/mesh_widget.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

namespace pipescope::gui {

MeshWidget::MeshWidget(QWidget *parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(260, 180);
}

void MeshWidget::setMesh(const Mesh &mesh) {
  mesh_ = mesh;
  geometry_.reset();
  if (hovered_ >= mesh_.worldSize()) hovered_ = -1;
  update();
}

MeshWidget::Layout MeshWidget::computeLayout() const {
  Layout result;
  const int world = std::max(1, mesh_.worldSize());
  const int nodes = std::max(1, mesh_.nodeCount());
  const int per_node = std::max(1, std::min(mesh_.gpus_per_node, world));
  result.cells_per_row = std::min(per_node, 8);
  result.cell_rows = (per_node + result.cells_per_row - 1) / result.cells_per_row;
  const double width = std::max(100, this->width() - 8);
  const double height = std::max(60.0, this->height() - result.top - 4);
  // Pick the node column count that gives the largest cells.
  double best_cell = 0;
  for (int columns = 1; columns <= nodes; ++columns) {
    const int rows = (nodes + columns - 1) / columns;
    const double cell_w =
        (width / columns - result.gap - 2 * result.padding) / result.cells_per_row;
    const double cell_h =
        (height / rows - result.gap - 2 * result.padding - result.title) / result.cell_rows;
    const double cell = std::min({cell_w, cell_h, 46.0});
    if (cell > best_cell) {
      best_cell = cell;
      result.node_columns = columns;
    }
  }
  result.cell = std::max(2.0, best_cell);
  result.node_width = result.cells_per_row * result.cell + 2 * result.padding;
  result.node_height = result.cell_rows * result.cell + 2 * result.padding + result.title;
  return result;
}

// Both grids depend only on the mesh and the widget's size; gpuRect and gpuAt ask for them once
// a GPU, so they are computed once a size.
const MeshWidget::Geometry &MeshWidget::geometry() const {
  if (!geometry_ || geometry_size_ != size()) {
    Geometry computed;
    computed.gpus = computeLayout();
    computed.nodes = computeNodeGrid();
    const int world = mesh_.worldSize();
    computed.draws_nodes =
        world > kMaxDrawnGpus || (world > 0 && computed.gpus.cell < kMinGpuCellPx);
    geometry_ = computed;
    geometry_size_ = size();
  }
  return *geometry_;
}

bool MeshWidget::drawsNodes() const {
  return geometry().draws_nodes;
}

MeshWidget::NodeGrid MeshWidget::computeNodeGrid() const {
  NodeGrid grid;
  const int nodes = std::max(1, mesh_.nodeCount());
  const double width = std::max(100, this->width() - 8);
  const double height = std::max(60.0, this->height() - grid.top - 22); // above the legend
  // The column count that gives the largest squares.
  double best = 0;
  for (int columns = 1; columns <= nodes; ++columns) {
    const int rows = (nodes + columns - 1) / columns;
    const double side = std::min(width / columns, height / rows) - grid.gap;
    if (side > best) {
      best = side;
      grid.columns = columns;
    }
  }
  grid.side = std::max(1.0, std::min(best, 46.0));
  grid.gap = grid.side >= 6 ? 2 : 1;
  return grid;
}

QRectF MeshWidget::nodeRect(int node) const {
  const NodeGrid &grid = geometry().nodes;
  const double pitch = grid.side + grid.gap;
  const int row = node / grid.columns, column = node % grid.columns; // whole grid rows
  return QRectF(4 + column * pitch, grid.top + row * pitch, grid.side, grid.side);
}

QRectF MeshWidget::gpuRect(int rank) const {
  if (drawsNodes()) return nodeRect(mesh_.nodeOf(rank));
  const Layout &l = geometry().gpus;
  const int node = mesh_.nodeOf(rank);
  const int local = mesh_.localRankOf(rank);
  // Nodes and GPUs fill whole grid rows: the row is an integer division on purpose.
  const int node_row = node / l.node_columns, gpu_row = local / l.cells_per_row;
  const double node_x = 4 + (node % l.node_columns) * (l.node_width + l.gap);
  const double node_y = l.top + node_row * (l.node_height + l.gap);
  const double x = node_x + l.padding + (local % l.cells_per_row) * l.cell;
  const double y = node_y + l.title + l.padding + gpu_row * l.cell;
  return QRectF(x + 1, y + 1, l.cell - 2, l.cell - 2);
}

int MeshWidget::gpuAt(QPoint position) const {
  const int world = mesh_.worldSize();
  if (drawsNodes()) {
    const NodeGrid &grid = geometry().nodes;
    const double pitch = grid.side + grid.gap;
    if (position.x() < 4 || position.y() < grid.top) return -1;
    const int column = static_cast<int>((position.x() - 4) / pitch);
    const int row = static_cast<int>((position.y() - grid.top) / pitch);
    const int node = row * grid.columns + column;
    if (column >= grid.columns || node >= mesh_.nodeCount() ||
        !nodeRect(node).contains(QPointF(position)))
      return -1;
    return node * mesh_.gpus_per_node;
  }
  for (int rank = 0; rank < world; ++rank)
    if (gpuRect(rank).adjusted(-1, -1, 1, 1).contains(position)) return rank;
  return -1;
}

QString MeshWidget::describeGpu(int rank) const {
  if (rank < 0 || rank >= mesh_.worldSize()) return {};
  const RankCoords coords = mesh_.coordsOf(rank);
  auto group_text = [&](MeshGroup kind, const QString &name) {
    const auto group = mesh_.groupOf(kind, rank);
    QStringList members;
    const std::size_t shown = std::min<std::size_t>(group.size(), 16);
    for (std::size_t i = 0; i < shown; ++i)
      members << QString::number(group[i]);
    if (shown < group.size()) members << QStringLiteral("\u2026 (%1 GPUs)").arg(group.size());
    const bool inside = mesh_.groupInsideNode(kind, rank);
    const QString link = group.size() <= 1 ? tr("no traffic (group of one)")
                         : inside          ? tr("intra-node link (NVLink class)")
                                           : tr("inter-node link (InfiniBand class)");
    return QStringLiteral("<b>%1 group</b> [%2]: %3")
        .arg(name, members.join(QStringLiteral(", ")), link);
  };
  QString text;
  if (drawsNodes()) {
    const int node = mesh_.nodeOf(rank);
    const int first = node * mesh_.gpus_per_node;
    const int last = std::min(mesh_.worldSize(), first + mesh_.gpus_per_node) - 1;
    text += tr("<b>node %1</b>: GPUs %2\u2013%3; its first, for its groups:<br>")
                .arg(node)
                .arg(first)
                .arg(last);
  }
  text += tr("<b>GPU %1</b> &nbsp;node %2, local %3<br>DP replica d=%4, pipeline rank "
             "p=%5, TP index t=%6")
              .arg(rank)
              .arg(mesh_.nodeOf(rank))
              .arg(mesh_.localRankOf(rank))
              .arg(coords.d)
              .arg(coords.p)
              .arg(coords.t);
  if (mesh_.cp > 1)
    text += tr(", CP index c=%1 (sequence chunks %1 and %2 of %3)")
                .arg(coords.c)
                .arg(2 * mesh_.cp - 1 - coords.c)
                .arg(2 * mesh_.cp);
  if (mesh_.ep > 1)
    text += tr(", expert shard e=%1 of %2").arg(mesh_.expertIndexOf(coords)).arg(mesh_.ep);
  text += QStringLiteral("<br>") + group_text(MeshGroup::TP, tr("TP"));
  if (mesh_.cp > 1) text += QStringLiteral("<br>") + group_text(MeshGroup::CP, tr("CP (K/V ring)"));
  text += QStringLiteral("<br>") + group_text(MeshGroup::PP, tr("PP"));
  text += QStringLiteral("<br>") + group_text(MeshGroup::DP, tr("DP"));
  if (mesh_.cp > 1)
    text +=
        QStringLiteral("<br>") + group_text(MeshGroup::DataCP, tr("DP\u00d7CP (dense gradients)"));
  if (mesh_.ep > 1)
    text += QStringLiteral("<br>") + group_text(MeshGroup::EP, tr("EP (all-to-all)")) +
            QStringLiteral("<br>") +
            group_text(MeshGroup::ExpertData, tr("expert-data (expert gradients)"));
  return text;
}

void MeshWidget::setHoveredGpu(int rank) {
  if (rank == hovered_) return;
  hovered_ = rank;
  emit hoverTextChanged(describeGpu(rank));
  update();
}

void MeshWidget::mouseMoveEvent(QMouseEvent *event) {
  const int rank = gpuAt(event->pos());
  const bool changed = rank != hovered_;
  setHoveredGpu(rank);
  if (!changed) return;
  if (rank < 0)
    QToolTip::hideText();
  else
    QToolTip::showText(mapToGlobal(event->pos()), describeGpu(rank), this);
}

void MeshWidget::leaveEvent(QEvent *event) {
  QWidget::leaveEvent(event);
  setHoveredGpu(-1);
}

void MeshWidget::paintEvent(QPaintEvent *) {
  QPainter painter(this);
  painter.fillRect(rect(), palette::background());
  QFont font = painter.font();
  font.setPointSizeF(8.5);
  painter.setFont(font);
  const int world = mesh_.worldSize();
  painter.setPen(palette::text());
  QString dims = tr("DP %1").arg(mesh_.dp);
  if (mesh_.cp > 1) dims += tr(" \u00d7 CP %1").arg(mesh_.cp);
  dims += tr(" \u00d7 TP %1 \u00d7 PP %2").arg(mesh_.tp).arg(mesh_.pp);
  if (mesh_.ep > 1)
    dims += mesh_.expertsFoldTp()
                ? tr(" (EP %1 \u00d7 ETP %2 in TP\u00d7DP\u00d7CP)").arg(mesh_.ep).arg(mesh_.etp)
                : tr(" (EP %1 in DP\u00d7CP)").arg(mesh_.ep);
  const QString how = drawsNodes() ? tr("a square per node, color = pipeline rank")
                                   : tr("color = pipeline rank; hover a GPU for its groups");
  painter.drawText(QRectF(6, 4, width() - 12, 22), Qt::AlignLeft | Qt::AlignVCenter,
                   tr("%1 GPUs = %2, %3 per node, rank order %4 \u2014 %5")
                       .arg(world)
                       .arg(dims)
                       .arg(mesh_.gpus_per_node)
                       .arg(QString::fromStdString(mesh_.orderName()), how));
  if (world <= 0) return;
  if (drawsNodes()) {
    paintNodes(painter);
    paintGroupLegend(painter);
    return;
  }
  const Layout &l = geometry().gpus;
  // The hovered GPU's groups, outlined in one color each.
  std::vector<int> tp_group, pp_group, dp_group, cp_group, ep_group;
  if (hovered_ >= 0) {
    tp_group = mesh_.groupOf(MeshGroup::TP, hovered_);
    pp_group = mesh_.groupOf(MeshGroup::PP, hovered_);
    dp_group = mesh_.groupOf(MeshGroup::DP, hovered_);
    if (mesh_.cp > 1) cp_group = mesh_.groupOf(MeshGroup::CP, hovered_);
    if (mesh_.ep > 1) ep_group = mesh_.groupOf(MeshGroup::EP, hovered_);
  }
  for (int node = 0; node < mesh_.nodeCount(); ++node) {
    const int node_row = node / l.node_columns; // whole grid rows
    const double node_x = 4 + (node % l.node_columns) * (l.node_width + l.gap);
    const double node_y = l.top + node_row * (l.node_height + l.gap);
    painter.setPen(palette::gpuFrame());
    painter.setBrush(palette::nodeFill());
    painter.drawRoundedRect(QRectF(node_x, node_y, l.node_width, l.node_height), 4, 4);
    painter.setPen(palette::rowLabel());
    if (l.node_width > 40)
      painter.drawText(QRectF(node_x + 4, node_y + 1, l.node_width - 8, l.title),
                       Qt::AlignLeft | Qt::AlignVCenter, tr("node %1").arg(node));
  }
  painter.setBrush(Qt::NoBrush);
  for (int rank = 0; rank < world; ++rank) {
    const QRectF cell = gpuRect(rank);
    const RankCoords coords = mesh_.coordsOf(rank);
    QColor color = pipelineStageColor(coords.p, mesh_.pp);
    painter.fillRect(cell, color);
    if (l.cell >= 22) {
      // The pipeline rank, and where the cell sits along CP (its sequence chunks) and EP (the
      // expert shard it holds) when those are split.
      QStringList lines{QStringLiteral("p%1").arg(coords.p)};
      if (mesh_.cp > 1 && l.cell >= 30) lines << QStringLiteral("c%1").arg(coords.c);
      if (mesh_.ep > 1 && l.cell >= 30)
        lines << QStringLiteral("e%1").arg(mesh_.expertIndexOf(coords));
      painter.setPen(palette::gpuText());
      painter.drawText(cell, Qt::AlignCenter, lines.join(QLatin1Char('\n')));
    }
  }
  auto outline = [&](const std::vector<int> &group, const QColor &color, double inset,
                     Qt::PenStyle style = Qt::SolidLine) {
    painter.setPen(QPen(color, 2.2, style));
    for (int member : group)
      painter.drawRect(gpuRect(member).adjusted(inset, inset, -inset, -inset));
  };
  if (hovered_ >= 0) {
    outline(dp_group, palette::dpGroup(), -1);
    outline(pp_group, palette::ppGroup(), 1.5);
    outline(ep_group, palette::epGroup(), 3, Qt::DashLine);
    outline(cp_group, palette::cpGroup(), 5.5);
    outline(tp_group, palette::tpGroup(), 4);
    painter.setPen(QPen(palette::hoveredGpu(), 2));
    painter.drawRect(gpuRect(hovered_));
  }
  paintGroupLegend(painter);
}

void MeshWidget::paintGroupLegend(QPainter &painter) {
  // Legend for the outlines.
  const double legend_y = height() - 16;
  struct Entry {
    const char *name;
    QColor color;
    Qt::PenStyle style;
  };
  std::vector<Entry> entries{{"TP group", palette::tpGroup(), Qt::SolidLine}};
  if (mesh_.cp > 1) entries.push_back({"CP group", palette::cpGroup(), Qt::SolidLine});
  entries.push_back({"PP group", palette::ppGroup(), Qt::SolidLine});
  entries.push_back({"DP group", palette::dpGroup(), Qt::SolidLine});
  if (mesh_.ep > 1) entries.push_back({"EP group", palette::epGroup(), Qt::DashLine});
  double x = width() - 4 - 82.0 * static_cast<double>(entries.size());
  for (const auto &entry : entries) {
    painter.setPen(QPen(entry.color, 2.2, entry.style));
    painter.drawRect(QRectF(x, legend_y + 2, 10, 10));
    painter.setPen(palette::text());
    painter.drawText(QRectF(x + 14, legend_y, 70, 14), Qt::AlignLeft | Qt::AlignVCenter,
                     QString::fromLatin1(entry.name));
    x += 82;
  }
}

void MeshWidget::paintNodes(QPainter &painter) {
  const NodeGrid &grid = geometry().nodes;
  const int per_node = mesh_.gpus_per_node;
  const int world = mesh_.worldSize();
  for (int node = 0; node < mesh_.nodeCount(); ++node) {
    const QRectF square = nodeRect(node);
    // One stripe per run of GPUs on the same pipeline rank, as wide as its share of the node.
    const int first = node * per_node, end = std::min(world, first + per_node);
    int run_start = first;
    for (int rank = first + 1; rank <= end; ++rank) {
      const int stage = mesh_.coordsOf(run_start).p;
      if (rank < end && mesh_.coordsOf(rank).p == stage) continue;
      const double x0 = square.left() + square.width() * (run_start - first) / (end - first);
      const double x1 = square.left() + square.width() * (rank - first) / (end - first);
      painter.fillRect(QRectF(x0, square.top(), x1 - x0, square.height()),
                       pipelineStageColor(stage, mesh_.pp));
      run_start = rank;
    }
  }
  if (hovered_ < 0) return;
  // The nodes each of the hovered GPU's groups reaches, outlined as the GPU view outlines GPUs.
  painter.setBrush(Qt::NoBrush);
  const auto outline = [&](MeshGroup kind, const QColor &color, double inset,
                           Qt::PenStyle style = Qt::SolidLine) {
    std::vector<int> nodes;
    for (int member : mesh_.groupOf(kind, hovered_))
      nodes.push_back(mesh_.nodeOf(member));
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    painter.setPen(QPen(color, grid.side >= 8 ? 2.0 : 1.0, style));
    for (int node : nodes)
      painter.drawRect(nodeRect(node).adjusted(inset, inset, -inset, -inset));
  };
  const double step = grid.side >= 12 ? 1.5 : 0;
  outline(MeshGroup::DP, palette::dpGroup(), -1);
  outline(MeshGroup::PP, palette::ppGroup(), step);
  if (mesh_.ep > 1) outline(MeshGroup::EP, palette::epGroup(), 2 * step, Qt::DashLine);
  if (mesh_.cp > 1) outline(MeshGroup::CP, palette::cpGroup(), 3 * step);
  outline(MeshGroup::TP, palette::tpGroup(), 2.5 * step);
}

} // namespace pipescope::gui
