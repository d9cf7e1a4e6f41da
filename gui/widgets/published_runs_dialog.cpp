#include "gui/widgets/published_runs_dialog.h"

#include <QApplication>
#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <cmath>

#include "engine/output_file.h"
#include "gui/explorer/labels.h"
#include "gui/run/measurement.h"
#include "gui/timeline/palette.h"

namespace pipescope::gui {

namespace {

enum Column { kRun, kGpus, kHardware, kMeasured, kPredicted, kError, kColumns };

/// The bound on the worst step error (#13; docs/validation.md): a row past it is shown
/// in the out-of-bounds colour.
constexpr double kWorstStepErrorGoal = 0.08;

/// Where the runs files added persist (with remember_runs_files), and how many.
const QString kRunsFilesKey = QStringLiteral("files/runs");
constexpr int kRememberedRunsFiles = 8;

// Item data: which set and row an item is (-1 for a set's own item).
constexpr int kSetRole = Qt::UserRole;
constexpr int kCaseRole = Qt::UserRole + 1;

std::vector<std::shared_ptr<const ValidationSet>> loadShippedSets(QString &problems) {
  std::vector<std::shared_ptr<const ValidationSet>> sets;
  for (const auto &name : validationSetNames()) {
    auto set = loadValidationSet(name);
    if (set)
      sets.push_back(std::make_shared<const ValidationSet>(std::move(*set)));
    else
      problems += QString::fromStdString(set.error().message) + QLatin1Char('\n');
  }
  return sets;
}

QString seconds(double s) {
  return formatDuration(s * 1e6);
}

} // namespace

Result<PublishedRun> findPublishedRun(const std::string &set_and_id) {
  // Ids have no slash, so the last one ends the set (which may be a runs file's path).
  const std::size_t slash = set_and_id.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == set_and_id.size())
    return makeError("--published: expected SET/ID, e.g. megatron-core-h100/gpt-70b (pipescope "
                     "compare --published all lists them), or RUNS.json/ID for a runs file");
  const std::string set_name = set_and_id.substr(0, slash), id = set_and_id.substr(slash + 1);
  const auto names = validationSetNames();
  const bool shipped = std::find(names.begin(), names.end(), set_name) != names.end();
  if (!shipped && !QFileInfo(QString::fromStdString(set_name)).isFile()) {
    std::string known;
    for (const auto &known_name : names)
      known += (known.empty() ? "" : ", ") + known_name;
    return makeError("--published: no set '" + set_name + "'; the shipped sets are " + known +
                     ", or give a runs file's path");
  }
  auto set = loadValidationSet(set_name);
  if (!set) return makeError("--published: " + set.error().message);
  std::string ids;
  for (const auto &row : set->cases) {
    if (row.id == id) return PublishedRun{set->name, set->title, row};
    ids += (ids.empty() ? "" : ", ") + row.id;
  }
  return makeError("--published: '" + id + "' is not a row of " + set_name + "; its rows are " +
                   ids);
}

