#include "gui/bench/frame_benchmark.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPainter>
#include <QSpinBox>
#include <QTabWidget>
#include <algorithm>
#include <ctime>
#include <vector>

#include "gui/timeline/zoom_stack.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/explain_panel.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/timeline_widget.h"

namespace pipescope::gui {

namespace {

struct Size {
  const char *schedule;
  int pp, microbatches, chunks;
};

// The ladder: the P = 16, M = 128 rows are the ones the 8 ms budget is about (DESIGN.md §9).
const Size kLadder[] = {
    {"1f1b", 4, 8, 1},
    {"1f1b", 8, 32, 1},
    {"1f1b", 16, 128, 1},
    {"interleaved-1f1b", 16, 128, 2},
    {"zb-h1", 16, 128, 1},
    // Every other family at the same size, so the budget holds whichever schedule is dragged.
    {"gpipe", 16, 128, 1},
    {"looped-bfs", 16, 128, 2},
    {"zb-h2", 16, 128, 1},
    {"interleaved-zb", 16, 128, 2},
    {"zb-v", 16, 128, 2},
    {"v-half", 16, 128, 2},
    {"v-min", 16, 128, 2},
    {"dualpipe", 16, 128, 1},
    {"dualpipev", 16, 128, 2},
    {"zb-v", 32, 256, 2},
    {"1f1b", 32, 1024, 1},
    {"interleaved-1f1b", 64, 1024, 4},
    {"interleaved-1f1b", 64, 2048, 4},
};

struct Row {
  Size size{};
  QString tab;             ///< the tab in view under the timeline
  QString model, hardware; ///< the plan's model and hardware presets, empty without a model
  std::size_t ops = 0;
  double frame_ms = 0;    ///< median: the whole slider move, deferred work included
  double deferred_ms = 0; ///< median: of that, the event-loop turn after the repaint
  /// median: processor time of the frame, all threads (wall time less what waiting for the
  /// processor adds on a loaded machine)
  double cpu_ms = 0;
  double simulate_ms = 0; ///< median: schedule + lower + simulate (+ model)
  double paint_ms = 0;    ///< median: painting the fitted timeline alone
  double pan_ms = 0;      ///< median: one frame of panning a timeline zoomed 8x
  /// median: repainting every widget of the window (an expose or resize), apart from any move
  double window_ms = 0;
  std::size_t items = 0; ///< draw items of the fitted timeline
  /// median: writing the Explain tab's text for the plan, the work its worker thread does after
  /// a move while the tab is in view (the gap's shares and "Try it" simulate the plan again)
  double explain_ms = 0;
};

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double milliseconds(const QElapsedTimer &timer) {
  return static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

double renderMs(QWidget *widget, QImage &image) {
  QElapsedTimer timer;
  timer.start();
  QPainter painter(&image);
  widget->render(&painter);
  painter.end();
  return milliseconds(timer);
}

Plan planOfSize(Plan plan, const Size &size) {
  plan.custom.reset();
  plan.request.name = size.schedule;
  plan.request.pp = size.pp;
  plan.request.microbatches = size.microbatches;
  plan.request.chunks = size.chunks;
  plan.request.microbatch_group = 0;
  // The other mesh sizes stay the plan's (DP, TP, CP from the plan options): the ladder is P,
  // M and V.
  plan.mesh.pp = size.pp;
  return plan;
}

/// One slider move of the M spin box to `value`, run to the end as the event loop runs it; returns
/// the milliseconds of its deferred part (the event-loop turn after the repaint). Out of line so a
/// profiler can collect exactly the moves: `valgrind --tool=callgrind --collect-atstart=no
/// --toggle-collect='*moveMicrobatches*' pipescope-gui --bench --bench-schedule v-half ...`.
[[gnu::noinline]] double moveMicrobatches(MainWindow &window, int value) {
  window.controls()->microbatches()->spinBox()->setValue(value);
  window.evaluator()->waitForIdle();
  // Layouts first (Qt posts them), so the paint shows the settled result.
  QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
  QCoreApplication::sendPostedEvents();
  QElapsedTimer after;
  after.start();
  QCoreApplication::processEvents();
  return milliseconds(after);
}

Row measure(MainWindow &window, const Plan &plan, const Size &size) {
  Row row;
  row.size = size;
  if (plan.model) {
    row.model = QString::fromStdString(plan.model->model.name);
    row.hardware = QString::fromStdString(plan.model->hardware.name);
  }
  const int repeats = estimatedOpCount(plan) > 100000 ? 2 : 9;
  std::vector<double> frame, deferred, cpu, simulate, paint, pan, whole;
  window.setPlan(plan);
  window.settle();
  window.repaint();
  for (int repeat = 0; repeat < repeats; ++repeat) {
    // A slider move, as a person makes it: the M spin box changes, the evaluator runs (inline
    // below 100k ops), every view updates, and the posted layouts and the window's update request
    // run as the event loop runs them: Qt repaints the widgets the move marked dirty, not the
    // menus, docks and scroll bars it left alone. Then one more event-loop turn runs whatever the
    // move left queued, so nothing it causes is left out of the figure.
    const int value =
        repeat % 2 == 0 ? size.microbatches + (size.chunks > 1 ? size.pp : 1) : size.microbatches;
    QElapsedTimer timer;
    const std::clock_t cpu_start = std::clock();
    timer.start();
    deferred.push_back(moveMicrobatches(window, value));
    frame.push_back(milliseconds(timer));
    cpu.push_back(static_cast<double>(std::clock() - cpu_start) * 1000.0 / CLOCKS_PER_SEC);
    simulate.push_back(window.snapshot()->compute_ms);
  }
  window.setPlan(plan);
  window.settle();
  for (int repeat = 0; repeat < 5; ++repeat) {
    QElapsedTimer timer;
    timer.start();
    window.repaint();
    whole.push_back(milliseconds(timer));
  }
  TimelineWidget *timeline = window.timeline();
  QImage image(timeline->size(), QImage::Format_ARGB32_Premultiplied);
  timeline->zoomStack()->resetZoom();
  for (int repeat = 0; repeat < 5; ++repeat)
    paint.push_back(renderMs(timeline, image));
  row.items = timeline->drawList().itemCount();
  // Panning a zoomed view: 30 frames of a 40-pixel drag.
  timeline->setMapping(timeline->mapping().zoomedAround(timeline->width() / 2.0, 8));
  for (int repeat = 0; repeat < 30; ++repeat) {
    timeline->setMapping(timeline->mapping().pannedByPixels(repeat < 15 ? -40 : 40));
    pan.push_back(renderMs(timeline, image));
  }
  timeline->zoomStack()->resetZoom();
  // The Explain tab's text, as its worker writes it for this snapshot (3 times: a text costs up
  // to tens of milliseconds).
  std::vector<double> explain;
  for (int repeat = 0; repeat < 3; ++repeat) {
    QElapsedTimer timer;
    timer.start();
    explanationHtml(*window.snapshot());
    explain.push_back(milliseconds(timer));
  }
  row.ops = window.snapshot()->evaluation->schedule.opCount();
  row.frame_ms = median(frame);
  row.deferred_ms = median(deferred);
  row.cpu_ms = median(cpu);
  row.simulate_ms = median(simulate);
  row.paint_ms = median(paint);
  row.pan_ms = median(pan);
  row.window_ms = median(whole);
  row.explain_ms = median(explain);
  return row;
}

void writeTableHeader(QTextStream &out, const Plan &base, const QString &tab) {
  out << "pipescope-gui frame benchmark (offscreen, window 1280x800, medians; " << tab << " tab";
  if (base.model)
    out << "; " << QString::fromStdString(base.model->model.name) << " on "
        << QString::fromStdString(base.model->hardware.name);
  out << ")\n";
  out << QStringLiteral("%1 %2 %3 %4 %5 %6 %7 %8 %9 %10 %11\n")
             .arg(QStringLiteral("schedule P M V"), -30)
             .arg(QStringLiteral("ops"), 9)
             .arg(QStringLiteral("frame ms"), 9)
             .arg(QStringLiteral("deferred"), 9)
             .arg(QStringLiteral("cpu ms"), 7)
             .arg(QStringLiteral("simulate"), 9)
             .arg(QStringLiteral("timeline"), 9)
             .arg(QStringLiteral("pan ms"), 8)
             .arg(QStringLiteral("window"), 7)
             .arg(QStringLiteral("items"), 7)
             .arg(QStringLiteral("explain"), 8);
  out.flush();
}

void writeTableRow(QTextStream &out, const Row &row) {
  out << QStringLiteral("%1 %2 %3 %4 %5 %6 %7 %8 %9 %10 %11\n")
             .arg(QStringLiteral("%1 %2 %3 %4")
                      .arg(QString::fromLatin1(row.size.schedule))
                      .arg(row.size.pp)
                      .arg(row.size.microbatches)
                      .arg(row.size.chunks),
                  -30)
             .arg(static_cast<qulonglong>(row.ops), 9)
             .arg(row.frame_ms, 9, 'f', 2)
             .arg(row.deferred_ms, 9, 'f', 2)
             .arg(row.cpu_ms, 7, 'f', 2)
             .arg(row.simulate_ms, 9, 'f', 2)
             .arg(row.paint_ms, 9, 'f', 2)
             .arg(row.pan_ms, 8, 'f', 2)
             .arg(row.window_ms, 7, 'f', 2)
             .arg(static_cast<qulonglong>(row.items), 7)
             .arg(row.explain_ms, 8, 'f', 2);
  out.flush();
}

QJsonObject jsonRow(const Row &row) {
  return QJsonObject{
      {QStringLiteral("schedule"), QString::fromLatin1(row.size.schedule)},
      {QStringLiteral("tab"), row.tab},
      {QStringLiteral("model"), row.model.isEmpty() ? QJsonValue() : QJsonValue(row.model)},
      {QStringLiteral("hardware"),
       row.hardware.isEmpty() ? QJsonValue() : QJsonValue(row.hardware)},
      {QStringLiteral("pp"), row.size.pp},
      {QStringLiteral("microbatches"), row.size.microbatches},
      {QStringLiteral("virtual_stages"), row.size.chunks},
      {QStringLiteral("ops"), static_cast<qint64>(row.ops)},
      {QStringLiteral("frame_ms"), row.frame_ms},
      {QStringLiteral("deferred_ms"), row.deferred_ms},
      {QStringLiteral("cpu_ms"), row.cpu_ms},
      {QStringLiteral("simulate_ms"), row.simulate_ms},
      {QStringLiteral("timeline_paint_ms"), row.paint_ms},
      {QStringLiteral("pan_ms"), row.pan_ms},
      {QStringLiteral("window_repaint_ms"), row.window_ms},
      {QStringLiteral("explain_text_ms"), row.explain_ms},
  };
}

} // namespace

int runFrameBenchmark(QTextStream &out, const FrameBenchmarkOptions &options) {
  QStringList families;
  for (const Size &size : kLadder)
    if (!families.contains(QLatin1String(size.schedule)))
      families << QString::fromLatin1(size.schedule);
  for (const QString &schedule : options.schedules)
    if (!families.contains(schedule)) {
      QTextStream(stderr) << "pipescope-gui: the benchmark's ladder has no schedule '" << schedule
                          << "'; it has: " << families.join(QStringLiteral(", ")) << '\n';
      return 2;
    }
  MainWindowOptions window_options;
  window_options.use_settings = false;
  window_options.animate = false;
  MainWindow window(window_options);
  window.setCriticalPathShown(options.critical_path);
  window.resize(1280, 800);
  window.show();
  window.settle();
  // Measure the real cost of every size inline; the app itself moves large ones to a worker.
  window.evaluator()->setInlineOpLimit(std::size_t{1} << 30);
  if (!options.tab.isEmpty()) {
    QStringList titles;
    for (int index = 0; index < window.tabs()->count(); ++index) {
      titles << window.tabs()->tabText(index).toLower();
      if (titles.last() == options.tab.toLower()) window.tabs()->setCurrentIndex(index);
    }
    if (!titles.contains(options.tab.toLower())) {
      QTextStream(stderr) << "pipescope-gui: no tab named '" << options.tab
                          << "'; the tabs: " << titles.join(QStringLiteral(", ")) << '\n';
      return 2;
    }
  }
  const QString tab = window.tabs()->tabText(window.tabs()->currentIndex());
  Plan base = window.controls()->plan();
  if (options.base_plan) {
    auto planned = options.base_plan(base);
    if (!planned) {
      QTextStream(stderr) << "pipescope-gui: " << QString::fromStdString(planned.error().message)
                          << '\n';
      return 2;
    }
    if (*planned) base = std::move(**planned);
  }
  if (!options.json) writeTableHeader(out, base, tab);
  QJsonArray rows;
  for (const Size &size : kLadder) {
    const Plan plan = planOfSize(base, size);
    if (estimatedOpCount(plan) > options.largest_ops) continue;
    if (!options.schedules.isEmpty() && !options.schedules.contains(QLatin1String(size.schedule)))
      continue;
    // A model may not split over every size (fewer layers than P x V stages): such a size is
    // left out, as it would time an error message.
    window.setPlan(plan);
    window.settle();
    if (!window.errorMessage().isEmpty()) continue;
    Row row = measure(window, plan, size);
    row.tab = tab;
    if (options.json)
      rows.append(jsonRow(row));
    else
      writeTableRow(out, row);
  }
  if (options.json) {
    out << QJsonDocument(QJsonObject{{QStringLiteral("rows"), rows}}).toJson(QJsonDocument::Compact)
        << '\n';
    return 0;
  }
  out << "frame ms = move the M spin box: simulate, update every view (the memory-over-time view\n"
         "included), run the posted layouts and repaint what the move changed, as the event\n"
         "loop does, then run one more event-loop turn for anything the move queued;\n"
         "deferred = that last turn (part of frame ms); cpu ms = processor time of the frame,\n"
         "all threads (on a loaded machine, frame ms minus the waiting); simulate = schedule +\n"
         "lower + simulate (+ model); timeline = paint the fitted timeline; pan ms = paint one\n"
         "frame while panning a view zoomed 8x; window = repaint every widget of the window (an\n"
         "expose or resize, not part of a move); explain = write the Explain tab's text for the\n"
         "plan, on a worker thread after a move with that tab in view (no frame waits for it).\n"
         "120 Hz is 8.3 ms a frame.\n";
  return 0;
}

} // namespace pipescope::gui
