#include "gui/run/run_session.h"

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <cmath>

#include "gui/explorer/labels.h"

namespace pipescope::gui {

RunSession::RunSession(QObject *parent) : QObject(parent) {
  process_ = new BackendProcess(this);
  backend_path_ = findBackendExecutable();
  progress_label_ = tr("idle");
  connect(process_, &BackendProcess::eventReceived, this, &RunSession::onEvent);
  connect(process_, &BackendProcess::stderrLine, this,
          [this](const QString &line) { log(line, RunTone::Quiet); });
  connect(process_, &BackendProcess::finished, this, &RunSession::onFinished);
  connect(process_, &BackendProcess::failedToStart, this, &RunSession::onFailedToStart);
  status_html_ = tr("Run the shown plan on a target, or import a measured trace (File \u25b8 "
                    "Import measured trace\u2026).");
}

RunSession::~RunSession() = default;

void RunSession::setBackendPath(const QString &path) {
  backend_path_ = path;
}

QString RunSession::runDirectory() const {
  return run_directory_ ? run_directory_->path() : QString();
}

bool RunSession::running() const {
  return process_->running();
}

bool RunSession::refuse(const QString &html) {
  setStatus(html, RunTone::Error);
  return false;
}

bool RunSession::start(const RunRequest &request) {
  if (running()) return false;
  if (!snapshot_ || !snapshot_->ok())
    return refuse(tr("<b>Nothing to run:</b> the settings cannot be evaluated."));
  const Plan &plan = snapshot_->plan;
  const Evaluation &evaluation = *snapshot_->evaluation;
  const QString base = qEnvironmentVariable("PIPESCOPE_RUN_DIR", QDir::tempPath());
  auto directory =
      std::make_unique<QTemporaryDir>(QDir(base).filePath(QStringLiteral("pipescope-run-XXXXXX")));
  if (!directory->isValid())
    return refuse(tr("<b>The run did not start:</b> cannot make a folder in %1 (%2).")
                      .arg(base.toHtmlEscaped(), directory->errorString()));
  const QString plan_path = directory->filePath(QStringLiteral("plan.json"));
  const QString trace_path = directory->filePath(QStringLiteral("trace.json"));
  if (auto status = savePlan(plan_path.toStdString(), plan, &evaluation.program); !status)
    return refuse(tr("<b>The run did not start:</b> %1")
                      .arg(QString::fromStdString(status.error().message).toHtmlEscaped()));
  LaunchValues values;
  values.backend = backend_path_;
  values.plan = plan_path;
  values.trace = trace_path;
  values.world = plan.mesh.worldSize();
  values.pp = plan.mesh.pp;
  values.gpus_per_node = plan.mesh.gpus_per_node;
  values.warmup = request.warmup_steps;
  values.steps = request.measured_steps;
  auto command = expandLaunchTemplate(request.command_template, values);
  if (!command)
    return refuse(tr("<b>The run did not start:</b> %1")
                      .arg(QString::fromStdString(command.error().message).toHtmlEscaped()));

  run_directory_ = std::move(directory);
  run_trace_path_ = trace_path;
  errors_.clear();
  run_device_.clear();
  succeeded_ = false;
  calibration_.reset();
  before_calibration_.reset();
  measurement_ = std::make_unique<Measurement>(plan, evaluation.schedule);
  progress_.setPlanned(values.warmup, values.steps);
  emit logCleared();
  const QString program = command->takeFirst();
  log(QStringLiteral("$ ") + program + QLatin1Char(' ') + command->join(QLatin1Char(' ')),
      RunTone::Busy);
  setStatus(tr("Running %1 on %2\u2026")
                .arg(scheduleLabel(evaluation.schedule).toHtmlEscaped(),
                     launchTargetTitle(request.target).toHtmlEscaped()),
            RunTone::Busy);
  updateComparison();
  emit measurementChanged();
  // Before the start: a launcher that fails to start reports runningChanged(false) after this.
  emit runningChanged(true);
  process_->start(program, *command, run_directory_->path());
  setProgressLabel(progress_.text());
  return true;
}

void RunSession::cancel() {
  if (!running()) return;
  log(tr("cancelling: stopping every process of the run"), RunTone::Warning);
  setStatus(tr("Cancelling\u2026"), RunTone::Busy);
  process_->cancel();
  emit progressChanged();
}

void RunSession::onFailedToStart(const QString &message) {
  setStatus(tr("<b>The run did not start.</b> %1").arg(message.toHtmlEscaped()), RunTone::Error);
  log(message, RunTone::Error);
  setProgressLabel(tr("not started"));
  emit runningChanged(false);
}

void RunSession::onEvent(const BackendEvent &event) {
  switch (event.type) {
  case BackendEventType::Start:
    run_device_ = event.device;
    if (event.time_factor > 0 && measurement_) measurement_->setTimeFactor(event.time_factor);
    log(tr("started: device %1, %2 processes, %3 warm-up and %4 measured steps")
            .arg(event.device.isEmpty() ? tr("?") : event.device)
            .arg(event.world_size)
            .arg(event.warmup_steps)
            .arg(event.measured_steps));
    break;
  case BackendEventType::Check: log(tr("kernel check passed: %1").arg(event.text)); break;
  case BackendEventType::Progress:
    log(tr("%1 step %2 of %3 done")
            .arg(event.phase.isEmpty() ? tr("warm-up") : event.phase)
            .arg(event.step + 1)
            .arg(event.of));
    break;
  case BackendEventType::Step: {
    if (!event.problem.isEmpty())
      log(tr("step %1: %2").arg(event.step).arg(event.problem), RunTone::Warning);
    if (!measurement_) break;
    if (auto status = measurement_->addStep(event.step, event.ops); !status) {
      log(tr("step %1 not drawn: %2")
              .arg(event.step)
              .arg(QString::fromStdString(status.error().message)),
          RunTone::Error);
      break;
    }
    log(tr("measured step %1: %2 ops, step time %3 on the device")
            .arg(event.step)
            .arg(event.ops.size())
            .arg(formatDuration(measurement_->deviceMakespan(event.step))));
    updateComparison();
    emit measurementChanged();
    break;
  }
  case BackendEventType::Warning:
    log(tr("warning (rank %1): %2").arg(event.rank).arg(event.text), RunTone::Warning);
    break;
  case BackendEventType::Error: {
    const QString line =
        event.rank >= 0 ? tr("rank %1: %2").arg(event.rank).arg(event.text) : event.text;
    errors_ << line;
    log(tr("error, %1").arg(line), RunTone::Error);
    QString html =
        tr("<b>The backend reported an error.</b> %1").arg(errors_.front().toHtmlEscaped());
    if (errors_.size() > 1) html += tr(" <i>(and %1 more in the log)</i>").arg(errors_.size() - 1);
    setStatus(html, RunTone::Error);
    break;
  }
  case BackendEventType::Done: {
    log(tr("done: trace written to %1").arg(event.trace_path));
    // The file is the full record (transfers, devices, clock error): it replaces the live steps.
    const QString path = event.trace_path.isEmpty() ? run_trace_path_ : event.trace_path;
    const QString resolved =
        QFileInfo(path).isAbsolute() || !run_directory_ ? path : run_directory_->filePath(path);
    auto file = loadMeasuredTrace(resolved.toStdString());
    if (file && measurement_) {
      // The live steps' factor (from the start event) stands when the file does not say one.
      const double factor = file->time_factor > 0 ? file->time_factor : measurement_->timeFactor();
      auto whole = Measurement::fromTrace(file->trace, measurement_->schedule(), factor);
      if (whole) {
        measurement_ = std::make_unique<Measurement>(std::move(*whole));
        updateComparison();
        emit measurementChanged();
      } else {
        log(tr("the trace file does not match the run: %1")
                .arg(QString::fromStdString(whole.error().message)),
            RunTone::Warning);
      }
    } else if (!file) {
      log(tr("could not read the trace: %1").arg(QString::fromStdString(file.error().message)),
          RunTone::Warning);
    }
    break;
  }
  case BackendEventType::Other: log(event.text, RunTone::Quiet); break;
  case BackendEventType::Text: log(event.text); break;
  case BackendEventType::Malformed:
    log(tr("unreadable line from the backend (%1): %2").arg(event.problem, event.text),
        RunTone::Warning);
    break;
  }
  progress_.apply(event);
  if (running()) progress_label_ = progress_.text();
  emit progressChanged();
}

void RunSession::onFinished(int exit_code, bool crashed, bool cancelled) {
  const int steps = measurement_ ? static_cast<int>(measurement_->steps().size()) : 0;
  if (cancelled) {
    log(tr("cancelled; every process of the run was stopped"), RunTone::Warning);
    setStatus(
        tr("<b>Cancelled.</b> Every process of the run was stopped; %n measured step(s) kept.",
           nullptr, steps),
        RunTone::Warning);
    setProgressLabel(tr("cancelled"));
  } else if (!errors_.isEmpty() || crashed || exit_code != 0) {
    const QString how = crashed ? tr("crashed") : tr("exited with status %1").arg(exit_code);
    log(tr("the launcher %1").arg(how), RunTone::Error);
    QString html = tr("<b>The run failed</b> (the launcher %1).").arg(how);
    if (!errors_.isEmpty())
      html += QLatin1Char(' ') + errors_.front().toHtmlEscaped();
    else
      html += tr(" See the log for its output.");
    if (errors_.size() > 1)
      html += tr(" <i>(and %1 more errors in the log)</i>").arg(errors_.size() - 1);
    if (steps > 0) html += tr(" %n measured step(s) kept.", nullptr, steps);
    setStatus(html, RunTone::Error);
    setProgressLabel(tr("failed"));
  } else {
    setStatus(
        tr("<b>Done.</b> %n measured step(s)%1; the timeline shows the measurement over the "
           "prediction.",
           nullptr, steps)
            .arg(run_device_.isEmpty() ? QString() : tr(" on %1").arg(run_device_.toHtmlEscaped())),
        RunTone::Ok);
    succeeded_ = true;
    setProgressLabel(tr("done"));
  }
  emit runningChanged(false);
}

void RunSession::setSnapshot(const SnapshotPointer &snapshot) {
  if (!snapshot || !snapshot->ok()) return;
  snapshot_ = snapshot;
  predicted_trace_.reset();
  // Without a measurement there is nothing to compare: a slider move costs nothing here.
  if (hasMeasurement() || comparison_ || calibration_) updateComparison();
}

bool RunSession::measurementApplies() const {
  return hasMeasurement() && snapshot_ && snapshot_->ok() &&
         sameSchedule(measurement_->schedule(), snapshot_->evaluation->schedule);
}

std::shared_ptr<const Evaluation> RunSession::measuredStep(int step) const {
  if (!measurementApplies()) return nullptr;
  return measurement_->alignedStep(step < 0 ? measurement_->latestStep() : step);
}

std::shared_ptr<const BubbleAnalysis> RunSession::measuredBubbles(int step) const {
  if (!measurementApplies()) return nullptr;
  if (step < 0) step = measurement_->latestStep();
  const Evaluation *prediction = snapshot_->evaluation.get();
  const std::size_t ops = measurement_->trace().ops.size();
  if (bubble_cache_.prediction != prediction || bubble_cache_.measurement != measurement_.get() ||
      bubble_cache_.step != step || bubble_cache_.ops != ops) {
    bubble_cache_ = {prediction, measurement_.get(), step, ops, nullptr};
    // The measured step laid out on the prediction's schedule and lowered program: the same
    // dependencies, the measured times (in planned microseconds, as drawn).
    auto timeline = stepTimelineFromTrace(measurement_->trace(), prediction->schedule,
                                          prediction->program, step);
    if (timeline) {
      auto analysis = explainBubbles(prediction->schedule, prediction->program, *timeline);
      if (analysis) bubble_cache_.analysis = std::make_shared<const BubbleAnalysis>(*analysis);
    }
  }
  return bubble_cache_.analysis;
}

Status RunSession::importTrace(const MeasuredTraceFile &file) {
  if (!snapshot_ || !snapshot_->ok())
    return makeError("there is no prediction to compare with: the settings cannot be evaluated");
  if (running())
    return makeError("a run is in progress; cancel it or wait for it to finish, then import");
  auto measurement =
      Measurement::fromTrace(file.trace, snapshot_->evaluation->schedule, file.time_factor);
  if (!measurement) {
    setStatus(tr("<b>Not imported.</b> %1")
                  .arg(QString::fromStdString(measurement.error().message).toHtmlEscaped()),
              RunTone::Error);
    return measurement.error();
  }
  measurement_ = std::make_unique<Measurement>(std::move(*measurement));
  calibration_.reset();
  errors_.clear();
  const int steps = static_cast<int>(measurement_->steps().size());
  setStatus(tr("Imported a %1 trace of %2: %n step(s).", nullptr, steps)
                .arg(QString::fromStdString(file.trace.source).toHtmlEscaped(),
                     scheduleLabel(measurement_->schedule()).toHtmlEscaped()),
            RunTone::Ok);
  updateComparison();
  emit measurementChanged();
  return Ok{};
}

void RunSession::reportImportFailure(const QString &message) {
  setStatus(tr("<b>Not imported.</b> %1").arg(message.toHtmlEscaped()), RunTone::Error);
}

void RunSession::updateComparison() {
  comparison_.reset();
  calibration_shown_ = false;
  if (measurementApplies()) {
    if (!predicted_trace_)
      predicted_trace_ = traceFromEvaluation(snapshot_->plan, *snapshot_->evaluation);
    comparison_ = compareTraces(*predicted_trace_, measurement_->trace());
    // The calibrated costs are shown until the person changes them.
    if (calibration_) {
      calibration_shown_ = !snapshot_->plan.model && snapshot_->plan.costs == calibration_->costs;
      if (!calibration_shown_) {
        calibration_.reset();
        before_calibration_.reset();
      }
    }
  }
  emit comparisonChanged();
}

bool RunSession::showingCalibration() const {
  return calibration_shown_ && comparison_.has_value();
}

const std::optional<TraceComparison> &RunSession::comparisonBeforeCalibration() const {
  static const std::optional<TraceComparison> none;
  return showingCalibration() ? before_calibration_ : none;
}

bool RunSession::calibrate() {
  if (!measurementApplies() || !comparison_) {
    setStatus(
        tr("<b>Nothing to calibrate to:</b> run the plan or import a measured trace of it first."),
        RunTone::Error);
    return false;
  }
  if (running()) return false;
  const Plan &plan = snapshot_->plan;
  const Schedule &schedule = snapshot_->evaluation->schedule;
  auto current = planCosts(plan, schedule.placement);
  if (!current) {
    setStatus(tr("<b>Not calibrated:</b> %1")
                  .arg(QString::fromStdString(current.error().message).toHtmlEscaped()),
              RunTone::Error);
    return false;
  }
  auto calibrated = calibrateCosts(schedule, measurement_->trace(), *current);
  if (!calibrated) {
    setStatus(tr("<b>Not calibrated:</b> %1")
                  .arg(QString::fromStdString(calibrated.error().message).toHtmlEscaped()),
              RunTone::Error);
    return false;
  }
  // Calibrated costs are explicit per-stage op times: a model's derivation would override them.
  Plan next = plan;
  const bool had_model = next.model.has_value();
  next.model.reset();
  next.costs = *calibrated;
  // Keep the first uncalibrated plan when calibrating again on top of a calibration.
  const Plan uncalibrated = calibration_ && calibration_shown_ ? calibration_->uncalibrated : plan;
  const TraceComparison before = calibration_ && calibration_shown_ && before_calibration_
                                     ? *before_calibration_
                                     : *comparison_;
  calibration_ = Calibration{uncalibrated, next.costs};
  before_calibration_ = before;
  log(tr("calibrated: per-stage F, B, W%1%2 refitted to %n measured step(s)", nullptr,
         static_cast<int>(measurement_->steps().size()))
          .arg(calibrated->boundary_transfer_us.empty() ? QString() : tr(", transfers"))
          .arg(calibrated->concurrency_slowdown.empty()
                   ? QString()
                   : tr(", the slowdown while other ranks compute (they share a device)")));
  setStatus(tr("<b>Calibrated.</b> The prediction now uses the measured per-stage op times%1 (they "
               "stand in for F, B, W in "
               "the settings until you edit those or Revert); the tables show the errors before "
               "and after.")
                .arg(had_model
                         ? tr(" instead of the model's derived costs (Revert returns to the model)")
                         : QString()),
            RunTone::Ok);
  emit planReplaced(next);
  return true;
}

void RunSession::revertCalibration() {
  if (!calibration_) return;
  const Plan plan = calibration_->uncalibrated;
  calibration_.reset();
  before_calibration_.reset();
  setStatus(tr("Back to the costs before calibration."), RunTone::Neutral);
  emit planReplaced(plan);
}

QString RunSession::measurementNote() const {
  if (!hasMeasurement()) return tr("No measurement yet.");
  if (!measurementApplies())
    return tr("The measurement is of %1, not of the schedule shown: set those settings to see it.")
        .arg(scheduleLabel(measurement_->schedule()));
  QString note = tr("%n step(s) measured", nullptr, static_cast<int>(measurement_->steps().size()));
  const double factor = measurement_->timeFactor();
  if (std::abs(factor - 1) > 1e-9) {
    // The backend sized its work so that a planned microsecond takes `factor` on the device.
    note += tr("; times in planned units: the device ran each planned \u00b5s as %1 (measured "
               "step %2 on the device)")
                .arg(formatDuration(factor),
                     formatDuration(measurement_->deviceMakespan(measurement_->latestStep())));
  }
  return note + QLatin1Char('.');
}

QString RunSession::statusText() const {
  QString plain = status_html_;
  plain.remove(QRegularExpression(QStringLiteral("<[^>]*>")));
  return plain;
}

void RunSession::setStatus(const QString &html, RunTone tone) {
  status_html_ = html;
  status_tone_ = tone;
  emit statusChanged();
}

void RunSession::log(const QString &text, RunTone tone) {
  emit logLine(text, tone);
}

void RunSession::setProgressLabel(const QString &label) {
  progress_label_ = label;
  emit progressChanged();
}

} // namespace pipescope::gui
