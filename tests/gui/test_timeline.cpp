// The painter-free timeline: draw list, folding of sub-pixel ops, hit testing, microbatch paths,
// the layout morph, the SVG export and the cached labels the painted views draw.
#include <QImage>
#include <QPainter>
#include <QtTest>
#include <memory>

#include "engine/evaluation.h"
#include "gui/timeline/svg_export.h"
#include "gui/timeline/text_cache.h"
#include "gui/timeline/timeline_draw_list.h"
#include "gui/timeline/timeline_model.h"

using namespace pipescope;
using namespace pipescope::gui;

namespace {

std::shared_ptr<const Evaluation> evaluated(const std::string &name, int pp, int microbatches,
                                            int chunks = 1) {
  ScheduleRequest request;
  request.name = name;
  request.pp = pp;
  request.microbatches = microbatches;
  request.chunks = chunks;
  auto evaluation = evaluate(request, Costs{});
  if (!evaluation) qFatal("evaluate failed: %s", evaluation.error().message.c_str());
  return std::make_shared<const Evaluation>(std::move(*evaluation));
}

TimelineModel single(std::shared_ptr<const Evaluation> evaluation) {
  return TimelineModel({TimelineSection{QStringLiteral("test"), std::move(evaluation)}});
}

} // namespace

class TestTimeline : public QObject {
  Q_OBJECT
private slots:
  void wideOpsGetOneItemEach() {
    const auto model = single(evaluated("1f1b", 4, 8));
    const TimeMapping mapping(0, model.endTime(), 100, 2000);
    const DrawList list = buildDrawList(model, mapping);
    QCOMPARE(list.itemCount(), model.opCount());
    for (int row = 0; row < model.rowCount(); ++row) {
      const auto &times =
          model.sections()[0].evaluation->simulation.op_times[static_cast<std::size_t>(row)];
      QCOMPARE(list.row_begin[static_cast<std::size_t>(row) + 1] -
                   list.row_begin[static_cast<std::size_t>(row)],
               times.size());
      for (std::size_t i = list.row_begin[static_cast<std::size_t>(row)];
           i < list.row_begin[static_cast<std::size_t>(row) + 1]; ++i) {
        const DrawItem &item = list.items[i];
        QVERIFY(!item.folded());
        QCOMPARE(item.row, static_cast<float>(row));
        QCOMPARE(item.x0,
                 static_cast<float>(mapping.mapTimeToX(model.timing(item.first).start_us)));
        QCOMPARE(item.x1, static_cast<float>(mapping.mapTimeToX(model.timing(item.first).end_us)));
      }
    }
  }

  void hitTestReturnsTheOpUnderThePoint() {
    const auto model = single(evaluated("1f1b", 4, 8));
    const TimeMapping mapping(0, model.endTime(), 0, 1000);
    const DrawList list = buildDrawList(model, mapping);
    for (int rank = 0; rank < 4; ++rank)
      for (int index : {0, 3, 7, 15}) {
        const OpLocation location{0, rank, index};
        const auto &timing = model.timing(location);
        const double x = mapping.mapTimeToX((timing.start_us + timing.end_us) / 2);
        const DrawItem *item = list.itemAt(rank, x, 0);
        QVERIFY(item);
        QCOMPARE(item->first, location);
      }
    // Rank 3 waits for the first forward to arrive: time 0.5 us is bubble there.
    QVERIFY(list.itemAt(3, mapping.mapTimeToX(0.5), 0) == nullptr);
    // Outside the rows, nothing.
    QVERIFY(list.itemAt(7, 10, 2) == nullptr);
  }

  void subPixelOpsFoldAndKeepTheirCount() {
    // 1F1B with P = 8 and M = 2048: 32768 ops in 1000 px, so about 4 ops per pixel per rank.
    const auto model = single(evaluated("1f1b", 8, 2048));
    const TimeMapping mapping(0, model.endTime(), 0, 1000);
    const DrawList list = buildDrawList(model, mapping);
    QVERIFY(list.itemCount() < model.opCount() / 10);
    std::size_t counted = 0;
    for (const DrawItem &item : list.items)
      counted += static_cast<std::size_t>(item.op_count);
    QCOMPARE(counted, model.opCount());
    bool any_folded = false;
    for (const DrawItem &item : list.items) {
      any_folded = any_folded || item.folded();
      QVERIFY(item.busy_share > 0 && item.busy_share <= 1);
    }
    QVERIFY(any_folded);
    // The steady state has no idle time, so a rank's middle is one folded block.
    const DrawItem *middle = list.itemAt(4, 500, 0);
    QVERIFY(middle);
    QVERIFY(middle->folded());
    QVERIFY(middle->op_count > 1000);
  }