PublishedRunsDialog::PublishedRunsDialog(QWidget *parent, bool remember_runs_files)
    : QDialog(parent), remember_runs_files_(remember_runs_files) {
  setWindowTitle(tr("Open published run"));
  auto *layout = new QVBoxLayout(this);
  auto *intro = new QLabel(
      tr("Runs that someone measured and published, each with its source "
         "(docs/validation.md). pipescope predicts each with the shipped preset of its GPU type; "
         "open one to see it in the explorer as it was run, then vary it. Add runs file adds "
         "your own runs (pipescope megatron TRAIN.log --add-row FILE writes them from a "
         "Megatron-LM log, or LAUNCH --step-time S from a launch)."),
      this);
  intro->setWordWrap(true);
  layout->addWidget(intro);

  tree_ = new QTreeWidget(this);
  tree_->setObjectName(QStringLiteral("published_runs"));
  tree_->setColumnCount(kColumns);
  tree_->setHeaderLabels(
      {tr("run"), tr("GPUs"), tr("GPU"), tr("measured"), tr("predicted"), tr("error")});
  tree_->setRootIsDecorated(true);
  tree_->setUniformRowHeights(true);
  tree_->header()->setStretchLastSection(false);
  tree_->header()->setSectionResizeMode(kRun, QHeaderView::Stretch);
  for (int column = kGpus; column < kColumns; ++column)
    tree_->header()->setSectionResizeMode(column, QHeaderView::ResizeToContents);
  layout->addWidget(tree_, 1);

  details_ = new QLabel(this);
  details_->setObjectName(QStringLiteral("published_run_details"));
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  details_->setMinimumHeight(details_->fontMetrics().lineSpacing() * 5);
  details_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  layout->addWidget(details_);

  auto *buttons = new QDialogButtonBox(QDialogButtonBox::Cancel, this);
  QPushButton *add = buttons->addButton(tr("Add runs file\u2026"), QDialogButtonBox::ActionRole);
  connect(add, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Add runs file: a pipescope.validation JSON of measured runs"), QString(),
        tr("Runs files (*.json);;All files (*)"));
    if (path.isEmpty()) return;
    if (auto added = addRunsFile(path); !added)
      details_->setText(QString::fromStdString(added.error().message).toHtmlEscaped());
  });
  calibrate_overhead_ = new QCheckBox(tr("with a layer overhead"), this);
  calibrate_overhead_->setObjectName(QStringLiteral("calibrate_overhead"));
  calibrate_overhead_->setToolTip(
      tr("Calibrate hardware also fits a fixed time per transformer layer and microbatch beside "
         "the GEMM level (pipescope calibrate --fit level,overhead): for runs whose microbatches "
         "hold different token counts. The details then give the runs held out with it and "
         "with the level alone; it takes about 25 times as long"));
  calibrate_step_ = new QCheckBox(tr("with a step overhead"), this);
  calibrate_step_->setObjectName(QStringLiteral("calibrate_step"));
  calibrate_step_->setToolTip(
      tr("Calibrate hardware also fits a fixed time every step pays once (the framework's "
         "per-step host work) beside the GEMM level (pipescope calibrate --fit level,step): for "
         "runs of different microbatch counts. The details then give the runs held out with it "
         "and with the level alone"));
  calibrate_ = buttons->addButton(tr("Calibrate hardware\u2026"), QDialogButtonBox::ActionRole);
  calibrate_->setObjectName(QStringLiteral("calibrate_hardware"));
  calibrate_->setToolTip(tr("Fit the hardware's GEMM level (and MoE host time) to the selected "
                            "runs file's measured steps, as pipescope calibrate does, save it and "
                            "use it in the explorer"));
  calibrate_->setEnabled(false);
  calibration_ = new QFutureWatcher<Result<HardwareFit>>(this);
  connect(calibration_, &QFutureWatcherBase::finished, this, &PublishedRunsDialog::showCalibration);
  connect(calibrate_, &QPushButton::clicked, this, [this] {
    const QString runs = currentRunsFile();
    if (runs.isEmpty() || calibrating()) return;
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save the calibrated hardware file"),
        QFileInfo(runs).dir().filePath(QFileInfo(runs).completeBaseName() +
                                       QStringLiteral("-hardware.json")),
        tr("Hardware files (*.json)"));
    if (path.isEmpty()) return;
    if (auto started = startCalibration(runs, path, calibrate_overhead_->isChecked(),
                                        calibrate_step_->isChecked());
        !started)
      details_->setText(QString::fromStdString(started.error().message).toHtmlEscaped());
  });
  remove_ = buttons->addButton(tr("Remove runs file"), QDialogButtonBox::ActionRole);
  remove_->setObjectName(QStringLiteral("remove_runs_file"));
  remove_->setToolTip(tr("Take the selected runs file off this list (the file itself stays)"));
  remove_->setEnabled(false);
  connect(remove_, &QPushButton::clicked, this, [this] { removeRunsFile(currentRunsFile()); });
  open_ = buttons->addButton(tr("Open"), QDialogButtonBox::AcceptRole);
  open_->setEnabled(false);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  // The overhead box beside the buttons it changes: Calibrate hardware's.
  auto *button_row = new QHBoxLayout;
  button_row->addWidget(calibrate_overhead_);
  button_row->addWidget(calibrate_step_);
  button_row->addWidget(buttons, 1);
  layout->addLayout(button_row);

  QString problems;
  for (const auto &set : loadShippedSets(problems))
    addSet(set);
  tree_->expandAll();
  if (remember_runs_files_) {
    // The runs files added before, oldest first; one that no longer loads is dropped.
    const QStringList remembered = QSettings().value(kRunsFilesKey).toStringList();
    for (const QString &path : remembered)
      if (auto added = addRunsFile(path); !added)
        problems += QString::fromStdString(added.error().message) + QLatin1Char('\n');
    rememberRunsFiles(); // without the ones dropped
    tree_->setCurrentItem(nullptr);
  }
  if (!problems.isEmpty())
    details_->setText(tr("Some sets could not be read: %1").arg(problems.toHtmlEscaped()));

  connect(tree_, &QTreeWidget::currentItemChanged, this, &PublishedRunsDialog::showDetails);
  connect(tree_, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem *item) {
    if (item && item->data(kRun, kCaseRole).toInt() >= 0) accept();
  });
  resize(760, 560);
}

