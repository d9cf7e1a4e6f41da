#pragma once
// The controls: schedule, P, M, V, microbatch group, the mesh (DP, CP, TP, EP, GPUs per node,
// rank order), op times or a model + hardware preset with its training options (recomputation,
// ZeRO stage, GEMM precision, collectives, loss, sequence parallelism, DP overlap) and device
// memory. Edits come
// out as a whole Plan; controls that do not apply to the chosen schedule or cost source are
// disabled with a tooltip that says why.
#include <QWidget>
#include <optional>
#include <vector>

#include "engine/plan_file.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QGroupBox;
class QHBoxLayout;
class QLabel;
class QRadioButton;
class QSlider;
class QSpinBox;

class QToolButton;

namespace pipescope::gui {

class LayerEditor;

/// A slider with a spin box beside it. The spin box reaches further than the slider (the
/// slider covers the everyday range; the spin box accepts large settings).
class SliderSpin : public QWidget {
  Q_OBJECT
public:
  SliderSpin(int slider_max, int spin_max, QWidget *parent = nullptr);
  int value() const;
  void setValue(int value);
  void setRange(int minimum, int slider_max, int spin_max);
  QSlider *slider() const { return slider_; }
  QSpinBox *spinBox() const { return spin_; }
  void setReason(const QString &reason); ///< disabled with this tooltip; empty: enabled

signals:
  void valueChanged(int value);

private:
  QSlider *slider_;
  QSpinBox *spin_;
  QString tooltip_;
};

/// A slider over a list of allowed values (EP: the divisors of dp × cp that divide the experts),
/// with the chosen value beside it.
class ChoiceSlider : public QWidget {
  Q_OBJECT
public:
  explicit ChoiceSlider(QWidget *parent = nullptr);
  int value() const;
  /// Offers `choices` (ascending, non-empty) and selects `value`, or the largest choice below it.
  void setChoices(const std::vector<int> &choices, int value);
  const std::vector<int> &choices() const { return choices_; }
  QSlider *slider() const { return slider_; }
  void setReason(const QString &reason); ///< disabled with this tooltip; empty: enabled

signals:
  void valueChanged(int value);

private:
  QSlider *slider_;
  QLabel *label_;
  std::vector<int> choices_{1};
};

class ControlsPanel : public QWidget {
  Q_OBJECT
public:
  explicit ControlsPanel(QWidget *parent = nullptr);
  /// Characters a combo box keeps when its dock is narrow (its popup shows whole items).
  static constexpr int kComboMinimumCharacters = 8;

  /// Shows a plan in the controls (without emitting planEdited).
  void setPlan(const Plan &plan);
  const Plan &plan() const { return plan_; }

  SliderSpin *pipelineRanks() const { return pp_; }
  SliderSpin *microbatches() const { return microbatches_; }
  SliderSpin *chunks() const { return chunks_; }
  SliderSpin *dataParallel() const { return dp_; }
  SliderSpin *tensorParallel() const { return tp_; }
  SliderSpin *contextParallel() const { return cp_; }
  ChoiceSlider *expertParallel() const { return ep_; }
  ChoiceSlider *expertTensorParallel() const { return etp_; }
  QComboBox *moeDispatcherBox() const { return moe_dispatcher_; }
  QSpinBox *dispatcherSmsBox() const { return dispatcher_sms_; }
  QDoubleSpinBox *moeHostBox() const { return moe_host_; }
  SliderSpin *gpusPerNode() const { return gpus_per_node_; }
  QSpinBox *microbatchGroup() const { return microbatch_group_; }
  QComboBox *scheduleBox() const { return schedule_; }
  QComboBox *rankOrderBox() const { return rank_order_; }
  QRadioButton *opTimesButton() const { return op_times_button_; }
  QRadioButton *modelButton() const { return model_button_; }
  QComboBox *modelPresetBox() const { return model_preset_; }
  QComboBox *hardwarePresetBox() const { return hardware_preset_; }
  /// Adds a hardware file (one `pipescope calibrate` or `pipescope-backend --save-hardware`
  /// wrote, say) to the hardware box beside the presets, selects it and turns on the model +
  /// hardware costs. A file that does not load is refused with the reason; nothing changes.
  Status addHardwareFile(const QString &path);
  QComboBox *recomputeBox() const { return recompute_; }
  QToolButton *recomputeModulesButton() const { return recompute_modules_; }
  /// Training options of the model + hardware costs (TrainingSetup), each naming its plan field.
  QComboBox *zeroStageBox() const { return zero_stage_; }
  QComboBox *gemmPrecisionBox() const { return gemm_precision_; }
  QCheckBox *fp8DispatchBox() const { return fp8_dispatch_; }
  QCheckBox *fp8ParamsBox() const { return fp8_params_; }
  QComboBox *collectiveAlgorithmBox() const { return collective_algorithm_; }
  QComboBox *crossEntropyBox() const { return cross_entropy_; }
  QCheckBox *sequenceParallelBox() const { return sequence_parallel_; }
  QCheckBox *tpCommOverlapBox() const { return tp_comm_overlap_; }
  QCheckBox *tpBackwardOverlapBox() const { return tp_backward_overlap_; }
  QCheckBox *fp32GradientsBox() const { return fp32_gradients_; }
  QCheckBox *overlapGradientSyncBox() const { return overlap_gradient_sync_; }
  QDoubleSpinBox *deviceMemoryBox() const { return device_memory_; }
  QDoubleSpinBox *forwardBox() const { return forward_; }
  /// Says when per-stage op times (from Calibrate or a plan file) stand in for F, B, W.
  QLabel *stageCostsNote() const { return stage_costs_note_; }
  /// Layers per model stage (uneven stages); applies with a model + hardware preset.
  LayerEditor *layerEditor() const { return layer_editor_; }

signals:
  void planEdited(const pipescope::Plan &plan);

private:
  void readControls();
  void updateApplicability();
  /// FP8 offered where the GPU has FP8 tensor cores; FP8 dispatch for MoE models under FP8.
  void updateTrainingApplicability();
  void selectModelPresets();
  /// The training options' controls from `training` (no signals).
  void showTraining(const TrainingSetup &training);
  /// `training` with the training options' controls read into it.
  void readTraining(TrainingSetup &training) const;
  void showStageCosts(const Costs &costs);
  /// Rank orders offered for the plan's cp (three names without CP, four with it), the plan's
  /// selected; EP choices for its model and dp × cp.
  void offerMeshChoices();

