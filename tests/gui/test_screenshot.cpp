// The real executable, headless: --screenshot writes an image of the window that shows what a
// person must see (one row of ops per pipeline rank, the legend, the memory-over-time lines),
// with and without --plan; a bad plan ends with a message and a non-zero exit; --bench --json
// prints rows a script can read.
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "engine/schedule.h"
#include "gui/timeline/palette.h"

using namespace pipescope;
using namespace pipescope::gui;

class TestScreenshot : public QObject {
  Q_OBJECT
private:
  static int run(const QStringList &arguments, QString *output = nullptr) {
    QProcess process;
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    process.setProcessEnvironment(environment);
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(QStringLiteral(PIPESCOPE_GUI_EXECUTABLE), arguments);
    if (!process.waitForFinished(120000)) return -1;
    if (output) *output = QString::fromUtf8(process.readAll());
    return process.exitCode();
  }

  /// Runs `pipescope-gui --bench --json ARGUMENTS` offscreen: its exit code (-1 when it did not
  /// finish in four minutes), its standard output read as JSON into `document`.
  static int benchJson(const QStringList &arguments, QJsonDocument *document,
                       QJsonParseError *error) {
    QProcess process;
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    process.setProcessEnvironment(environment);
    process.start(QStringLiteral(PIPESCOPE_GUI_EXECUTABLE),
                  QStringList{QStringLiteral("--bench"), QStringLiteral("--json")} + arguments);
    if (!process.waitForFinished(240000)) return -1;
    *document = QJsonDocument::fromJson(process.readAllStandardOutput(), error);
    return process.exitCode();
  }

  /// The colours ops of `kinds` are painted in (every microbatch shade).
  static QSet<QRgb> opColors(std::initializer_list<OpKind> kinds) {
    QSet<QRgb> colors;
    for (OpKind kind : kinds)
      for (int microbatch = 0; microbatch < 4; ++microbatch)
        colors.insert(opColor(kind, microbatch).rgb());
    return colors;
  }

  /// Horizontal bands of the image's upper part (above the tabs) where at least `min_pixels` of
  /// a scan line have one of `colors`: the timeline's rows of ops.
  static QList<QPair<int, int>> rowBands(const QImage &image, const QSet<QRgb> &colors,
                                         int min_pixels) {
    QList<QPair<int, int>> bands;
    int start = -1;
    for (int y = 0; y < image.height() * 6 / 10; ++y) {
      int count = 0;
      for (int x = 0; x < image.width(); ++x)
        count += colors.contains(image.pixel(x, y) | 0xff000000u) ? 1 : 0;
      if (count >= min_pixels && start < 0) start = y;
      if (count < min_pixels && start >= 0) {
        bands.append({start, y});
        start = -1;
      }
    }
    return bands;
  }

  static int countPixels(const QImage &image, const QRect &area, QRgb color) {
    int count = 0;
    for (int y = std::max(0, area.top()); y <= std::min(image.height() - 1, area.bottom()); ++y)
      for (int x = std::max(0, area.left()); x <= std::min(image.width() - 1, area.right()); ++x)
        count += (image.pixel(x, y) | 0xff000000u) == color ? 1 : 0;
    return count;
  }

