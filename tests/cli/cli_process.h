#pragma once
// Running `pipescope` (PIPESCOPE_CLI, set by CMake) as a user runs it, for the CLI suites.
#include <QProcess>
#include <QString>
#include <QStringList>

namespace cli_test {

struct Run {
  int exit_code = -1;
  QString out, err;
};

/// Runs the command to its end (at most two minutes) and collects its exit code and outputs.
inline Run pipescope(const QStringList &args) {
  QProcess process;
  process.start(QStringLiteral(PIPESCOPE_CLI), args);
  process.waitForFinished(120000);
  return {process.exitCode(), QString::fromUtf8(process.readAllStandardOutput()),
          QString::fromUtf8(process.readAllStandardError())};
}

/// A text output as one line, every run of spaces and line breaks one space: the commands wrap
/// their prose at 100 columns (wrappedLine), so a phrase is looked for in this, not across the
/// line breaks.
inline QString unwrapped(const QString &text) {
  return text.simplified();
}

} // namespace cli_test
