#include "gui/widgets/controls_panel.h"

#include "engine/model/layer_layout.h"
#include "gui/timeline/palette.h"
#include "gui/widgets/layer_editor.h"
#include <QAbstractItemView>
#include <QButtonGroup>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QRadioButton>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

namespace pipescope::gui {

namespace {

QString fromStd(std::string_view text) {
  return QString::fromUtf8(text.data(), static_cast<int>(text.size()));
}

/// EP sizes the plan's model and mesh admit: 1, and for a mixture-of-experts model every size
/// dividing both the experts and the ranks expert parallelism folds into (dp × cp, times tp/etp
/// when the experts are split over fewer ranks than TP).
std::vector<int> expertParallelChoices(const Plan &plan) {
  std::vector<int> choices{1};
  if (!plan.model || plan.model->model.experts <= 1) return choices;
  const long long folded = static_cast<long long>(plan.mesh.dp) * plan.mesh.cp *
                           (plan.mesh.tp / plan.mesh.expertTpSize());
  for (int ep = 2; ep <= plan.model->model.experts; ++ep)
    if (plan.model->model.experts % ep == 0 && folded % ep == 0) choices.push_back(ep);
  return choices;
}

/// ETP sizes: the divisors of tp that divide each expert's FFN (tp itself always offered).
std::vector<int> expertTensorParallelChoices(const Plan &plan) {
  std::vector<int> choices;
  for (int etp = 1; etp <= plan.mesh.tp; ++etp)
    if (plan.mesh.tp % etp == 0 &&
        (etp == plan.mesh.tp || !plan.model || plan.model->model.expert_ffn_hidden % etp == 0))
      choices.push_back(etp);
  return choices;
}

/// The largest choice not above `value` (choices ascending, starting at 1).
int nearestChoice(const std::vector<int> &choices, int value) {
  int chosen = choices.front();
  for (int choice : choices)
    if (choice <= value) chosen = choice;
  return chosen;
}

QDoubleSpinBox *timeBox(QWidget *parent, double maximum) {
  auto *box = new QDoubleSpinBox(parent);
  box->setRange(0, maximum);
  box->setDecimals(2);
  box->setSingleStep(0.25);
  box->setSuffix(QStringLiteral(" \u00b5s"));
  box->setKeyboardTracking(false);
  return box;
}

} // namespace

SliderSpin::SliderSpin(int slider_max, int spin_max, QWidget *parent)
    : QWidget(parent), slider_(new QSlider(Qt::Horizontal, this)), spin_(new QSpinBox(this)) {
  auto *layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(6);
  layout->addWidget(slider_, 1);
  layout->addWidget(spin_);
  spin_->setMinimumWidth(64);
  // Typing a number must not re-simulate on every keystroke.
  spin_->setKeyboardTracking(false);
  setRange(1, slider_max, spin_max);
  connect(slider_, &QSlider::valueChanged, this, [this](int value) {
    if (spin_->value() == value) return;
    const QSignalBlocker blocker(spin_);
    spin_->setValue(value);
    emit valueChanged(value);
  });
  connect(spin_, &QSpinBox::valueChanged, this, [this](int value) {
    {
      const QSignalBlocker blocker(slider_);
      slider_->setValue(std::min(value, slider_->maximum()));
    }
    emit valueChanged(value);
  });
}

int SliderSpin::value() const {
  return spin_->value();
}

void SliderSpin::setValue(int value) {
  const QSignalBlocker spin_blocker(spin_);
  const QSignalBlocker slider_blocker(slider_);
  spin_->setValue(value);
  slider_->setValue(std::min(value, slider_->maximum()));
}

void SliderSpin::setRange(int minimum, int slider_max, int spin_max) {
  const QSignalBlocker spin_blocker(spin_);
  const QSignalBlocker slider_blocker(slider_);
  slider_->setRange(minimum, std::max(minimum, slider_max));
  spin_->setRange(minimum, std::max(minimum, spin_max));
}

void SliderSpin::setReason(const QString &reason) {
  setEnabled(reason.isEmpty());
  slider_->setToolTip(reason.isEmpty() ? toolTip() : reason);
  spin_->setToolTip(reason.isEmpty() ? toolTip() : reason);
}

ChoiceSlider::ChoiceSlider(QWidget *parent)
    : QWidget(parent), slider_(new QSlider(Qt::Horizontal, this)), label_(new QLabel(this)) {
  auto *layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(6);
  layout->addWidget(slider_, 1);
  layout->addWidget(label_);
  label_->setMinimumWidth(64);
  // Left-aligned beside the slider: the dock's scroll bar may cover its right edge.
  label_->setAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  slider_->setPageStep(1);
  setChoices(choices_, 1);
  connect(slider_, &QSlider::valueChanged, this, [this](int) {
    label_->setText(QString::number(value()));
    emit valueChanged(value());
  });
}

int ChoiceSlider::value() const {
  const auto i = static_cast<std::size_t>(std::max(0, slider_->value()));
  return i < choices_.size() ? choices_[i] : choices_.back();
}

void ChoiceSlider::setChoices(const std::vector<int> &choices, int value) {
  const QSignalBlocker blocker(slider_);
  choices_ = choices.empty() ? std::vector<int>{1} : choices;
  int index = 0;
  for (std::size_t i = 0; i < choices_.size(); ++i)
    if (choices_[i] <= value) index = static_cast<int>(i);
  slider_->setRange(0, static_cast<int>(choices_.size()) - 1);
  slider_->setValue(index);
  label_->setText(QString::number(this->value()));
}

void ChoiceSlider::setReason(const QString &reason) {
  setEnabled(reason.isEmpty());
  slider_->setToolTip(reason.isEmpty() ? toolTip() : reason);
  label_->setToolTip(reason.isEmpty() ? toolTip() : reason);
}

ControlsPanel::ControlsPanel(QWidget *parent) : QWidget(parent) {
  auto *layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->setSpacing(8);

  auto *schedule_group = new QGroupBox(tr("Schedule"), this);
  auto *schedule_form = new QFormLayout(schedule_group);
  schedule_form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  schedule_ = new QComboBox(schedule_group);
  schedule_->setObjectName(QStringLiteral("schedule"));
  for (const auto &family : scheduleFamilies()) {
    schedule_->addItem(QString::fromStdString(family.title), QString::fromStdString(family.name));
    schedule_->setItemData(schedule_->count() - 1, QString::fromStdString(family.summary),
                           Qt::ToolTipRole);
  }
  schedule_form->addRow(tr("schedule"), schedule_);
  schedule_summary_ = new QLabel(schedule_group);
  schedule_summary_->setWordWrap(true);
  schedule_summary_->setStyleSheet(
      QStringLiteral("color: %1; font-size: 8pt;").arg(palette::secondaryText().name()));
  schedule_form->addRow(schedule_summary_);
  pp_ = new SliderSpin(64, kMaxPipelineRanks, schedule_group);
  pp_->setToolTip(tr("P: pipeline ranks (stages of the model)"));
  microbatches_ = new SliderSpin(256, kMaxMicrobatches, schedule_group);
  microbatches_->setToolTip(tr("M: microbatches per step per DP replica"));
  chunks_ = new SliderSpin(8, kMaxChunks, schedule_group);
  chunks_->setToolTip(tr("V: model chunks (virtual stages) per pipeline rank"));
  microbatch_group_ = new QSpinBox(schedule_group);
  microbatch_group_->setRange(0, kMaxMicrobatches);
  microbatch_group_->setSpecialValueText(tr("P (depth-first)"));
  microbatch_group_->setKeyboardTracking(false);
  schedule_form->addRow(tr("P"), pp_);
  schedule_form->addRow(tr("M"), microbatches_);
  schedule_form->addRow(tr("V"), chunks_);
  schedule_form->addRow(tr("group"), microbatch_group_);
  layout->addWidget(schedule_group);

  auto *mesh_group = new QGroupBox(tr("Mesh"), this);
  auto *mesh_form = new QFormLayout(mesh_group);
  dp_ = new SliderSpin(64, 65536, mesh_group);
  dp_->setToolTip(tr("DP: data-parallel replicas"));
  tp_ = new SliderSpin(16, 1024, mesh_group);
  tp_->setToolTip(tr("TP: tensor-parallel GPUs per layer"));
  cp_ = new SliderSpin(16, 1024, mesh_group);
  cp_->setToolTip(tr("CP: context-parallel GPUs per sequence"));
  ep_ = new ChoiceSlider(mesh_group);
  ep_->setToolTip(tr("EP: expert-parallel GPUs per MoE layer, folded into DP \u00d7 CP"));
  etp_ = new ChoiceSlider(mesh_group);
  etp_->setToolTip(tr("ETP: GPUs each expert is split over"));
  gpus_per_node_ = new SliderSpin(16, 1024, mesh_group);
  gpus_per_node_->setToolTip(tr("GPUs per node: which groups share the intra-node link"));
  rank_order_ = new QComboBox(mesh_group);
  for (const char *order : {"tp-pp-dp", "tp-dp-pp", "pp-tp-dp", "pp-dp-tp", "dp-tp-pp", "dp-pp-tp"})
    rank_order_->addItem(QString::fromLatin1(order));
  rank_order_->setToolTip(
      tr("Which dimension varies fastest in rank numbering (innermost first). tp-pp-dp keeps "
         "each TP group inside a node, as Megatron-LM numbers ranks."));
  mesh_form->addRow(tr("DP"), dp_);
  mesh_form->addRow(tr("CP"), cp_);
  mesh_form->addRow(tr("TP"), tp_);
  mesh_form->addRow(tr("EP"), ep_);
  mesh_form->addRow(tr("ETP"), etp_);
  mesh_form->addRow(tr("GPUs/node"), gpus_per_node_);
  mesh_form->addRow(tr("rank order"), rank_order_);
  layout->addWidget(mesh_group);

  auto *source_group = new QGroupBox(tr("Costs"), this);
  auto *source_layout = new QVBoxLayout(source_group);
  auto *source_row = new QHBoxLayout;
  op_times_button_ = new QRadioButton(tr("Op times"), source_group);
  model_button_ = new QRadioButton(tr("Model + hardware"), source_group);
  auto *source_buttons = new QButtonGroup(this);
  source_buttons->addButton(op_times_button_);
  source_buttons->addButton(model_button_);
  source_row->addWidget(op_times_button_);
  source_row->addWidget(model_button_);
  source_layout->addLayout(source_row);

  op_times_group_ = new QGroupBox(source_group);
  op_times_group_->setFlat(true);
  auto *times_form = new QFormLayout(op_times_group_);
  times_form->setContentsMargins(0, 0, 0, 0);
  forward_ = timeBox(op_times_group_, 1e9);
  backward_ = timeBox(op_times_group_, 1e9);
  weight_ = timeBox(op_times_group_, 1e9);
  overlapped_ = timeBox(op_times_group_, 1e9);
  overlapped_->setSpecialValueText(tr("F + B (no gain)"));
  latency_ = timeBox(op_times_group_, 1e9);
  forward_->setToolTip(tr("F: forward time of one rank's share of the model (L/P layers)"));
  backward_->setToolTip(tr("B: full backward time, B = I + W"));
  weight_->setToolTip(tr("W: weight-grad part of B; an I op takes B \u2212 W"));
  overlapped_->setToolTip(tr("Time of one overlapped F&B pair; 0 means F + B"));
  latency_->setToolTip(tr("Point-to-point transfer time between neighbouring ranks"));
  times_form->addRow(tr("F"), forward_);
  times_form->addRow(tr("B"), backward_);
  times_form->addRow(tr("W"), weight_);
  times_form->addRow(tr("F&&B pair"), overlapped_);
  times_form->addRow(tr("p2p latency"), latency_);
  stage_costs_note_ = new QLabel(op_times_group_);
  stage_costs_note_->setWordWrap(true);
  stage_costs_note_->setObjectName(QStringLiteral("stageCostsNote"));
  stage_costs_note_->setVisible(false);
  times_form->addRow(stage_costs_note_);
  source_layout->addWidget(op_times_group_);

  model_group_ = new QGroupBox(source_group);
  model_group_->setFlat(true);
  auto *model_form = new QFormLayout(model_group_);
  model_form_ = model_form;
  model_form->setContentsMargins(0, 0, 0, 0);
  // Its longest labels beside its widest fields ("recompute" with its modules button) made the
  // panel wider than a narrow dock; there the field goes under its label instead.
  model_form->setRowWrapPolicy(QFormLayout::WrapLongRows);
  model_preset_ = new QComboBox(model_group_);
  for (const auto &name : modelPresetNames())
    model_preset_->addItem(QString::fromStdString(name));
  hardware_preset_ = new QComboBox(model_group_);
  for (const auto &name : hardwarePresetNames())
    hardware_preset_->addItem(QString::fromStdString(name));
  // Start on the smallest common case rather than the alphabetically first preset.
  model_preset_->setCurrentText(QStringLiteral("llama3-8b"));
  hardware_preset_->setCurrentText(QStringLiteral("h100-sxm"));
  recompute_ = new QComboBox(model_group_);
  for (Recompute mode :
       {Recompute::None, Recompute::Selective, Recompute::Full, Recompute::SelectiveOp})
    recompute_->addItem(fromStd(recomputeName(mode)), static_cast<int>(mode));
  recompute_->setToolTip(tr("Recomputation (plan field \"recompute\"): redo forward work in the "
                            "backward to hold fewer activations"));
  const auto item_tips = [](QComboBox *box, std::initializer_list<QString> tips) {
    int index = 0;
    for (const QString &tip : tips)
      box->setItemData(index++, tip, Qt::ToolTipRole);
  };
  item_tips(recompute_,
            {tr("Every activation kept for the backward"),
             tr("Megatron's selective recomputation: the attention core redone, the rest kept"),
             tr("Each layer keeps only its input and redoes its whole forward in the backward"),
             tr("torchtitan's per-op selective checkpointing: every second matmul's output "
                "kept, the rest redone")});
  recompute_modules_ = new QToolButton(model_group_);
  recompute_modules_->setPopupMode(QToolButton::InstantPopup);
  auto *modules_menu = new QMenu(recompute_modules_);
  const QString module_tips[] = {
      tr("The outputs of the norms that stand alone (before MLA's down-projections and before "
         "an MoE layer's router) redone in the backward"),
      tr("MLA's normalized latents and its up-projections' queries, keys and values redone"),
      tr("A dense layer's whole MLP (with its fused norm) redone"),
      tr("The routed experts' activation (the down projection's input) redone")};
  for (std::size_t i = 0; i < recomputeModuleNames().size(); ++i) {
    QAction *action = modules_menu->addAction(fromStd(recomputeModuleNames()[i]));
    action->setCheckable(true);
    action->setToolTip(module_tips[i]);
  }
  modules_menu->setToolTipsVisible(true);
  recompute_modules_->setMenu(modules_menu);
  showRecomputeModules();
  zero_stage_ = new QComboBox(model_group_);
  zero_stage_->addItem(tr("0 none"), 0);
  zero_stage_->addItem(tr("1 optimizer"), 1);
  zero_stage_->addItem(tr("2 + gradients"), 2);
  zero_stage_->addItem(tr("3 FSDP"), 3);
  zero_stage_->setToolTip(tr("ZeRO stage (plan field \"zero_stage\"): what is sharded over the "
                             "DP \u00d7 CP ranks"));
  item_tips(zero_stage_,
            {tr("Every DP rank holds all parameters, gradients and optimizer state; gradients "
                "all-reduced"),
             tr("Optimizer state sharded (Megatron's distributed optimizer)"),
             tr("Optimizer state and gradients sharded; gradients reduce-scattered"),
             tr("Parameters sharded too (PyTorch FSDP, DeepSpeed ZeRO-3): each layer gathered "
                "in the forward and again in the backward")});
  gemm_precision_ = new QComboBox(model_group_);
  for (GemmPrecision precision : {GemmPrecision::Bf16, GemmPrecision::Fp8})
    gemm_precision_->addItem(fromStd(gemmPrecisionName(precision)), static_cast<int>(precision));
  fp8_dispatch_ = new QCheckBox(tr("FP8"), model_group_);
  fp8_params_ = new QCheckBox(tr("FP8 params"), model_group_);
  moe_dispatcher_ = new QComboBox(model_group_);
  for (const char *dispatcher : {"alltoall", "deepep", "hybridep"})
    moe_dispatcher_->addItem(QString::fromLatin1(dispatcher), QString::fromLatin1(dispatcher));
  item_tips(moe_dispatcher_,
            {tr("NCCL all-to-all of every routed copy (Megatron's alltoall dispatcher)"),
             tr("DeepEP's normal kernels: a token once per other node (RDMA) and once per GPU "
                "holding its experts (NVLink), in one kernel"),
             tr("NVIDIA's HybridEP (Megatron's flex dispatcher), priced as DeepEP")});
  dispatcher_sms_ = new QSpinBox(model_group_);
  dispatcher_sms_->setRange(1, 1024);
  dispatcher_sms_->setValue(kDefaultDispatcherSms);
  dispatcher_sms_->setSuffix(tr(" SMs"));
  moe_host_ = new QDoubleSpinBox(model_group_);
  moe_host_->setRange(0, 1000);
  moe_host_->setDecimals(2);
  moe_host_->setSingleStep(0.5);
  moe_host_->setValue(kDefaultMoeLayerHostUs / 1000);
  moe_host_->setSuffix(tr(" ms"));
  collective_algorithm_ = new QComboBox(model_group_);
  for (CollectiveAlgorithm algorithm :
       {CollectiveAlgorithm::Auto, CollectiveAlgorithm::Ring, CollectiveAlgorithm::Tree})
    collective_algorithm_->addItem(fromStd(collectiveAlgorithmName(algorithm)),
                                   static_cast<int>(algorithm));
  collective_algorithm_->setToolTip(
      tr("All-reduce algorithm (plan field \"collective_algorithm\", NCCL_ALGO): auto takes the "
         "cheaper of ring and tree per message, as NCCL's tuner does"));
  item_tips(collective_algorithm_,
            {tr("The cheaper of ring and tree for each message, as NCCL's tuner picks"),
             tr("Every all-reduce a ring (NCCL_ALGO=Ring)"),
             tr("Every all-reduce NCCL's tree: a chain in each node, a binary tree across nodes "
                "(NCCL_ALGO=Tree); all-gather and reduce-scatter stay rings")});
  cross_entropy_ = new QComboBox(model_group_);
  for (const std::string_view loss : kCrossEntropyModes) {
    const QString name = QString::fromLatin1(loss.data(), static_cast<qsizetype>(loss.size()));
    cross_entropy_->addItem(name, name);
  }
  cross_entropy_->setToolTip(tr("The loss (plan field \"cross_entropy\"): the logits it keeps "
                                "for the backward, what it holds beside them while it runs, and "
                                "how many passes it makes over them"));
  item_tips(cross_entropy_,
            {tr("Megatron's fused vocab-parallel cross-entropy (--cross-entropy-loss-fusion): "
                "keeps fp32 logits; the 16-bit logits and one more fp32 copy beside them "
                "while it runs"),
             tr("Megatron's vocab-parallel cross-entropy without --cross-entropy-loss-fusion: "
                "keeps fp32 logits, the 16-bit ones beside them while it runs; one kernel per "
                "PyTorch op (eight passes over the logits)"),
             tr("Transformer Engine's fused cross-entropy (--cross-entropy-fusion-impl te, "
                "Megatron-Bridge's recipes): keeps the 16-bit logits and overwrites them with "
                "their gradient; no fp32 copy, three passes"),
             tr("F.cross_entropy(logits.float()) as torchtitan runs it: two more fp32 "
                "logit-sized tensors on the loss rank")});
  sequence_parallel_ = new QCheckBox(tr("sequence parallel"), model_group_);
  sequence_parallel_->setToolTip(
      tr("Sequence parallelism (plan field \"sequence_parallel\"): norm and dropout "
         "activations split along the sequence over the TP ranks (Megatron's "
         "--sequence-parallel)"));
  overlap_gradient_sync_ = new QCheckBox(tr("overlap DP"), model_group_);
  overlap_gradient_sync_->setToolTip(
      tr("Overlap the DP gradient sync (plan field \"overlap_gradient_sync\") with the "
         "backward; under ZeRO-3 also the parameter all-gathers with compute"));
  tp_comm_overlap_ = new QCheckBox(tr("overlap TP"), model_group_);
  tp_comm_overlap_->setToolTip(
      tr("Overlap the TP all-gathers and reduce-scatters with the GEMMs they feed or follow "
         "(plan field \"tp_comm_overlap\", Megatron's --tp-comm-overlap); needs sequence "
         "parallelism"));
  tp_backward_overlap_ = new QCheckBox(tr("async TP backward"), model_group_);
  tp_backward_overlap_->setToolTip(
      tr("Each column-parallel layer's backward TP collectives (QKV, MLP up, the head) run "
         "beside its own GEMMs (plan field \"tp_backward_overlap\"), as Megatron-LM has run "
         "them by default since September 2021 and Transformer Engine's Linear does; off, "
         "every backward TP collective is exposed (Megatron-LM of early 2021). \"overlap TP\" "
         "prices the backward itself where it is on"));
  fp32_gradients_ = new QCheckBox(tr("fp32 gradients"), model_group_);
  fp32_gradients_->setToolTip(
      tr("Gradients accumulated and reduced in fp32 (plan field \"fp32_gradients\"; "
         "Megatron-LM's default under bf16, Megatron-Bridge's grad_reduce_in_fp32): twice the "
         "gradient memory and a wider gradient reduction"));
  // Two flags a row: a third would widen the panel past the dock at 1280 px.
  auto *training_flags = new QHBoxLayout;
  training_flags->setContentsMargins(0, 0, 0, 0);
  training_flags->addWidget(sequence_parallel_);
  training_flags->addWidget(overlap_gradient_sync_);
  training_flags->addStretch(1);
  auto *more_training_flags = new QHBoxLayout;
  more_training_flags->setContentsMargins(0, 0, 0, 0);
  more_training_flags->addWidget(tp_comm_overlap_);
  more_training_flags->addWidget(fp32_gradients_);
  more_training_flags->addStretch(1);
  device_memory_ = new QDoubleSpinBox(model_group_);
  device_memory_->setRange(1, 4096);
  device_memory_->setDecimals(1);
  device_memory_->setSuffix(QStringLiteral(" GiB"));
  device_memory_->setKeyboardTracking(false);
  device_memory_->setToolTip(tr("Device memory per GPU (starts at the hardware preset's)"));
  if (auto hardware = loadHardwareSpec(hardwareKey()))
    device_memory_->setValue(hardware->memory_gib);
  model_form->addRow(tr("model"), model_preset_);
  model_form->addRow(tr("hardware"), hardware_preset_);
  auto *recompute_row = new QHBoxLayout;
  recompute_row->setContentsMargins(0, 0, 0, 0);
  recompute_row->addWidget(recompute_, 1);
  recompute_row->addWidget(recompute_modules_);
  model_form->addRow(tr("recompute"), recompute_row);
  model_form->addRow(tr("ZeRO stage"), zero_stage_);
  model_form->addRow(tr("GEMMs"), gemm_precision_);
  // The MoE dispatcher with the FP8-dispatch flag beside it: one row for the all-to-all.
  auto *dispatch_row = new QHBoxLayout;
  moe_dispatch_row_ = dispatch_row;
  dispatch_row->setContentsMargins(0, 0, 0, 0);
  dispatch_row->addWidget(moe_dispatcher_, 1);
  dispatch_row->addWidget(fp8_dispatch_);
  model_form->addRow(tr("MoE dispatch"), dispatch_row);
  model_form->addRow(tr("dispatch SMs"), dispatcher_sms_);
  model_form->addRow(tr("MoE host"), moe_host_);
  model_form->addRow(tr("all-reduce"), collective_algorithm_);
  model_form->addRow(tr("loss"), cross_entropy_);
  model_form->addRow(training_flags);
  model_form->addRow(more_training_flags);
  // Each on a row of its own: beside each other they would widen the panel past its dock.
  model_form->addRow(tp_backward_overlap_);
  model_form->addRow(fp8_params_); // shown under FP8 GEMMs only (below)
  model_form->addRow(tr("device memory"), device_memory_);
  source_layout->addWidget(model_group_);
  layout->addWidget(source_group);

  auto *layers_group = new QGroupBox(tr("Layers per stage"), this);
  auto *layers_layout = new QVBoxLayout(layers_group);
  layer_editor_ = new LayerEditor(layers_group);
  layers_layout->addWidget(layer_editor_);
  layout->addWidget(layers_group);
  layout->addStretch(1);
  connect(layer_editor_, &LayerEditor::layoutEdited, this,
          [this](const LayerLayout &layer_layout, bool balance) {
            if (!plan_.model) return;
            plan_.model->training.layout = layer_layout;
            plan_.model->training.balance_layers = balance;
            remembered_model_ = plan_.model;
            emit planEdited(plan_);
          });

  auto edited = [this] {
    if (!updating_) readControls();
  };
  connect(schedule_, &QComboBox::currentIndexChanged, this, edited);
  for (SliderSpin *control : {pp_, microbatches_, chunks_, dp_, tp_, cp_, gpus_per_node_})
    connect(control, &SliderSpin::valueChanged, this, edited);
  connect(ep_, &ChoiceSlider::valueChanged, this, edited);
  connect(etp_, &ChoiceSlider::valueChanged, this, edited);
  connect(microbatch_group_, &QSpinBox::valueChanged, this, edited);
  connect(dispatcher_sms_, &QSpinBox::valueChanged, this, edited);
  connect(moe_host_, &QDoubleSpinBox::valueChanged, this, edited);
  connect(rank_order_, &QComboBox::currentIndexChanged, this, edited);
  for (QDoubleSpinBox *box : {forward_, backward_, weight_, overlapped_, latency_, device_memory_})
    connect(box, &QDoubleSpinBox::valueChanged, this, edited);
  connect(model_button_, &QRadioButton::toggled, this, edited);
  connect(model_preset_, &QComboBox::currentIndexChanged, this, edited);
  for (QComboBox *box : {recompute_, zero_stage_, gemm_precision_, collective_algorithm_,
                         cross_entropy_, moe_dispatcher_})
    connect(box, &QComboBox::currentIndexChanged, this, edited);
  for (QCheckBox *box : {fp8_dispatch_, fp8_params_, sequence_parallel_, overlap_gradient_sync_,
                         tp_comm_overlap_, tp_backward_overlap_, fp32_gradients_})
    connect(box, &QCheckBox::toggled, this, edited);
  for (QAction *action : recompute_modules_->menu()->actions())
    connect(action, &QAction::toggled, this, [this, edited] {
      showRecomputeModules();
      edited();
    });
  connect(hardware_preset_, &QComboBox::currentIndexChanged, this, [this] {
    if (updating_) return;
    // A new GPU brings its memory and node size; the person can still override both.
    if (auto hardware = loadHardwareSpec(hardwareKey())) {
      updating_ = true;
      device_memory_->setValue(hardware->memory_gib);
      gpus_per_node_->setValue(hardware->gpus_per_node);
      showMoeHostDefault(*hardware);
      updating_ = false;
    }
    readControls();
  });
  showTraining(TrainingSetup{});
  setPlan(plan_);
  // The panel must fit its dock (at most 340 px): combo boxes sized to their longest item
  // ("Combined 1F1B (EP all-to-all overlap)") made it 350 px wide, cut on the right with no
  // scroll bar. They shrink to a few characters instead, and their popups keep full names.
  for (QComboBox *box : findChildren<QComboBox *>()) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(kComboMinimumCharacters);
    const auto fitPopup = [box] {
      int widest = 0;
      for (int i = 0; i < box->count(); ++i)
        widest = std::max(widest, box->fontMetrics().horizontalAdvance(box->itemText(i)));
      // The item's text margins and a scroll bar, should the list need one.
      box->view()->setMinimumWidth(widest +
                                   2 * box->style()->pixelMetric(QStyle::PM_FocusFrameHMargin) +
                                   16 + box->view()->verticalScrollBar()->sizeHint().width());
    };
    fitPopup();
    connect(box->model(), &QAbstractItemModel::rowsInserted, box, fitPopup);
    connect(box->model(), &QAbstractItemModel::modelReset, box, fitPopup);
  }
}

