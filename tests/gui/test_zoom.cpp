// The state every time view follows, without a widget: the zoom stack (window, history, actions)
// and the memory-over-time view's numbers (step functions and their per-pixel reduction).
#include <QAction>
#include <QSignalSpy>
#include <QtTest>

#include "gui/timeline/memory_curves.h"
#include "gui/timeline/zoom_stack.h"

using namespace pipescope;
using namespace pipescope::gui;

namespace {
QStringList words(const char *text) {
  return QString::fromLatin1(text).split(QLatin1Char(' '), Qt::SkipEmptyParts);
}
} // namespace

class TestZoom : public QObject {
  Q_OBJECT
private slots:
  // Each row: a sequence of commands on a fitted 0..1000 µs stack, then the window shown and how
  // many views the history holds.
  void commands_data() {
    QTest::addColumn<QStringList>("commands");
    QTest::addColumn<double>("start");
    QTest::addColumn<double>("end");
    QTest::addColumn<int>("history");
    QTest::newRow("zoom in once") << words("in") << 1000.0 / 6 << 5000.0 / 6 << 1;
    QTest::newRow("in, out") << words("in out") << 0.0 << 1000.0 << 1;
    QTest::newRow("in, back") << words("in back") << 0.0 << 1000.0 << 0;
    QTest::newRow("in, reset remembers the zoomed view") << words("in reset") << 0.0 << 1000.0 << 2;
    QTest::newRow("in, reset, back") << words("in reset back") << 1000.0 / 6 << 5000.0 / 6 << 1;
    QTest::newRow("back on an empty history") << words("back") << 0.0 << 1000.0 << 0;
    QTest::newRow("reset when fitted adds nothing") << words("reset") << 0.0 << 1000.0 << 0;
    QTest::newRow("zoomed, then a longer step keeps the window")
        << words("in range:2000") << 1000.0 / 6 << 5000.0 / 6 << 1;
    QTest::newRow("fitted, then a longer step stays fitted")
        << words("range:2000") << 0.0 << 2000.0 << 0;
  }
  void commands() {
    QFETCH(QStringList, commands);
    QFETCH(double, start);
    QFETCH(double, end);
    QFETCH(int, history);
    ZoomStack stack;
    stack.setFullRange(0, 1000);
    stack.setMapping(TimeMapping(0, 1000, 100, 600));
    for (const QString &command : commands) {
      if (command == QLatin1String("in")) stack.zoomInAction()->trigger();
      if (command == QLatin1String("out")) stack.zoomOutAction()->trigger();
      if (command == QLatin1String("reset")) stack.resetZoomAction()->trigger();
      if (command == QLatin1String("back")) stack.zoomBackAction()->trigger();
      if (command.startsWith(QLatin1String("range:")))
        stack.setFullRange(0, command.mid(6).toDouble());
    }
    QVERIFY2(std::abs(stack.mapping().viewStart() - start) < 1e-6,
             qPrintable(QString::number(stack.mapping().viewStart())));
    QVERIFY2(std::abs(stack.mapping().viewEnd() - end) < 1e-6,
             qPrintable(QString::number(stack.mapping().viewEnd())));
    QCOMPARE(static_cast<int>(stack.history().size()), history);
  }

  void everyChangeIsSignalledOnce() {
    ZoomStack stack;
    stack.setFullRange(0, 100);
    QSignalSpy spy(&stack, &ZoomStack::zoomChanged);
    stack.zoomIn();
    stack.setMapping(stack.mapping()); // the same window: nothing to follow
    stack.zoomBack();
    QCOMPARE(spy.count(), 2);
    QVERIFY(spy.last().at(0).value<TimeMapping>().isFitted());
  }

  // Each row: a step function, the window and the columns; the polyline expected.
  void capStepSeries_data() {
    QTest::addColumn<QList<QPointF>>("steps");
    QTest::addColumn<double>("start");
    QTest::addColumn<double>("end");
    QTest::addColumn<int>("bins");
    QTest::addColumn<QList<QPointF>>("expected");
    const QList<QPointF> steps{{0, 0}, {10, 2}, {20, 1}, {30, 0}};
    QTest::newRow("exact, whole step")
        << steps << 0.0 << 40.0 << 100
        << QList<QPointF>{{0, 0}, {10, 0}, {10, 2}, {20, 2}, {20, 1}, {30, 1}, {30, 0}, {40, 0}};
    QTest::newRow("exact, a window opens at the level held")
        << steps << 15.0 << 25.0 << 100 << QList<QPointF>{{15, 2}, {20, 2}, {20, 1}, {25, 1}};
    QTest::newRow("columns keep each one's maximum")
        << steps << 0.0 << 40.0 << 1 << QList<QPointF>{{0, 2}, {40, 2}};
    QTest::newRow("columns in a window")
        << steps << 5.0 << 35.0 << 1 << QList<QPointF>{{5, 2}, {35, 2}};
    QTest::newRow("empty window") << steps << 5.0 << 5.0 << 10 << QList<QPointF>{};
  }
  void capStepSeries() {
    QFETCH(QList<QPointF>, steps);
    QFETCH(double, start);
    QFETCH(double, end);
    QFETCH(int, bins);
    QFETCH(QList<QPointF>, expected);
    const std::vector<QPointF> input(steps.begin(), steps.end());
    const auto output = pipescope::gui::capStepSeries(input, start, end, bins);
    QCOMPARE(QList<QPointF>(output.begin(), output.end()), expected);
  }

