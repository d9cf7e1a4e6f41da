#pragma once
// A Megatron-LM training log read as its launch and its measured step (`pipescope megatron LOG`).
// pretrain_gpt.py prints, on its first rank, every argument as it resolved it between
// "------------------------ arguments ------------------------" and "-------------------- end of
// arguments ---------------------" (megatron/training/arguments.py, _print_args: "  name ....
// value", Python's str of the value), the vocabulary it padded ("> padded vocab (size: N) with D
// dummy tokens (new size: M)"), and on its last rank one line per --log-interval iterations with
// "iteration  I/ T | ... | elapsed time per iteration (ms): X | ..." (megatron/training/
// training.py, training_log). A log of several starts (a job restarted) is read from its last.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/megatron_args.h"
#include "engine/result.h"

namespace pipescope {

/// One logged iteration line: its iteration number and the mean elapsed time per iteration over
/// the log interval that ends there.
struct MegatronLogIteration {
  long long iteration = 0;
  double elapsed_ms = 0;
};

struct MegatronLog {
  /// The arguments block as the command line that gives the same settings: "name value" as
  /// --name value, True as the flag, False as the flag that turns a default-on setting off where
  /// Megatron spells it apart (masked_softmax_fusion False: --no-masked-softmax-fusion), None and
  /// settings that only matter beside another one that is off (moe_* without experts, fp8_*
  /// without FP8) left out.
  MegatronArguments arguments;
  int logged_arguments = 0;      ///< lines in the block
  int world_size = 0;            ///< the block's world_size; 0 when it has none
  long long tokenizer_vocab = 0; ///< N of "padded vocab (size: N)"; 0 when not logged
  std::vector<MegatronLogIteration> iterations;
};

/// The "elapsed time per iteration" lines anywhere in `text`, in order: a log of another rank
/// of the same run (Megatron-LM prints the arguments on its first rank, the iteration lines on
/// its last; with one log per node they are in different files).
std::vector<MegatronLogIteration> megatronLogIterations(std::string_view text);

/// Whether `text` holds a Megatron-LM arguments block.
bool looksLikeMegatronLog(std::string_view text);

/// Reads the log. Errors: no arguments block, or one that does not end.
Result<MegatronLog> parseMegatronLog(std::string_view text);

/// The step a log measured: the median elapsed time of the logged lines after the first fifth of
/// them (at least the first: it holds start-up work, allocation and compilation).
struct MegatronLogStep {
  double step_s = 0;
  int kept = 0, skipped = 0;
  long long first_kept = 0, last_kept = 0; ///< iteration numbers
  double fastest_s = 0, slowest_s = 0;     ///< among the kept lines
};
/// Errors: fewer than two logged iteration lines, naming what to do.
Result<MegatronLogStep> measuredStep(const std::vector<MegatronLogIteration> &iterations);

/// A launch file or a training log, whichever `text` is (what `pipescope megatron FILE` and the
/// explorer's File > Open Megatron-LM launch read): a log's world size and padded vocabulary
/// fill what `target` leaves at 0. `log`, when given, receives the log (left empty for a
/// launch file).
Result<MegatronLaunch> readMegatronLaunchOrLog(std::string_view text, MegatronTarget target,
                                               std::optional<MegatronLog> *log = nullptr);

} // namespace pipescope