  /// What a person must see in a window of a `ranks`-rank schedule of F and B ops: a row of ops
  /// per rank, of equal height, under the legend's F and B swatches, and below them the
  /// memory-over-time view's line per rank.
  static void checkWindow(const QImage &image, int ranks, std::initializer_list<OpKind> kinds) {
    const auto bands = rowBands(image, opColors(kinds), 100);
    QCOMPARE(bands.size(), ranks);
    for (const auto &band : bands)
      QVERIFY2(std::abs((band.second - band.first) - (bands[0].second - bands[0].first)) <= 2,
               "the ranks' rows have different heights");
    const QRect legend(0, 0, image.width(), bands[0].first);
    for (OpKind kind : kinds)
      QVERIFY2(countPixels(image, legend, opKindColor(kind).rgb()) >= 50,
               "the legend above the rows lacks a kind's swatch");
    const QRect lower(image.width() / 2, image.height() * 6 / 10, image.width() / 2,
                      image.height() * 4 / 10);
    for (int rank = 0; rank < ranks; ++rank)
      QVERIFY2(countPixels(image, lower, palette::rankSeries(rank, ranks).rgb()) >= 40,
               qPrintable(QStringLiteral("no memory-over-time line of rank %1").arg(rank)));
  }

private slots:
  void runsASearchBeforeTheScreenshot() {
    QTemporaryDir directory;
    const QString path = directory.filePath(QStringLiteral("search.png"));
    QString output;
    QCOMPARE(run({QStringLiteral("--model"), QStringLiteral("llama3-8b"),
                  QStringLiteral("--hardware"), QStringLiteral("h100-sxm"), QStringLiteral("--tab"),
                  QStringLiteral("search"), QStringLiteral("--search-gpus"), QStringLiteral("16"),
                  QStringLiteral("--search-schedules"), QStringLiteral("1f1b"),
                  QStringLiteral("--search-load"), QStringLiteral("1"),
                  QStringLiteral("--screenshot"), path},
                 &output),
             0);
    QImage image(path);
    QVERIFY2(!image.isNull(), qPrintable(output));
    // The search finished before the picture: the Search tab's chart shows 1F1B's points.
    int family = 0;
    while (scheduleFamilies()[static_cast<std::size_t>(family)].name != "1f1b")
      ++family;
    const QRect lower(0, image.height() * 4 / 10, image.width(), image.height() * 6 / 10);
    QVERIFY(countPixels(image, lower, palette::scheduleSeries(family).rgb()) >= 100);
    // An unknown schedule is refused with a message, exit 2.
    QCOMPARE(run({QStringLiteral("--search-gpus"), QStringLiteral("16"),
                  QStringLiteral("--search-schedules"), QStringLiteral("nope"),
                  QStringLiteral("--screenshot"), path},
                 &output),
             2);
    QVERIFY(output.contains(QStringLiteral("unknown schedule 'nope'")));
  }

  // --hover-op draws the op's hover into the picture (a tooltip is its own window): a model
  // plan's first op on rank 1, beside the same picture without it; a bad op is refused.
  void drawsTheHoverOfAnOp() {
    QTemporaryDir directory;
    const QStringList model = {QStringLiteral("--model"), QStringLiteral("llama3-8b"),
                               QStringLiteral("--hardware"), QStringLiteral("h100-sxm")};
    const QString plain_path = directory.filePath(QStringLiteral("plain.png"));
    const QString hover_path = directory.filePath(QStringLiteral("hover.png"));
    QString output;
    QCOMPARE(run(model + QStringList{QStringLiteral("--screenshot"), plain_path}, &output), 0);
    QCOMPARE(run(model + QStringList{QStringLiteral("--hover-op"), QStringLiteral("1,0"),
                                     QStringLiteral("--screenshot"), hover_path},
                 &output),
             0);
    const QImage plain(plain_path), hover(hover_path);
    QVERIFY2(!plain.isNull() && !hover.isNull(), qPrintable(output));
    QCOMPARE(hover.size(), plain.size());
    int changed = 0;
    for (int y = 0; y < hover.height(); ++y)
      for (int x = 0; x < hover.width(); ++x)
        changed += hover.pixel(x, y) != plain.pixel(x, y);
    QVERIFY2(changed >= 5000, qPrintable(QString::number(changed))); // a box of several lines
    QCOMPARE(run(model + QStringList{QStringLiteral("--hover-op"), QStringLiteral("9,0"),
                                     QStringLiteral("--screenshot"), hover_path},
                 &output),
             2);
    QVERIFY2(output.contains(QStringLiteral("--hover-op")), qPrintable(output));
  }

  void writesAScreenshotOfTheExample() {
    QTemporaryDir directory;
    const QString path = directory.filePath(QStringLiteral("shot.png"));
    QString output;
    QCOMPARE(run({QStringLiteral("--screenshot"), path}, &output), 0);
    QVERIFY(output.contains(path));
    QImage image(path);
    QVERIFY(!image.isNull());
    QVERIFY(image.width() >= 1280 && image.height() >= 800);
    // The example: 1F1B, P = 4, M = 8.
    checkWindow(image, 4, {OpKind::Forward, OpKind::FullBackward});
  }

