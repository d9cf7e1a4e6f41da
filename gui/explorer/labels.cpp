#include "gui/explorer/labels.h"

#include <cmath>

namespace pipescope::gui {

DurationUnit durationUnitFor(double microseconds) {
  const double magnitude = std::abs(microseconds);
  if (magnitude >= 1e6) return {1e6, "s"};
  if (magnitude >= 1e3) return {1e3, "ms"};
  if (magnitude >= 1 || magnitude == 0) return {1, "\u00b5s"};
  return {1e-3, "ns"};
}

QString formatDuration(double microseconds) {
  const DurationUnit unit = durationUnitFor(microseconds);
  const double value = microseconds / unit.microseconds;
  const double magnitude = std::abs(value);
  const int decimals = magnitude >= 100 ? 1 : magnitude >= 10 ? 2 : 3;
  return QString::number(value, 'f', decimals) + QLatin1Char(' ') + QString::fromUtf8(unit.name);
}

QString formatPercent(double fraction) {
  return QString::number(fraction * 100, 'f', 2) + QStringLiteral(" %");
}

QString formatBytes(double bytes) {
  const double magnitude = std::abs(bytes);
  if (magnitude >= 1024.0 * 1024 * 1024 * 1024)
    return QString::number(bytes / (1024.0 * 1024 * 1024 * 1024), 'f', 2) + QStringLiteral(" TiB");
  if (magnitude >= 1024.0 * 1024 * 1024)
    return QString::number(bytes / (1024.0 * 1024 * 1024), 'f', 2) + QStringLiteral(" GiB");
  if (magnitude >= 1024.0 * 1024)
    return QString::number(bytes / (1024.0 * 1024), 'f', 1) + QStringLiteral(" MiB");
  if (magnitude >= 1024.0) return QString::number(bytes / 1024.0, 'f', 1) + QStringLiteral(" KiB");
  return QString::number(bytes, 'f', 0) + QStringLiteral(" B");
}

QString opKindLegend(OpKind kind) {
  switch (kind) {
  case OpKind::Forward: return QStringLiteral("F = forward");
  case OpKind::InputGrad: return QStringLiteral("I = backward for the input (input-grad)");
  case OpKind::WeightGrad: return QStringLiteral("W = backward for the weights (weight-grad)");
  case OpKind::FullBackward: return QStringLiteral("B = full backward (I + W in one op)");
  case OpKind::OverlappedPair: return QStringLiteral("F&B = a forward overlapped with a backward");
  }
  return {};
}

QString opKindShortLegend(OpKind kind) {
  switch (kind) {
  case OpKind::Forward: return QStringLiteral("F forward");
  case OpKind::InputGrad: return QStringLiteral("I input-grad");
  case OpKind::WeightGrad: return QStringLiteral("W weight-grad");
  case OpKind::FullBackward: return QStringLiteral("B full backward");
  case OpKind::OverlappedPair: return QStringLiteral("F&B overlapped pair");
  }
  return {};
}

} // namespace pipescope::gui
