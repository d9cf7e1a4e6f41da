#include "gui/run/backend_process.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStandardPaths>

#ifdef Q_OS_UNIX
#include <csignal>
#include <sys/types.h>
#include <unistd.h>
#endif
#ifdef Q_OS_LINUX
#include <sys/prctl.h>
#endif

namespace pipescope::gui {

QString launchTargetTitle(LaunchTarget target) {
  switch (target) {
  case LaunchTarget::Cpu: return QStringLiteral("This machine's CPU");
  case LaunchTarget::SharedGpu: return QStringLiteral("One GPU shared by the stages");
  case LaunchTarget::LocalGpus: return QStringLiteral("All local GPUs");
  case LaunchTarget::Slurm: return QStringLiteral("Slurm (srun)");
  case LaunchTarget::Custom: return QStringLiteral("Custom command");
  }
  return {};
}

QString launchTargetKey(LaunchTarget target) {
  switch (target) {
  case LaunchTarget::Cpu: return QStringLiteral("cpu");
  case LaunchTarget::SharedGpu: return QStringLiteral("gpu-shared");
  case LaunchTarget::LocalGpus: return QStringLiteral("local-gpus");
  case LaunchTarget::Slurm: return QStringLiteral("slurm");
  case LaunchTarget::Custom: return QStringLiteral("custom");
  }
  return {};
}

QString defaultLaunchTemplate(LaunchTarget target) {
  QString run =
      QStringLiteral("{backend} --plan {plan} --trace {trace} --warmup {warmup} --steps {steps}");
  switch (target) {
  // One pipeline replica on the CPU: the backend runs the plan's pipeline ranks without TP and DP.
  case LaunchTarget::Cpu:
    return QStringLiteral("mpirun --allow-run-as-root --oversubscribe -np {pp} ") + run +
           QStringLiteral(" --device cpu");
  case LaunchTarget::SharedGpu: return run + QStringLiteral(" --device gpu-shared");
  case LaunchTarget::LocalGpus:
    return QStringLiteral("mpirun --allow-run-as-root -np {ranks} ") + run +
           QStringLiteral(" --device cuda");
  case LaunchTarget::Slurm:
    return QStringLiteral("srun --nodes={nodes} --ntasks={ranks} "
                          "--ntasks-per-node={tasks_per_node} --gpus-per-task=1 --mpi=pmix ") +
           run + QStringLiteral(" --device cuda");
  case LaunchTarget::Custom:
    return QStringLiteral("torchrun --standalone --nproc-per-node {ranks} --no-python ") + run +
           QStringLiteral(" --device cuda");
  }
  return run;
}

QStringList launchPlaceholders() {
  return {
      QStringLiteral("{backend}: the pipescope-backend executable"),
      QStringLiteral("{plan}: the plan with its lowered program, written for this run"),
      QStringLiteral("{trace}: where the backend writes the measured trace"),
      QStringLiteral("{ranks} or {world}: processes of the whole mesh (DP \u00d7 TP \u00d7 PP)"),
      QStringLiteral("{pp}: pipeline ranks (one replica)"),
      QStringLiteral("{nodes}: nodes at the plan's GPUs per node"),
      QStringLiteral("{gpus_per_node}, {tasks_per_node}"),
      QStringLiteral("{warmup}, {steps}: warm-up and measured steps")};
}

Result<QStringList> splitCommandLine(const QString &command) {
  QStringList words;
  QString word;
  bool in_word = false;
  QChar quote;
  for (qsizetype i = 0; i < command.size(); ++i) {
    const QChar c = command[i];
    if (quote == QLatin1Char('\'')) {
      if (c == quote)
        quote = QChar();
      else
        word += c;
    } else if (quote == QLatin1Char('"')) {
      if (c == quote)
        quote = QChar();
      else if (c == QLatin1Char('\\') && i + 1 < command.size() &&
               (command[i + 1] == QLatin1Char('"') || command[i + 1] == QLatin1Char('\\')))
        word += command[++i];
      else
        word += c;
    } else if (c.isSpace()) {
      if (in_word) words << word;
      word.clear();
      in_word = false;
    } else {
      in_word = true;
      if (c == QLatin1Char('\'') || c == QLatin1Char('"'))
        quote = c;
      else if (c == QLatin1Char('\\') && i + 1 < command.size())
        word += command[++i];
      else
        word += c;
    }
  }
  if (!quote.isNull())
    return makeError(
        QStringLiteral("the launch command has an unclosed %1 quote").arg(quote).toStdString());
  if (in_word) words << word;
  return words;
}

Result<QStringList> expandLaunchTemplate(const QString &command_template,
                                         const LaunchValues &values) {
  auto split = splitCommandLine(command_template);
  if (!split) return split.error();
  const QStringList words = *split;
  if (words.isEmpty())
    return makeError("the launch command is empty; pick a target or write a command");
  const QList<std::pair<QString, QString>> substitutions = {
      {QStringLiteral("{backend}"), values.backend},
      {QStringLiteral("{plan}"), values.plan},
      {QStringLiteral("{trace}"), values.trace},
      {QStringLiteral("{ranks}"), QString::number(values.world)},
      {QStringLiteral("{world}"), QString::number(values.world)},
      {QStringLiteral("{pp}"), QString::number(values.pp)},
      {QStringLiteral("{nodes}"), QString::number(values.nodes())},
      {QStringLiteral("{gpus_per_node}"), QString::number(values.gpus_per_node)},
      {QStringLiteral("{tasks_per_node}"), QString::number(values.tasksPerNode())},
      {QStringLiteral("{warmup}"), QString::number(values.warmup)},
      {QStringLiteral("{steps}"), QString::number(values.steps)},
  };
  static const QRegularExpression placeholder(QStringLiteral("\\{[A-Za-z_]+\\}"));
  QStringList expanded;
  for (QString word : words) {
    // Unknown placeholders first, so a typo is named rather than passed on literally.
    auto matches = placeholder.globalMatch(word);
    while (matches.hasNext()) {
      const QString name = matches.next().captured(0);
      const bool known = std::any_of(substitutions.begin(), substitutions.end(),
                                     [&](const auto &entry) { return entry.first == name; });
      if (!known)
        return makeError(
            QStringLiteral(
                "unknown placeholder %1 in the launch command; the known ones are {backend}, "
                "{plan}, {trace}, {ranks}, {world}, {pp}, {nodes}, {gpus_per_node}, "
                "{tasks_per_node}, {warmup}, {steps}")
                .arg(name)
                .toStdString());
    }
    if (word.contains(QStringLiteral("{backend}")) && values.backend.isEmpty())
      return makeError(
          "pipescope-backend was not found (" +
          backendSearchLocations().join(QStringLiteral("; ")).toStdString() +
          "); build it (cmake --build BUILD --target pipescope-backend, which needs MPI) or set "
          "PIPESCOPE_BACKEND to its path");
    for (const auto &[name, value] : substitutions)
      word.replace(name, value);
    expanded << word;
  }
  return expanded;
}

QStringList backendSearchLocations() {
  const QString app = QCoreApplication::applicationDirPath();
  return {QStringLiteral("$PIPESCOPE_BACKEND"),
          QDir::cleanPath(app + QStringLiteral("/../backend/pipescope-backend")),
          QDir::cleanPath(app + QStringLiteral("/pipescope-backend")), QStringLiteral("PATH")};
}

QString findBackendExecutable() {
  const auto executable = [](const QString &path) {
    const QFileInfo info(path);
    return info.isFile() && info.isExecutable();
  };
  const QString configured = qEnvironmentVariable("PIPESCOPE_BACKEND");
  if (!configured.isEmpty() && executable(configured))
    return QFileInfo(configured).absoluteFilePath();
  const QString app = QCoreApplication::applicationDirPath();
  const QStringList candidates = {app + QStringLiteral("/../backend/pipescope-backend"),
                                  app + QStringLiteral("/pipescope-backend")};
  for (const QString &candidate : candidates)
    if (executable(candidate)) return QDir::cleanPath(QFileInfo(candidate).absoluteFilePath());
  return QStandardPaths::findExecutable(QStringLiteral("pipescope-backend"));
}

BackendProcess::BackendProcess(QObject *parent) : QObject(parent) {
#ifdef Q_OS_UNIX
  // In the child, between fork and exec (async-signal-safe calls only): a session of its own,
  // so the launcher and everything it starts share a session id that cancel can find even after
  // the launcher is gone; and on Linux a SIGTERM when the window's process dies, so a crashed
  // explorer leaves no run behind.
  process_.setChildProcessModifier([] {
    ::setsid();
#ifdef Q_OS_LINUX
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
  });
#endif
  term_timer_.setSingleShot(true);
  kill_timer_.setSingleShot(true);
  connect(&term_timer_, &QTimer::timeout, this, [this] { signalSession(SIGTERM); });
  connect(&kill_timer_, &QTimer::timeout, this, [this] { signalSession(SIGKILL); });
  connect(&process_, &QProcess::readyReadStandardOutput, this, &BackendProcess::readStdout);
  connect(&process_, &QProcess::readyReadStandardError, this, [this] { readStderr(false); });
  connect(&process_, &QProcess::finished, this, &BackendProcess::onFinished);
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
    if (error != QProcess::FailedToStart) return;
    emit failedToStart(
        QStringLiteral("could not start '%1': %2").arg(process_.program(), process_.errorString()));
  });
}

