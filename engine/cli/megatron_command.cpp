// `pipescope megatron`: a Megatron-LM launch (a training script, a command line, or the
// model_config.yaml of a Megatron-LM CI test) read as a pipescope configuration, predicted, and
// written as a plan the explorer and `simulate --plan` open (engine/model/megatron_args.h).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/json_io.h"
#include "engine/model/megatron_args.h"
#include "engine/model/validation.h"
#include "engine/plan_file.h"

namespace pipescope::cli {

namespace {

using nlohmann::json;

constexpr double kGiB = 1073741824.0;

constexpr const char *kMegatronHelp =
    R"(usage: pipescope megatron FILE [--gpus N] [--gpus-per-node N]
                          [--hardware H] [--vocab N] [--out PLAN] [--json]

Reads the arguments of a Megatron-LM launch and predicts the run: its step time, what each stage's
forward and backward are made of, its communication and its peak memory per GPU. FILE ("-": standard
input) is one of
  - a training script or a command line (torchrun ... pretrain_gpt.py --num-layers 32 ...; line
    continuations, quotes, --name=value, argument arrays, and the script's variables:
    NAME=value, $NAME, ${NAME:-default}, $(( )) arithmetic; conditionals are not evaluated,
    so every branch's arguments are read and the last one given counts),
  - a Megatron-LM CI test's model_config.yaml (its MODEL_ARGS and ENV_VARS).
Where the arguments are silent, Megatron-LM's own defaults apply (FFN 4h, LayerNorm, biases,
learned positions, dropout 0.1, the vocabulary padded to 128 × TP, fp32 gradient reduction under
bf16, no loss fusion) and the output lists each one taken. Arguments that change time or memory
but are not priced (--deterministic-mode, CUDA graphs, partial recomputation, ...) are named, and
so are the ones not read (logging, data, learning rate, checkpoints).

  --gpus N             world size (default: torchrun's --nproc-per-node × --nnodes in FILE)
  --gpus-per-node N    (default: torchrun's --nproc-per-node, else the hardware preset's)
  --hardware H         a hardware preset or file (default h100-sxm; pipescope presets lists them)
  --vocab N            the tokenizer's vocabulary before padding, for tokenizers that read it
                       from their files (HuggingFace, SentencePiece, TikToken)
  --out PLAN           write the configuration as a plan file: pipescope simulate --plan PLAN
                       predicts it again, the explorer opens it to vary it
  --json               one JSON object: configuration, assumed, not_priced, not_read, prediction
)";

std::string listText(const std::vector<std::string> &names) {
  std::string text;
  for (const auto &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return text;
}

} // namespace

int runMegatron(const std::vector<std::string> &args) {
  if (wantsHelp(args)) {
    std::cout << kMegatronHelp;
    return 0;
  }
  auto parsed = Arguments::parse(args, {"gpus", "gpus-per-node", "hardware", "vocab", "out"},
                                 {"json"}, "megatron");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  if (a.positional().size() != 1)
    return fail("megatron: name one file with the launch's arguments (a script, a command line "
                "or a CI model_config.yaml; - for standard input)");
  const std::string &path = a.positional().front();
  MegatronTarget target;
  auto gpus = a.integer("gpus", 1, kMaxWorldSize);
  if (!gpus) return fail(gpus.error().message);
  auto per_node = a.integer("gpus-per-node", 1, 1 << 16);
  if (!per_node) return fail(per_node.error().message);
  auto vocab = a.integer("vocab", 1, 1 << 30);
  if (!vocab) return fail(vocab.error().message);
  target.gpus = gpus->value_or(0);
  target.gpus_per_node = per_node->value_or(0);
  target.vocab = vocab->value_or(0);
  target.hardware = a.text("hardware").value_or("h100-sxm");
  target.name = launchName(a.positional().front());
  if (const auto out = a.text("out"); out && *out == "-")
    return fail("megatron: --out - would mix the plan with the report; give a file name");

  currentActivity() = "reading " + path;
  auto text = readTextFile(path);
  if (!text) return fail(text.error().message);
  auto read = readMegatronLaunch(*text, target);
  if (!read) return fail(path + ": " + read.error().message);
  const MegatronArguments &launch = read->arguments;
  const MegatronTranslation &translation = read->translation;
  ValidationCase &configuration = read->configuration;
  configuration.id = path;
  currentActivity() = "predicting the run";
  auto result = predictValidationCase(configuration);
  if (!result) return fail(result.error().message);
  if (const auto out = a.text("out")) {
    currentActivity() = "writing " + *out;
    if (auto status = savePlan(*out, validationCasePlan(configuration)); !status)
      return fail("megatron: " + status.error().message);
  }

  const ModelReport &report = result->report;
  json memory = json::array();
  for (const auto &rank : report.memory)
    memory.push_back(rank.total / kGiB);
  if (a.has("json")) {
    json out = {{"configuration", translation.row},
                {"assumed", translation.assumed},
                {"not_priced", translation.not_priced},
                {"not_read", translation.not_read},
                {"prediction",
                 {{"step_time_s", result->predicted_step_s},
                  {"tokens_per_s", report.tokens_per_s},
                  {"mfu", report.mfu},
                  {"memory_gib_per_pipeline_rank", memory},
                  {"explanation", explanationJson(*result)}}}};
    if (const auto plan = a.text("out")) out["plan"] = *plan;
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  const json &row = translation.row;
  std::cout << "Megatron-LM launch " << path << " (" << launch.arguments.size() << " arguments)\n";
  for (const char *part : {"model", "mesh", "schedule", "training"})
    std::cout << "  " << part << std::string(10 - std::string(part).size(), ' ') << row[part].dump()
              << '\n';
  std::cout << "  hardware  " << target.hardware << '\n';
  if (!translation.assumed.empty()) {
    std::cout << "\nassumed (the arguments are silent; Megatron-LM's defaults):\n";
    for (const auto &line : translation.assumed)
      std::cout << "  - " << line << '\n';
  }
  if (!translation.not_priced.empty()) {
    std::cout << "\nread but not priced (they change time or memory; the prediction leaves "
                 "them out):\n";
    for (const auto &line : translation.not_priced)
      std::cout << "  - " << line << '\n';
  }
  if (!translation.not_read.empty())
    std::cout << "\nnot read (" << translation.not_read.size()
              << "; logging, data, optimizer hyper-parameters, checkpoints and the like): "
              << listText(translation.not_read) << '\n';
  std::cout << "\nprediction on " << target.hardware << ": step "
            << fixed(result->predicted_step_s, 3) << " s, " << number(report.tokens_per_s)
            << " tokens/s\n";
  for (const auto &line : explanationLines(*result))
    std::cout << "  " << line << '\n';
  std::cout << "  peak memory per GPU by pipeline rank:";
  for (std::size_t rank = 0; rank < report.memory.size(); ++rank)
    std::cout << (rank ? ", " : " ") << fixed(report.memory[rank].total / kGiB, 1) << " GiB";
  std::cout << " (of " << fixed(configuration.setup.hardware.memory_gib, 1) << ")\n";
  if (const auto out = a.text("out"))
    std::cout << "\nThe plan is written to " << *out << " (pipescope simulate --plan " << *out
              << " predicts it again; the explorer opens it)\n";
  return 0;
}

} // namespace pipescope::cli
