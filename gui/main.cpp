// pipescope-gui: the explorer. `--screenshot FILE [--plan FILE] [--measured TRACE]` renders the
// window after loading and exits (headless use and tests; with `--run TARGET` it waits for the run
// first); `--bench` prints frame times for a ladder of sizes. With no display at all, the window is
// rendered to a PNG whose path is printed.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QElapsedTimer>
#include <QImage>
#include <QTextStream>
#include <cmath>
#include <cstdio>

#include "engine/heap.h"
#include "gui/bench/frame_benchmark.h"
#include "gui/widgets/compare_view.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/mesh_widget.h"
#include "gui/widgets/run_panel.h"
#include "gui/widgets/timeline_widget.h"

#include <QTabWidget>

using namespace pipescope;
using namespace pipescope::gui;

namespace {

bool noDisplay() {
  return qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
         qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM");
}

int fail(const QString &message) {
  QTextStream(stderr) << "pipescope-gui: " << message << '\n';
  return 2;
}

} // namespace

int main(int argc, char *argv[]) {
  pipescope::keepHeapWarm(); // slider drags re-simulate; reuse the pages of the last run
  const bool headless = noDisplay();
  // Without a display the explorer still renders: offscreen, to a PNG.
  if (headless) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("pipescope"));
  QApplication::setApplicationName(QStringLiteral("pipescope-gui"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

  QCommandLineParser parser;
  parser.setApplicationDescription(
      QStringLiteral("pipescope: explore pipeline-parallel training schedules"));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption screenshot({QStringLiteral("screenshot")},
                                      QStringLiteral("Render the window to FILE and exit."),
                                      QStringLiteral("FILE"));
  const QCommandLineOption plan_file({QStringLiteral("plan")},
                                     QStringLiteral("Open this plan instead of the example."),
                                     QStringLiteral("FILE"));
  const QCommandLineOption bench(
      {QStringLiteral("bench")},
      QStringLiteral("Print frame times for a ladder of sizes and exit."));
  const QCommandLineOption json(
      {QStringLiteral("json")},
      QStringLiteral("With --bench, print the rows as one JSON object {\"rows\": [...]}."));
  const QCommandLineOption schedule({QStringLiteral("schedule")},
                                    QStringLiteral("Schedule family to show."),
                                    QStringLiteral("NAME"));
  const QCommandLineOption pp({QStringLiteral("pp")}, QStringLiteral("P, pipeline ranks."),
                              QStringLiteral("P"));
  const QCommandLineOption microbatches({QStringLiteral("microbatches")},
                                        QStringLiteral("M, microbatches."), QStringLiteral("M"));
  const QCommandLineOption chunks({QStringLiteral("chunks")}, QStringLiteral("V, chunks per rank."),
                                  QStringLiteral("V"));
  const QCommandLineOption dp({QStringLiteral("dp")}, QStringLiteral("DP replicas."),
                              QStringLiteral("DP"));
  const QCommandLineOption tp({QStringLiteral("tp")}, QStringLiteral("TP size."),
                              QStringLiteral("TP"));
  const QCommandLineOption model({QStringLiteral("model")},
                                 QStringLiteral("Model preset (with --hardware)."),
                                 QStringLiteral("NAME"));
  const QCommandLineOption hardware({QStringLiteral("hardware")},
                                    QStringLiteral("Hardware preset."), QStringLiteral("NAME"));
  const QCommandLineOption tab(
      {QStringLiteral("tab")},
      QStringLiteral("Bottom tab to show: memory, mesh, explain, compare, run."),
      QStringLiteral("NAME"));
  const QCommandLineOption highlight({QStringLiteral("highlight")},
                                     QStringLiteral("Highlight this microbatch's path."),
                                     QStringLiteral("M"));
  const QCommandLineOption playhead(
      {QStringLiteral("playhead")},
      QStringLiteral("Put the playhead at this fraction of the step."), QStringLiteral("FRACTION"));
  const QCommandLineOption zoom(
      {QStringLiteral("zoom")},
      QStringLiteral("Zoom the timeline by this factor around its center."),
      QStringLiteral("FACTOR"));
  const QCommandLineOption hover_gpu({QStringLiteral("hover-gpu")},
                                     QStringLiteral("Show this GPU as hovered in the mesh view."),
                                     QStringLiteral("RANK"));
  const QCommandLineOption measured(
      {QStringLiteral("measured")},
      QStringLiteral("Import this measured trace and draw it over the prediction."),
      QStringLiteral("TRACE"));
  const QCommandLineOption overlay(
      {QStringLiteral("overlay")},
      QStringLiteral("How the measurement is drawn: overlay, side, hidden."),
      QStringLiteral("MODE"));
  const QCommandLineOption measured_step(
      {QStringLiteral("measured-step")},
      QStringLiteral("Which measured step to draw (default: the latest)."), QStringLiteral("K"));
  const QCommandLineOption calibrate(
      {QStringLiteral("calibrate")},
      QStringLiteral("Calibrate the costs to the measurement before the screenshot."));
  const QCommandLineOption run(
      {QStringLiteral("run")},
      QStringLiteral("Run the plan on a target (cpu, gpu-shared, local-gpus, slurm, custom); with "
                     "--screenshot, wait for it to end."),
      QStringLiteral("TARGET"));
  const QCommandLineOption size({QStringLiteral("size")},
                                QStringLiteral("Window size for --screenshot, e.g. 1280x800."),
                                QStringLiteral("WxH"));
  const QCommandLineOption bench_max_ops(
      {QStringLiteral("bench-max-ops")},
      QStringLiteral("With --bench, skip the sizes with more than OPS ops."),
      QStringLiteral("OPS"));
  parser.addOptions({json, bench_max_ops});
  parser.addOptions({screenshot,    plan_file, bench, schedule,  pp,       microbatches,
                     chunks,        dp,        tp,    model,     hardware, tab,
                     highlight,     playhead,  zoom,  hover_gpu, measured, overlay,
                     measured_step, calibrate, run,   size});
  // A plan given alone, as the desktop entry's %f passes a double-clicked file.
  parser.addPositionalArgument(QStringLiteral("plan"), QStringLiteral("A plan file to open."),
                               QStringLiteral("[PLAN]"));
  parser.process(app);
  if (parser.positionalArguments().size() > 1 ||
      (parser.positionalArguments().size() == 1 && parser.isSet(plan_file)))
    return fail(QStringLiteral("give one plan file, either alone or with --plan"));
  const QString plan_path = parser.positionalArguments().isEmpty()
                                ? parser.value(plan_file)
                                : parser.positionalArguments().constFirst();

  if (parser.isSet(bench)) {
    QTextStream out(stdout);
    FrameBenchmarkOptions bench_options;
    bench_options.json = parser.isSet(json);
    if (parser.isSet(bench_max_ops))
      bench_options.largest_ops = parser.value(bench_max_ops).toULongLong();
    return runFrameBenchmark(out, bench_options);
  }

  const bool offscreen = QGuiApplication::platformName() == QStringLiteral("offscreen");
  QString screenshot_path = parser.value(screenshot);
  if (screenshot_path.isEmpty() && offscreen)
    screenshot_path = QDir::temp().filePath(QStringLiteral("pipescope-window.png"));

  MainWindowOptions options;
  // A screenshot is a function of its arguments, not of what was remembered last time.
  options.use_settings = screenshot_path.isEmpty();
  options.animate = screenshot_path.isEmpty();
  MainWindow window(options);
  if (!plan_path.isEmpty() && !window.openPlan(plan_path) && !screenshot_path.isEmpty())
    return fail(window.errorMessage());

  // Command-line settings on top of the plan, as a person would move the sliders.
  Plan plan = window.controls()->plan();
  bool edited = false;
  auto integer = [&](const QCommandLineOption &option, int &target) {
    if (!parser.isSet(option)) return;
    target = parser.value(option).toInt();
    edited = true;
  };
  if (parser.isSet(schedule)) {
    plan.request.name = parser.value(schedule).toStdString();
    plan.custom.reset();
    if (const auto *family = findScheduleFamily(plan.request.name); family && !family->uses_chunks)
      plan.request.chunks = family->placement == PlacementKind::Loop ? 1 : 2;
    edited = true;
  }
  integer(pp, plan.request.pp);
  integer(microbatches, plan.request.microbatches);
  integer(chunks, plan.request.chunks);
  integer(dp, plan.mesh.dp);
  integer(tp, plan.mesh.tp);
  plan.mesh.pp = plan.request.pp;
  if (parser.isSet(model)) {
    ModelSetup setup;
    auto model_spec = loadModelSpec(parser.value(model).toStdString());
    if (!model_spec) return fail(QString::fromStdString(model_spec.error().message));
    setup.model = *model_spec;
    auto hardware_spec = loadHardwareSpec(
        parser.isSet(hardware) ? parser.value(hardware).toStdString() : "h100-sxm");
    if (!hardware_spec) return fail(QString::fromStdString(hardware_spec.error().message));
    setup.hardware = *hardware_spec;
    plan.mesh.gpus_per_node = setup.hardware.gpus_per_node;
    plan.model = setup;
    edited = true;
  }
  if (edited) window.setPlan(plan);

  if (parser.isSet(size)) {
    const QStringList parts = parser.value(size).split(QLatin1Char('x'));
    if (parts.size() == 2) window.resize(parts[0].toInt(), parts[1].toInt());
  }
  const QString tab_name = parser.value(tab).toLower();
  for (int index = 0; index < window.tabs()->count(); ++index)
    if (window.tabs()->tabText(index).toLower() == tab_name) window.tabs()->setCurrentIndex(index);
  window.show();
  window.settle();
  // A plan that loads but cannot be evaluated (a schedule that cannot complete, a model the mesh
  // cannot hold, an impossible figure) is as bad an input as one that does not load: headless,
  // say why and exit 2 rather than save a picture of the error.
  if (parser.isSet(plan_file) && !screenshot_path.isEmpty() && !window.errorMessage().isEmpty())
    return fail(parser.value(plan_file) + QStringLiteral(": ") + window.errorMessage());
  if (parser.isSet(zoom))
    window.timeline()->setMapping(window.timeline()->mapping().zoomedAround(
        window.timeline()->mapping().xLeft() + window.timeline()->mapping().widthPx() / 2,
        parser.value(zoom).toDouble()));
  if (parser.isSet(highlight))
    window.timeline()->setHighlightedMicrobatch(0, parser.value(highlight).toInt());
  if (parser.isSet(playhead) && window.snapshot())
    window.setPlayhead(parser.value(playhead).toDouble() *
                       window.snapshot()->evaluation->simulation.makespan_us);
  if (parser.isSet(hover_gpu)) window.mesh()->setHoveredGpu(parser.value(hover_gpu).toInt());
  if (parser.isSet(measured) && !window.importMeasuredTrace(parser.value(measured)) &&
      !screenshot_path.isEmpty())
    return fail(window.runPanel()->statusText());
  if (parser.isSet(run)) {
    bool known = false;
    for (int index = 0; index < kLaunchTargetCount; ++index)
      if (launchTargetKey(static_cast<LaunchTarget>(index)) == parser.value(run)) {
        window.runPanel()->setTarget(static_cast<LaunchTarget>(index));
        known = true;
      }
    if (!known)
      return fail(QStringLiteral("--run: expected cpu, gpu-shared, local-gpus, slurm or custom"));
    if (!window.runPanel()->startRun() && !screenshot_path.isEmpty())
      return fail(window.runPanel()->statusText());
    if (!screenshot_path.isEmpty()) {
      // Headless: follow the run to its end, then take the picture of what it measured.
      QElapsedTimer waited;
      waited.start();
      while (window.runPanel()->running() && waited.elapsed() < 600000)
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
      window.runPanel()->cancelRun();
      while (window.runPanel()->running())
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
    }
  }
  if (parser.isSet(calibrate) && !window.runPanel()->calibrate() && !screenshot_path.isEmpty())
    return fail(window.runPanel()->statusText());
  window.settle();
  if (parser.isSet(overlay)) {
    const QString mode = parser.value(overlay).toLower();
    window.setOverlayMode(mode.startsWith(QStringLiteral("side")) ? OverlayMode::SideBySide
                          : mode == QStringLiteral("hidden")      ? OverlayMode::Hidden
                                                                  : OverlayMode::Overlay);
  }
  if (parser.isSet(measured_step)) window.setMeasuredStep(parser.value(measured_step).toInt());
  // Importing and running show the Run tab; an explicit --tab has the last word.
  if (parser.isSet(tab))
    for (int index = 0; index < window.tabs()->count(); ++index)
      if (window.tabs()->tabText(index).toLower() == tab_name)
        window.tabs()->setCurrentIndex(index);

  if (!screenshot_path.isEmpty()) {
    const QImage image = window.renderWindow();
    if (image.isNull() || !image.save(screenshot_path))
      return fail(QStringLiteral("could not write %1").arg(screenshot_path));
    QTextStream out(stdout);
    if (headless || !parser.isSet(screenshot))
      out << "pipescope-gui: no display; rendered the window to " << screenshot_path << '\n';
    else
      out << "pipescope-gui: wrote " << screenshot_path << '\n';
    if (!window.errorMessage().isEmpty())
      out << "pipescope-gui: the window shows: " << window.errorMessage() << '\n';
    return 0;
  }
  return app.exec();
}
