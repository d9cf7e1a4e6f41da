#include "gui/timeline/svg_export.h"

#include <algorithm>

#include "gui/timeline/timeline_draw_list.h"

namespace pipescope::gui {

QString timelineSvg(const TimelineModel &model, const TimeMapping &window, QSize size) {
  constexpr double header = 70, axis = 26, title_height = 18;
  const int sections = static_cast<int>(model.sections().size());
  const double titles = sections > 1 ? sections * title_height : 0;
  const double row_height =
      std::clamp((size.height() - axis - titles - 4) / std::max(1, model.rowCount()), 3.0, 30.0);
  const double height = axis + titles + model.rowCount() * row_height + 8;
  const TimeMapping mapping = window.withPixelSpan(header, size.width() - header - 12);
  auto row_top = [&](double row, int section) {
    return axis + 2 + (sections > 1 ? (section + 1) * title_height : 0) + row * row_height;
  };
  QString svg;
  svg += QStringLiteral("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%1\" height=\"%2\" "
                        "viewBox=\"0 0 %1 %2\" "
                        "font-family=\"sans-serif\" font-size=\"10\">\n")
             .arg(size.width())
             .arg(height);
  svg += QStringLiteral("<rect width=\"100%\" height=\"100%\" fill=\"%1\"/>\n")
             .arg(palette::background().name());
  svg += QStringLiteral(
             "<defs><pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\">"
             "<path d=\"M0,6 L6,0\" stroke=\"%1\" stroke-width=\"1\"/></pattern></defs>\n")
             .arg(palette::idleHatch().name());
  // Axis.
  for (const auto &tick : axisTicks(mapping, 90)) {
    svg += QStringLiteral("<line x1=\"%1\" y1=\"%2\" x2=\"%1\" y2=\"%3\" stroke=\"%6\" "
                          "stroke-opacity=\"%7\"/>"
                          "<text x=\"%4\" y=\"16\" fill=\"%8\">%5</text>\n")
               .arg(tick.x, 0, 'f', 1)
               .arg(axis - 6)
               .arg(height)
               .arg(tick.x + 3, 0, 'f', 1)
               .arg(tick.label.toHtmlEscaped())
               .arg(palette::gridLine().name())
               .arg(palette::gridLine().alphaF(), 0, 'f', 3)
               .arg(palette::text().name());
  }
  // Rows: idle hatch behind, then the ops.
  for (int section = 0; section < sections; ++section) {
    const auto &info = model.sections()[static_cast<std::size_t>(section)];
    if (!info.evaluation) continue;
    const int first = model.sectionFirstRow(section);
    if (sections > 1)
      svg += QStringLiteral("<text x=\"6\" y=\"%1\" font-weight=\"bold\" fill=\"%3\">%2</text>\n")
                 .arg(row_top(first, section) - 5, 0, 'f', 1)
                 .arg(info.title.toHtmlEscaped(), palette::sectionTitle().name());
    const double x0 = std::max(header, mapping.mapTimeToX(0));
    const double x1 = std::min<double>(size.width() - 12,
                                       mapping.mapTimeToX(info.evaluation->simulation.makespan_us));
    for (int rank = 0; rank < info.rankCount(); ++rank) {
      const double top = row_top(first + rank, section);
      svg += QStringLiteral(
                 "<text x=\"%1\" y=\"%2\" text-anchor=\"end\" fill=\"%8\">rank %3</text>"
                 "<rect x=\"%4\" y=\"%5\" width=\"%6\" height=\"%7\" fill=\"%9\"/>"
                 "<rect x=\"%4\" y=\"%5\" width=\"%6\" height=\"%7\" fill=\"url(#idle)\"/>\n")
                 .arg(header - 8)
                 .arg(top + row_height / 2 + 3.5, 0, 'f', 1)
                 .arg(rank)
                 .arg(x0, 0, 'f', 1)
                 .arg(top + 1, 0, 'f', 1)
                 .arg(std::max(0.0, x1 - x0), 0, 'f', 1)
                 .arg(std::max(1.0, row_height - 2), 0, 'f', 1)
                 .arg(palette::rowLabel().name(), palette::rowBackground().name());
    }
  }
  const DrawList list = buildDrawList(model, mapping);
  for (const DrawItem &item : list.items) {
    const double top = row_top(item.row, item.first.section) + 1;
    const QColor color =
        item.folded() ? opKindColor(item.kind) : opColor(item.kind, item.microbatch);
    const double opacity = item.folded() ? 0.35 + 0.65 * item.busy_share : 1.0;
    svg += QStringLiteral(
               "<rect x=\"%1\" y=\"%2\" width=\"%3\" height=\"%4\" fill=\"%5\" fill-opacity=\"%6\">"
               "<title>%7</title></rect>")
               .arg(item.x0, 0, 'f', 2)
               .arg(top, 0, 'f', 1)
               .arg(std::max(1.0f, item.x1 - item.x0), 0, 'f', 2)
               .arg(std::max(1.0, row_height - 2), 0, 'f', 1)
               .arg(color.name())
               .arg(opacity, 0, 'f', 2)
               .arg(item.folded()
                        ? QStringLiteral("%1 ops").arg(item.op_count)
                        : QString::fromStdString(formatOp(model.op(item.first))).toHtmlEscaped());
    if (!item.folded() && item.x1 - item.x0 >= 16 && row_height >= 12) {
      svg += QStringLiteral("<text x=\"%1\" y=\"%2\" text-anchor=\"middle\" fill=\"%4\">%3</text>")
                 .arg((item.x0 + item.x1) / 2, 0, 'f', 1)
                 .arg(top + row_height / 2 + 2.5, 0, 'f', 1)
                 .arg(item.microbatch)
                 .arg(palette::opLabel().name());
    }
    svg += QLatin1Char('\n');
  }
  svg += QStringLiteral("</svg>\n");
  return svg;
}

} // namespace pipescope::gui
