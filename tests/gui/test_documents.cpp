// The explorer's files, offscreen: a plan saved and opened again is the same plan (and a bad one
// is refused), the timeline exports as PNG, SVG and a Chrome trace, and the settings remember the
// plan.
#include <QFile>
#include <QImage>
#include <QSettings>
#include <QTemporaryDir>
#include <QtTest>

#include "engine/plan_file.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/timeline_widget.h"
#include "tests/gui/window_test_support.h"

using namespace pipescope;
using namespace pipescope::gui;
using namespace pipescope::gui::testing;

class TestDocuments : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() {
    useTestSettings("test_gui_documents");
    QSettings().clear();
  }

  void saveThenOpenRoundTripsAPlan() {
    QTemporaryDir directory;
    QVERIFY(directory.isValid());
    const QString path = directory.filePath(QStringLiteral("plan.json"));
    MainWindow window(quietOptions());
    window.show();
    Plan plan = examplePlan();
    plan.request.name = "zb-h1";
    plan.request.pp = 6;
    plan.request.microbatches = 12;
    plan.mesh.pp = 6;
    plan.mesh.dp = 2;
    plan.costs.forward_us = 1.5;
    window.setPlan(plan);
    window.settle();
    QVERIFY(window.savePlanTo(path));
    window.setPlan(examplePlan());
    window.settle();
    QCOMPARE(window.snapshot()->plan.request.pp, 4);
    QVERIFY(window.openPlan(path));
    window.settle();
    QCOMPARE(planToJson(window.controls()->plan()), planToJson(plan));
    QCOMPARE(window.snapshot()->plan.request.name, std::string("zb-h1"));
    QCOMPARE(window.controls()->pipelineRanks()->value(), 6);
    QCOMPARE(window.controls()->dataParallel()->value(), 2);
    // A bad file is refused with a message, not a crash.
    QFile bad(directory.filePath(QStringLiteral("bad.json")));
    QVERIFY(bad.open(QIODevice::WriteOnly));
    bad.write("{\"format\": \"pipescope.plan\", \"version\": 1, \"schedule\": 5}");
    bad.close();
    QVERIFY(!window.openPlan(bad.fileName()));
    QVERIFY(!window.errorMessage().isEmpty());
  }

  void exportsWriteFiles() {
    QTemporaryDir directory;
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const QString png = directory.filePath(QStringLiteral("timeline.png"));
    QVERIFY(window.exportPng(png));
    QImage image(png);
    QVERIFY(!image.isNull());
    QCOMPARE(image.size(), window.timeline()->size());
    const QString svg = directory.filePath(QStringLiteral("timeline.svg"));
    QVERIFY(window.exportSvg(svg));
    QFile svg_file(svg);
    QVERIFY(svg_file.open(QIODevice::ReadOnly));
    QVERIFY(svg_file.readAll().contains("<svg"));
    const QString trace = directory.filePath(QStringLiteral("trace.json"));
    QVERIFY(window.exportChromeTrace(trace));
    auto text = readTextFile(trace.toStdString());
    QVERIFY(text.ok());
    auto json = parseJsonLimited(*text);
    QVERIFY(json.ok());
    QVERIFY(json->contains("traceEvents"));
  }

  void settingsRememberThePlan() {
    QSettings().clear();
    MainWindowOptions options = quietOptions();
    options.use_settings = true;
    {
      MainWindow window(options);
      window.show();
      Plan plan = examplePlan();
      plan.request.microbatches = 13;
      window.setPlan(plan);
      window.settle();
      window.close();
    }
    MainWindow restored(options);
    restored.settle();
    QCOMPARE(restored.snapshot()->plan.request.microbatches, 13);
    QSettings().clear();
  }
};

QTEST_MAIN(TestDocuments)
#include "test_documents.moc"
