#include "gui/widgets/schedule_family_list.h"

#include <QListWidget>

namespace pipescope::gui {

QListWidget *makeScheduleFamilyList(QWidget *parent,
                                    const std::function<bool(const ScheduleFamily &)> &checked) {
  auto *list = new QListWidget(parent);
  for (const auto &family : scheduleFamilies()) {
    auto *item = new QListWidgetItem(QString::fromStdString(family.title), list);
    item->setData(Qt::UserRole, QString::fromStdString(family.name));
    item->setToolTip(QString::fromStdString(family.title + ": " + family.summary));
    item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
    item->setCheckState(checked(family) ? Qt::Checked : Qt::Unchecked);
  }
  list->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  list->setTextElideMode(Qt::ElideMiddle);
  return list;
}

QStringList checkedScheduleFamilies(const QListWidget *list) {
  QStringList names;
  for (int row = 0; row < list->count(); ++row)
    if (list->item(row)->checkState() == Qt::Checked)
      names << list->item(row)->data(Qt::UserRole).toString();
  return names;
}

void checkScheduleFamilies(QListWidget *list, const QStringList &names) {
  for (int row = 0; row < list->count(); ++row) {
    QListWidgetItem *item = list->item(row);
    item->setCheckState(names.contains(item->data(Qt::UserRole).toString()) ? Qt::Checked
                                                                            : Qt::Unchecked);
  }
}

} // namespace pipescope::gui