void ControlsPanel::setPlan(const Plan &plan) {
  updating_ = true;
  plan_ = plan;
  const QString custom_title = tr("Custom (from file)");
  const int custom_index = schedule_->findData(QStringLiteral("custom"));
  if (plan.custom && custom_index < 0) schedule_->addItem(custom_title, QStringLiteral("custom"));
  if (!plan.custom && custom_index >= 0) schedule_->removeItem(custom_index);
  const int index = schedule_->findData(plan.custom ? QStringLiteral("custom")
                                                    : QString::fromStdString(plan.request.name));
  schedule_->setCurrentIndex(std::max(0, index));
  pp_->setValue(plan.request.pp);
  microbatches_->setValue(plan.request.microbatches);
  chunks_->setValue(plan.request.chunks);
  microbatch_group_->setValue(plan.request.microbatch_group);
  dp_->setValue(plan.mesh.dp);
  tp_->setValue(plan.mesh.tp);
  cp_->setValue(plan.mesh.cp);
  gpus_per_node_->setValue(plan.mesh.gpus_per_node);
  offerMeshChoices();
  forward_->setValue(plan.costs.forward_us);
  backward_->setValue(plan.costs.backward_us);
  weight_->setValue(plan.costs.weight_us);
  overlapped_->setValue(plan.costs.overlapped_us);
  latency_->setValue(plan.costs.p2p_latency_us);
  showStageCosts(plan.costs);
  if (plan.model) remembered_model_ = plan.model;
  model_button_->setChecked(plan.model.has_value());
  op_times_button_->setChecked(!plan.model.has_value());
  selectModelPresets();
  updateApplicability();
  layer_editor_->setPlan(plan_);
  updating_ = false;
}