  Plan plan_;
  bool updating_ = false;
  /// The last model used, restored when switching back from op times.
  std::optional<ModelSetup> remembered_model_;
  /// Where remembered_model_'s hardware came from: the hardware box's key (a preset name or a
  /// file's path) it was loaded for, so it is loaded again only when the box changes.
  std::string hardware_source_;
  /// The hardware box's current choice: a file item's path, else the preset name shown.
  std::string hardwareKey() const;
  /// The MoE host time a plan on the current hardware takes by default (its file's, else
  /// pipescope's), which the MoE host box shows and leaves unwritten.
  double moe_host_default_us_ = kDefaultMoeLayerHostUs;
  /// Takes `hardware`'s default MoE host time; a box left at the old default follows it.
  void showMoeHostDefault(const HardwareSpec &hardware);

  QComboBox *schedule_ = nullptr;
  QLabel *schedule_summary_ = nullptr;
  SliderSpin *pp_ = nullptr, *microbatches_ = nullptr, *chunks_ = nullptr;
  QSpinBox *microbatch_group_ = nullptr;
  SliderSpin *dp_ = nullptr, *tp_ = nullptr, *cp_ = nullptr, *gpus_per_node_ = nullptr;
  ChoiceSlider *ep_ = nullptr, *etp_ = nullptr;
  QComboBox *rank_order_ = nullptr;
  QRadioButton *op_times_button_ = nullptr, *model_button_ = nullptr;
  QDoubleSpinBox *forward_ = nullptr, *backward_ = nullptr, *weight_ = nullptr,
                 *overlapped_ = nullptr, *latency_ = nullptr;
  QComboBox *model_preset_ = nullptr, *hardware_preset_ = nullptr, *recompute_ = nullptr;
  /// Megatron's recompute modules beside recompute none or selective: a menu of checkable
  /// actions, one per module (recomputeModuleNames()).
  QToolButton *recompute_modules_ = nullptr;
  void showRecomputeModules();
  QComboBox *zero_stage_ = nullptr, *gemm_precision_ = nullptr, *collective_algorithm_ = nullptr,
            *cross_entropy_ = nullptr, *moe_dispatcher_ = nullptr;
  QCheckBox *fp8_dispatch_ = nullptr, *fp8_params_ = nullptr, *sequence_parallel_ = nullptr,
            *overlap_gradient_sync_ = nullptr, *tp_comm_overlap_ = nullptr,
            *tp_backward_overlap_ = nullptr, *fp32_gradients_ = nullptr;
  QDoubleSpinBox *device_memory_ = nullptr;
  QSpinBox *dispatcher_sms_ = nullptr; ///< SMs DeepEP/HybridEP hold beside an overlapped pair
  QDoubleSpinBox *moe_host_ = nullptr; ///< ms of host time per MoE layer and microbatch
  QGroupBox *op_times_group_ = nullptr, *model_group_ = nullptr;
  QFormLayout *model_form_ = nullptr;       ///< the model's settings, rows shown as they apply
  QHBoxLayout *moe_dispatch_row_ = nullptr; ///< the MoE dispatcher and its FP8 flag
  QLabel *stage_costs_note_ = nullptr;
  LayerEditor *layer_editor_ = nullptr;
};

} // namespace pipescope::gui
