// The real executable, headless: --screenshot writes a non-empty image of the window, with and
// without --plan, and a bad plan ends with a message and a non-zero exit.
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

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

  static bool hasDetail(const QImage &image) {
    // A real window has many colors; a blank or failed render has one or two.
    QSet<QRgb> colors;
    for (int y = 0; y < image.height(); y += 7)
      for (int x = 0; x < image.width(); x += 7)
        colors.insert(image.pixel(x, y));
    return colors.size() > 20;
  }

private slots:
  void writesAScreenshotOfTheExample() {
    QTemporaryDir directory;
    const QString path = directory.filePath(QStringLiteral("shot.png"));
    QString output;
    QCOMPARE(run({QStringLiteral("--screenshot"), path}, &output), 0);
    QVERIFY(output.contains(path));
    QImage image(path);
    QVERIFY(!image.isNull());
    QVERIFY(image.width() >= 1280 && image.height() >= 800);
    QVERIFY(hasDetail(image));
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
    QVERIFY(hasDetail(image));
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