void ControlsPanel::offerMeshChoices() {
  // Three-name orders without CP (where cp sits does not matter then), all 24 with it.
  const auto orders = Mesh::allOrders(plan_.mesh.cp);
  if (rank_order_->count() != static_cast<int>(orders.size())) {
    const QSignalBlocker blocker(rank_order_);
    rank_order_->clear();
    if (plan_.mesh.cp == 1) {
      for (const char *order :
           {"tp-pp-dp", "tp-dp-pp", "pp-tp-dp", "pp-dp-tp", "dp-tp-pp", "dp-pp-tp"})
        rank_order_->addItem(QString::fromLatin1(order));
    } else {
      Mesh named = plan_.mesh;
      for (const auto &order : orders) {
        named.order = order;
        rank_order_->addItem(QString::fromStdString(named.orderName()));
      }
    }
  }
  {
    const QSignalBlocker blocker(rank_order_);
    rank_order_->setCurrentText(QString::fromStdString(plan_.mesh.orderName()));
  }
  etp_->setChoices(expertTensorParallelChoices(plan_), plan_.mesh.expertTpSize());
  ep_->setChoices(expertParallelChoices(plan_), plan_.mesh.ep);
}

void ControlsPanel::showStageCosts(const Costs &costs) {
  if (costs.stage_overrides.empty()) {
    stage_costs_note_->setVisible(false);
    return;
  }
  double low[3] = {1e300, 1e300, 1e300}, high[3] = {0, 0, 0};
  for (const auto &stage : costs.stage_overrides) {
    const double values[3] = {stage.forward_us, stage.backward_us, stage.weight_us};
    for (int i = 0; i < 3; ++i) {
      low[i] = std::min(low[i], values[i]);
      high[i] = std::max(high[i], values[i]);
    }
  }
  const auto range = [&](int i) {
    return low[i] == high[i]
               ? QString::number(low[i], 'g', 4)
               : QStringLiteral("%1\u2013%2")
                     .arg(QString::number(low[i], 'g', 4), QString::number(high[i], 'g', 4));
  };
  const int stages = static_cast<int>(costs.stage_overrides.size());
  // A calibration on ranks that share a device also fitted how much faster ops run while fewer
  // others compute; the timeline replays it, so say so.
  QString slowdown;
  if (!costs.concurrency_slowdown.empty()) {
    QStringList factors;
    for (const double f : costs.concurrency_slowdown)
      factors << QString::number(f, 'f', 2);
    slowdown = tr(" The ranks share a device: with 0 to %1 other ranks computing, ops take %2 of "
                  "these times.")
                   .arg(costs.concurrency_slowdown.size() - 1)
                   .arg(factors.join(QStringLiteral(", ")));
  }
  stage_costs_note_->setText(
      tr("<i>Per-stage times in use for %1%2: F %3, B %4, W %5 \u00b5s.%6 Editing F, B or W, the "
         "latency or the stages (P, V, schedule) replaces them.</i>")
          .arg(stages == 1 ? tr("1 stage") : tr("%1 stages").arg(stages),
               costs.boundary_transfer_us.empty() ? QString() : tr(" and their transfer times"),
               range(0), range(1), range(2), slowdown));
  stage_costs_note_->setVisible(true);
}

