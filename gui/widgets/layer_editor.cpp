#include "gui/widgets/layer_editor.h"

#include <QComboBox>
#include <QGridLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "gui/timeline/palette.h"

namespace pipescope::gui {

namespace {

// "E 8", "8 L", "E 8 L", "0": a stage as the spin box labels and the summary show it.
QString stageText(const StageLayers &stage) {
  QString text;
  if (stage.embedding) text += QStringLiteral("E ");
  text += QString::number(stage.layers);
  if (stage.mtp_layers > 0) text += QStringLiteral(" +%1m").arg(stage.mtp_layers);
  if (stage.loss) text += QStringLiteral(" L");
  return text;
}

} // namespace

LayerEditor::LayerEditor(QWidget *parent) : QWidget(parent) {
  setObjectName(QStringLiteral("layer_editor"));
  auto *layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(4);
  mode_ = new QComboBox(this);
  mode_->addItem(tr("Even split"), static_cast<int>(Mode::Even));
  mode_->addItem(tr("Balanced (slowest stage smallest)"), static_cast<int>(Mode::Balanced));
  mode_->addItem(tr("Custom layout"), static_cast<int>(Mode::Custom));
  mode_->setItemData(0,
                     tr("Layers split evenly over the model stages, the remainder on the first "
                        "stages; the embedding and the loss head add to the first and last."),
                     Qt::ToolTipRole);
  mode_->setItemData(1,
                     tr("Layers moved off the stages that hold the embedding and the loss head "
                        "so the slowest stage is as fast as it can be."),
                     Qt::ToolTipRole);
  mode_->setItemData(2,
                     tr("Layers per stage as edited below. Another P or V spreads them over its "
                        "stages, the embedding and the loss counting as a layer each (Megatron's "
                        "--account-for-embedding/loss-in-pipeline-split)."),
                     Qt::ToolTipRole);
  layout->addWidget(mode_);
  text_ = new QLineEdit(this);
  text_->setObjectName(QStringLiteral("layout_text"));
  text_->setPlaceholderText(QStringLiteral("Et*8|t*8|t*8|t*8L"));
  text_->setToolTip(
      tr("Megatron-LM's --pipeline-model-parallel-layout: E embedding, t transformer layer, m "
         "MTP layer, L loss head, '|' between model stages, (...)*n and t*n repeats. Press "
         "Enter to apply."));
  layout->addWidget(text_);
  spin_area_ = new QWidget(this);
  spin_grid_ = new QGridLayout(spin_area_);
  spin_grid_->setContentsMargins(0, 0, 0, 0);
  spin_grid_->setHorizontalSpacing(4);
  spin_grid_->setVerticalSpacing(2);
  layout->addWidget(spin_area_);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setStyleSheet(
      QStringLiteral("color: %1; font-size: 8pt;").arg(palette::secondaryText().name()));
  layout->addWidget(summary_);
  message_ = new QLabel(this);
  message_->setObjectName(QStringLiteral("layout_message"));
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->setStyleSheet(palette::toneStyleSheet(palette::Tone::Error, 3));
  message_->hide();
  layout->addWidget(message_);
  disabled_note_ = new QLabel(
      tr("<i>Layer layouts need a model + hardware preset: choose 'Model + hardware' under "
         "Costs.</i>"),
      this);
  disabled_note_->setWordWrap(true);
  layout->addWidget(disabled_note_);

  connect(mode_, &QComboBox::currentIndexChanged, this, [this] {
    if (updating_) return;
    showMessage(QString());
    switch (mode()) {
    case Mode::Even: emit layoutEdited({}, false); break;
    case Mode::Balanced: emit layoutEdited({}, true); break;
    case Mode::Custom:
      // Starts from the split in use, so switching to Custom changes nothing until edited.
      if (!shown_.empty()) tryLayout(shown_);
      break;
    }
  });
  connect(text_, &QLineEdit::returnPressed, this, [this] { applyLayoutText(text_->text()); });
}

int LayerEditor::modelStages() const {
  return plan_.request.pp * std::max(1, plan_.request.chunks);
}

LayerEditor::Mode LayerEditor::mode() const {
  return static_cast<Mode>(mode_->currentData().toInt());
}

void LayerEditor::setMode(Mode mode) {
  mode_->setCurrentIndex(mode_->findData(static_cast<int>(mode)));
}

void LayerEditor::setPlan(const Plan &plan) {
  const bool stages_changed = modelStages() != plan.request.pp * std::max(1, plan.request.chunks);
  plan_ = plan;
  const bool applies = plan.model.has_value() && !plan.custom;
  mode_->setEnabled(applies);
  text_->setEnabled(applies);
  spin_area_->setEnabled(applies);
  disabled_note_->setVisible(!applies);
  setToolTip(applies       ? QString()
             : plan.custom ? tr("A custom schedule fixes its stages; layouts apply to "
                                "the built-in schedules with a model.")
                           : tr("Layer layouts need a model + hardware preset."));
  if (!applies) {
    summary_->clear();
    showMessage(QString());
    return;
  }
  const TrainingSetup &training = plan.model->training;
  updating_ = true;
  setMode(!training.layout.empty()  ? Mode::Custom
          : training.balance_layers ? Mode::Balanced
                                    : Mode::Even);
  updating_ = false;
  if (!training.layout.empty()) {
    showLayout(training.layout);
    if (!text_->hasFocus())
      text_->setText(QString::fromStdString(formatMegatronLayout(training.layout)));
  } else if (stages_changed) {
    rebuildSpins(modelStages());
  }
}

void LayerEditor::showSplit(const LayerLayout &split) {
  if (!plan_.model) return;
  showLayout(split);
  if (mode() != Mode::Custom && !text_->hasFocus())
    text_->setText(QString::fromStdString(formatMegatronLayout(split)));
}

void LayerEditor::showLayout(const LayerLayout &layout) {
  shown_ = layout;
  const int stages = static_cast<int>(layout.size());
  if (stages != spun_stages_) rebuildSpins(stages);
  QStringList parts;
  updating_ = true;
  for (int stage = 0; stage < stages; ++stage) {
    const StageLayers &layers = layout[static_cast<std::size_t>(stage)];
    parts << stageText(layers);
    // Past kMaxSpunStages there are no spin boxes (the summary and the layout text carry it).
    if (stage >= stageCount()) continue;
    spins_[static_cast<std::size_t>(stage)]->setValue(layers.layers);
    QString label = QStringLiteral("s%1").arg(stage);
    if (layers.embedding) label += QStringLiteral(" E");
    if (layers.loss) label += QStringLiteral(" L");
    spin_labels_[static_cast<std::size_t>(stage)]->setText(label);
  }
  updating_ = false;
  const int pp = std::max(1, plan_.request.pp);
  summary_->setText(tr("Per model stage (stage k runs on rank k mod %1): %2")
                        .arg(pp)
                        .arg(parts.join(QStringLiteral(" | "))));
}

void LayerEditor::rebuildSpins(int stages) {
  for (auto *spin : spins_)
    delete spin;
  for (auto *label : spin_labels_)
    delete label;
  spins_.clear();
  spin_labels_.clear();
  spun_stages_ = stages;
  // Past kMaxSpunStages stages spin boxes stop being readable; the layout string covers those.
  const int shown = stages <= kMaxSpunStages ? stages : 0;
  const int layers = plan_.model ? plan_.model->model.layers : 0;
  for (int stage = 0; stage < shown; ++stage) {
    auto *label = new QLabel(QStringLiteral("s%1").arg(stage), spin_area_);
    auto *spin = new QSpinBox(spin_area_);
    spin->setRange(0, std::max(1, layers));
    spin->setKeyboardTracking(false);
    spin->setToolTip(tr("Transformer layers of model stage %1").arg(stage));
    const int row = stage / 3, column = (stage % 3) * 2;
    spin_grid_->addWidget(label, row, column);
    spin_grid_->addWidget(spin, row, column + 1);
    connect(spin, &QSpinBox::valueChanged, this, [this, stage](int value) {
      if (!updating_) setStageLayers(stage, value);
    });
    spins_.push_back(spin);
    spin_labels_.push_back(label);
  }
  spin_area_->setVisible(shown == stages);
}

bool LayerEditor::setStageLayers(int stage, int layers) {
  if (stage < 0 || stage >= static_cast<int>(shown_.size()) || stage >= stageCount()) return false;
  // The pending edit is what the spin boxes say: a refused step (the total off by the layers
  // the person is about to take from another stage) stays in its box until the next one.
  {
    const QSignalBlocker blocker(spins_[static_cast<std::size_t>(stage)]);
    spins_[static_cast<std::size_t>(stage)]->setValue(layers);
  }
  LayerLayout layout = shown_;
  for (int index = 0; index < stageCount(); ++index)
    layout[static_cast<std::size_t>(index)].layers =
        spins_[static_cast<std::size_t>(index)]->value();
  text_->setText(QString::fromStdString(formatMegatronLayout(layout)));
  return tryLayout(layout);
}

bool LayerEditor::applyLayoutText(const QString &text) {
  auto parsed = parseMegatronLayout(text.toStdString());
  if (!parsed) {
    showMessage(QString::fromStdString(parsed.error().message));
    return false;
  }
  return tryLayout(*parsed);
}

bool LayerEditor::tryLayout(const LayerLayout &layout) {
  if (!plan_.model || plan_.custom) {
    showMessage(tr("Layer layouts need a model + hardware preset."));
    return false;
  }
  const ModelSpec &model = plan_.model->model;
  if (auto status = checkLayerLayout(layout, model.layers, model.mtp_layers, modelStages());
      !status) {
    showMessage(QString::fromStdString(status.error().message));
    return false;
  }
  showMessage(QString());
  updating_ = true;
  setMode(Mode::Custom);
  updating_ = false;
  showLayout(layout);
  emit layoutEdited(layout, false);
  return true;
}

void LayerEditor::showMessage(const QString &message) {
  message_->setText(message);
  message_->setVisible(!message.isEmpty());
}

} // namespace pipescope::gui
