#pragma once

#include <QFont>
#include <QHash>
#include <QStaticText>
#include <QString>

class QPainter;
class QRectF;

namespace pipescope::gui {

/// Short plain-text labels (axis ticks, row names, microbatch numbers) laid out once and drawn
/// again from their cached glyphs. QPainter::drawText shapes its string with HarfBuzz on every
/// call; at a slider move's repaint the timeline's and memory view's few dozen labels cost more
/// than all their boxes and lines. QStaticText keeps the shaped layout (Qt's documented use for
/// text drawn repeatedly that rarely changes).
class TextCache {
public:
  /// Draws `text` in the painter's current font and pen, placed in `rect` by `alignment` (the
  /// horizontal and vertical Qt::Alignment flags), as drawText(rect, alignment, text) does (the
  /// same pixels in a box on whole pixels; at a fractional position the baseline may round a
  /// pixel apart); a label wider or taller than `rect` is clipped to it, as drawText clips.
  void draw(QPainter &painter, const QRectF &rect, int alignment, const QString &text);
  /// The width of `text` in `font`, from the same cache.
  double width(const QFont &font, const QString &text);

  std::size_t size() const { return static_cast<std::size_t>(count_); }

private:
  QStaticText &prepared(const QFont &font, const QString &text);

  QHash<QString, QHash<QString, QStaticText>> texts_; ///< by font key, then text
  QFont last_font_;                                   ///< the font of the last lookup
  QHash<QString, QStaticText> *last_texts_ = nullptr; ///< its labels (QFont::key() allocates)
  qsizetype count_ = 0;
  /// Past this many labels the cache starts again, so zooming through many tick labels keeps
  /// it small; a repaint draws far fewer.
  static constexpr qsizetype kMaxEntries = 2048;
};

} // namespace pipescope::gui