// Each worker holds its own reference to its set, so closing the dialog early is safe.
PublishedRunsDialog::~PublishedRunsDialog() = default;

void PublishedRunsDialog::addSet(const std::shared_ptr<const ValidationSet> &set) {
  const int s = static_cast<int>(sets_.size());
  sets_.push_back(set);
  set_files_.emplace_back(); // a runs file's path, set by addRunsFile
  auto *set_item = new QTreeWidgetItem(tree_);
  set_item->setText(kRun, QString::fromStdString(set->title));
  set_item->setToolTip(kRun, QString::fromStdString(set->source));
  set_item->setFirstColumnSpanned(true);
  set_item->setData(kRun, kSetRole, s);
  set_item->setData(kRun, kCaseRole, -1);
  set_item->setFlags(Qt::ItemIsEnabled);
  for (int c = 0; c < static_cast<int>(set->cases.size()); ++c) {
    const ValidationCase &row = set->cases[static_cast<std::size_t>(c)];
    auto *item = new QTreeWidgetItem(set_item);
    item->setText(kRun, QString::fromStdString(row.id));
    item->setText(kGpus, QString::number(row.mesh.worldSize()));
    item->setText(kHardware, QString::fromStdString(row.hardware_name));
    item->setText(kMeasured,
                  row.measured_step_s > 0 ? seconds(row.measured_step_s) : tr("memory only"));
    item->setText(kPredicted, QStringLiteral("\u2026"));
    for (int column = kGpus; column < kColumns; ++column)
      item->setTextAlignment(column, Qt::AlignRight | Qt::AlignVCenter);
    item->setData(kRun, kSetRole, s);
    item->setData(kRun, kCaseRole, c);
  }
  // Each prediction is a whole evaluation (a 6144-GPU mesh among them): off the GUI thread.
  auto *watcher = new QFutureWatcher<std::vector<PublishedPrediction>>(this);
  watchers_.push_back(watcher);
  shown_.push_back(false);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, s] { showPredictions(s); });
  watcher->setFuture(QtConcurrent::run([set] {
    std::vector<PublishedPrediction> predictions;
    for (const auto &row : set->cases) {
      PublishedPrediction prediction;
      if (auto result = predictValidationCase(row, true)) {
        prediction.step_s = result->predicted_step_s;
        prediction.step_error = result->step_error;
        prediction.below_speed_of_light = belowSpeedOfLight(*result);
      } else {
        prediction.error = QString::fromStdString(result.error().message);
      }
      predictions.push_back(std::move(prediction));
    }
    return predictions;
  }));
}

void PublishedRunsDialog::rememberRunsFiles() const {
  if (!remember_runs_files_) return;
  // The runs files on the list, in the order they were added.
  QStringList files;
  for (std::size_t s = 0; s < set_files_.size(); ++s)
    if (!set_files_[s].isEmpty() && !tree_->topLevelItem(static_cast<int>(s))->isHidden())
      files << set_files_[s];
  while (files.size() > kRememberedRunsFiles)
    files.removeFirst();
  QSettings().setValue(kRunsFilesKey, files);
}