  void zoomingInUnfolds() {
    const auto model = single(evaluated("1f1b", 8, 2048));
    const TimeMapping fitted(0, model.endTime(), 0, 1000);
    const TimeMapping zoomed = fitted.zoomedAround(500, 200);
    const DrawList list = buildDrawList(model, zoomed);
    QVERIFY(!list.items.empty());
    for (const DrawItem &item : list.items) {
      QVERIFY(!item.folded());
      // Only ops that overlap the visible window are listed.
      QVERIFY(model.timing(item.first).end_us >= zoomed.viewStart());
      QVERIFY(model.timing(item.first).start_us <= zoomed.viewEnd());
    }
  }

  void rowsOutsideTheViewAreCulled() {
    const auto model = single(evaluated("1f1b", 8, 16));
    DrawListOptions options;
    options.first_row = 2;
    options.last_row = 3;
    const DrawList list = buildDrawList(model, TimeMapping(0, model.endTime(), 0, 1000), options);
    for (const DrawItem &item : list.items)
      QVERIFY(item.row == 2.0f || item.row == 3.0f);
    QCOMPARE(list.row_begin[0], list.row_begin[2]);
    QVERIFY(list.row_begin[4] > list.row_begin[2]);
  }

  void microbatchPathFollowsTheRoute() {
    const auto model = single(evaluated("1f1b", 4, 8));
    const auto ops = model.microbatchOps(0, 3);
    QCOMPARE(ops.size(), std::size_t{8}); // F and B on each of 4 stages
    const auto path = model.microbatchPath(0, 3);
    QCOMPARE(path.size(), std::size_t{7}); // F0>F1>F2>F3>B3>B2>B1>B0
    for (const auto &edge : path) {
      QVERIFY(model.timing(edge.from).end_us <= model.timing(edge.to).start_us + 1e-9);
      QVERIFY(opTouchesMicrobatch(model.op(edge.from), 3));
    }
    // With split backward every I also leads to its W.
    const auto split = single(evaluated("zb-h1", 4, 8));
    QCOMPARE(split.microbatchPath(0, 2).size(), std::size_t{7 + 4});
  }

  void morphStartsAtTheOldLayoutAndEndsAtTheNew() {
    const auto before = single(evaluated("1f1b", 4, 8));
    const auto after = single(evaluated("gpipe", 4, 9));
    const LayoutMorph morph(before, after);
    QVERIFY(morph.active());
    const TimeMapping mapping(0, after.endTime(), 0, 1000);
    const DrawList start = morph.interpolate(after, mapping, 0);
    const DrawList end = morph.interpolate(after, mapping, 1);
    QCOMPARE(start.itemCount(), after.opCount());
    for (std::size_t i = 0; i < end.itemCount(); ++i) {
      const DrawItem &item = end.items[i];
      QCOMPARE(item.x0, static_cast<float>(mapping.mapTimeToX(after.timing(item.first).start_us)));
      const DrawItem &first = start.items[i];
      const Op &op = after.op(first.first);
      if (op.microbatch == 8) {
        QCOMPARE(first.alpha, 0.0f); // new microbatch fades in
      } else {
        QCOMPARE(first.alpha, 1.0f);
        // At t = 0 the op sits where the same op was in the old layout.
        bool found = false;
        for (int rank = 0; rank < 4 && !found; ++rank)
          for (int index = 0; index < 16 && !found; ++index)
            if (before.op({0, rank, index}) == op) {
              found = true;
              QCOMPARE(first.x0, static_cast<float>(
                                     mapping.mapTimeToX(before.timing({0, rank, index}).start_us)));
              QCOMPARE(first.row, static_cast<float>(rank));
            }
        QVERIFY(found);
      }
    }
    QVERIFY(!LayoutMorph(before, after, 10).active()); // too large to animate
    QCOMPARE(easeInOut(0), 0.0);
    QCOMPARE(easeInOut(1), 1.0);
    QCOMPARE(easeInOut(0.5), 0.5);
  }

