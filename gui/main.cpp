// pipescope-gui: the explorer. `--screenshot FILE [--plan FILE | --published SET/ID] [--measured
// TRACE] [--import PATH...] [--critical-path] [--hover-op R,I]` renders the window after loading
// and exits (headless use and tests; with `--run TARGET` it waits for the run first, with
// `--search-gpus N` for the Search tab's planner); `--bench` prints frame times for a ladder of
// sizes (the plan options, e.g. --model and --hardware, applied to each). With no display at all,
// the window is rendered to a PNG whose path is printed. The plan options (--schedule, --pp,
// --model, ...) are `pipescope simulate`'s, read by the same engine code (engine/plan_options.h),
// with its checks and messages.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QImage>
#include <QLabel>
#include <QPainter>
#include <QSpinBox>
#include <QTabWidget>
#include <QTextDocument>
#include <QTextStream>
#include <QToolTip>
#include <algorithm>
#include <map>
#include <optional>

#include "engine/heap.h"
#include "engine/plan_options.h"
#include "gui/bench/frame_benchmark.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/document_actions.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/mesh_widget.h"
#include "gui/widgets/run_panel.h"
#include "gui/widgets/search_panel.h"
#include "gui/widgets/timeline_widget.h"

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

QCommandLineOption valued(const char *name, const char *help, const char *value_name) {
  return {{QString::fromLatin1(name)}, QString::fromLatin1(help), QString::fromLatin1(value_name)};
}

QCommandLineOption flag(const char *name, const char *help) {
  return {{QString::fromLatin1(name)}, QString::fromLatin1(help)};
}

// The explorer's own options; the plan options are the engine's (planOptions()).
struct Flags {
  QCommandLineOption screenshot =
      valued("screenshot", "Render the window to FILE and exit.", "FILE");
  QCommandLineOption plan = valued("plan", "Open this plan instead of the example.", "FILE");
  QCommandLineOption published =
      valued("published",
             "Open a published run (File > Open published run; `pipescope compare --published all` "
             "lists them) as SET/ID, e.g. megatron-core-h100/gpt-70b, or one of your runs as "
             "RUNS.json/ID (a runs file, as pipescope megatron --add-row writes).",
             "SET/ID");
  QCommandLineOption megatron =
      valued("megatron",
             "Open a Megatron-LM launch or training log as File > Open Megatron-LM launch does, "
             "on the GPUs the file gives (else 8); a log's measured step shows in Metrics.",
             "FILE");
  QCommandLineOption bench =
      flag("bench", "Print frame times for a ladder of sizes and exit (the plan options given, "
                    "e.g. --model and --hardware, apply to every size; --tab picks the tab in "
                    "view).");
  QCommandLineOption bench_json =
      flag("json", "With --bench, print the rows as one JSON object {\"rows\": [...]}.");
  QCommandLineOption bench_max_ops =
      valued("bench-max-ops", "With --bench, skip the sizes with more than OPS ops.", "OPS");
  QCommandLineOption bench_schedule = valued(
      "bench-schedule",
      "With --bench, time only the ladder's sizes of these schedules (comma-separated).", "LIST");
  QCommandLineOption chunks = valued("chunks", "Same as --virtual-stages.", "V");
  QCommandLineOption tab =
      valued("tab", "Bottom tab to show: memory, mesh, explain, compare, run, search.", "NAME");
  QCommandLineOption highlight = valued("highlight", "Highlight this microbatch's path.", "M");
  QCommandLineOption playhead =
      valued("playhead", "Put the playhead at this fraction of the step.", "FRACTION");
  QCommandLineOption zoom =
      valued("zoom", "Zoom the timeline by this factor around its center.", "FACTOR");
  QCommandLineOption hover_op = valued(
      "hover-op", "Show the hover of pipeline rank R's I-th op (from 0) in the screenshot.", "R,I");
  QCommandLineOption hover_gpu =
      valued("hover-gpu", "Show this GPU as hovered in the mesh view.", "RANK");
  QCommandLineOption measured =
      valued("measured", "Import this measured trace and draw it over the prediction.", "TRACE");
  QCommandLineOption overlay =
      valued("overlay", "How the measurement is drawn: overlay, side, hidden.", "MODE");
  QCommandLineOption measured_step =
      valued("measured-step", "Which measured step to draw (default: the latest).", "K");
  QCommandLineOption import_run =
      valued("import",
             "Import a real run (PyTorch profiler traces or Megatron-LM timer dumps: a file or "
             "folder; repeat for several files), show its plan and draw the run over it.",
             "PATH");
  QCommandLineOption critical_path =
      flag("critical-path", "Highlight the critical path on the timeline (with --bench: in every "
                            "frame measured).");
  QCommandLineOption calibrate =
      flag("calibrate", "Calibrate the costs to the measurement before the screenshot.");
  QCommandLineOption run = valued("run",
                                  "Run the plan on a target (cpu, gpu-shared, local-gpus, slurm, "
                                  "custom); with --screenshot, wait for it to end.",
                                  "TARGET");
  QCommandLineOption size = valued("size", "Window size for --screenshot, e.g. 1280x800.", "WxH");
  QCommandLineOption search_gpus =
      valued("search-gpus",
             "Run the Search tab's planner on N GPUs (the model and hardware of the plan); with "
             "--screenshot, wait for it to end.",
             "N");
  QCommandLineOption search_schedules =
      valued("search-schedules", "With --search-gpus, the families to try (default all).", "LIST");
  QCommandLineOption search_global_batch = valued(
      "search-global-batch", "With --search-gpus, sequences per step (default one per GPU).", "B");
  QCommandLineOption search_memory_limit =
      valued("search-memory-limit", "With --search-gpus, GiB per GPU (default the GPU's).", "GIB");
  QCommandLineOption search_top =
      valued("search-top", "With --search-gpus, plans to rank (default 10).", "K");
  QCommandLineOption search_load =
      valued("search-load", "With --search-gpus, load the K-th ranked plan (1 = the best).", "K");
  /// The engine's plan options but --plan, which the explorer opens itself.
  std::map<std::string, QCommandLineOption> plan_options;