Status PublishedRunsDialog::addRunsFile(const QString &path) {
  const QString absolute = QFileInfo(path).absoluteFilePath();
  if (runsFileSet(absolute) >= 0) return Ok{};
  auto set = loadValidationSet(absolute.toStdString());
  if (!set) return set.error();
  const bool empty = set->cases.empty();
  addSet(std::make_shared<const ValidationSet>(std::move(*set)));
  set_files_.back() = absolute;
  rememberRunsFiles();
  QTreeWidgetItem *set_item = tree_->topLevelItem(tree_->topLevelItemCount() - 1);
  set_item->setExpanded(true);
  if (!empty) tree_->setCurrentItem(set_item->child(0));
  tree_->scrollToItem(set_item);
  return Ok{};
}

Result<PublishedRunsDialog::CalibrationJob>
PublishedRunsDialog::calibrationJob(const QString &runs_path, bool with_overhead,
                                    bool with_step) const {
  const QString absolute = QFileInfo(runs_path).absoluteFilePath();
  const int s = runsFileSet(absolute);
  if (s < 0)
    return makeError(absolute.toStdString() + " is not a runs file of this list; add it first");
  CalibrationJob job;
  job.set = sets_[static_cast<std::size_t>(s)];
  const ValidationSet &set = *job.set;
  // As pipescope calibrate fits a set: its rows set aside left out.
  bool aside = false;
  for (const auto &row : set.cases)
    if (row.set_aside.empty())
      job.rows.push_back({&row, set.name});
    else
      aside = aside || row.measured_step_s > 0;
  if (aside && std::none_of(job.rows.begin(), job.rows.end(), [](const FitRow &row) {
        return row.validation_case->measured_step_s > 0;
      }))
    return makeError(set.name + ": every timed run is set aside (its \"measured\" says why); "
                                "pipescope calibrate --rows fits on them anyway");
  auto base_name = commonHardwareName(job.rows);
  if (!base_name) return makeError(set.name + ": " + base_name.error().message);
  if (base_name->empty())
    return makeError(set.name + ": no run has a measured step time to fit on");
  auto base = loadHardwareSpec(*base_name);
  if (!base) return base.error();
  job.base = std::move(*base);
  // As pipescope calibrate does too: runs faster than their speed of light left out.
  job.below_speed_of_light = removeRowsBelowSpeedOfLight(job.rows, job.base);
  if (std::none_of(job.rows.begin(), job.rows.end(),
                   [](const FitRow &row) { return row.validation_case->measured_step_s > 0; }))
    return makeError(set.name + ": every timed run is measured faster than its speed of light on " +
                     job.base.name + ", so none ran as written (" +
                     job.below_speed_of_light.front() +
                     "); correct the runs' settings, or fit on them with pipescope calibrate "
                     "--rows");
  job.options = defaultFitOptions(job.rows);
  if (with_overhead && !job.options.level)
    return makeError(set.name + ": every timed run is an MoE run, which fits the MoE host time; "
                                "the layer overhead is fitted beside the GEMM level, on dense "
                                "runs: untick \"with a layer overhead\"");
  if (with_step && !job.options.level)
    return makeError(set.name + ": every timed run is an MoE run, which fits the MoE host time; "
                                "the step overhead is fitted beside the GEMM level, on dense "
                                "runs: untick \"with a step overhead\"");
  job.options.overhead = with_overhead;
  job.options.step = with_step;
  return job;
}

Status PublishedRunsDialog::startCalibration(const QString &runs_path, const QString &save_path,
                                             bool with_overhead, bool with_step) {
  if (calibrating()) return makeError("a calibration is still fitting; wait for it");
  auto job = calibrationJob(runs_path, with_overhead, with_step);
  if (!job) return job.error();
  // The fit predicts every row at every candidate (seconds, a minute with the overhead): on a
  // worker thread, the button held until it is done.
  details_->setText(tr("Calibrating %1 on the timed runs of %2\u2026")
                        .arg(QString::fromStdString(job->base.name).toHtmlEscaped(),
                             QString::fromStdString(job->set->name).toHtmlEscaped()));
  calibrate_->setEnabled(false);
  QApplication::setOverrideCursor(Qt::BusyCursor);
  calibration_job_ = std::move(*job);
  calibration_save_path_ = save_path;
  calibration_->setFuture(
      QtConcurrent::run([rows = calibration_job_->rows, base = calibration_job_->base,
                         options = calibration_job_->options, keep = calibration_job_->set] {
        return fitHardware(rows, base, options);
      }));
  return Ok{};
}