  void sectionsStackOnOneAxis() {
    const TimelineModel model({TimelineSection{QStringLiteral("a"), evaluated("1f1b", 4, 8)},
                               TimelineSection{QStringLiteral("b"), evaluated("gpipe", 2, 8)}});
    QCOMPARE(model.rowCount(), 6);
    QCOMPARE(model.sectionFirstRow(1), 4);
    QCOMPARE(model.sectionAndRank(5), std::make_pair(1, 1));
    const DrawList list = buildDrawList(model, TimeMapping(0, model.endTime(), 0, 1000));
    QCOMPARE(list.itemCount(), model.opCount());
    QCOMPARE(list.items.back().first.section, 1);
  }

  void colorsSayTheKind() {
    QVERIFY(opKindColor(OpKind::Forward) != opKindColor(OpKind::FullBackward));
    QVERIFY(opColor(OpKind::Forward, 0) != opColor(OpKind::Forward, 1));
    QCOMPARE(opColor(OpKind::Forward, 0), opColor(OpKind::Forward, 4));
    QVERIFY(opKindLegend(OpKind::InputGrad).contains(QStringLiteral("input")));
  }

  void svgHoldsEveryOp() {
    const auto model = single(evaluated("1f1b", 4, 8));
    const QString svg =
        timelineSvg(model, TimeMapping(0, model.endTime(), 0, 1000), QSize(1100, 300));
    QVERIFY(svg.startsWith(QStringLiteral("<?xml")));
    QVERIFY(svg.contains(QStringLiteral("<svg")));
    QCOMPARE(static_cast<std::size_t>(svg.count(QStringLiteral("<title>"))), model.opCount());
    QVERIFY(svg.contains(QStringLiteral("rank 3")));
    QVERIFY(svg.trimmed().endsWith(QStringLiteral("</svg>")));
  }

  // In boxes on whole pixels the cached labels draw what QPainter::drawText draws, pixel for
  // pixel, in every alignment the views use, and clip a label too long for its box as drawText
  // does (at fractional positions the two may round the baseline a pixel apart).
  void cachedLabelsDrawAsDrawTextDoes() {
    struct Case {
      QRectF rect;
      int alignment;
      QString text;
    };
    const Case cases[] = {
        {{4, 2, 80, 20}, Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("1.5 s")},
        {{4, 30, 80, 18}, Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("rank 12")},
        {{0, 60, 120, 16}, Qt::AlignCenter, QStringLiteral("37")},
        {{10, 90, 30, 14}, Qt::AlignCenter, QStringLiteral("a label far wider than its box")},
    };
    TextCache cache;
    for (const Case &label : cases) {
      QImage expected(160, 120, QImage::Format_ARGB32_Premultiplied);
      QImage drawn = expected;
      expected.fill(Qt::white);
      drawn.fill(Qt::white);
      QFont font;
      font.setPointSizeF(8.5);
      {
        QPainter painter(&expected);
        painter.setFont(font);
        painter.drawText(label.rect, label.alignment, label.text);
      }
      for (int repeat = 0; repeat < 2; ++repeat) { // laid out, then from the cache
        drawn.fill(Qt::white);
        QPainter painter(&drawn);
        painter.setFont(font);
        cache.draw(painter, label.rect, label.alignment, label.text);
      }
      QVERIFY2(drawn == expected, qPrintable(label.text));
      QVERIFY(cache.width(font, label.text) > 0);
    }
    QCOMPARE(cache.size(), std::size(cases));
    // Another font is another layout.
    QFont bold;
    bold.setBold(true);
    QVERIFY(cache.width(bold, QStringLiteral("37")) > 0);
    QCOMPARE(cache.size(), std::size(cases) + 1);
  }
};

QTEST_MAIN(TestTimeline)
#include "test_timeline.moc"