  explicit Flags(QCommandLineParser &parser) {
    parser.addOptions({screenshot,
                       plan,
                       published,
                       megatron,
                       bench,
                       bench_json,
                       bench_max_ops,
                       bench_schedule,
                       chunks,
                       tab,
                       highlight,
                       playhead,
                       zoom,
                       hover_gpu,
                       hover_op,
                       measured,
                       import_run,
                       critical_path,
                       overlay,
                       measured_step,
                       calibrate,
                       run,
                       size,
                       search_gpus,
                       search_schedules,
                       search_global_batch,
                       search_memory_limit,
                       search_top,
                       search_load});
    for (const PlanOption &option : planOptions()) {
      if (option.name == std::string_view("plan")) continue;
      const auto added = plan_options.emplace(
          option.name, option.value_name ? valued(option.name, option.help, option.value_name)
                                         : flag(option.name, option.help));
      parser.addOption(added.first->second);
    }
    // A plan given alone, as the desktop entry's %f passes a double-clicked file.
    parser.addPositionalArgument(QStringLiteral("plan"), QStringLiteral("A plan file to open."),
                                 QStringLiteral("[PLAN]"));
  }
};

// The window's plan with the command line's plan options on top, as `pipescope simulate --plan`
// applies them; nullopt when none was given.
Result<std::optional<Plan>> plannedFromFlags(const QCommandLineParser &parser, const Flags &flags,
                                             const Plan &base) {
  OptionValues values;
  for (const auto &[name, option] : flags.plan_options)
    if (parser.isSet(option))
      values.set(name, option.valueName().isEmpty() ? std::string("1")
                                                    : parser.value(option).toStdString());
  if (parser.isSet(flags.chunks)) {
    if (values.has("virtual-stages"))
      return makeError("give V once: --chunks and --virtual-stages are the same option");
    values.set("virtual-stages", parser.value(flags.chunks).toStdString());
  }
  bool any = false;
  for (const auto &[name, option] : flags.plan_options)
    any = any || values.has(name);
  if (!any) return std::optional<Plan>{};
  auto plan = planFromOptions(values, &base);
  if (!plan) return plan.error();
  return std::optional<Plan>{std::move(*plan)};
}

void showTab(MainWindow &window, const QString &name) {
  for (int index = 0; index < window.tabs()->count(); ++index)
    if (window.tabs()->tabText(index).toLower() == name.toLower())
      window.tabs()->setCurrentIndex(index);
}

