#include "gui/timeline/text_cache.h"

#include <QPainter>
#include <QRectF>

namespace pipescope::gui {

QStaticText &TextCache::prepared(const QFont &font, const QString &text) {
  if (!last_texts_ || font != last_font_) {
    last_font_ = font;
    last_texts_ = &texts_[font.key()];
  }
  auto found = last_texts_->find(text);
  if (found != last_texts_->end()) return *found;
  if (count_ >= kMaxEntries) {
    for (auto &labels : texts_)
      labels.clear();
    count_ = 0;
  }
  QStaticText label(text);
  label.setTextFormat(Qt::PlainText);
  label.prepare(QTransform(), font);
  ++count_;
  return *last_texts_->insert(text, label);
}

double TextCache::width(const QFont &font, const QString &text) {
  return prepared(font, text).size().width();
}

void TextCache::draw(QPainter &painter, const QRectF &rect, int alignment, const QString &text) {
  const QStaticText &label = prepared(painter.font(), text);
  const QSizeF size = label.size();
  double x = rect.left();
  if (alignment & Qt::AlignRight)
    x = rect.right() - size.width();
  else if (alignment & Qt::AlignHCenter)
    x = rect.left() + (rect.width() - size.width()) / 2;
  double y = rect.top();
  if (alignment & Qt::AlignBottom)
    y = rect.bottom() - size.height();
  else if (alignment & Qt::AlignVCenter)
    y = rect.top() + (rect.height() - size.height()) / 2;
  const bool fits = size.width() <= rect.width() && size.height() <= rect.height();
  if (fits) {
    painter.drawStaticText(QPointF(x, y), label);
    return;
  }
  painter.save();
  painter.setClipRect(rect, Qt::IntersectClip);
  painter.drawStaticText(QPointF(x, y), label);
  painter.restore();
}

} // namespace pipescope::gui