  // The memory view's step lines as two-pixel bands: each row a polyline of whole pixels and the
  // rectangles expected (QRect(top-left, bottom-right), both corners inside).
  void stepLineBands_data() {
    QTest::addColumn<QList<QPoint>>("pixels");
    QTest::addColumn<QList<QRect>>("bands");
    QTest::newRow("along, up, along")
        << QList<QPoint>{{0, 10}, {5, 10}, {5, 4}, {9, 4}}
        << QList<QRect>{QRect(QPoint(0, 10), QPoint(6, 11)), QRect(QPoint(5, 4), QPoint(6, 11)),
                        QRect(QPoint(5, 4), QPoint(10, 5))};
    QTest::newRow("a run merged over repeated and collinear points")
        << QList<QPoint>{{0, 3}, {2, 3}, {2, 3}, {4, 3}}
        << QList<QRect>{QRect(QPoint(0, 3), QPoint(5, 4))};
    // A level that dips and comes back inside one pixel column keeps its dip.
    QTest::newRow("a dip in one column")
        << QList<QPoint>{{0, 5}, {3, 5}, {3, 9}, {3, 5}, {6, 5}}
        << QList<QRect>{QRect(QPoint(0, 5), QPoint(4, 6)), QRect(QPoint(3, 5), QPoint(4, 10)),
                        QRect(QPoint(3, 5), QPoint(4, 10)), QRect(QPoint(3, 5), QPoint(7, 6))};
    QTest::newRow("a move in x and y goes along first")
        << QList<QPoint>{{0, 0}, {4, 2}}
        << QList<QRect>{QRect(QPoint(0, 0), QPoint(5, 1)), QRect(QPoint(4, 0), QPoint(5, 3))};
    QTest::newRow("one point") << QList<QPoint>{{7, 7}}
                               << QList<QRect>{QRect(QPoint(7, 7), QPoint(8, 8))};
    QTest::newRow("none") << QList<QPoint>{} << QList<QRect>{};
  }
  void stepLineBands() {
    QFETCH(QList<QPoint>, pixels);
    QFETCH(QList<QRect>, bands);
    const auto output =
        pipescope::gui::stepLineBands(std::vector<QPoint>(pixels.begin(), pixels.end()));
    QCOMPARE(QList<QRect>(output.begin(), output.end()), bands);
  }

  void niceValueSteps_data() {
    QTest::addColumn<double>("maximum");
    QTest::addColumn<double>("step");
    QTest::newRow("4.4 in 5") << 4.4 << 1.0;
    QTest::newRow("44 in 5") << 44.0 << 10.0;
    QTest::newRow("0.3 in 5") << 0.3 << 0.1;
    QTest::newRow("17 in 5") << 17.0 << 5.0;
  }
  void niceValueSteps() {
    QFETCH(double, maximum);
    QFETCH(double, step);
    QCOMPARE(niceValueStep(maximum, 5), step);
  }

  void memoryStepsFollowTheSimulation() {
    Plan plan = examplePlan();
    const SnapshotPointer snapshot = computeSnapshot(plan);
    QVERIFY(snapshot->ok());
    const MemorySteps steps = memoryStepsFor(*snapshot, 2);
    const auto &simulation = snapshot->evaluation->simulation;
    QCOMPARE(steps.total_ranks, static_cast<int>(simulation.memory.size()));
    QCOMPARE(steps.shownRanks(), 2);
    // One point per instant (plus the start at 0), holding the level the simulation reached
    // last at that instant: no zero-width dip where a backward frees as a forward acquires.
    const auto &rank0 = simulation.memory[0];
    std::vector<QPointF> expected{{0, 0}};
    for (const auto &point : rank0) {
      if (expected.size() > 1 && expected.back().x() == point.time_us)
        expected.back().setY(point.inflight_microbatches);
      else
        expected.emplace_back(point.time_us, point.inflight_microbatches);
    }
    QVERIFY(expected.size() < rank0.size() + 1); // the 1F1B example has such instants
    QCOMPARE(steps.ranks[0], expected);
    for (std::size_t i = 2; i < steps.ranks[0].size(); ++i)
      QVERIFY(steps.ranks[0][i].x() > steps.ranks[0][i - 1].x());
    double peak = 0;
    for (const auto &rank : simulation.memory)
      for (const auto &point : rank)
        peak = std::max(peak, point.inflight_microbatches);
    QCOMPARE(steps.peak, peak); // every rank's peak, shown or not
    QVERIFY(!steps.bytes);
  }
};

QTEST_MAIN(TestZoom)
#include "test_zoom.moc"
