#pragma once
// The per-stage layer editor (uneven stages, engine/model/layer_layout.h): the layout in use per
// model stage (its transformer layers, E for the embedding, L for the loss head), edited as
// layers per stage or as Megatron's --pipeline-model-parallel-layout string. Edits are checked
// with the engine's checkLayerLayout: an invalid layout shows the engine's message and leaves the
// plan as it was. "Even" and "Balanced" keep the engine's own splits.
#include <QWidget>
#include <vector>

#include "engine/plan_file.h"

class QComboBox;
class QGridLayout;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace pipescope::gui {

class LayerEditor : public QWidget {
  Q_OBJECT
public:
  enum class Mode { Even, Balanced, Custom };

  explicit LayerEditor(QWidget *parent = nullptr);

  /// Follows the plan: enabled only with a model, mode and layout string from its training.
  void setPlan(const Plan &plan);
  /// The layout the engine split the model into (the shown evaluation's), per model stage.
  void showSplit(const LayerLayout &split);

  /// Applies a Megatron layout string: false (with the engine's message shown) when it does not
  /// parse or does not fit the model and the stages.
  bool applyLayoutText(const QString &text);
  /// Sets one stage's transformer layers, the others as shown; false with the message when the
  /// total no longer matches the model.
  bool setStageLayers(int stage, int layers);
  void setMode(Mode mode);
  Mode mode() const;

  QComboBox *modeBox() const { return mode_; }
  QLineEdit *layoutEdit() const { return text_; }
  QLabel *message() const { return message_; }
  QLabel *summary() const { return summary_; }
  /// Model stages with a spin box: all of them up to kMaxSpunStages, none past it (then the
  /// summary and the layout text show the split).
  int stageCount() const { return static_cast<int>(spins_.size()); }
  static constexpr int kMaxSpunStages = 32;
  QSpinBox *stageSpin(int stage) const { return spins_.at(static_cast<std::size_t>(stage)); }

signals:
  /// A checked layout (empty with Even or Balanced) and whether to balance.
  void layoutEdited(const pipescope::LayerLayout &layout, bool balance);

private:
  bool tryLayout(const LayerLayout &layout);
  void showMessage(const QString &message);
  void rebuildSpins(int stages);
  void showLayout(const LayerLayout &layout);
  int modelStages() const;

  Plan plan_;
  LayerLayout shown_; ///< the layout the spin boxes and summary show
  bool updating_ = false;
  QComboBox *mode_ = nullptr;
  QLineEdit *text_ = nullptr;
  QLabel *message_ = nullptr;
  QLabel *summary_ = nullptr;
  QLabel *disabled_note_ = nullptr;
  QWidget *spin_area_ = nullptr;
  QGridLayout *spin_grid_ = nullptr;
  std::vector<QSpinBox *> spins_;
  int spun_stages_ = -1; ///< the model stages spins_ was built for
  std::vector<QLabel *> spin_labels_;
};

} // namespace pipescope::gui
