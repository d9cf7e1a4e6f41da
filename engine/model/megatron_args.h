#pragma once
// A Megatron-LM launch read as a pipescope configuration (DESIGN.md §5): the arguments of
// pretrain_gpt.py, from a training script or command line, or from the MODEL_ARGS of a
// Megatron-LM CI test's model_config.yaml, mapped onto the model, mesh, schedule and training
// settings a validation row or a plan holds. Where an argument is absent, Megatron-LM's own
// default applies (megatron/training/arguments.py and megatron/core/transformer/
// transformer_config.py), and the translation says which it took. Arguments the cost model does
// not price are named, not dropped silently.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/validation.h"
#include "engine/result.h"

namespace pipescope {

/// One argument as written: "--num-layers" with "32"; a flag has no value.
struct MegatronArgument {
  std::string name;
  std::string value;
  bool has_value = false;
};

/// The arguments in the order given (a repeated argument: the last one counts, as in argparse),
/// and the environment settings the text makes (YAML ENV_VARS, shell `export NAME=value`).
struct MegatronArguments {
  std::vector<MegatronArgument> arguments;
  std::vector<std::pair<std::string, std::string>> environment;
  /// Python scripts the command runs (pretrain_gpt.py, ...), from a shell text.
  std::vector<std::string> scripts;
};

/// Reads a Megatron-LM CI model_config.yaml (its ENV_VARS and MODEL_ARGS blocks: `--name: value`,
/// true for a flag, false for a flag not given) or a shell command or script (`torchrun ...
/// pretrain_gpt.py --num-layers 32 \`, quotes, `--name=value`, comments, `export NAME=value`).
/// Errors name the line.
Result<MegatronArguments> parseMegatronArguments(std::string_view text);

/// What the arguments do not say.
struct MegatronTarget {
  /// World size; 0: torchrun's --nproc-per-node × --nnodes from the text.
  int gpus = 0;
  /// 0: torchrun's --nproc-per-node from the text, else the hardware preset's.
  int gpus_per_node = 0;
  std::string hardware = "h100-sxm";
  /// The model's name in the plan (launchName of the file).
  std::string name = "megatron-args";
  /// The tokenizer's vocabulary before Megatron pads it, for tokenizers that read it from their
  /// files (HuggingFace, SentencePiece, TikToken); 0: from --vocab-size or the GPT-2 BPE files.
  int vocab = 0;
  std::string vocab_source = "the --vocab given"; ///< where `vocab` comes from, as said
};

// nlohmann::json's destructor checks its invariants with assertions, not exceptions, which
// clang-tidy cannot see through.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct MegatronTranslation {
  /// {"model", "hardware", "mesh", "schedule", "training"}, as a validation row holds them.
  nlohmann::json row;
  /// Megatron's defaults taken where the arguments are silent, and derived values:
  /// "ffn_hidden 16384: 4 × hidden (no --ffn-hidden-size)".
  std::vector<std::string> assumed;
  /// Arguments read that change step time or memory but that pipescope does not price, each with
  /// what it does.
  std::vector<std::string> not_priced;
  /// Arguments pipescope does not know (logging, data, learning rate, checkpoints, ...).
  std::vector<std::string> not_read;
};

/// Maps the arguments. A launch of another model than a decoder-only GPT (pretrain_bert.py,
/// pretrain_t5.py, pretrain_mamba.py, hybrid or vision models) is refused, naming what says so.
/// An argument whose value pipescope cannot represent (an MoE layer pattern
/// other than dense-then-MoE, a shared expert size that is not a multiple of the expert's, a
/// value left as a shell variable) or sizes that do not divide is an error naming the argument
/// and the fix.
Result<MegatronTranslation> translateMegatronArguments(const MegatronArguments &arguments,
                                                       const MegatronTarget &target);

/// torchrun's world size in the launch (--nproc-per-node × --nnodes, either spelling), 0 when it
/// does not say, or says something that is not a whole number within kMaxWorldSize.
int torchrunWorldSize(const MegatronArguments &arguments);

/// A name for the launch in `path`: its file name without the folder and the extensions a launch
/// file has (.sh, .yaml, .yml, .txt, .log, .model_config).
std::string launchName(std::string_view path);

/// A launch read whole: its arguments, their translation and the configuration they make, checked
/// as a validation row's is (validationCasePlan(configuration) is its plan). Errors name the
/// argument or the field and the fix.
struct MegatronLaunch {
  MegatronArguments arguments;
  MegatronTranslation translation;
  ValidationCase configuration;
};
Result<MegatronLaunch> readMegatronLaunch(std::string_view text, const MegatronTarget &target);
/// The same for arguments already read (a Megatron-LM log's arguments block, megatron_log.h).
Result<MegatronLaunch> launchFromArguments(MegatronArguments arguments,
                                           const MegatronTarget &target);

} // namespace pipescope