void ControlsPanel::showMoeHostDefault(const HardwareSpec &hardware) {
  // A host time left at the old hardware's default follows the new one's.
  const double old_default = moe_host_default_us_;
  moe_host_default_us_ = defaultMoeLayerHostUs(hardware);
  if (std::abs(moe_host_->value() * 1000 - old_default) < 0.5) {
    const QSignalBlocker quiet(moe_host_);
    moe_host_->setValue(moe_host_default_us_ / 1000);
  }
}

std::string ControlsPanel::hardwareKey() const {
  const QString path = hardware_preset_->currentData().toString();
  return (path.isEmpty() ? hardware_preset_->currentText() : path).toStdString();
}

Status ControlsPanel::addHardwareFile(const QString &path) {
  const QString absolute = QFileInfo(path).absoluteFilePath();
  auto hardware = loadHardwareSpec(absolute.toStdString());
  if (!hardware) return hardware.error();
  int index = hardware_preset_->findData(absolute);
  if (index < 0) {
    // The file's name, then the GPU it describes and whether its levels were fitted to runs.
    QString text = QFileInfo(absolute).fileName() + QStringLiteral(" (") +
                   QString::fromStdString(hardware->name) +
                   (hardware->calibration ? tr(", calibrated") : QString()) + QLatin1Char(')');
    hardware_preset_->addItem(text, absolute);
    index = hardware_preset_->count() - 1;
    QString tip = absolute;
    if (const auto &c = hardware->calibration)
      tip += tr("\nGEMM level fitted by pipescope calibrate on %1 measured runs (%2); each held "
                "out, the step was off by %3 % mean, %4 % worst")
                 .arg(c->runs)
                 .arg(QString::fromStdString(c->sets))
                 .arg(c->mean_abs_step_error * 100, 0, 'f', 1)
                 .arg(c->worst_abs_step_error * 100, 0, 'f', 1);
    hardware_preset_->setItemData(index, tip, Qt::ToolTipRole);
  }
  // The file may have changed since it was added: load it again.
  hardware_source_.clear();
  if (!model_button_->isChecked()) model_button_->setChecked(true);
  if (hardware_preset_->currentIndex() == index)
    readControls();
  else
    hardware_preset_->setCurrentIndex(index);
  return Ok{};
}

