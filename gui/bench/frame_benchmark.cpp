#include "gui/bench/frame_benchmark.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QPainter>
#include <QSpinBox>
#include <algorithm>
#include <vector>

#include "gui/widgets/controls_panel.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/timeline_widget.h"

namespace pipescope::gui {

namespace {

struct Size {
  const char *schedule;
  int pp, microbatches, chunks;
};

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double renderMs(QWidget *widget, QImage &image) {
  QElapsedTimer timer;
  timer.start();
  QPainter painter(&image);
  widget->render(&painter);
  painter.end();
  return static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

} // namespace

int runFrameBenchmark(QTextStream &out, std::size_t largest_ops) {
  const std::vector<Size> ladder = {
      {"1f1b", 4, 8, 1},
      {"1f1b", 8, 32, 1},
      {"1f1b", 16, 128, 1},
      {"interleaved-1f1b", 16, 128, 2},
      {"zb-h1", 16, 128, 1},
      {"zb-v", 32, 256, 2},
      {"1f1b", 32, 1024, 1},
      {"interleaved-1f1b", 64, 1024, 4},
      {"interleaved-1f1b", 64, 2048, 4},
  };
  MainWindowOptions options;
  options.use_settings = false;
  options.animate = false;
  MainWindow window(options);
  window.resize(1280, 800);
  window.show();
  window.settle();
  // Measure the real cost of every size inline; the app itself moves large ones to a worker.
  window.engine()->setInlineOpLimit(std::size_t{1} << 30);
  out << "pipescope-gui frame benchmark (offscreen, window 1280x800, medians)\n";
  out << QStringLiteral("%1 %2 %3 %4 %5 %6 %7 %8 %9\n")
             .arg(QStringLiteral("schedule P M V"), -30)
             .arg(QStringLiteral("ops"), 9)
             .arg(QStringLiteral("slider ms"), 10)
             .arg(QStringLiteral("update"), 8)
             .arg(QStringLiteral("next"), 7)
             .arg(QStringLiteral("simulate"), 9)
             .arg(QStringLiteral("timeline"), 9)
             .arg(QStringLiteral("pan ms"), 8)
             .arg(QStringLiteral("items"), 7);
  TimelineWidget *timeline = window.timeline();
  QImage window_image(window.size(), QImage::Format_ARGB32_Premultiplied);
  QImage timeline_image(timeline->size(), QImage::Format_ARGB32_Premultiplied);
  for (const Size &size : ladder) {
    Plan plan = window.controls()->plan();
    plan.custom.reset();
    plan.model.reset();
    plan.request.name = size.schedule;
    plan.request.pp = size.pp;
    plan.request.microbatches = size.microbatches;
    plan.request.chunks = size.chunks;
    plan.request.microbatch_group = 0;
    plan.mesh.pp = size.pp;
    plan.mesh.dp = plan.mesh.tp = 1;
    if (estimatedOpCount(plan) > largest_ops) continue;
    const int repeats = estimatedOpCount(plan) > 100000 ? 2 : 7;
    std::vector<double> slider, update, follow_up, simulate, paint, pan;
    window.setPlan(plan);
    window.settle();
    window.repaint();
    for (int repeat = 0; repeat < repeats; ++repeat) {
      // A slider move, as a person makes it: the M spin box changes, the engine evaluates
      // (inline at these sizes), every view updates, and the window repaints synchronously.
      const int value =
          repeat % 2 == 0 ? size.microbatches + (size.chunks > 1 ? size.pp : 1) : size.microbatches;
      QElapsedTimer timer;
      timer.start();
      window.controls()->microbatches()->spinBox()->setValue(value);
      window.engine()->waitForIdle();
      update.push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
      window.repaint();
      slider.push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
      // The next turn of the event loop: the deferred memory-over-time chart and its repaint.
      QElapsedTimer next;
      next.start();
      QCoreApplication::processEvents();
      window.repaint();
      follow_up.push_back(static_cast<double>(next.nsecsElapsed()) / 1e6);
      simulate.push_back(window.snapshot()->compute_ms);
    }
    window.setPlan(plan);
    window.settle();
    timeline->resetZoom();
    for (int frame = 0; frame < 5; ++frame)
      paint.push_back(renderMs(timeline, timeline_image));
    const std::size_t items = timeline->drawList().itemCount();
    // Panning a zoomed view: 30 frames of a 40-pixel drag.
    timeline->setMapping(timeline->mapping().zoomedAround(timeline->width() / 2.0, 8));
    for (int frame = 0; frame < 30; ++frame) {
      timeline->setMapping(timeline->mapping().pannedByPixels(frame < 15 ? -40 : 40));
      pan.push_back(renderMs(timeline, timeline_image));
    }
    const auto &schedule = window.snapshot()->evaluation->schedule;
    out << QStringLiteral("%1 %2 %3 %4 %5 %6 %7 %8 %9\n")
               .arg(QStringLiteral("%1 %2 %3 %4")
                        .arg(QString::fromLatin1(size.schedule))
                        .arg(size.pp)
                        .arg(size.microbatches)
                        .arg(size.chunks),
                    -30)
               .arg(static_cast<qulonglong>(schedule.opCount()), 9)
               .arg(median(slider), 10, 'f', 2)
               .arg(median(update), 8, 'f', 2)
               .arg(median(follow_up), 7, 'f', 2)
               .arg(median(simulate), 9, 'f', 2)
               .arg(median(paint), 9, 'f', 2)
               .arg(median(pan), 8, 'f', 2)
               .arg(static_cast<qulonglong>(items), 7);
    out.flush();
  }
  out << "slider ms = move the M spin box: simulate, update every view, repaint the whole window;\n"
         "update = the same without the repaint; next = the following event-loop turn (the\n"
         "memory-over-time chart, deferred and coalesced, and its repaint);\n"
         "simulate = schedule + lower + simulate (+ model); timeline = paint the fitted timeline;\n"
         "pan ms = paint one frame while panning a view zoomed 8x. One 60 Hz frame is 16.7 ms.\n";
  return 0;
}

} // namespace pipescope::gui