  void writesAScreenshotOfAPlanFile() {
    QTemporaryDir directory;
    const QString plan = directory.filePath(QStringLiteral("plan.json"));
    QFile file(plan);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(R"({"format": "pipescope.plan", "version": 1,
      "schedule": {"name": "interleaved-1f1b", "pp": 4, "microbatches": 8, "virtual_stages": 2, "microbatch_group": 0},
      "mesh": {"dp": 1, "tp": 1, "pp": 4, "gpus_per_node": 8, "rank_order": "tp-pp-dp"},
      "costs": {"forward": 1, "backward": 2, "weight": 1, "overlapped": 0, "p2p_latency": 0, "p2p_bandwidth": 0,
                "activation_bytes": 0, "gradient_sync": 0},
      "model": null, "hardware": null, "training": null})");
    file.close();
    const QString path = directory.filePath(QStringLiteral("plan.png"));
    QString output;
    QCOMPARE(run({QStringLiteral("--screenshot"), path, QStringLiteral("--plan"), plan}, &output),
             0);
    QImage image(path);
    QVERIFY2(!image.isNull(), qPrintable(output));
    checkWindow(image, 4, {OpKind::Forward, OpKind::FullBackward});
  }

  // The benchmark's machine-readable form: one object with a row per size, every figure there
  // and positive (timings themselves are the benchmark's business, not a test's); with a model
  // every size derives its costs from it.
  void benchJsonHasEveryField_data() {
    QTest::addColumn<QStringList>("settings");
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("tab");
    QTest::newRow("op times") << QStringList{} << QString() << QStringLiteral("Memory");
    QTest::newRow("compare tab") << QStringList{QStringLiteral("--tab"), QStringLiteral("compare")}
                                 << QString() << QStringLiteral("Compare");
    QTest::newRow("model") << QStringList{QStringLiteral("--model"),
                                          QStringLiteral("llama3-70b"),
                                          QStringLiteral("--hardware"),
                                          QStringLiteral("h100-sxm"),
                                          QStringLiteral("--tp"),
                                          QStringLiteral("8")}
                           << QStringLiteral("llama3-70b") << QStringLiteral("Memory");
  }

  void benchJsonHasEveryField() {
    QFETCH(QStringList, settings);
    QFETCH(QString, model);
    QFETCH(QString, tab);
    QJsonDocument document;
    QJsonParseError error;
    QCOMPARE(
        benchJson(QStringList{QStringLiteral("--bench-max-ops"), QStringLiteral("600")} + settings,
                  &document, &error),
        0);
    QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
    const QJsonArray rows = document.object().value(QStringLiteral("rows")).toArray();
    QCOMPARE(rows.size(), 2); // 1f1b 4 8 (64 ops) and 1f1b 8 32 (512 ops)
    for (const QJsonValue &value : rows) {
      const QJsonObject row = value.toObject();
      QVERIFY(!row.value(QStringLiteral("schedule")).toString().isEmpty());
      for (const char *field : {"pp", "microbatches", "virtual_stages", "ops", "frame_ms",
                                "window_repaint_ms", "explain_text_ms"})
        QVERIFY2(row.value(QLatin1String(field)).toDouble() > 0, field);
      QCOMPARE(row.value(QStringLiteral("model")).toString(), model);
      QCOMPARE(row.value(QStringLiteral("tab")).toString(), tab);
      QCOMPARE(row.value(QStringLiteral("hardware")).isNull(), model.isEmpty());
      QCOMPARE(row.value(QStringLiteral("ops")).toInt(),
               2 * row.value(QStringLiteral("pp")).toInt() *
                   row.value(QStringLiteral("microbatches")).toInt());
    }
  }

  // --bench-schedule times only the sizes of the families named (a profiler collects one of them).
  void benchTimesOnlyTheSchedulesAsked() {
    QJsonDocument document;
    QJsonParseError error;
    QCOMPARE(benchJson({QStringLiteral("--bench-max-ops"), QStringLiteral("7000"),
                        QStringLiteral("--bench-schedule"), QStringLiteral("gpipe,zb-h1")},
                       &document, &error),
             0);
    QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
    const QJsonArray rows = document.object().value(QStringLiteral("rows")).toArray();
    QStringList schedules;
    for (const QJsonValue &row : rows)
      schedules << row.toObject().value(QStringLiteral("schedule")).toString();
    // The ladder's order: zb-h1 16 128 1 (6144 ops), then gpipe 16 128 1 (4096).
    QCOMPARE(schedules, (QStringList{QStringLiteral("zb-h1"), QStringLiteral("gpipe")}));
  }

  // A benchmark asked for an impossible setting says which and exits 2, as the app does.
  void benchRefusesABadSetting_data() {
    QTest::addColumn<QStringList>("settings");
    QTest::addColumn<QString>("named");
    QTest::newRow("model") << QStringList{QStringLiteral("--model"),
                                          QStringLiteral("no-such-model"),
                                          QStringLiteral("--hardware"), QStringLiteral("h100-sxm")}
                           << QStringLiteral("no-such-model");
    QTest::newRow("tab") << QStringList{QStringLiteral("--tab"), QStringLiteral("no-such-tab")}
                         << QStringLiteral("no tab named 'no-such-tab'");
    QTest::newRow("schedule") << QStringList{QStringLiteral("--bench-schedule"),
                                             QStringLiteral("1f1b,no-such-schedule")}
                              << QStringLiteral("has no schedule 'no-such-schedule'");
  }

  void benchRefusesABadSetting() {
    QFETCH(QStringList, settings);
    QFETCH(QString, named);
    QString output;
    QCOMPARE(run(QStringList{QStringLiteral("--bench")} + settings, &output), 2);
    QVERIFY2(output.contains(named), qPrintable(output));
  }

  void refusesABadPlan() {
    QTemporaryDir directory;
    const QString plan = directory.filePath(QStringLiteral("bad.json"));
    QFile file(plan);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("{ not json");
    file.close();
    QString output;
    QVERIFY(run({QStringLiteral("--screenshot"), directory.filePath(QStringLiteral("x.png")),
                 QStringLiteral("--plan"), plan},
                &output) != 0);
    QVERIFY(output.contains(QStringLiteral("pipescope-gui:")));
    QVERIFY(!QFile::exists(directory.filePath(QStringLiteral("x.png"))));
  }

  // Headless, a bad --plan or --measured ends with exit 2 and the reason on stderr (stdout
  // separate), and no picture. Each row: the option, the file's text, what stderr must say.
  void badInputExitsTwo_data() {
    QTest::addColumn<QString>("option");
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<QString>("expected");
    const QByteArray plan_head = R"({"format": "pipescope.plan", "version": 1,
      "schedule": {"name": "1f1b", "pp": 4, "microbatches": 8}, )";
    QTest::newRow("plan: not JSON") << "--plan" << QByteArray("{ not json") << "pipescope-gui:";
    QTest::newRow("plan: tiny bandwidth")
        << "--plan" << plan_head + R"("costs": {"p2p_bandwidth": 1e-300, "activation_bytes": 4e6}})"
        << "/costs/p2p_bandwidth";
    QTest::newRow("plan: huge transfer")
        << "--plan" << plan_head + R"("costs": {"boundary_transfer": [1.7e308, 1.7e308, 1, 1]}})"
        << "/costs/boundary_transfer/0";
    QTest::newRow("plan: short F&B pair")
        << "--plan" << QByteArray(R"({"format": "pipescope.plan", "version": 1,
             "schedule": {"name": "dualpipe", "pp": 4, "microbatches": 8},
             "costs": {"forward": 1, "backward": 2, "overlapped": 1}})")
        << "/costs/overlapped";
    QTest::newRow("plan: schedule that cannot complete")
        << "--plan" << QByteArray(R"({"format": "pipescope.plan", "version": 1,
             "schedule": {"name": "custom", "pp": 2, "microbatches": 1},
             "custom": {"ranks": [["0B0", "0F0"], ["1F0", "1B0"]]}})")
        << "pipescope-gui:";
    QTest::newRow("measured: not JSON") << "--measured" << QByteArray("[1, 2") << "pipescope-gui:";
    QTest::newRow("measured: time factor 0")
        << "--measured"
        << QByteArray(R"({"format": "pipescope.trace", "version": 1, "source": "measured",
             "plan": {"format": "pipescope.plan", "version": 1,
                      "schedule": {"name": "1f1b", "pp": 1, "microbatches": 1}},
             "ops": [], "comms": [],
             "backend": {"workload": {"expected_time_factor": 0}}})")
        << "expected_time_factor";
  }
  void badInputExitsTwo() {
    QFETCH(QString, option);
    QFETCH(QByteArray, text);
    QFETCH(QString, expected);
    QTemporaryDir directory;
    const QString input = directory.filePath(QStringLiteral("input.json"));
    QFile file(input);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(text);
    file.close();
    const QString shot = directory.filePath(QStringLiteral("x.png"));
    QProcess process;
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    process.setProcessEnvironment(environment);
    process.start(QStringLiteral(PIPESCOPE_GUI_EXECUTABLE),
                  {QStringLiteral("--screenshot"), shot, option, input});
    QVERIFY(process.waitForFinished(120000));
    const QString err = QString::fromUtf8(process.readAllStandardError());
    const QString out = QString::fromUtf8(process.readAllStandardOutput());
    const QString describe =
        QStringLiteral("exit %1\nstdout:\n%2\nstderr:\n%3").arg(process.exitCode()).arg(out, err);
    QVERIFY2(process.exitStatus() == QProcess::NormalExit && process.exitCode() == 2,
             qPrintable(describe));
    QVERIFY2(err.contains(QStringLiteral("pipescope-gui: ")) && err.contains(expected),
             qPrintable(describe));
    QVERIFY2(!QFile::exists(shot), qPrintable(describe));
  }
};

QTEST_GUILESS_MAIN(TestScreenshot)
#include "test_screenshot.moc"
