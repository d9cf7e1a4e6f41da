#pragma once
// File > Open published run: every run of the shipped validation sets (docs/validation.md,
// `pipescope compare --published all`), with what was measured and what pipescope predicts, to
// open in the explorer exactly as it was run and vary from there. The list shows at once; the
// predictions fill in from a worker thread.
#include <QDialog>
#include <QFutureWatcher>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/hardware_fit.h"
#include "engine/model/validation.h"

class QCheckBox;
class QLabel;
class QPushButton;
class QTreeWidget;

namespace pipescope::gui {

/// One published run and the set it belongs to.
struct PublishedRun {
  std::string set_name;  ///< the set's file stem (`compare --published NAME`)
  std::string set_title; ///< who measured what, on which GPUs
  ValidationCase row;
};

/// The shipped run named "SET/ID" (pipescope-gui --published), or one message naming what there
/// is: the form, the shipped sets, or the set's rows.
Result<PublishedRun> findPublishedRun(const std::string &set_and_id);

/// What the table predicts for one row: the step and its error, or why it cannot be predicted.
struct PublishedPrediction {
  double step_s = 0;
  std::optional<double> step_error;
  bool below_speed_of_light = false; ///< measured faster than its configuration allows
  QString error;                     ///< non-empty when the row cannot be predicted
};

class PublishedRunsDialog : public QDialog {
  Q_OBJECT
public:
  /// With `remember_runs_files`, the runs files added (the last eight) persist in QSettings and
  /// are listed again the next time; one that no longer loads is dropped, the details say why.
  explicit PublishedRunsDialog(QWidget *parent = nullptr, bool remember_runs_files = false);
  ~PublishedRunsDialog() override;

  /// The selected run (what Open opens), if a run is selected.
  std::optional<PublishedRun> selected() const;
  /// Selects the row `id` of the set `set`; false if there is none.
  bool select(const QString &set, const QString &id);
  /// Blocks until the predictions are in the list (tests, screenshots).
  void waitForPredictions();
  /// Adds a runs file (a "pipescope.validation" JSON of the user's measured runs, as `pipescope
  /// megatron --add-row` writes) below the shipped sets, predicted the same way, and selects
  /// its first run; a file that does not load is refused with the reason, nothing added. A
  /// file added before is not added twice.
  Status addRunsFile(const QString &path);
  /// Fits the hardware to an added runs file's timed rows as `pipescope calibrate --published
  /// RUNS` does (the figures the rows ask for; with `with_overhead` also the layer overhead
  /// beside the level, as --fit adds overhead, with `with_step` the step overhead, as --fit adds
  /// step), writes it to `save_path`, says in the details
  /// what changed and emits hardwareCalibrated. The error names what is missing (the file was
  /// not added, its rows run on several GPU types or have no measured step) or why it fails.
  /// The Calibrate hardware button does the same with the fit on a worker thread
  /// (startCalibration).
  Result<HardwareFit> calibrateRunsFile(const QString &runs_path, const QString &save_path,
                                        bool with_overhead = false, bool with_step = false);
  /// What the Calibrate hardware button starts once it has the file to save: the same fit on a
  /// worker thread, the details saying so and the button held until it is done; refused (with
  /// calibrateRunsFile's reasons) before anything starts.
  Status startCalibration(const QString &runs_path, const QString &save_path, bool with_overhead,
                          bool with_step = false);
  /// Whether a calibration started by the button is still fitting.
  bool calibrating() const;
  /// Blocks until the button's calibration, if any, is done and shown (tests, screenshots).
  void waitForCalibration();
  /// Takes an added runs file off the list (and off the remembered ones); the file itself is
  /// left as it is. False if it is not on the list.
  bool removeRunsFile(const QString &path);
  QTreeWidget *tree() const { return tree_; }

signals:
  /// Calibrate hardware wrote a hardware file: the explorer adds it to its hardware box.
  void hardwareCalibrated(const QString &path);

private:
  /// What a calibration fits: the set's timed rows (the set kept alive with them), the base
  /// hardware and the figures; checked on the GUI thread, fitted anywhere.
  struct CalibrationJob {
    std::shared_ptr<const ValidationSet> set;
    std::vector<FitRow> rows;
    HardwareSpec base;
    HardwareFitOptions options;
    /// Runs left out as measured faster than their speed of light (removeRowsBelowSpeedOfLight).
    std::vector<std::string> below_speed_of_light;
  };
  Result<CalibrationJob> calibrationJob(const QString &runs_path, bool with_overhead,
                                        bool with_step) const;
  /// The button's calibration, done: the button and cursor back, then finishCalibration (or its
  /// error in the details). Nothing when there is none or it was shown.
  void showCalibration();
  /// Writes the fitted file, says what changed in the details and emits hardwareCalibrated.
  Result<HardwareFit> finishCalibration(const CalibrationJob &job, Result<HardwareFit> fit,
                                        const QString &save_path);
  /// A set's item and its rows' items, and its predictions started on a worker thread.
  void addSet(const std::shared_ptr<const ValidationSet> &set);
  void showPredictions(int set);
  /// Keeps the runs files added in QSettings (with remember_runs_files).
  void rememberRunsFiles() const;
  void showDetails();
  /// The set of the runs file at `absolute` still on the list, or -1.
  int runsFileSet(const QString &absolute) const;
  /// The runs file of the selected set or row; empty for a shipped set or no selection.
  QString currentRunsFile() const;

  std::vector<std::shared_ptr<const ValidationSet>> sets_; ///< in the order of the tree
  std::vector<QString> set_files_;   ///< per set, its runs file ("" for a shipped set)
  bool remember_runs_files_ = false; ///< the added files persist in QSettings
  QTreeWidget *tree_ = nullptr;
  QLabel *details_ = nullptr;
  QPushButton *open_ = nullptr;
  QPushButton *calibrate_ = nullptr;
  QCheckBox *calibrate_overhead_ = nullptr; ///< fit the layer overhead too
  QCheckBox *calibrate_step_ = nullptr;     ///< fit the step overhead too
  /// The button's calibration on a worker thread, and what it needs when it is done.
  QFutureWatcher<Result<HardwareFit>> *calibration_ = nullptr;
  std::optional<CalibrationJob> calibration_job_;
  QString calibration_save_path_;
  QPushButton *remove_ = nullptr;
  /// One prediction per row of each set, and whether they are shown yet.
  std::vector<QFutureWatcher<std::vector<PublishedPrediction>> *> watchers_;
  std::vector<bool> shown_;
};

} // namespace pipescope::gui