BackendProcess::~BackendProcess() {
  if (!running()) return;
  disconnect(&process_, nullptr, this, nullptr);
  cancelled_ = true;
  signalSession(SIGKILL);
  process_.waitForFinished(2000);
  signalSession(SIGKILL); // what the launcher's exit orphaned
}

void BackendProcess::start(const QString &program, const QStringList &arguments,
                           const QString &working_directory) {
  if (running()) return;
  parser_ = BackendOutputParser();
  stderr_buffer_.clear();
  cancelled_ = false;
  session_ = 0;
  process_.setWorkingDirectory(working_directory);
  process_.setProgram(program);
  process_.setArguments(arguments);
  process_.start(QIODevice::ReadOnly);
  // On Unix the pid is known as soon as the fork returned; the exec result arrives later by
  // signal (errorOccurred), so nothing here waits.
  session_ = process_.processId();
}

void BackendProcess::cancel() {
  if (!running()) return;
  cancelled_ = true;
  // The launcher first: mpirun forwards the signal to its ranks and reports them.
  process_.terminate();
  term_timer_.start(std::max(1, kill_timeout_ms_ / 3));
  kill_timer_.start(std::max(1, kill_timeout_ms_));
}

QList<qint64> BackendProcess::sessionMembers(qint64 session) {
  QList<qint64> members;
#ifdef Q_OS_LINUX
  if (session <= 0) return members;
  const QStringList entries =
      QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
  for (const QString &entry : entries) {
    bool numeric = false;
    const qint64 pid = entry.toLongLong(&numeric);
    if (!numeric) continue;
    QFile file(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!file.open(QIODevice::ReadOnly)) continue;
    const QByteArray stat = file.read(4096);
    // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
    const qsizetype close = stat.lastIndexOf(')');
    if (close < 0) continue;
    const QList<QByteArray> fields = stat.mid(close + 2).split(' ');
    if (fields.size() < 4) continue;
    if (fields[0] == "Z" || fields[0] == "X") continue; // already dead, waiting to be reaped
    if (fields[3].toLongLong() == session) members << pid;
  }
#else
  Q_UNUSED(session);
#endif
  return members;
}

