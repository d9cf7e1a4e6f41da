// The explorer's files, offscreen: a plan saved and opened again is the same plan (and a bad one
// is refused), a plan's training options load into the controls and save back unchanged, the
// timeline exports as PNG, SVG and a Chrome trace, and the settings remember the plan.
#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>

#include "engine/model/validation.h"
#include "engine/plan_file.h"
#include "gui/run/measurement.h"
#include "gui/widgets/controls_panel.h"
#include "gui/widgets/document_actions.h"
#include "gui/widgets/layer_editor.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/metrics_panel.h"
#include "gui/widgets/published_runs_dialog.h"
#include "gui/widgets/timeline_widget.h"
#include "tests/gui/window_test_support.h"
#include "tests/write_file.h"

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
    const QString bad = directory.filePath(QStringLiteral("bad.json"));
    QVERIFY(writeFile(bad, "{\"format\": \"pipescope.plan\", \"version\": 1, \"schedule\": 5}"));
    QVERIFY(!window.openPlan(bad));
    QVERIFY(!window.errorMessage().isEmpty());
  }

  void trainingOptionsLoadIntoTheControls() {
    QTemporaryDir directory;
    QVERIFY(directory.isValid());
    auto model = loadModelSpec("mixtral-8x7b");
    auto hardware = loadHardwareSpec("h100-sxm");
    QVERIFY(model.ok() && hardware.ok());
    Plan plan = examplePlan();
    plan.mesh.dp = 2;
    plan.model = ModelSetup{*model, *hardware, TrainingSetup{}};
    // The training object as a person writes it in a plan file.
    nlohmann::json json = planToJson(plan);
    json["training"] = {{"zero_stage", 3},
                        {"gemm_precision", "fp8"},
                        {"fp8_dispatch", false},
                        {"collective_algorithm", "tree"},
                        {"cross_entropy", "torch-fp32"},
                        {"recompute", "full"},
                        {"sequence_parallel", true},
                        {"overlap_gradient_sync", true}};
    const QString path = directory.filePath(QStringLiteral("training.json"));
    {
      QFile file(path);
      QVERIFY(file.open(QIODevice::WriteOnly));
      file.write(QByteArray::fromStdString(json.dump(2)));
    }
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    QVERIFY(window.openPlan(path));
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    auto *controls = window.controls();
    QCOMPARE(controls->zeroStageBox()->currentData().toInt(), 3);
    QCOMPARE(controls->gemmPrecisionBox()->currentText(), QStringLiteral("fp8"));
    QVERIFY(controls->fp8DispatchBox()->isEnabled());
    QVERIFY(!controls->fp8DispatchBox()->isChecked());
    QCOMPARE(controls->collectiveAlgorithmBox()->currentText(), QStringLiteral("tree"));
    QCOMPARE(controls->crossEntropyBox()->currentText(), QStringLiteral("torch-fp32"));
    QCOMPARE(controls->recomputeBox()->currentText(), QStringLiteral("full"));
    QVERIFY(controls->sequenceParallelBox()->isChecked());
    QVERIFY(controls->overlapGradientSyncBox()->isChecked());

    // Controls to plan and back: an edit elsewhere keeps every option, and the saved file
    // reopens into the same controls.
    controls->microbatches()->spinBox()->setValue(12);
    window.settle();
    const TrainingSetup &edited = window.snapshot()->plan.model->training;
    QCOMPARE(edited.zero_stage, 3);
    QCOMPARE(edited.gemm_precision, GemmPrecision::Fp8);
    QVERIFY(!edited.fp8_dispatch);
    QCOMPARE(edited.collective_algorithm, CollectiveAlgorithm::Tree);
    QCOMPARE(edited.cross_entropy, std::string("torch-fp32"));
    QCOMPARE(edited.recompute, Recompute::Full);
    QVERIFY(edited.sequence_parallel && edited.overlap_gradient_sync);
    const Plan saved = controls->plan();
    const QString saved_path = directory.filePath(QStringLiteral("saved.json"));
    QVERIFY(window.savePlanTo(saved_path));
    window.setPlan(examplePlan());
    window.settle();
    QVERIFY(window.openPlan(saved_path));
    window.settle();
    QCOMPARE(planToJson(window.controls()->plan()), planToJson(saved));
    QCOMPARE(controls->zeroStageBox()->currentData().toInt(), 3);
    QCOMPARE(controls->collectiveAlgorithmBox()->currentText(), QStringLiteral("tree"));
  }

  // File > Open published run: the dialog lists every published row with the table's
  // prediction; opening one shows its configuration, and Metrics sets the measurement beside the
  // prediction (the same error as `compare --published`) until the settings leave it.
  // Add runs file: the user's own runs (a validation file, as `pipescope megatron --add-row`
  // writes) join the shipped sets, predicted the same way, and open as a published run does
  // (also as RUNS.json/ID on the command line); a file that does not load is refused, nothing
  // added.
  void aRunsFileJoinsThePublishedRuns() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    // One run of someone's own: a GPT 7.1B on 96 H100s, measured at 0.81 s a step.
    const QString runs = dir.filePath(QStringLiteral("my-runs.json"));
    nlohmann::json run_a = {{"id", "run-a"},
                            {"published", "our 7.1B run"},
                            {"hardware", "h100-sxm"},
                            {"model",
                             {{"name", "gpt-7.1b"},
                              {"layers", 30},
                              {"hidden", 4096},
                              {"ffn_hidden", 16384},
                              {"heads", 32},
                              {"kv_heads", 32},
                              {"vocab", 131072},
                              {"sequence_length", 4096},
                              {"microbatch_size", 1},
                              {"position_embeddings", 4096},
                              {"attention", "flash"}}},
                            {"mesh", {{"dp", 48}, {"tp", 2}, {"pp", 1}}},
                            {"training",
                             {{"zero1", true},
                              {"sequence_parallel", true},
                              {"overlap_gradient_sync", true},
                              {"tp_comm_overlap", true},
                              {"fp32_gradients", true}}},
                            {"schedule", {{"name", "1f1b"}, {"microbatches", 4}}},
                            {"measured", {{"step_time_s", 0.81}}}};
    // The same model on half the GPUs, twice the microbatches.
    nlohmann::json run_b = run_a;
    run_b["id"] = "run-b";
    run_b["published"] = "the same on 48 GPUs";
    run_b["mesh"]["dp"] = 24;
    run_b["schedule"]["microbatches"] = 8;
    run_b["measured"]["step_time_s"] = 1.58;
    const std::string text = nlohmann::json{
        {"format", "pipescope.validation"},
        {"version", 1},
        {"title", "My runs"},
        {"source", "measured on our cluster"},
        {"rows", {run_a, run_b}}}.dump();
    QVERIFY(writeFile(runs, QByteArray::fromStdString(text)));

    PublishedRunsDialog dialog;
    const int sets = dialog.tree()->topLevelItemCount();
    QVERIFY(!dialog.addRunsFile(dir.filePath(QStringLiteral("missing.json"))).ok());
    QCOMPARE(dialog.tree()->topLevelItemCount(), sets);
    QVERIFY(dialog.addRunsFile(runs).ok());
    QVERIFY(dialog.addRunsFile(runs).ok()); // once only
    QCOMPARE(dialog.tree()->topLevelItemCount(), sets + 1);
    dialog.waitForPredictions();
    const auto chosen = dialog.selected(); // the file's first run is selected
    QVERIFY(chosen.has_value());
    QCOMPARE(chosen->set_name, std::string("my-runs"));
    QCOMPARE(chosen->row.id, std::string("run-a"));
    auto predicted = predictValidationCase(chosen->row);
    QVERIFY(predicted.ok());
    const QTreeWidgetItem *item = dialog.tree()->currentItem();
    QCOMPARE(item->text(4), formatDuration(predicted->predicted_step_s * 1e6));
    QCOMPARE(item->text(5), formatSignedPercent(*predicted->step_error));
    QVERIFY(dialog.tree()->topLevelItem(sets)->text(0).startsWith(QStringLiteral("My runs")));
    // The command line's SET/ID takes the file's path as the set.
    auto by_path = findPublishedRun(runs.toStdString() + "/run-a");
    QVERIFY2(by_path.ok(), by_path.ok() ? "" : by_path.error().message.c_str());
    QCOMPARE(by_path->row.measured_step_s, 0.81);
    QVERIFY(!findPublishedRun(runs.toStdString() + "/run-c").ok());

    // Remembered where asked (the explorer's own dialog): listed again next time, not otherwise.
    QSettings().clear();
    {
      PublishedRunsDialog remembering(nullptr, true);
      QCOMPARE(remembering.tree()->topLevelItemCount(), sets);
      QVERIFY(remembering.addRunsFile(runs).ok());
    }
    {
      PublishedRunsDialog again(nullptr, true);
      QCOMPARE(again.tree()->topLevelItemCount(), sets + 1);
      again.waitForPredictions();
    }
    QCOMPARE(PublishedRunsDialog().tree()->topLevelItemCount(), sets);
    QSettings().setValue(QStringLiteral("files/runs"),
                         QStringList{dir.filePath(QStringLiteral("gone.json")), runs});
    {
      PublishedRunsDialog dropped(nullptr, true); // a file no longer there is dropped
      QCOMPARE(dropped.tree()->topLevelItemCount(), sets + 1);
      dropped.waitForPredictions();
    }
    QCOMPARE(QSettings().value(QStringLiteral("files/runs")).toStringList(),
             QStringList{QFileInfo(runs).absoluteFilePath()});
    QSettings().clear();

    // Calibrate hardware: the runs file's level fitted as `pipescope calibrate --published` fits
    // it, the file written, and the explorer told to use it.
    QSignalSpy calibrated(&dialog, &PublishedRunsDialog::hardwareCalibrated);
    const QString hardware = dir.filePath(QStringLiteral("my-hardware.json"));
    QVERIFY(!dialog.calibrateRunsFile(dir.filePath(QStringLiteral("other.json")), hardware).ok());
    QCOMPARE(calibrated.count(), 0);
    auto fit = dialog.calibrateRunsFile(runs, hardware);
    QVERIFY2(fit.ok(), fit.ok() ? "" : fit.error().message.c_str());
    QCOMPARE(calibrated.count(), 1);
    QCOMPARE(calibrated.front().front().toString(), hardware);
    QCOMPARE(fit->level_rows, 2);
    QVERIFY(fit->after.mean() < fit->before.mean());
    auto saved = loadHardwareSpec(hardware.toStdString());
    QVERIFY2(saved.ok(), saved.ok() ? "" : saved.error().message.c_str());
    QVERIFY(saved->calibration.has_value());
    QCOMPARE(saved->calibration->runs, 2);
    const QString details =
        dialog.findChild<QLabel *>(QStringLiteral("published_run_details"))->text();
    QVERIFY2(details.contains(QStringLiteral("calibrated on 2 runs of my-runs")),
             qPrintable(details));
    QVERIFY(!details.contains(QStringLiteral("layer overhead")));

    // The button's way: the fit on a worker thread, the button held and a second start refused
    // until it is done, then the same file, details and signal; "with a layer overhead" checked
    // adds the overhead beside the level (pipescope calibrate --fit level,overhead).
    auto *overhead = dialog.findChild<QCheckBox *>(QStringLiteral("calibrate_overhead"));
    auto *calibrate = dialog.findChild<QPushButton *>(QStringLiteral("calibrate_hardware"));
    QVERIFY(overhead && calibrate && calibrate->isEnabled() && !overhead->isChecked());
    const QString with_overhead = dir.filePath(QStringLiteral("my-hardware-overhead.json"));
    QVERIFY(dialog.startCalibration(runs, with_overhead, true).ok());
    QVERIFY(dialog.calibrating());
    QVERIFY(!calibrate->isEnabled());
    QVERIFY(!dialog.startCalibration(runs, with_overhead, true).ok());
    QVERIFY(dialog.findChild<QLabel *>(QStringLiteral("published_run_details"))
                ->text()
                .startsWith(QStringLiteral("Calibrating h100-sxm on the timed runs of my-runs")));
    dialog.waitForCalibration();
    QVERIFY(!dialog.calibrating());
    QVERIFY(calibrate->isEnabled());
    QCOMPARE(calibrated.count(), 2);
    QCOMPARE(calibrated.back().front().toString(), with_overhead);
    const QString overhead_details =
        dialog.findChild<QLabel *>(QStringLiteral("published_run_details"))->text();
    QVERIFY2(overhead_details.contains(QStringLiteral("layer overhead 0 \u2192 ")),
             qPrintable(overhead_details));
    QVERIFY2(overhead_details.contains(QStringLiteral("with the level alone")),
             qPrintable(overhead_details));
    auto saved_overhead = loadHardwareSpec(with_overhead.toStdString());
    QVERIFY(saved_overhead.ok());
    QVERIFY(saved_overhead->notes.rfind("layer_overhead_us: ", 0) == 0);
    QCoreApplication::processEvents(); // the queued finished signal finds nothing left to do
    QCOMPARE(calibrated.count(), 2);

    // "with a step overhead" fits the step's fixed time beside the level (pipescope calibrate
    // --fit level,step), beside the layer overhead too when both are ticked.
    auto *step = dialog.findChild<QCheckBox *>(QStringLiteral("calibrate_step"));
    QVERIFY(step && !step->isChecked());
    const QString with_step = dir.filePath(QStringLiteral("my-hardware-step.json"));
    const auto both = dialog.calibrateRunsFile(runs, with_step, true, true);
    QVERIFY2(both.ok(), both.ok() ? "" : both.error().message.c_str());
    QCOMPARE(calibrated.count(), 3);
    const QString both_details =
        dialog.findChild<QLabel *>(QStringLiteral("published_run_details"))->text();
    QVERIFY2(both_details.contains(QStringLiteral("layer overhead 0 \u2192 ")) &&
                 both_details.contains(QStringLiteral("step overhead 0.0 \u2192 ")),
             qPrintable(both_details));
    QVERIFY(dialog.startCalibration(runs, with_step, false, true).ok());
    dialog.waitForCalibration();
    QCOMPARE(calibrated.count(), 4);
    const QString step_details =
        dialog.findChild<QLabel *>(QStringLiteral("published_run_details"))->text();
    QVERIFY2(step_details.contains(QStringLiteral("step overhead 0.0 \u2192 ")),
             qPrintable(step_details));
    QVERIFY2(step_details.contains(QStringLiteral("with the level alone")) &&
                 !step_details.contains(QStringLiteral("layer overhead")),
             qPrintable(step_details));
    auto saved_step = loadHardwareSpec(with_step.toStdString());
    QVERIFY(saved_step.ok());
    QVERIFY(saved_step->notes.rfind("step_overhead_us: ", 0) == 0);

    // Remove runs file: off the list and off the remembered files, the file itself unchanged;
    // a shipped set has nothing to remove. Added again, it is listed again.
    QVERIFY(!dialog.removeRunsFile(QStringLiteral("megatron-core-h100")));
    QVERIFY(dialog.select(QStringLiteral("my-runs"), QStringLiteral("run-b")));
    auto *remove = dialog.findChild<QPushButton *>(QStringLiteral("remove_runs_file"));
    QVERIFY(remove && remove->isEnabled());
    remove->click();
    QVERIFY(dialog.tree()->topLevelItem(sets)->isHidden());
    QVERIFY(!dialog.selected());
    QVERIFY(!dialog.select(QStringLiteral("my-runs"), QStringLiteral("run-a")));
    QVERIFY(!dialog.calibrateRunsFile(runs, hardware).ok());
    QVERIFY(!dialog.removeRunsFile(runs));
    QVERIFY(QFileInfo::exists(runs));
    QVERIFY(dialog.select(QStringLiteral("megatron-core-h100"), QStringLiteral("gpt-70b")));
    QVERIFY(!remove->isEnabled());
    QVERIFY(dialog.addRunsFile(runs).ok());
    QVERIFY(dialog.select(QStringLiteral("my-runs"), QStringLiteral("run-a")));
    // A runs file whose timed runs are all set aside gives the calibration nothing to fit on.
    nlohmann::json aside_run = run_a;
    aside_run["measured"]["set_aside"] = "measured during a driver regression";
    const QString aside = dir.filePath(QStringLiteral("aside.json"));
    QVERIFY(writeFile(aside, QByteArray::fromStdString(nlohmann::json{
                                 {"format", "pipescope.validation"},
                                 {"version", 1},
                                 {"title", "Aside"},
                                 {"source", "s"},
                                 {"rows", {aside_run}}}.dump())));
    QVERIFY(dialog.addRunsFile(aside).ok());
    auto nothing = dialog.calibrateRunsFile(aside, hardware);
    QVERIFY(!nothing.ok());
    QVERIFY2(nothing.error().message.find("every timed run is set aside") != std::string::npos,
             nothing.error().message.c_str());
    // A runs file of MoE runs alone fits the MoE host time, and no GEMM level for the layer
    // overhead to go beside: the box is refused, saying what to do.
    QFile shipped_moe(QStringLiteral(
        PIPESCOPE_TEST_DATA "/../../resources/validation/megatron-moe-modelzoo-h100.json"));
    QVERIFY(shipped_moe.open(QIODevice::ReadOnly));
    nlohmann::json moe_runs = nlohmann::json::parse(shipped_moe.readAll().toStdString());
    moe_runs["rows"] = nlohmann::json::array({moe_runs["rows"][0]});
    const QString moe = dir.filePath(QStringLiteral("moe-runs.json"));
    QVERIFY(writeFile(moe, QByteArray::fromStdString(moe_runs.dump())));
    QVERIFY(dialog.addRunsFile(moe).ok());
    auto moe_overhead = dialog.calibrateRunsFile(moe, hardware, true);
    QVERIFY(!moe_overhead.ok());
    QVERIFY2(moe_overhead.error().message.find("untick \"with a layer overhead\"") !=
                 std::string::npos,
             moe_overhead.error().message.c_str());
    QVERIFY(!dialog.startCalibration(moe, hardware, true).ok());
    QVERIFY(!dialog.calibrating());
    // A run measured faster than its speed of light (the ModelZoo's FSDP run) did not run as
    // written: left out of the fit, as pipescope calibrate leaves it, and the details say so; a
    // file of it alone has nothing to fit on.
    nlohmann::json with_fsdp = moe_runs;
    with_fsdp["rows"] = nlohmann::json::array();
    shipped_moe.seek(0);
    const nlohmann::json all_moe = nlohmann::json::parse(shipped_moe.readAll().toStdString());
    for (const auto &row : all_moe["rows"])
      if (row["id"] == "qwen3-235b-a22b-ep8-fsdp" || row["id"] == "qwen3-235b-a22b-ep32-deepep")
        with_fsdp["rows"].push_back(row);
    QCOMPARE(with_fsdp["rows"].size(), std::size_t{2});
    const QString fsdp = dir.filePath(QStringLiteral("fsdp-runs.json"));
    QVERIFY(writeFile(fsdp, QByteArray::fromStdString(with_fsdp.dump())));
    QVERIFY(dialog.addRunsFile(fsdp).ok());
    auto without_fsdp = dialog.calibrateRunsFile(fsdp, hardware);
    QVERIFY2(without_fsdp.ok(), without_fsdp.ok() ? "" : without_fsdp.error().message.c_str());
    QCOMPARE(without_fsdp->rows.size(), std::size_t{1});
    const QString fsdp_details =
        dialog.findChild<QLabel *>(QStringLiteral("published_run_details"))->text();
    QVERIFY2(fsdp_details.contains(QStringLiteral("Left out, as measured faster than their speed "
                                                  "of light")) &&
                 fsdp_details.contains(QStringLiteral("qwen3-235b-a22b-ep8-fsdp")),
             qPrintable(fsdp_details));
    with_fsdp["rows"].erase(0);
    QCOMPARE(with_fsdp["rows"][0]["id"].get<std::string>(),
             std::string("qwen3-235b-a22b-ep8-fsdp"));
    const QString fsdp_alone = dir.filePath(QStringLiteral("fsdp-alone.json"));
    QVERIFY(writeFile(fsdp_alone, QByteArray::fromStdString(with_fsdp.dump())));
    QVERIFY(dialog.addRunsFile(fsdp_alone).ok());
    auto alone = dialog.calibrateRunsFile(fsdp_alone, hardware);
    QVERIFY(!alone.ok());
    QVERIFY2(alone.error().message.find("faster than its speed of light") != std::string::npos,
             alone.error().message.c_str());
    {
      QSettings().clear();
      PublishedRunsDialog remembering(nullptr, true);
      QVERIFY(remembering.addRunsFile(runs).ok());
      QVERIFY(remembering.removeRunsFile(runs));
      QCOMPARE(QSettings().value(QStringLiteral("files/runs")).toStringList(), QStringList{});
      remembering.waitForPredictions();
    }
    QSettings().clear();
  }

  void publishedRunOpensAsItRan() {
    auto set = loadValidationSet("megatron-core-h100");
    QVERIFY(set.ok());
    const auto row = std::find_if(set->cases.begin(), set->cases.end(),
                                  [](const ValidationCase &c) { return c.id == "gpt-70b"; });
    QVERIFY(row != set->cases.end());
    auto table = predictValidationCase(*row);
    QVERIFY(table.ok());
    const QString error = formatSignedPercent(*table->step_error);

    PublishedRunsDialog dialog;
    dialog.waitForPredictions();
    QVERIFY(!dialog.select(QStringLiteral("megatron-core-h100"), QStringLiteral("gpt-2")));
    QVERIFY(!dialog.selected());
    QVERIFY(dialog.select(QStringLiteral("megatron-core-h100"), QStringLiteral("gpt-70b")));
    const auto chosen = dialog.selected();
    QVERIFY(chosen.has_value());
    QCOMPARE(chosen->set_name, std::string("megatron-core-h100"));
    QCOMPARE(chosen->row.id, std::string("gpt-70b"));
    const QTreeWidgetItem *item = dialog.tree()->currentItem();
    QCOMPARE(item->text(4), formatDuration(table->predicted_step_s * 1e6));
    QCOMPARE(item->text(5), error);
    // Every shipped row is listed, and every one was predicted.
    int rows = 0;
    for (int s = 0; s < dialog.tree()->topLevelItemCount(); ++s)
      for (int c = 0; c < dialog.tree()->topLevelItem(s)->childCount(); ++c, ++rows)
        QVERIFY(dialog.tree()->topLevelItem(s)->child(c)->text(4).contains(
            QRegularExpression(QStringLiteral("^[0-9.]+ (s|ms)$"))));
    int shipped = 0;
    for (const auto &name : validationSetNames())
      shipped += static_cast<int>(loadValidationSet(name)->cases.size());
    QCOMPARE(rows, shipped);
    // Each set's line sums it up as `compare --published SET` does.
    double error_sum = 0;
    for (const ValidationCase &c : set->cases)
      error_sum += std::abs(*predictValidationCase(c)->step_error);
    const QString mean =
        QStringLiteral("mean |error| %1 % over %2 timed runs")
            .arg(error_sum / static_cast<double>(set->cases.size()) * 100, 0, 'f', 1)
            .arg(set->cases.size());
    bool summed = false;
    for (int s = 0; s < dialog.tree()->topLevelItemCount(); ++s)
      summed = summed || dialog.tree()->topLevelItem(s)->text(0).endsWith(mean);
    QVERIFY2(summed, qPrintable(mean));
    // A row whose measured time is set aside shows its error, marked, out of its set's mean.
    QVERIFY(dialog.select(QStringLiteral("megatron-bridge-h100"),
                          QStringLiteral("qwen3-30b-a3b-gbs512-pp2")));
    const QTreeWidgetItem *aside = dialog.tree()->currentItem();
    QVERIFY2(aside->text(5).endsWith(QStringLiteral(" (set aside)")), qPrintable(aside->text(5)));
    QVERIFY(aside->toolTip(5).contains(QStringLiteral("#1998")));
    QVERIFY2(aside->parent()->text(0).endsWith(QStringLiteral("over 10 timed runs (1 set aside)")),
             qPrintable(aside->parent()->text(0)));
    QVERIFY(dialog.findChild<QLabel *>(QStringLiteral("published_run_details"))
                ->text()
                .contains(QStringLiteral("Set aside, not in the set's mean: a regression")));
    // A run measured faster than its speed of light is marked so, as compare marks it.
    QVERIFY(dialog.select(QStringLiteral("megatron-moe-modelzoo-h100"),
                          QStringLiteral("qwen3-235b-a22b-ep8-fsdp")));
    const QTreeWidgetItem *too_fast = dialog.tree()->currentItem();
    QVERIFY2(too_fast->text(5).endsWith(QStringLiteral(" (below speed of light)")),
             qPrintable(too_fast->text(5)));
    QVERIFY(too_fast->toolTip(5).contains(QStringLiteral("Calibrate leaves it out")));
    QVERIFY(dialog.select(QStringLiteral("megatron-core-h100"), QStringLiteral("gpt-32b")));
    QVERIFY(!dialog.tree()->currentItem()->text(5).contains(QStringLiteral("speed of light")));

    MainWindow window(quietOptions());
    window.show();
    window.openPublishedRun(*chosen);
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    const Plan &shown = window.snapshot()->plan;
    QCOMPARE(shown.request.pp, 2);
    QCOMPARE(shown.request.microbatches, 8);
    QCOMPARE(shown.mesh.tp, 8);
    QCOMPARE(shown.mesh.dp, 48);
    QVERIFY(shown.model->training.fp32_gradients);
    const QString published = window.metrics()->valueText(QStringLiteral("published"));
    QVERIFY2(published.contains(QStringLiteral("gpt-70b")), qPrintable(published));
    QVERIFY2(published.contains(formatDuration(row->measured_step_s * 1e6) +
                                QStringLiteral(" measured")),
             qPrintable(published));
    QVERIFY2(published.contains(formatDuration(table->predicted_step_s * 1e6) +
                                QStringLiteral(" predicted")),
             qPrintable(published));
    QVERIFY2(published.contains(error), qPrintable(published));

    // Another M is not the published run any more: the panel says so instead of an error.
    window.controls()->microbatches()->spinBox()->setValue(16);
    window.settle();
    QCOMPARE(window.snapshot()->plan.request.microbatches, 16);
    const QString changed = window.metrics()->valueText(QStringLiteral("published"));
    QVERIFY2(changed.contains(QStringLiteral("differ")), qPrintable(changed));
    QVERIFY2(!changed.contains(error), qPrintable(changed));
    // Back to 8: it is again.
    window.controls()->microbatches()->spinBox()->setValue(8);
    window.settle();
    QVERIFY(window.metrics()->valueText(QStringLiteral("published")).contains(error));
    // Any other plan lets the published run go.
    window.setPlan(examplePlan());
    window.settle();
    QCOMPARE(window.metrics()->valueText(QStringLiteral("published")), QStringLiteral("\u2014"));
  }

  // File > Open Megatron-LM launch: a CI launch opens as its validation row's plan (the GPUs from
  // the dialog), a torchrun script gives its GPUs to the dialog, and a launch that cannot be
  // read leaves the window as it was with the reason in the banner.
  void megatronLaunchOpensAsItsRow() {
    MainWindow window(quietOptions());
    window.show();
    window.settle();
    const QString launch = QStringLiteral(
        PIPESCOPE_TEST_DATA "/megatron_ci/gpt3_7b_tp1_pp4_memory_speed.model_config.yaml");
    QVERIFY(window.documents()->openMegatronLaunch(launch, 8));
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    auto set = loadValidationSet("megatron-lm-ci-h100");
    QVERIFY(set.ok());
    const Plan row = validationCasePlan(set->cases[1]); // gpt3-7b-tp1-pp4
    const Plan &shown = window.snapshot()->plan;
    QCOMPARE(shown.request.pp, 4);
    QCOMPARE(shown.request.chunks, 8);
    QCOMPARE(shown.request.microbatches, row.request.microbatches);
    QCOMPARE(shown.mesh.dp, 2);
    QCOMPARE(shown.model->model.vocab, row.model->model.vocab);
    QCOMPARE(shown.model->training.cross_entropy, std::string("vocab-parallel-unfused"));

    QTemporaryDir dir;
    const QString script = dir.filePath(QStringLiteral("train.sh"));
    QVERIFY(writeFile(script,
                      "torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --num-layers 4 "
                      "--hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                      "--vocab-size 100 --tensor-model-parallel-size 3\n"));
    QCOMPARE(DocumentActions::launchGpus(script), 32);
    QCOMPARE(DocumentActions::launchGpus(launch), 0);
    QVERIFY(!window.documents()->openMegatronLaunch(script, 32));
    window.settle();
    QVERIFY2(window.errorMessage().contains(QStringLiteral("TP 3")),
             qPrintable(window.errorMessage()));
    QCOMPARE(window.snapshot()->plan.request.pp, 4); // still the launch opened before

    // A training log opens as its run: the log's world size, and its measured step said.
    const QString log = QStringLiteral(PIPESCOPE_TEST_DATA "/megatron_h100_run/train_gpt_1.7b.log");
    QCOMPARE(DocumentActions::launchGpus(log), 1);
    QSignalSpy said(window.documents(), &DocumentActions::message);
    QVERIFY(window.documents()->openMegatronLaunch(log, 0));
    window.settle();
    QVERIFY2(window.errorMessage().isEmpty(), qPrintable(window.errorMessage()));
    QCOMPARE(window.snapshot()->plan.model->model.layers, 24);
    QCOMPARE(window.snapshot()->plan.model->model.vocab, 131072);
    QCOMPARE(window.snapshot()->plan.request.microbatches, 8);
    QVERIFY(!said.isEmpty());
    const QString text = said.back().front().toString();
    // Metrics sets the log's measured step beside the prediction, as for a published run.
    const QString published = window.metrics()->valueText(QStringLiteral("published"));
    QVERIFY2(published.contains(QStringLiteral("step 1.227 s measured")), qPrintable(published));
    QVERIFY2(text.contains(QStringLiteral("Megatron-LM log")) &&
                 text.contains(QStringLiteral("on 1 GPU: ")) &&
                 text.endsWith(QStringLiteral("; the log measured 1.227 s a step")),
             qPrintable(text));
  }

  // Every shipped published run opens in the explorer and shows the table's error: the 1T
  // SC'21 run's 64 pipeline stages (past the layer editor's spin boxes) among them.
  void everyPublishedRunOpens() {
    MainWindow window(quietOptions());
    window.show();
    for (const auto &name : validationSetNames()) {
      auto set = loadValidationSet(name);
      QVERIFY(set.ok());
      for (const ValidationCase &row : set->cases) {
        const QString where = QString::fromStdString(name + "/" + row.id);
        auto table = predictValidationCase(row);
        QVERIFY2(table.ok(), qPrintable(where));
        window.openPublishedRun(PublishedRun{set->name, set->title, row});
        window.settle();
        QVERIFY2(window.errorMessage().isEmpty(),
                 qPrintable(where + QStringLiteral(": ") + window.errorMessage()));
        const QString published = window.metrics()->valueText(QStringLiteral("published"));
        QVERIFY2(published.contains(formatDuration(table->predicted_step_s * 1e6) +
                                    QStringLiteral(" predicted")) ||
                     !table->step_error,
                 qPrintable(where + QStringLiteral(": ") + published));
        LayerEditor *editor = window.controls()->layerEditor();
        const int stages = static_cast<int>(window.snapshot()->derivation->model_layout.size());
        QCOMPARE(editor->stageCount(), stages <= LayerEditor::kMaxSpunStages ? stages : 0);
        QCOMPARE(editor->summary()->text().count(QLatin1Char('|')), stages - 1);
      }
    }
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
      window.metricsDock()->toggleViewAction()->trigger(); // View > Metrics panel, hidden
      window.settle();
      window.close();
    }
    MainWindow restored(options);
    restored.show();
    restored.settle();
    QCOMPARE(restored.snapshot()->plan.request.microbatches, 13);
    QVERIFY(restored.metricsDock()->isHidden()); // and which side panels were shown
    QVERIFY(restored.settingsDock()->isVisible());
    QSettings().clear();
  }
};

QTEST_MAIN(TestDocuments)
#include "test_documents.moc"
