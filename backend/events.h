#pragma once
// Progress, warnings and errors as JSON lines on stdout: one object per line, written whole and
// flushed, so the GUI (through QProcess) and scripts can follow a run as it happens. The lines are
// the run protocol of engine/run_events.h (its one writer); this file only puts them on stdout.
#include <string>

#include <nlohmann/json.hpp>

#include "engine/run_events.h"

namespace pipescope::backend {

/// Writes one event line of the run protocol (thread-safe).
void emitEvent(const RunEvent &event);
/// Writes one JSON line that is not a run event: the answers of --list-devices and --gemm-bench,
/// which are whole commands of their own (thread-safe).
void emitJsonLine(const nlohmann::json &line);
void emitError(int rank, const std::string &message);
void emitWarning(int rank, const std::string &message);

/// What this rank is doing now, kept ready as a complete error line for the SIGTERM handler: when
/// the launcher stops the run because another rank failed, the line says what this rank was
/// waiting for (and so, usually, which rank failed). Cheap enough to call before every wait.
/// `waiting_for_rank` (when >= 0) goes into the line as a field of its own.
void setActivity(int rank, const std::string &activity, int waiting_for_rank = -1);
/// Installs the SIGTERM/SIGINT handler that writes that line and exits with status 143/130.
void installTerminationReport();
/// Nothing to report on termination any more: the run's end was already reported (an agreed
/// failure), so a launcher stopping this rank on its way out adds no second error event.
void clearActivity();

} // namespace pipescope::backend