bool PublishedRunsDialog::calibrating() const {
  return calibration_job_.has_value();
}

void PublishedRunsDialog::waitForCalibration() {
  if (!calibration_job_) return;
  calibration_->waitForFinished();
  // The finished signal may still be queued: show it now (the slot then finds nothing to do).
  showCalibration();
}

void PublishedRunsDialog::showCalibration() {
  if (!calibration_job_) return; // shown already
  const CalibrationJob job = std::move(*calibration_job_);
  calibration_job_.reset();
  QApplication::restoreOverrideCursor();
  showDetails(); // the Calibrate button as the selection allows
  if (auto fit = finishCalibration(job, calibration_->result(), calibration_save_path_); !fit)
    details_->setText(QString::fromStdString(fit.error().message).toHtmlEscaped());
}

Result<HardwareFit> PublishedRunsDialog::calibrateRunsFile(const QString &runs_path,
                                                           const QString &save_path,
                                                           bool with_overhead, bool with_step) {
  auto job = calibrationJob(runs_path, with_overhead, with_step);
  if (!job) return job.error();
  return finishCalibration(*job, fitHardware(job->rows, job->base, job->options), save_path);
}

Result<HardwareFit> PublishedRunsDialog::finishCalibration(const CalibrationJob &job,
                                                           Result<HardwareFit> fit,
                                                           const QString &save_path) {
  const ValidationSet &set = *job.set;
  const HardwareSpec *base = &job.base;
  if (!fit) return makeError(set.name + ": " + fit.error().message);
  if (auto written = writeTextFile(save_path.toStdString(), toJson(fit->hardware).dump(2) + "\n");
      !written)
    return written.error();
  // What changed, in the details pane: each figure fitted, and the errors it leaves.
  QStringList figures;
  if (fit->level_rows > 0)
    figures << tr("GEMM level %1 \u2192 %2")
                   .arg(fit->level_before, 0, 'f', 2)
                   .arg(fit->level_after, 0, 'f', 2);
  if (fit->fp8_rows > 0)
    figures << tr("FP8 level %1 \u2192 %2")
                   .arg(fit->fp8_level_before, 0, 'f', 2)
                   .arg(fit->fp8_level_after, 0, 'f', 2);
  if (fit->moe_host_rows > 0)
    figures << tr("MoE host time %1 \u2192 %2 ms")
                   .arg(fit->moe_host_before_us / 1000, 0, 'f', 1)
                   .arg(fit->moe_host_after_us / 1000, 0, 'f', 1);
  if (job.options.overhead)
    figures << tr("layer overhead %1 \u2192 %2 \u00b5s")
                   .arg(fit->overhead_before_us, 0, 'f', 0)
                   .arg(fit->overhead_after_us, 0, 'f', 0);
  if (job.options.step)
    figures << tr("step overhead %1 \u2192 %2 ms")
                   .arg(fit->step_before_us / 1000, 0, 'f', 1)
                   .arg(fit->step_after_us / 1000, 0, 'f', 1);
  QString text =
      tr("<b>%1 calibrated on %2 runs of %3</b>: %4; mean |error| %5 before, %6 after")
          .arg(QString::fromStdString(base->name).toHtmlEscaped())
          .arg(fit->rows.size())
          .arg(QString::fromStdString(set.name).toHtmlEscaped(), figures.join(QStringLiteral(", ")),
               formatPercent(fit->before.mean()), formatPercent(fit->after.mean()));
  if (fit->held_out.runs > 0)
    text += tr(", %1 with each run held out").arg(formatPercent(fit->held_out.mean()));
  if (fit->level_alone_held_out.runs > 0)
    text += tr(" (the level's runs held out: %1 with the overhead, %2 with the level alone)")
                .arg(formatPercent(fit->overhead_held_out.mean()),
                     formatPercent(fit->level_alone_held_out.mean()));
  if (!job.below_speed_of_light.empty())
    text += tr(". Left out, as measured faster than their speed of light (they did not run as "
               "written): %1")
                .arg(QString::fromStdString(job.below_speed_of_light.front()).toHtmlEscaped() +
                     (job.below_speed_of_light.size() > 1
                          ? tr(" and %1 more").arg(job.below_speed_of_light.size() - 1)
                          : QString()));
  text += tr(".<br>Written to %1; the explorer now prices plans with it.")
              .arg(save_path.toHtmlEscaped());
  details_->setText(text);
  emit hardwareCalibrated(save_path);
  return fit;
}

