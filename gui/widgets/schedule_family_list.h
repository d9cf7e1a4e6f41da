#pragma once
// The checkable list of schedule families the Compare and Search tabs share.
#include <QStringList>
#include <functional>

#include "engine/schedule.h"

class QListWidget;
class QWidget;

namespace pipescope::gui {

/// A list of every schedule family with a check box each (item data: the family's name), its
/// title shown and its summary in the tooltip. Titles wider than the list ("Combined 1F1B (EP
/// all-to-all overlap)") are elided in the middle, whole in the tooltip, instead of a horizontal
/// scroll bar that took one of the list's few rows.
QListWidget *makeScheduleFamilyList(QWidget *parent,
                                    const std::function<bool(const ScheduleFamily &)> &checked);
/// The names of the checked families, in the list's order.
QStringList checkedScheduleFamilies(const QListWidget *list);
/// Checks exactly the named families.
void checkScheduleFamilies(QListWidget *list, const QStringList &names);

} // namespace pipescope::gui
