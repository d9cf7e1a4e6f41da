#pragma once
// Writing a test's input file in one call, for the CLI and GUI tests alike.
#include <QByteArray>
#include <QFile>
#include <QFileDevice>
#include <QString>

/// Writes `bytes` to `path`, replacing what was there; `executable` also sets the owner's
/// execute bit (fake backends, scripts). False when the file cannot be opened.
inline bool writeFile(const QString &path, const QByteArray &bytes, bool executable = false) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) return false;
  file.write(bytes);
  file.close();
  if (executable)
    file.setPermissions(file.permissions() | QFileDevice::ExeOwner | QFileDevice::ExeUser);
  return true;
}