void PublishedRunsDialog::waitForPredictions() {
  for (std::size_t s = 0; s < watchers_.size(); ++s) {
    watchers_[s]->waitForFinished();
    showPredictions(static_cast<int>(s)); // the finished signal may still be queued
  }
}

void PublishedRunsDialog::showPredictions(int s) {
  auto *watcher = watchers_[static_cast<std::size_t>(s)];
  if (shown_[static_cast<std::size_t>(s)] || !watcher->isFinished()) return;
  shown_[static_cast<std::size_t>(s)] = true;
  const std::vector<PublishedPrediction> predictions = watcher->result();
  {
    QTreeWidgetItem *set_item = tree_->topLevelItem(s);
    StepErrorSummary set_errors;
    int aside = 0; // timed runs set aside
    for (int c = 0; c < set_item->childCount() && c < static_cast<int>(predictions.size()); ++c) {
      QTreeWidgetItem *item = set_item->child(c);
      const PublishedPrediction &prediction = predictions[static_cast<std::size_t>(c)];
      const std::string &set_aside =
          sets_[static_cast<std::size_t>(s)]->cases[static_cast<std::size_t>(c)].set_aside;
      if (prediction.error.isEmpty() && prediction.step_error && set_aside.empty())
        set_errors.add(*prediction.step_error);
      if (prediction.error.isEmpty() && prediction.step_error && !set_aside.empty()) ++aside;
      if (!prediction.error.isEmpty()) {
        item->setText(kPredicted, tr("cannot predict"));
        item->setToolTip(kPredicted, prediction.error);
        continue;
      }
      item->setText(kPredicted, seconds(prediction.step_s));
      if (prediction.step_error && !set_aside.empty()) {
        // Shown, but its measured time is not what the configuration costs: not in the set's
        // figure, not marked as the model's miss.
        item->setText(kError,
                      tr("%1 (set aside)").arg(formatSignedPercent(*prediction.step_error)));
        item->setToolTip(kError,
                         tr("Not in the set's mean: %1").arg(QString::fromStdString(set_aside)));
      } else if (prediction.step_error) {
        item->setText(kError, formatSignedPercent(*prediction.step_error));
        if (std::abs(*prediction.step_error) > kWorstStepErrorGoal) {
          item->setForeground(kError, palette::badValue());
          item->setToolTip(kError, tr("Beyond the 8 % the cost model aims for on every row; "
                                      "docs/validation.md says what is known of why."));
        }
        if (prediction.below_speed_of_light) {
          item->setText(kError, item->text(kError) + tr(" (below speed of light)"));
          item->setToolTip(kError,
                           tr("Measured faster than this configuration's speed of light (every "
                              "kernel at the GPU's peak, every link at its line rate): the run "
                              "was not the configuration as written, or it overlapped something "
                              "pipescope prices in series. Calibrate leaves it out."));
        }
      } else {
        item->setText(kError, QStringLiteral("\u2014"));
      }
    }
    // The set's accuracy at a glance, as `compare --published SET` sums it up.
    if (set_errors.runs == 1)
      set_item->setText(kRun, set_item->text(kRun) + tr(" \u2014 |error| %1 % on its one timed run")
                                                         .arg(set_errors.mean() * 100, 0, 'f', 1));
    else if (set_errors.runs > 1)
      set_item->setText(kRun,
                        set_item->text(kRun) + tr(" \u2014 mean |error| %1 % over %2 timed runs")
                                                   .arg(set_errors.mean() * 100, 0, 'f', 1)
                                                   .arg(set_errors.runs));
    if (aside > 0)
      set_item->setText(kRun, set_item->text(kRun) + tr(" (%n set aside)", nullptr, aside));
  }
}

