#include "gui/timeline/palette.h"

#include <cmath>
#include <iterator>

namespace pipescope::gui {

QColor opKindColor(OpKind kind) {
  switch (kind) {
  case OpKind::Forward: return QColor(0x3f, 0x7c, 0xc4);
  case OpKind::InputGrad: return QColor(0xf0, 0x8a, 0x24);
  case OpKind::WeightGrad: return QColor(0x4e, 0xa6, 0x4a);
  case OpKind::FullBackward: return QColor(0xd9, 0x4a, 0x4a);
  case OpKind::OverlappedPair: return QColor(0x9b, 0x5f, 0xc0);
  }
  return QColor(0x80, 0x80, 0x80);
}

QColor opColor(OpKind kind, int microbatch) {
  // Four shades: enough to tell neighbouring microbatches apart without losing the kind's hue.
  static constexpr int kShadeFactors[] = {100, 118, 88, 108};
  const int factor = kShadeFactors[static_cast<unsigned>(microbatch) % 4];
  const QColor base = opKindColor(kind);
  return factor >= 100 ? base.lighter(factor) : base.darker(200 - factor);
}

QColor pipelineStageColor(int p, int pp) {
  const int hue = pp <= 1 ? 210 : static_cast<int>(std::lround(200.0 + 300.0 * p / pp)) % 360;
  return QColor::fromHsv(hue, 120, 225);
}

namespace palette {

QColor background() {
  return {0xfb, 0xfb, 0xfc};
}
QColor rowBackground() {
  return {0xee, 0xef, 0xf2};
}
QColor axisBackground() {
  return {0xf2, 0xf3, 0xf5};
}
QColor axisLine() {
  return {0xc8, 0xca, 0xd0};
}
QColor minorTick() {
  return {0x90, 0x92, 0x98};
}
QColor gridLine() {
  return {0, 0, 0, 22};
}
QColor text() {
  return {0x40, 0x40, 0x48};
}
QColor rowLabel() {
  return {0x50, 0x50, 0x58};
}
QColor sectionTitle() {
  return {0x30, 0x30, 0x30};
}
QColor opLabel() {
  return {0xff, 0xff, 0xff};
}
QColor opLabelFaded() {
  return {0xff, 0xff, 0xff, 120};
}
QColor idleHatch() {
  return {0xc9, 0x9a, 0x9a};
}
QColor playhead() {
  return {0x20, 0x20, 0x20};
}
QColor path() {
  return {0x11, 0x11, 0x11};
}
QColor criticalPath() {
  return {0xe6, 0x00, 0x7e}; // magenta: no op kind uses it, so the outline reads on all
}
QColor measuredEdge() {
  return {0x1c, 0x1c, 0x24};
}
QColor predictedGhost() {
  return {0x77, 0x77, 0x77};
}
QColor measuredSwatch() {
  return {0x33, 0x33, 0x33};
}

QColor secondaryText() {
  return {0x55, 0x55, 0x55};
}
QColor hintText() {
  return {0x66, 0x66, 0x66};
}
QColor faintText() {
  return {0x77, 0x77, 0x77};
}
QColor staleText() {
  return {0x6b, 0x4a, 0x45};
}
QColor badValue() {
  return {0xb0, 0x00, 0x20};
}
QColor withinErrorShade() {
  return {0xf3, 0xec, 0xd6}; // a pale amber: a caution about the order, not an error
}
QColor refusedText() {
  return {0x8a, 0x4b, 0x00};
}

QColor memorySegment(int segment) {
  switch (segment) {
  case 0: return {0x6b, 0x7f, 0x99};
  case 1: return {0x9b, 0xad, 0xc4};
  case 2: return {0xc7, 0xb2, 0x8a};
  default: return opKindColor(OpKind::Forward);
  }
}
QColor capacityLine() {
  return {0xc0, 0x20, 0x20};
}
QColor rankSeries(int rank, int ranks) {
  return QColor::fromHsv(rank * 360 / std::max(ranks, 1) % 360, 170, 190);
}
QColor curveSeries(int index) {
  return QColor::fromHsv(index * 47 % 360, 190, 200);
}

QColor scheduleSeries(int family_index) {
  // Tableau 10 (Tableau's default categorical palette, chosen to stay distinct for colour-blind
  // readers) and three darker tones: one colour per family of the registry, in its order.
  static const QColor kFamilies[] = {{0x4e, 0x79, 0xa7}, {0xf2, 0x8e, 0x2b}, {0xe1, 0x57, 0x59},
                                     {0x76, 0xb7, 0xb2}, {0x59, 0xa1, 0x4f}, {0xed, 0xc9, 0x48},
                                     {0xb0, 0x7a, 0xa1}, {0xff, 0x9d, 0xa7}, {0x9c, 0x75, 0x5f},
                                     {0xba, 0xb0, 0xac}, {0x1f, 0x3a, 0x93}, {0x8c, 0x8c, 0x00},
                                     {0x55, 0x55, 0x55}};
  constexpr int kCount = static_cast<int>(std::size(kFamilies));
  if (family_index >= 0 && family_index < kCount) return kFamilies[family_index];
  return curveSeries(family_index);
}
QColor paretoLine() {
  return {0x30, 0x30, 0x38};
}
QColor chosenPoint() {
  return {0x00, 0x00, 0x00};
}

QColor gpuFrame() {
  return {0xa0, 0xa4, 0xb0};
}
QColor nodeFill() {
  return {0xf0, 0xf1, 0xf4};
}
QColor gpuText() {
  return {0x20, 0x20, 0x28};
}
QColor hoveredGpu() {
  return {0, 0, 0};
}
QColor tpGroup() {
  return {0xd0, 0x30, 0x30};
}
QColor ppGroup() {
  return {0x20, 0x50, 0xd0};
}
QColor dpGroup() {
  return {0x2e, 0x9e, 0x44};
}
QColor cpGroup() {
  return {0xe0, 0x8a, 0x10};
}
QColor epGroup() {
  return {0x8e, 0x3c, 0xb8};
}

ToneColors tone(Tone tone) {
  switch (tone) {
  case Tone::Error: return {{0xfd, 0xec, 0xea}, {0x8a, 0x1c, 0x12}, {0xf0, 0xb8, 0xb0}};
  case Tone::Warning: return {{0xff, 0xf6, 0xe0}, {0x6b, 0x4a, 0x00}, {0xec, 0xd0, 0x8a}};
  case Tone::Ok: return {{0xea, 0xf6, 0xec}, {0x1e, 0x5b, 0x2a}, {0xb6, 0xdc, 0xbd}};
  case Tone::Busy: return {{0xea, 0xf1, 0xfb}, {0x1d, 0x4f, 0x91}, {0xb8, 0xcd, 0xea}};
  case Tone::Neutral: break;
  }
  return {QColor(), secondaryText(), QColor()};
}

QString toneStyleSheet(Tone which, int padding_px) {
  if (which == Tone::Neutral) return QStringLiteral("QLabel { padding: 3px; }");
  const ToneColors colors = tone(which);
  return QStringLiteral("QLabel { background: %1; color: %2; border: 1px solid %3; "
                        "border-radius: 3px; padding: %4px; }")
      .arg(colors.background.name(), colors.text.name(), colors.border.name())
      .arg(padding_px);
}

QColor logColor(Tone tone) {
  switch (tone) {
  case Tone::Error: return {0xb3, 0x26, 0x1e};
  case Tone::Warning: return {0x8a, 0x5a, 0x00};
  case Tone::Busy: return {0x1d, 0x4f, 0x91};
  case Tone::Ok:
  case Tone::Neutral: break;
  }
  return secondaryText();
}

} // namespace palette
} // namespace pipescope::gui