void BackendProcess::signalSession(int signal_number) {
#ifdef Q_OS_UNIX
  if (session_ <= 0) return;
  // The process group the launcher leads, then every member of its session (children that made
  // process groups of their own, and orphans whose parent already exited).
  ::kill(static_cast<pid_t>(-session_), signal_number);
  for (qint64 pid : sessionMembers(session_))
    if (pid != static_cast<qint64>(::getpid())) ::kill(static_cast<pid_t>(pid), signal_number);
#else
  Q_UNUSED(signal_number);
  if (signal_number == SIGKILL)
    process_.kill();
  else
    process_.terminate();
#endif
}

void BackendProcess::readStdout() {
  for (auto &event : parser_.feed(process_.readAllStandardOutput()))
    emit eventReceived(event);
}

void BackendProcess::readStderr(bool flush) {
  stderr_buffer_ += process_.readAllStandardError();
  qsizetype newline;
  while ((newline = stderr_buffer_.indexOf('\n')) >= 0) {
    const QByteArray line = stderr_buffer_.left(newline);
    stderr_buffer_.remove(0, newline + 1);
    if (!line.trimmed().isEmpty()) emit stderrLine(QString::fromUtf8(line).trimmed());
  }
  // A line without an end must not grow forever.
  if (stderr_buffer_.size() > (1 << 20) || (flush && !stderr_buffer_.trimmed().isEmpty())) {
    emit stderrLine(QString::fromUtf8(stderr_buffer_.left(4000)).trimmed());
    stderr_buffer_.clear();
  }
}

void BackendProcess::onFinished(int exit_code, QProcess::ExitStatus status) {
  term_timer_.stop();
  kill_timer_.stop();
  readStdout();
  for (auto &event : parser_.finish())
    emit eventReceived(event);
  readStderr(true);
  // Whatever the launcher left behind in its session (ranks it failed to stop, a script's
  // background children) ends with the run.
  signalSession(SIGKILL);
  session_ = 0;
  emit finished(exit_code, status == QProcess::CrashExit, cancelled_);
}

} // namespace pipescope::gui
