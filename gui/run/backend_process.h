#pragma once
// Launching pipescope-backend from the explorer (DESIGN.md §7, §8 "Run"): targets and their
// command templates, finding the backend executable, and one QProcess wrapper that streams the
// backend's events and can stop every process a run started. The launcher (mpirun, srun, a shell
// script) starts in a session of its own, so cancel reaches all of its descendants — the ranks,
// and anything they left behind — even where the launcher does not forward signals.
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <algorithm>

#include "engine/result.h"
#include "gui/backend_output_parser.h"

namespace pipescope::gui {

/// Where a run executes.
enum class LaunchTarget {
  Cpu,       ///< this machine's CPU: mpirun, one process per pipeline rank, --device cpu
  SharedGpu, ///< one GPU shared by the stages: one process, --device gpu-shared
  LocalGpus, ///< all local GPUs: mpirun, one process per rank of the mesh, --device cuda
  Slurm,     ///< srun across nodes, --device cuda
  Custom,    ///< a command the person writes
};
inline constexpr int kLaunchTargetCount = 5;

/// "This machine's CPU", ...
QString launchTargetTitle(LaunchTarget target);
/// Stable key for settings: "cpu", "gpu-shared", "local-gpus", "slurm", "custom".
QString launchTargetKey(LaunchTarget target);
/// The command template a target starts from; placeholders in braces (launchPlaceholders()).
QString defaultLaunchTemplate(LaunchTarget target);

/// The values substituted into a template.
struct LaunchValues {
  QString backend; ///< {backend}: the executable
  QString plan;    ///< {plan}: the plan with its lowered program
  QString trace;   ///< {trace}: where the measured trace goes
  int world = 1;   ///< {ranks} and {world}: processes of the whole mesh (dp x tp x pp)
  int pp = 1;      ///< {pp}: pipeline ranks (one replica)
  int gpus_per_node = 8;
  int warmup = 1; ///< {warmup}
  int steps = 3;  ///< {steps}
  /// {nodes}: nodes the mesh needs at gpus_per_node GPUs each.
  int nodes() const {
    return (world + std::max(1, gpus_per_node) - 1) / std::max(1, gpus_per_node);
  }
  /// {tasks_per_node}: processes per node.
  int tasksPerNode() const { return std::min(world, std::max(1, gpus_per_node)); }
};

/// Placeholders a template may use, with what each means (for the tooltip).
QStringList launchPlaceholders();

/// Splits a command line into words as a POSIX shell would for plain words: blanks separate,
/// '...' and "..." group (with \" and \\ inside double quotes), a backslash escapes the next
/// character. No expansion of any kind. Refuses an unclosed quote.
Result<QStringList> splitCommandLine(const QString &command);

/// Splits a template like a shell would (quotes group words) and substitutes the placeholders
/// in each word, so a path with spaces stays one argument. Refuses an empty command and unknown
/// placeholders, naming them.
Result<QStringList> expandLaunchTemplate(const QString &command_template,
                                         const LaunchValues &values);

/// The backend executable: $PIPESCOPE_BACKEND, then next to this program in the build tree
/// (<app dir>/../backend/pipescope-backend) or an install (<app dir>/pipescope-backend), then
/// PATH. Empty when none is found.
QString findBackendExecutable();
/// Where findBackendExecutable() looked, for the message that says it is missing.
QStringList backendSearchLocations();

/// One run of a launcher: its stdout parsed into events as they arrive, its stderr as lines.
class BackendProcess : public QObject {
  Q_OBJECT
public:
  explicit BackendProcess(QObject *parent = nullptr);
  /// Stops whatever still runs, at once (SIGKILL to the whole session).
  ~BackendProcess() override;

  /// Starts `program` with `arguments` in `working_directory`. Not while running.
  void start(const QString &program, const QStringList &arguments,
             const QString &working_directory);
  /// Stops every process of the run: SIGTERM to the launcher (mpirun forwards it to its ranks),
  /// after a third of the kill timeout SIGTERM to every process of its session, and SIGKILL to
  /// all of them when the kill timeout passes. finished() follows with cancelled = true.
  void cancel();
  bool running() const { return process_.state() != QProcess::NotRunning; }
  bool cancelling() const { return cancelled_ && running(); }
  /// The launcher's process id (also its session and process group), 0 when not running.
  qint64 processId() const { return process_.processId(); }
  void setKillTimeout(int milliseconds) { kill_timeout_ms_ = milliseconds; }

  /// Process ids of a session's live members (Linux /proc; elsewhere empty).
  static QList<qint64> sessionMembers(qint64 session);

signals:
  void eventReceived(const pipescope::gui::BackendEvent &event);
  void stderrLine(const QString &line);
  /// The launcher ended: exit code, whether it crashed (killed by a signal), whether cancel()
  /// asked for it.
  void finished(int exit_code, bool crashed, bool cancelled);
  /// The launcher could not be started (not found, not executable); finished() does not follow.
  void failedToStart(const QString &message);

private:
  void readStdout();
  void readStderr(bool flush);
  void signalSession(int signal_number);
  void onFinished(int exit_code, QProcess::ExitStatus status);

  QProcess process_;
  BackendOutputParser parser_;
  QByteArray stderr_buffer_;
  QTimer term_timer_, kill_timer_;
  qint64 session_ = 0;
  int kill_timeout_ms_ = 3000;
  bool cancelled_ = false;
};

} // namespace pipescope::gui