// The view settings a screenshot asks for: zoom, highlight, playhead, hovered GPU.
void applyViewFlags(MainWindow &window, const QCommandLineParser &parser, const Flags &flags) {
  TimelineWidget *timeline = window.timeline();
  if (parser.isSet(flags.zoom))
    timeline->setMapping(timeline->mapping().zoomedAround(timeline->mapping().xLeft() +
                                                              timeline->mapping().widthPx() / 2,
                                                          parser.value(flags.zoom).toDouble()));
  if (parser.isSet(flags.highlight))
    timeline->setHighlightedMicrobatch(0, parser.value(flags.highlight).toInt());
  if (parser.isSet(flags.playhead) && window.snapshot())
    window.setPlayhead(parser.value(flags.playhead).toDouble() *
                       window.snapshot()->evaluation->simulation.makespan_us);
  if (parser.isSet(flags.critical_path)) window.setCriticalPathShown(true);
  if (parser.isSet(flags.hover_gpu))
    window.mesh()->setHoveredGpu(parser.value(flags.hover_gpu).toInt());
}

// --run TARGET: starts the run; headless (a screenshot to take), follows it to its end.
std::optional<QString> runFromFlags(MainWindow &window, const QCommandLineParser &parser,
                                    const Flags &flags, bool screenshot) {
  bool known = false;
  for (int index = 0; index < kLaunchTargetCount; ++index)
    if (launchTargetKey(static_cast<LaunchTarget>(index)) == parser.value(flags.run)) {
      window.runPanel()->setTarget(static_cast<LaunchTarget>(index));
      known = true;
    }
  if (!known) return QStringLiteral("--run: expected cpu, gpu-shared, local-gpus, slurm or custom");
  if (!window.runPanel()->startRun() && screenshot) return window.runPanel()->statusText();
  if (!screenshot) return std::nullopt;
  QElapsedTimer waited;
  waited.start();
  while (window.runPanel()->running() && waited.elapsed() < 600000)
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
  window.runPanel()->cancelRun();
  while (window.runPanel()->running())
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
  return std::nullopt;
}

// --measured, --run, --calibrate, --overlay, --measured-step: the measurement to show.
std::optional<QString> measurementFromFlags(MainWindow &window, const QCommandLineParser &parser,
                                            const Flags &flags, bool screenshot) {
  if (parser.isSet(flags.measured) && !window.importMeasuredTrace(parser.value(flags.measured)) &&
      screenshot)
    return window.runPanel()->statusText();
  if (parser.isSet(flags.import_run) && !window.importRealRun(parser.values(flags.import_run)) &&
      screenshot)
    return window.runPanel()->statusText();
  if (parser.isSet(flags.run))
    if (auto failure = runFromFlags(window, parser, flags, screenshot)) return failure;
  if (parser.isSet(flags.calibrate) && !window.runPanel()->calibrate() && screenshot)
    return window.runPanel()->statusText();
  window.settle();
  if (parser.isSet(flags.overlay)) {
    const QString mode = parser.value(flags.overlay).toLower();
    window.setOverlayMode(mode.startsWith(QStringLiteral("side")) ? OverlayMode::SideBySide
                          : mode == QStringLiteral("hidden")      ? OverlayMode::Hidden
                                                                  : OverlayMode::Overlay);
  }
  if (parser.isSet(flags.measured_step))
    window.setMeasuredStep(parser.value(flags.measured_step).toInt());
  return std::nullopt;
}

// --search-gpus N and its companions: runs the Search tab's planner from the plan's model and
// hardware; headless, waits for it and loads --search-load's plan.
std::optional<QString> searchFromFlags(MainWindow &window, const QCommandLineParser &parser,
                                       const Flags &flags, bool screenshot) {
  if (!parser.isSet(flags.search_gpus)) return std::nullopt;
  SearchPanel *search = window.search();
  search->takeSettingsFrom(window.controls()->plan());
  bool ok = true;
  const auto integer = [&](const QCommandLineOption &option, int minimum) {
    const int value = parser.value(option).toInt(&ok);
    if (!ok || value < minimum) ok = false;
    return value;
  };
  search->gpusBox()->setValue(integer(flags.search_gpus, 1));
  if (!ok) return QStringLiteral("--search-gpus: expected a GPU count of 1 or more");
  if (parser.isSet(flags.search_global_batch)) {
    search->globalBatchBox()->setValue(integer(flags.search_global_batch, 1));
    if (!ok) return QStringLiteral("--search-global-batch: expected 1 or more sequences");
  }
  if (parser.isSet(flags.search_top)) {
    search->topBox()->setValue(integer(flags.search_top, 1));
    if (!ok) return QStringLiteral("--search-top: expected 1 or more plans");
  }
  if (parser.isSet(flags.search_memory_limit)) {
    const double limit = parser.value(flags.search_memory_limit).toDouble(&ok);
    if (!ok || limit <= 0) return QStringLiteral("--search-memory-limit: expected GiB above 0");
    search->memoryLimitBox()->setValue(limit);
  }
  if (parser.isSet(flags.search_schedules)) {
    std::vector<std::string> names;
    for (const QString &name :
         parser.value(flags.search_schedules).split(QLatin1Char(','), Qt::SkipEmptyParts)) {
      if (!findScheduleFamily(name.trimmed().toStdString()))
        return QStringLiteral("--search-schedules: unknown schedule '%1' (see 'pipescope "
                              "schedules')")
            .arg(name);
      names.push_back(name.trimmed().toStdString());
    }
    search->setSchedules(names);
  }
  window.tabs()->setCurrentWidget(search);
  if (!search->startSearch()) return search->status()->text();
  if (!screenshot) return std::nullopt;
  search->waitForSearch();
  if (!search->result()) return search->status()->text();
  if (parser.isSet(flags.search_load)) {
    const int rank = integer(flags.search_load, 1);
    if (!ok || rank > static_cast<int>(search->result()->plans.size()))
      return QStringLiteral("--search-load: expected a rank from 1 to %1")
          .arg(search->result()->plans.size());
    search->loadShownPlan(rank - 1);
  }
  window.settle();
  return std::nullopt;
}