std::optional<PublishedRun> PublishedRunsDialog::selected() const {
  const QTreeWidgetItem *item = tree_->currentItem();
  if (!item) return std::nullopt;
  const int s = item->data(kRun, kSetRole).toInt(), c = item->data(kRun, kCaseRole).toInt();
  if (c < 0 || s < 0 || s >= static_cast<int>(sets_.size())) return std::nullopt;
  const ValidationSet &set = *sets_[static_cast<std::size_t>(s)];
  if (c >= static_cast<int>(set.cases.size())) return std::nullopt;
  return PublishedRun{set.name, set.title, set.cases[static_cast<std::size_t>(c)]};
}

bool PublishedRunsDialog::select(const QString &set, const QString &id) {
  for (int s = 0; s < tree_->topLevelItemCount(); ++s) {
    QTreeWidgetItem *set_item = tree_->topLevelItem(s);
    const int index = set_item->data(kRun, kSetRole).toInt();
    if (set_item->isHidden() ||
        QString::fromStdString(sets_[static_cast<std::size_t>(index)]->name) != set)
      continue;
    for (int c = 0; c < set_item->childCount(); ++c)
      if (set_item->child(c)->text(kRun) == id) {
        tree_->setCurrentItem(set_item->child(c));
        tree_->scrollToItem(set_item->child(c));
        return true;
      }
  }
  return false;
}

int PublishedRunsDialog::runsFileSet(const QString &absolute) const {
  for (std::size_t s = 0; s < set_files_.size(); ++s)
    if (!absolute.isEmpty() && set_files_[s] == absolute &&
        !tree_->topLevelItem(static_cast<int>(s))->isHidden())
      return static_cast<int>(s);
  return -1;
}

QString PublishedRunsDialog::currentRunsFile() const {
  const int s = tree_->currentItem() ? tree_->currentItem()->data(kRun, kSetRole).toInt() : -1;
  return s >= 0 ? set_files_[static_cast<std::size_t>(s)] : QString();
}

bool PublishedRunsDialog::removeRunsFile(const QString &path) {
  const QString absolute = QFileInfo(path).absoluteFilePath();
  const int s = runsFileSet(absolute);
  if (s < 0) return false;
  // The set's item is hidden rather than deleted: the items' set indices and the predictions
  // still arriving for them stay as they are.
  QTreeWidgetItem *set_item = tree_->topLevelItem(s);
  if (set_item->isSelected() || tree_->currentItem() == set_item ||
      (tree_->currentItem() && tree_->currentItem()->parent() == set_item))
    tree_->setCurrentItem(nullptr);
  set_item->setHidden(true);
  rememberRunsFiles();
  details_->setText(
      tr("Removed %1 from the list (the file itself is unchanged).").arg(absolute.toHtmlEscaped()));
  return true;
}

void PublishedRunsDialog::showDetails() {
  const auto run = selected();
  open_->setEnabled(run.has_value());
  // Calibrate and Remove apply to the runs files added here (the shipped sets fitted the
  // presets, and stay).
  const bool runs_file = !currentRunsFile().isEmpty();
  calibrate_->setEnabled(runs_file && !calibrating());
  remove_->setEnabled(runs_file);
  if (!run) {
    details_->clear();
    return;
  }
  const ValidationCase &row = run->row;
  QString text = QStringLiteral("<b>%1</b> (%2)<br>%3")
                     .arg(QString::fromStdString(row.id).toHtmlEscaped(),
                          QString::fromStdString(run->set_name).toHtmlEscaped(),
                          QString::fromStdString(row.published).toHtmlEscaped());
  if (!row.measured_how.empty())
    text += QStringLiteral("<br><span style='color:%1'>%2</span>")
                .arg(palette::hintText().name(),
                     QString::fromStdString(row.measured_how).toHtmlEscaped());
  if (!row.set_aside.empty())
    text += tr("<br>Set aside, not in the set's mean: %1")
                .arg(QString::fromStdString(row.set_aside).toHtmlEscaped());
  details_->setText(text);
}

} // namespace pipescope::gui