void ControlsPanel::selectModelPresets() {
  if (!remembered_model_) return;
  const int model_index =
      model_preset_->findText(QString::fromStdString(remembered_model_->model.name));
  if (model_index < 0 && !remembered_model_->model.name.empty())
    model_preset_->addItem(QString::fromStdString(remembered_model_->model.name));
  model_preset_->setCurrentText(QString::fromStdString(remembered_model_->model.name));
  const int hardware_index =
      hardware_preset_->findText(QString::fromStdString(remembered_model_->hardware.name));
  if (hardware_index < 0 && !remembered_model_->hardware.name.empty())
    hardware_preset_->addItem(QString::fromStdString(remembered_model_->hardware.name));
  hardware_preset_->setCurrentText(QString::fromStdString(remembered_model_->hardware.name));
  // The plan's own hardware stands for the name it carries (a calibrated file keeps its
  // preset's name): it is what the box shows until the box changes.
  hardware_source_ = hardwareKey();
  moe_host_default_us_ = defaultMoeLayerHostUs(remembered_model_->hardware);
  showTraining(remembered_model_->training);
  device_memory_->setValue(remembered_model_->hardware.memory_gib);
}

void ControlsPanel::showTraining(const TrainingSetup &training) {
  const auto select = [](QComboBox *box, const QVariant &data) {
    box->setCurrentIndex(std::max(0, box->findData(data)));
  };
  select(recompute_, static_cast<int>(training.recompute));
  select(zero_stage_, training.zero_stage);
  select(gemm_precision_, static_cast<int>(training.gemm_precision));
  select(collective_algorithm_, static_cast<int>(training.collective_algorithm));
  select(cross_entropy_, QString::fromStdString(training.cross_entropy));
  select(moe_dispatcher_, QString::fromStdString(training.moe_dispatcher));
  {
    // Setting the value must not read back as an edit of its own.
    const QSignalBlocker quiet(dispatcher_sms_);
    dispatcher_sms_->setValue(training.moe_dispatcher_sms > 0 ? training.moe_dispatcher_sms
                                                              : kDefaultDispatcherSms);
    const QSignalBlocker quiet_host(moe_host_);
    moe_host_->setValue(
        (training.moe_layer_host_us < 0 ? moe_host_default_us_ : training.moe_layer_host_us) /
        1000);
  }
  fp8_dispatch_->setChecked(training.fp8_dispatch);
  fp8_params_->setChecked(training.fp8_params);
  sequence_parallel_->setChecked(training.sequence_parallel);
  overlap_gradient_sync_->setChecked(training.overlap_gradient_sync);
  tp_comm_overlap_->setChecked(training.tp_comm_overlap);
  tp_backward_overlap_->setChecked(training.tp_backward_overlap);
  fp32_gradients_->setChecked(training.fp32_gradients);
  for (QAction *action : recompute_modules_->menu()->actions()) {
    // Setting the checks must not read back as edits of their own.
    const QSignalBlocker quiet(action);
    action->setChecked(recomputesModule(training, action->text().toStdString()));
  }
  showRecomputeModules();
}