/// What --hover-op shows: the op's hover text and where the pointer rests, in window pixels.
struct HoverShot {
  QPoint at;
  QString text;
};

std::optional<HoverShot> hoverFromFlags(MainWindow &window, const QCommandLineParser &parser,
                                        const Flags &flags, QString *failure) {
  if (!parser.isSet(flags.hover_op)) return std::nullopt;
  const QStringList parts = parser.value(flags.hover_op).split(QLatin1Char(','));
  bool rank_ok = false, index_ok = false;
  const int rank = parts.size() == 2 ? parts[0].toInt(&rank_ok) : -1;
  const int index = parts.size() == 2 ? parts[1].toInt(&index_ok) : -1;
  const auto &snapshot = window.snapshot();
  const auto &ranks = snapshot && snapshot->evaluation ? snapshot->evaluation->schedule.ranks
                                                       : std::vector<std::vector<Op>>{};
  if (!rank_ok || !index_ok || rank < 0 || index < 0 || rank >= static_cast<int>(ranks.size()) ||
      index >= static_cast<int>(ranks[static_cast<std::size_t>(rank)].size())) {
    *failure = QStringLiteral("--hover-op: expected RANK,INDEX of an op of the schedule shown");
    return std::nullopt;
  }
  TimelineWidget *timeline = window.timeline();
  const QPoint center = timeline->opRect(OpLocation{0, rank, index}).center().toPoint();
  return HoverShot{timeline->mapTo(&window, center), timeline->hoverTextAt(center)};
}

/// Paints a hover as the tooltip would show it: a tooltip is its own window, which grabbing the
/// main window leaves out.
void paintHover(QImage &image, const HoverShot &hover) {
  QTextDocument document;
  document.setDefaultFont(QToolTip::font());
  document.setHtml(hover.text);
  document.setTextWidth(document.idealWidth());
  const QSizeF size = document.size();
  const double width = image.width() / image.devicePixelRatio();
  QPointF at(hover.at.x() + 12, hover.at.y() + 18);
  at.setX(std::max(0.0, std::min(at.x(), width - size.width() - 2)));
  QPainter painter(&image);
  const QPalette palette = QToolTip::palette();
  painter.setPen(palette.color(QPalette::ToolTipText));
  painter.setBrush(palette.color(QPalette::ToolTipBase));
  painter.drawRect(QRectF(at, size).adjusted(-1, -1, 1, 1));
  painter.translate(at);
  document.drawContents(&painter);
}

