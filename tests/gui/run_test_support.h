#pragma once
// What the run suites share: the measured trace of a plan under other costs (what a real
// machine would show), the backend's step lines, a fake backend script that streams the
// protocol's lines with pauses and leaves a child behind, and small file, process and table
// helpers.
#include <QFile>
#include <QTableView>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>

#include "engine/plan_file.h"
#include "engine/run_events.h"
#include "engine/trace_file.h"
#include "gui/run/backend_process.h"
#include "gui/widgets/run_panel.h"
#include "tests/write_file.h"

namespace pipescope::gui::testing {

// The example plan (1F1B, P=4, M=8, F=1, B=2, W=1) evaluated as the window does.
inline Evaluation evaluated(const Plan &plan) {
  auto evaluation = evaluatePlan(plan);
  if (!evaluation) qFatal("%s", evaluation.error().message.c_str());
  return std::move(*evaluation);
}

// What a real machine would show: other per-stage times and a transfer latency.
inline Plan otherCosts(Plan plan) {
  plan.costs.stage_overrides = {
      {1.1, 2.3, 1.1}, {1.0, 2.0, 1.0}, {1.25, 2.6, 1.2}, {1.45, 2.9, 1.4}};
  plan.costs.p2p_latency_us = 0.15;
  return plan;
}

// A measured trace of `plan`, simulated under other costs: `steps` identical steps one after the
// other (as on the backend's clock), in device time = planned time x time_factor.
inline Trace measuredTrace(const Plan &plan, int steps, double time_factor, double gap_us = 5) {
  const Evaluation other = evaluated(otherCosts(plan));
  const Trace one = traceFromEvaluation(plan, other);
  Trace trace = one;
  trace.source = "measured";
  trace.ops.clear();
  trace.transfers.clear();
  double offset = 0;
  for (int step = 0; step < steps; ++step) {
    for (TraceOp op : one.ops) {
      op.step = step;
      op.start_us = (offset + op.start_us) * time_factor;
      op.end_us = (offset + op.end_us) * time_factor;
      trace.ops.push_back(op);
    }
    offset += one.makespan_us + gap_us;
  }
  trace.makespan_us = one.makespan_us * time_factor;
  return trace;
}

// The backend's {"event":"step"} line for one step of a trace, written by the protocol's writer.
inline std::string stepLine(const Trace &trace, int step, int of) {
  StepEvent event;
  event.step = step;
  event.of = of;
  event.metrics = RunMetrics{1.0, 0.2, 0.25};
  event.clock_error_us = 0.5;
  for (const auto &op : trace.ops)
    if (op.step == step) event.ops.push_back(op);
  return runEventLine(event);
}

// Alive = has a /proc entry that is not a zombie (a container's init may never reap orphans).
inline bool alive(qint64 pid) {
  if (pid <= 0) return false;
  QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
  if (!stat.open(QIODevice::ReadOnly)) return false;
  const QByteArray text = stat.readAll();
  const qsizetype close = text.lastIndexOf(')');
  return close > 0 && close + 2 < text.size() && text[close + 2] != 'Z' && text[close + 2] != 'X';
}

inline qint64 readPid(const QString &path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return 0;
  return file.readAll().trimmed().toLongLong();
}

// Shell-quotes one line for printf '%s\n' '...'.
inline QByteArray quoted(const std::string &line) {
  QByteArray out = QByteArray::fromStdString(line);
  out.replace('\'', "'\\''");
  return "'" + out + "'";
}

struct FakeBackend {
  QString script;
  QString directory;
};

// A script that behaves like pipescope-backend: start, warm-up progress, each step with a pause
// before it, the trace copied to --trace, done. It also leaves a background child behind, which
// the window must stop with the run.
inline FakeBackend writeFakeBackend(const QTemporaryDir &dir, const Trace &trace, int steps,
                                    double time_factor, double pause_s,
                                    const QByteArray &ending = QByteArray()) {
  FakeBackend fake{dir.filePath(QStringLiteral("fake-backend.sh")), dir.path()};
  nlohmann::json file = traceToJson(trace);
  file["backend"] = {{"workload", {{"expected_time_factor", time_factor}}}};
  writeFile(dir.filePath(QStringLiteral("measured.json")), QByteArray::fromStdString(file.dump()));
  const QByteArray d = dir.path().toUtf8();
  QByteArray body =
      "#!/bin/sh\n"
      "trace=''\n"
      "while [ $# -gt 0 ]; do case \"$1\" in --trace) trace=\"$2\"; shift;; esac; shift; done\n"
      "echo $$ > '" +
      d +
      "/script.pid'\n"
      "sleep 600 &\n"
      "echo $! > '" +
      d +
      "/child.pid'\n"
      "echo 'mpirun: a launcher line that is not JSON'\n"
      "echo 'a line on stderr' >&2\n";
  StartEvent start;
  start.device = "cpu";
  start.world_size = 4;
  start.warmup_steps = 1;
  start.measured_steps = steps;
  start.workload = {{"expected_time_factor", time_factor}};
  body += "printf '%s\\n' " + quoted(runEventLine(start)) + "\n";
  body += "sleep " + QByteArray::number(pause_s / 2) + "\n";
  body += "printf '%s\\n' " + quoted(runEventLine(ProgressEvent{"warmup", 0, 1, 0})) + "\n";
  for (int step = 0; step < steps; ++step) {
    body += "sleep " + QByteArray::number(pause_s) + "\n";
    body += "printf '%s\\n' " + quoted(stepLine(trace, step, steps)) + "\n";
  }
  if (!ending.isEmpty()) {
    body += ending;
  } else {
    body += "sleep " + QByteArray::number(pause_s / 2) + "\n";
    body += "cp '" + d + "/measured.json' \"$trace\"\n";
    // The trace path is the script's argument: the done line is the writer's around a marker.
    DoneEvent done;
    done.trace_path = "@TRACE@";
    QByteArray line = QByteArray::fromStdString(runEventLine(done));
    line.replace("%", "%%").replace("@TRACE@", "%s");
    body += "printf " + quoted(line.toStdString() + "\\n") + " \"$trace\"\n";
  }
  writeFile(fake.script, body, true);
  return fake;
}

inline void useFake(RunPanel *panel, const FakeBackend &fake) {
  panel->setBackendPath(fake.script);
  panel->setTarget(LaunchTarget::Custom);
  panel->setCommandTemplate(QStringLiteral(
      "{backend} --plan {plan} --trace {trace} --warmup {warmup} --steps {steps} --device cpu"));
}

// One cell's display text, and a table's size, as a person reads them.
inline QString cell(QTableView *table, int row, int column) {
  return table->model()->data(table->model()->index(row, column)).toString();
}

inline int rowCount(QTableView *table) {
  return table->model()->rowCount();
}

inline int columnCount(QTableView *table) {
  return table->model()->columnCount();
}

} // namespace pipescope::gui::testing