// The button names the checked modules ("+ layernorm, moe_act"), or offers them.
void ControlsPanel::showRecomputeModules() {
  QStringList checked;
  for (const QAction *action : recompute_modules_->menu()->actions())
    if (action->isChecked()) checked << action->text();
  recompute_modules_->setText(checked.isEmpty() ? tr("modules") : tr("+%1").arg(checked.size()));
  recompute_modules_->setToolTip(
      tr("Megatron-Core's recompute modules (plan field \"recompute_modules\", its "
         "--recompute-modules) beside recompute none or selective: each module's outputs "
         "dropped after the forward and redone in the backward.") +
      (checked.isEmpty() ? QString() : tr(" On: %1.").arg(checked.join(QStringLiteral(", ")))));
}

void ControlsPanel::readTraining(TrainingSetup &training) const {
  training.recompute = static_cast<Recompute>(recompute_->currentData().toInt());
  training.zero_stage = zero_stage_->currentData().toInt();
  training.gemm_precision = static_cast<GemmPrecision>(gemm_precision_->currentData().toInt());
  training.collective_algorithm =
      static_cast<CollectiveAlgorithm>(collective_algorithm_->currentData().toInt());
  training.cross_entropy = cross_entropy_->currentData().toString().toStdString();
  training.moe_dispatcher = moe_dispatcher_->currentData().toString().toStdString();
  // The default stays unwritten (0), so a plan saved here means what it meant before.
  training.moe_dispatcher_sms =
      dispatcher_sms_->value() == kDefaultDispatcherSms ? 0 : dispatcher_sms_->value();
  // Likewise the MoE host time: the hardware's default stays unwritten (negative), so a
  // calibrated file's own host time follows the file.
  const double host_us = moe_host_->value() * 1000;
  training.moe_layer_host_us = std::abs(host_us - moe_host_default_us_) < 0.5 ? -1 : host_us;
  training.fp8_dispatch = fp8_dispatch_->isChecked();
  // FP8 parameters go with FP8 GEMMs (a plan file with them under bf16 is refused).
  training.fp8_params = fp8_params_->isChecked() && training.gemm_precision == GemmPrecision::Fp8;
  training.sequence_parallel = sequence_parallel_->isChecked();
  training.overlap_gradient_sync = overlap_gradient_sync_->isChecked();
  // TP overlap rides on sequence parallelism's all-gathers and reduce-scatters.
  training.tp_comm_overlap = tp_comm_overlap_->isChecked() && training.sequence_parallel;
  training.tp_backward_overlap = tp_backward_overlap_->isChecked();
  training.fp32_gradients = fp32_gradients_->isChecked();
  training.recompute_modules.clear();
  for (const QAction *action : recompute_modules_->menu()->actions())
    if (action->isChecked()) training.recompute_modules.push_back(action->text().toStdString());
}

