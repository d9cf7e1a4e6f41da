// TimeMapping and the axis ticks, row by row (after hotspot's tst_timelinedelegate).
#include <QtTest>

#include "gui/timeline/time_mapping.h"

using namespace pipescope::gui;

class TestTimeMapping : public QObject {
  Q_OBJECT
private slots:
  void mapsTimeToX_data() {
    QTest::addColumn<double>("time");
    QTest::addColumn<double>("x");
    // Full range 0..100 us over pixels 50..250: 2 px per us.
    QTest::newRow("start") << 0.0 << 50.0;
    QTest::newRow("middle") << 50.0 << 150.0;
    QTest::newRow("end") << 100.0 << 250.0;
    QTest::newRow("before") << -10.0 << 30.0;
    QTest::newRow("fraction") << 12.25 << 74.5;
  }
  void mapsTimeToX() {
    QFETCH(double, time);
    QFETCH(double, x);
    const TimeMapping mapping(0, 100, 50, 200);
    QCOMPARE(mapping.mapTimeToX(time), x);
    QCOMPARE(mapping.mapXToTime(x), time);
    QCOMPARE(mapping.microsecondsPerPixel(), 0.5);
  }

  void zoomKeepsTheAnchorUnderTheCursor_data() {
    QTest::addColumn<double>("x");
    QTest::addColumn<double>("factor");
    QTest::newRow("center in") << 150.0 << 2.0;
    QTest::newRow("left in") << 60.0 << 4.0;
    QTest::newRow("right in") << 240.0 << 3.0;
    QTest::newRow("deep") << 123.0 << 1000.0;
  }
  void zoomKeepsTheAnchorUnderTheCursor() {
    QFETCH(double, x);
    QFETCH(double, factor);
    const TimeMapping mapping(0, 100, 50, 200);
    const double anchor = mapping.mapXToTime(x);
    const TimeMapping zoomed = mapping.zoomedAround(x, factor);
    QVERIFY(qAbs(zoomed.mapXToTime(x) - anchor) < 1e-9);
    QVERIFY(qAbs(zoomed.viewSpan() - 100 / factor) < 1e-9);
    QVERIFY(!zoomed.isFitted());
  }

  void zoomOutStopsAtTheFullRange() {
    const TimeMapping mapping(0, 100, 0, 100);
    const TimeMapping zoomed = mapping.zoomedAround(30, 4).zoomedAround(80, 0.01);
    QCOMPARE(zoomed.viewStart(), 0.0);
    QCOMPARE(zoomed.viewEnd(), 100.0);
    QVERIFY(zoomed.isFitted());
  }

  void zoomInStopsAtTheLimit() {
    const TimeMapping mapping(0, 100, 0, 100);
    const TimeMapping zoomed = mapping.zoomedAround(50, 1e15);
    QVERIFY(zoomed.viewSpan() >= 100 / TimeMapping::kMaxZoomRatio * 0.999);
    QVERIFY(zoomed.viewSpan() > 0);
  }

  void panIsClampedToTheStep() {
    const TimeMapping zoomed = TimeMapping(0, 100, 0, 100).zoomedAround(50, 4); // 37.5..62.5
    const TimeMapping right = zoomed.pannedByPixels(-40);                       // drag left: later
    QCOMPARE(right.viewStart(), 37.5 + 10);
    const TimeMapping far_left = zoomed.pannedByPixels(1e6);
    QCOMPARE(far_left.viewStart(), 0.0);
    QCOMPARE(far_left.viewSpan(), 25.0);
    const TimeMapping far_right = zoomed.pannedByPixels(-1e6);
    QCOMPARE(far_right.viewEnd(), 100.0);
  }

  void newFullRangeKeepsAFittedViewFitted() {
    const TimeMapping fitted(0, 100, 10, 300);
    const TimeMapping longer = fitted.withFullRange(0, 400);
    QVERIFY(longer.isFitted());
    QCOMPARE(longer.viewEnd(), 400.0);
    QCOMPARE(longer.xLeft(), 10.0);
    const TimeMapping zoomed = fitted.showing(20, 30).withFullRange(0, 400);
    QCOMPARE(zoomed.viewStart(), 20.0);
    QCOMPARE(zoomed.viewEnd(), 30.0);
  }

  void ticksHaveNiceStepsAndUnits_data() {
    QTest::addColumn<double>("end");
    QTest::addColumn<QString>("first_label");
    QTest::addColumn<QString>("second_label");
    // 1000 px wide, at least 100 px per tick.
    QTest::newRow("microseconds") << 44.0 << QStringLiteral("0 \u00b5s")
                                  << QStringLiteral("5 \u00b5s");
    QTest::newRow("milliseconds") << 9000.0 << QStringLiteral("0 ms") << QStringLiteral("1 ms");
    QTest::newRow("seconds") << 2.5e6 << QStringLiteral("0.0 s") << QStringLiteral("0.5 s");
    QTest::newRow("sub-microsecond") << 0.5 << QStringLiteral("0 ns") << QStringLiteral("50 ns");
  }
  void ticksHaveNiceStepsAndUnits() {
    QFETCH(double, end);
    QFETCH(QString, first_label);
    QFETCH(QString, second_label);
    const auto ticks = axisTicks(TimeMapping(0, end, 0, 1000), 100);
    QVERIFY(ticks.size() >= 2);
    QCOMPARE(ticks[0].label, first_label);
    QCOMPARE(ticks[1].label, second_label);
    QVERIFY(ticks[1].x - ticks[0].x >= 100 - 1e-9);
    QVERIFY(ticks.size() <= 11);
  }

  void formatsDurations() {
    QCOMPARE(formatDuration(12.5), QStringLiteral("12.50 \u00b5s"));
    QCOMPARE(formatDuration(3200), QStringLiteral("3.200 ms"));
    QCOMPARE(formatDuration(1.05e6), QStringLiteral("1.050 s"));
    QCOMPARE(formatDuration(0.25), QStringLiteral("250.0 ns"));
  }
};

QTEST_APPLESS_MAIN(TestTimeMapping)
#include "test_time_mapping.moc"