int saveScreenshot(MainWindow &window, const QString &path, bool said_where,
                   const std::optional<HoverShot> &hover) {
  QImage image = window.renderWindow();
  if (hover && !image.isNull()) paintHover(image, *hover);
  if (image.isNull() || !image.save(path))
    return fail(QStringLiteral("could not write %1").arg(path));
  QTextStream out(stdout);
  if (said_where)
    out << "pipescope-gui: wrote " << path << '\n';
  else
    out << "pipescope-gui: no display; rendered the window to " << path << '\n';
  if (!window.errorMessage().isEmpty())
    out << "pipescope-gui: the window shows: " << window.errorMessage() << '\n';
  return 0;
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
  const Flags flags(parser);
  parser.process(app);
  const QStringList positional = parser.positionalArguments();
  if (positional.size() > 1 || (positional.size() == 1 && parser.isSet(flags.plan)))
    return fail(QStringLiteral("give one plan file, either alone or with --plan"));
  const QString plan_path = positional.isEmpty() ? parser.value(flags.plan) : positional.first();
  if (parser.isSet(flags.bench)) {
    QTextStream out(stdout);
    FrameBenchmarkOptions bench_options;
    bench_options.json = parser.isSet(flags.bench_json);
    bench_options.critical_path = parser.isSet(flags.critical_path);
    if (parser.isSet(flags.bench_max_ops))
      bench_options.largest_ops = parser.value(flags.bench_max_ops).toULongLong();
    bench_options.tab = parser.value(flags.tab);
    if (parser.isSet(flags.bench_schedule))
      bench_options.schedules = parser.value(flags.bench_schedule).split(QLatin1Char(','));
    bench_options.base_plan = [&](const Plan &explorer_plan) {
      return plannedFromFlags(parser, flags, explorer_plan);
    };
    return runFrameBenchmark(out, bench_options);
  }

  QString screenshot_path = parser.value(flags.screenshot);
  if (screenshot_path.isEmpty() && QGuiApplication::platformName() == QStringLiteral("offscreen"))
    screenshot_path = QDir::temp().filePath(QStringLiteral("pipescope-window.png"));
  const bool screenshot = !screenshot_path.isEmpty();
  MainWindowOptions options;
  // A screenshot is a function of its arguments, not of what was remembered last time.
  options.use_settings = options.animate = !screenshot;
  MainWindow window(options);
  if (!plan_path.isEmpty() && parser.isSet(flags.published))
    return fail(QStringLiteral("give a plan file or --published SET/ID, not both"));
  if (!plan_path.isEmpty() && !window.openPlan(plan_path) && screenshot)
    return fail(window.errorMessage());
  if (parser.isSet(flags.published)) {
    auto run = findPublishedRun(parser.value(flags.published).toStdString());
    if (!run) return fail(QString::fromStdString(run.error().message));
    window.openPublishedRun(*run);
  }
  if (parser.isSet(flags.megatron)) {
    const QString launch = parser.value(flags.megatron);
    const int gpus = DocumentActions::launchGpus(launch);
    if (!window.documents()->openMegatronLaunch(launch, gpus > 0 ? gpus : 8) && screenshot)
      return fail(window.errorMessage());
  }
  // Command-line settings on top of the plan, as a person would move the sliders.
  auto planned = plannedFromFlags(parser, flags, window.controls()->plan());
  if (!planned) return fail(QString::fromStdString(planned.error().message));
  if (*planned) window.setPlan(**planned);
  // A hardware file (not a preset) joins the hardware box, as File > Open hardware file adds it,
  // so the box names the file the costs come from.
  if (const auto hardware = flags.plan_options.find("hardware");
      hardware != flags.plan_options.end() && parser.isSet(hardware->second)) {
    const QString value = parser.value(hardware->second);
    if (QFileInfo(value).isFile())
      if (auto added = window.controls()->addHardwareFile(value); !added)
        return fail(QString::fromStdString(added.error().message));
  }

  if (parser.isSet(flags.size)) {
    const QStringList parts = parser.value(flags.size).split(QLatin1Char('x'));
    if (parts.size() == 2) window.resize(parts[0].toInt(), parts[1].toInt());
  }
  showTab(window, parser.value(flags.tab));
  window.show();
  window.settle();
  // A plan that loads but cannot be evaluated (a schedule that cannot complete, a model the mesh
  // cannot hold, an impossible figure) is as bad an input as one that does not load: headless,
  // say why and exit 2 rather than save a picture of the error.
  if (parser.isSet(flags.plan) && screenshot && !window.errorMessage().isEmpty())
    return fail(parser.value(flags.plan) + QStringLiteral(": ") + window.errorMessage());
  applyViewFlags(window, parser, flags);
  if (auto failure = measurementFromFlags(window, parser, flags, screenshot)) return fail(*failure);
  if (auto failure = searchFromFlags(window, parser, flags, screenshot)) return fail(*failure);
  // Importing and running show the Run tab; an explicit --tab has the last word.
  if (parser.isSet(flags.tab)) showTab(window, parser.value(flags.tab));
  QString hover_failure;
  const auto hover = hoverFromFlags(window, parser, flags, &hover_failure);
  if (!hover_failure.isEmpty()) return fail(hover_failure);
  if (screenshot)
    return saveScreenshot(window, screenshot_path, !headless && parser.isSet(flags.screenshot),
                          hover);
  return app.exec();
}