void ControlsPanel::readControls() {
  Plan plan = plan_;
  const QString name = schedule_->currentData().toString();
  if (name != QStringLiteral("custom")) {
    plan.custom.reset();
    plan.request.name = name.toStdString();
    plan.request.pp = pp_->value();
    plan.request.microbatches = microbatches_->value();
    const ScheduleFamily *family = findScheduleFamily(plan.request.name);
    // Fixed V comes from the family, so switching schedules never leaves a stale V behind.
    if (family && !family->uses_chunks)
      plan.request.chunks = family->placement == PlacementKind::Loop ? 1 : 2;
    // Interleaving needs V >= 2: coming from a V = 1 schedule starts at 2, not at an error.
    else
      plan.request.chunks = std::max(2, chunks_->value());
    plan.request.microbatch_group =
        family && family->uses_microbatch_group ? microbatch_group_->value() : 0;
  }
  plan.mesh.pp = plan.request.pp;
  plan.mesh.dp = dp_->value();
  plan.mesh.tp = tp_->value();
  plan.mesh.cp = cp_->value();
  plan.mesh.ep = ep_->value();
  // ETP equal to TP is the default split (0), which follows TP as it changes; a TP that a
  // chosen ETP no longer divides resets it to the default.
  const int etp = etp_->value();
  if (etp == plan_.mesh.expertTpSize() && !plan_.mesh.expertsFoldTp())
    plan.mesh.etp = 0;
  else
    plan.mesh.etp = plan.mesh.tp % etp == 0 && etp != plan.mesh.tp ? etp : 0;
  plan.mesh.gpus_per_node = gpus_per_node_->value();
  // The box may still list three-name orders as CP turns on: those put cp right after tp.
  if (auto order = Mesh::parseOrder(rank_order_->currentText().toStdString()))
    plan.mesh.order = *order;
  plan.costs.forward_us = forward_->value();
  plan.costs.backward_us = backward_->value();
  plan.costs.weight_us = weight_->value();
  plan.costs.overlapped_us = overlapped_->value();
  plan.costs.p2p_latency_us = latency_->value();

  if (model_button_->isChecked()) {
    const bool fresh = !remembered_model_;
    ModelSetup setup = remembered_model_.value_or(ModelSetup{});
    const std::string model_name = model_preset_->currentText().toStdString();
    const std::string hardware_key = hardwareKey();
    if (fresh || setup.model.name != model_name)
      if (auto model = loadModelSpec(model_name)) setup.model = *model;
    if (fresh || hardware_source_ != hardware_key)
      if (auto hardware = loadHardwareSpec(hardware_key)) {
        setup.hardware = *hardware;
        hardware_source_ = hardware_key;
      }
    readTraining(setup.training);
    // FP8 GEMMs need FP8 tensor cores: switching to a GPU without them (A100) falls back to bf16
    // rather than to the engine's refusal.
    if (setup.training.gemm_precision == GemmPrecision::Fp8 && !hasFp8TensorCores(setup.hardware)) {
      setup.training.gemm_precision = GemmPrecision::Bf16;
      const QSignalBlocker blocker(gemm_precision_);
      gemm_precision_->setCurrentIndex(
          gemm_precision_->findData(static_cast<int>(GemmPrecision::Bf16)));
    }
    if (fresh) {
      // The first switch to a model takes the hardware's memory and node size.
      updating_ = true;
      device_memory_->setValue(setup.hardware.memory_gib);
      gpus_per_node_->setValue(setup.hardware.gpus_per_node);
      updating_ = false;
      plan.mesh.gpus_per_node = setup.hardware.gpus_per_node;
    } else {
      setup.hardware.memory_gib = device_memory_->value();
    }
    // A layout is per model stage: when P or V changes its stage count, its units (embedding,
    // layers, loss) are spread over the new stages as Megatron spreads them; where they are too
    // few, the engine's even split takes over (the layer editor shows which).
    setup.training.layout = layoutForStages(setup.training.layout, modelStageCount(plan.request));
    remembered_model_ = setup;
    plan.model = setup;
  } else {
    plan.model.reset();
  }
  // EP stays one the model and dp × cp admit (a dense model, or a smaller dp, takes it down);
  // a dense model has no experts to split, so ETP goes back to the default.
  if (!plan.model || plan.model->model.experts <= 1) plan.mesh.etp = 0;
  plan.mesh.ep = nearestChoice(expertParallelChoices(plan), plan.mesh.ep);
  plan_ = plan;
  updating_ = true;
  offerMeshChoices();
  updateApplicability();
  layer_editor_->setPlan(plan_);
  updating_ = false;
  emit planEdited(plan_);
}

void ControlsPanel::updateApplicability() {
  const bool custom = plan_.custom.has_value();
  const ScheduleFamily *family = custom ? nullptr : findScheduleFamily(plan_.request.name);
  const QString title = family ? QString::fromStdString(family->title) : tr("A custom schedule");
  schedule_summary_->setText(family ? QString::fromStdString(family->summary)
                                    : tr("Per-rank op lists loaded from a file."));
  const QString custom_reason =
      tr("A custom schedule fixes P, M and V; choose a built-in schedule to change them.");
  pp_->setReason(custom ? custom_reason : QString());
  microbatches_->setReason(custom ? custom_reason : QString());
  QString chunks_reason;
  if (custom)
    chunks_reason = custom_reason;
  else if (family && family->placement != PlacementKind::Loop)
    chunks_reason =
        tr("%1 fixes V at 2 (%2 placement).").arg(title, fromStd(placementName(family->placement)));
  else if (family && !family->uses_chunks)
    chunks_reason =
        tr("%1 places one contiguous chunk per rank (V = 1); V applies to Interleaved 1F1B, "
           "Looped BFS and Interleaved zero bubble.")
            .arg(title);
  chunks_->setReason(chunks_reason);
  if (family && family->uses_chunks) {
    chunks_->setRange(2, 8, kMaxChunks);
    chunks_->setValue(std::max(2, plan_.request.chunks));
  } else {
    chunks_->setRange(1, 8, kMaxChunks);
    chunks_->setValue(plan_.request.chunks);
  }
  const bool group_applies = family && family->uses_microbatch_group;
  microbatch_group_->setEnabled(group_applies);
  microbatch_group_->setToolTip(
      group_applies
          ? tr("Microbatches per group G (P \u2264 G \u2264 M): G = P is Megatron's "
               "depth-first order, G = M Megatron's breadth-first interleaving (still 1F1B in "
               "its steady state; PyTorch's ScheduleLoopedBFS is the Looped BFS "
               "schedule).")
          : tr("The microbatch group applies to Interleaved 1F1B only."));
  const bool model = plan_.model.has_value();
  // With a model the op-time fields are hidden: they showed figures the plan does not use
  // (F = 1 µs beside the model's derived times) and pushed the layer editor below the fold of a
  // 1040 px window. Without one the model's settings stay in view, disabled, to show what
  // 'Model + hardware' offers.
  op_times_group_->setVisible(!model);
  op_times_group_->setEnabled(!model);
  op_times_group_->setToolTip(
      model ? tr("The model + hardware preset derives every op time; choose 'Op times' to "
                 "type them.")
            : QString());
  if (!model) {
    const bool splits = family ? family->splits_backward : true;
    weight_->setEnabled(splits);
    weight_->setToolTip(
        splits ? tr("W: weight-grad part of B; an I op takes B \u2212 W")
               : tr("%1 runs the full backward B as one op; W matters only for schedules that "
                    "split it (ZB-H1, ZB-H2, ZB-V, DualPipe).")
                     .arg(title));
    const bool pairs = family && family->overlapped_pairs;
    overlapped_->setEnabled(pairs);
    overlapped_->setToolTip(
        pairs ? tr("Time of one overlapped F&B pair; 0 means F + B")
              : tr("Only DualPipe, DualPipeV and combined 1F1B overlap a forward with a "
                   "backward."));
  }
  model_group_->setEnabled(model);
  model_group_->setToolTip(
      model ? QString()
            : tr("Choose 'Model + hardware' to derive op times and memory from a model preset."));
  const QString mesh_hint =
      model ? QString()
            : tr(" Without a model it shapes the mesh view only; op times come from F, B, W.");
  dp_->setToolTip(tr("DP: data-parallel replicas.") + mesh_hint);
  tp_->setToolTip(tr("TP: tensor-parallel GPUs per layer.") + mesh_hint);
  cp_->setToolTip(tr("CP: context-parallel GPUs per sequence (Megatron's "
                     "--context-parallel-size): each holds two of 2\u00b7CP chunks and K/V go "
                     "around the CP ring; the world is DP \u00d7 CP \u00d7 TP \u00d7 PP.") +
                  mesh_hint);
  ep_->setToolTip(tr("EP: each MoE layer's experts split over EP GPUs drawn from DP \u00d7 CP, "
                     "and from TP too when ETP is below TP (Megatron-Core's MoE parallel "
                     "folding); offered: the sizes dividing both the experts and those GPUs."));
  etp_->setToolTip(tr("ETP: each expert split over ETP GPUs (Megatron-Core's "
                      "--expert-tensor-parallel-size). ETP = TP splits experts like the dense "
                      "MLP; below TP (e.g. 1, whole experts) EP also spans the TP ranks, which "
                      "needs sequence parallelism."));
  dp_->setReason(QString());
  tp_->setReason(QString());
  cp_->setReason(QString());
  const bool experts = model && plan_.model->model.experts > 1;
  updateTrainingApplicability();
  etp_->setReason(experts && plan_.mesh.tp > 1 ? QString()
                  : experts ? tr("With TP = 1 each expert sits on one GPU already.")
                            : tr("Expert tensor parallelism applies to mixture-of-experts "
                                 "models."));
  ep_->setReason(
      experts ? QString()
      : model ? tr("%1 has no experts; expert parallelism applies to mixture-of-experts models "
                   "(e.g. mixtral-8x7b, deepseek-v3).")
                    .arg(QString::fromStdString(plan_.model->model.name))
              : tr("Expert parallelism needs a mixture-of-experts model: choose 'Model + "
                   "hardware' and an MoE preset (e.g. mixtral-8x7b)."));
}

void ControlsPanel::updateTrainingApplicability() {
  // Without a model the whole group is disabled; its controls still show the last model's setup.
  const std::optional<ModelSetup> &setup = plan_.model ? plan_.model : remembered_model_;
  const QString hardware = setup ? QString::fromStdString(setup->hardware.name) : QString();
  const bool fp8_hardware = setup && hasFp8TensorCores(setup->hardware);
  const QString precision_tip =
      tr("GEMM precision (plan field \"gemm_precision\"): fp8 runs the linear layers' GEMMs "
         "at the FP8 peak as Transformer Engine does; attention and the head stay bf16.");
  const QString no_fp8 =
      tr("%1 has no FP8 tensor cores (no peak_fp8_tflops); choose an FP8 GPU (h100-sxm, h200, "
         "h800) for fp8.")
          .arg(hardware.isEmpty() ? tr("This GPU") : hardware);
  if (auto *items = qobject_cast<QStandardItemModel *>(gemm_precision_->model())) {
    QStandardItem *fp8 =
        items->item(gemm_precision_->findData(static_cast<int>(GemmPrecision::Fp8)));
    fp8->setEnabled(fp8_hardware);
    fp8->setToolTip(fp8_hardware ? tr("Linear-layer GEMMs in FP8 at %1 TFLOP/s peak")
                                       .arg(setup->hardware.peak_fp8_tflops)
                                 : no_fp8);
  }
  gemm_precision_->setToolTip(fp8_hardware ? precision_tip
                                           : precision_tip + QLatin1Char(' ') + no_fp8);

  const bool moe = setup && setup->model.experts > 1;
  const bool fp8 = setup && setup->training.gemm_precision == GemmPrecision::Fp8;
  // Megatron's modules go with its selective granularity: recompute none or selective.
  recompute_modules_->setEnabled(setup && (setup->training.recompute == Recompute::None ||
                                           setup->training.recompute == Recompute::Selective));
  fp8_dispatch_->setEnabled(moe && fp8);
  // Like the MoE rows for a dense model, the FP8-parameters row only where the GEMMs are FP8:
  // the layer editor below needs the room.
  model_form_->setRowVisible(fp8_params_, fp8);
  fp8_params_->setToolTip(
      tr("The layers' weights held as FP8 parameters (plan field \"fp8_params\"; Megatron's "
         "--fp8-param-gather, NeMo's fp8_params): one byte and its transpose, no 16-bit copy, "
         "and the updated weights all-gathered at one byte. Off, Transformer Engine keeps "
         "16-bit weights and caches their FP8 cast and its transpose for the step: two more "
         "bytes a weight"));
  const bool sequence_parallel = setup && setup->training.sequence_parallel;
  tp_comm_overlap_->setEnabled(sequence_parallel);
  moe_dispatcher_->setEnabled(moe);
  moe_dispatcher_->setToolTip(
      tr("How MoE tokens reach their experts (plan field \"moe_dispatcher\", Megatron's "
         "--moe-token-dispatcher-type / --moe-flex-dispatcher-backend)") +
      (moe ? QString() : tr("; applies to mixture-of-experts models (e.g. deepseek-v3).")));
  const bool fused_dispatcher = moe && setup->training.moe_dispatcher != "alltoall";
  dispatcher_sms_->setEnabled(fused_dispatcher);
  const int sm_count = setup ? setup->hardware.sm_count : 0;
  QString sms_tip =
      tr("SMs DeepEP's or HybridEP's kernels hold beside an overlapped F&B pair (dualpipe, "
         "dualpipev, combined-1f1b): the pair's compute runs on the rest (plan field "
         "\"moe_dispatcher_sms\", Megatron's --moe-flex-dispatcher-num-sms; DeepSeek-V3 "
         "uses 20)");
  if (!fused_dispatcher)
    sms_tip += tr("; applies to the deepep and hybridep dispatchers of MoE models.");
  else if (sm_count <= 0)
    sms_tip += tr("; not priced: the hardware file gives no sm_count.");
  else
    sms_tip += tr("; here compute \u00d7 %1 on %2 of %3 SMs.")
                   .arg(dispatcherSmShare(setup->hardware, setup->training), 0, 'f', 3)
                   .arg(std::max(0, sm_count - dispatcher_sms_->value()))
                   .arg(sm_count);
  dispatcher_sms_->setToolTip(sms_tip);
  moe_host_->setEnabled(moe);
  // A dense model's settings leave out the three MoE rows: their fields, disabled, only said
  // they apply to MoE models (as the EP slider still does), and took the room the layer editor
  // below them needs.
  model_form_->setRowVisible(moe_dispatch_row_, moe);
  model_form_->setRowVisible(dispatcher_sms_, moe);
  model_form_->setRowVisible(moe_host_, moe);
  moe_host_->setToolTip(
      tr("Host time per MoE layer and microbatch that the GPU waits out: the framework "
         "launching the layer's many small kernels and the dispatcher's sync on the token "
         "counts, a third in each of F, I and W (plan field \"moe_layer_host_us\" in \u00b5s). "
         "3.5 ms is eager Megatron-Core's, fitted on its published Qwen3-235B-A22B H100 runs "
         "(docs/validation.md); a hardware file fitted to your runs by pipescope calibrate "
         "brings its own (this one's: %1 ms); 0 for a run that captures its MoE layers in CUDA "
         "graphs")
          .arg(moe_host_default_us_ / 1000) +
      (moe ? QString() : tr("; applies to mixture-of-experts models.")));
  const QString dispatch_tip =
      tr("MoE dispatch all-to-alls carry FP8 activations, combine stays bf16, as DeepSeek-V3 "
         "does (plan field \"fp8_dispatch\")");
  fp8_dispatch_->setToolTip(
      !moe   ? dispatch_tip + tr("; applies to mixture-of-experts models (e.g. deepseek-v3).")
      : !fp8 ? dispatch_tip + tr("; applies under fp8 GEMMs.")
             : dispatch_tip);
}

} // namespace pipescope::gui
