// `pipescope megatron`: a Megatron-LM launch (a training script, a command line, or the
// model_config.yaml of a Megatron-LM CI test) read as a pipescope configuration, predicted, and
// written as a plan the explorer and `simulate --plan` open (engine/model/megatron_args.h).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/json_io.h"
#include "engine/model/megatron_args.h"
#include "engine/model/megatron_log.h"
#include "engine/model/validation.h"
#include "engine/output_file.h"
#include "engine/plan_file.h"

namespace pipescope::cli {

namespace {

using nlohmann::json;

constexpr double kGiB = 1073741824.0;

constexpr const char *kMegatronHelp =
    R"(usage: pipescope megatron FILE [MORE_LOGS...] [--gpus N] [--gpus-per-node N]
                          [--hardware H] [--vocab N] [--out PLAN] [--json]
                          [--step-time S [--add-row RUNS [--row-id ID]]]

Reads the arguments of a Megatron-LM launch and predicts the run: its step time, what each stage's
forward and backward are made of, its communication, its peak memory per GPU and its speed of light
(the step with every kernel at the GPU's peak and every link at its line rate: a measured step
below it did not run as read). FILE ("-": standard input) is one of
  - a training script or a command line (torchrun ... pretrain_gpt.py --num-layers 32 ...; line
    continuations, quotes, --name=value, argument arrays, and the script's variables:
    NAME=value, $NAME, ${NAME:-default}, $(( )) arithmetic; conditionals are not evaluated,
    so every branch's arguments are read and the last one given counts),
  - a Megatron-LM CI test's model_config.yaml (its MODEL_ARGS and ENV_VARS),
  - a Megatron-LM training log (pretrain_gpt.py's output on its first rank): the arguments as the
    run resolved them, the vocabulary it padded, its world size, and its measured step, the
    median "elapsed time per iteration" of the logged lines after the first fifth (start-up,
    allocation and compilation); --step-time overrides it. Megatron-LM prints the arguments on
    its first rank and the iteration lines on its last: with one log per node, name them all
    (MORE_LOGS), and the step comes from the one with the most iteration lines.
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
  --step-time S        the run's measured seconds per iteration (Megatron-LM logs the elapsed
                       time per iteration, in ms; read from FILE when it is a log): the
                       prediction's error against it is printed
  --add-row RUNS       with a measured step: add the launch and its measured step as a row of the
                       "pipescope.validation" file RUNS (created if absent; rewritten whole, or
                       left as it was on any error). pipescope calibrate --published RUNS fits
                       the hardware's GEMM level to your runs; compare --published RUNS checks it
  --row-id ID          the row's id in RUNS (default: the launch file's name)
)";

/// The text of the validation file `path` (created when absent) with one more row: the launch's
/// configuration, `id`, and its measured step. The file must be a validation file that loads, and
/// the id new in it.
Result<std::string> runsWithRow(const std::string &path, const json &configuration,
                                const std::string &id, const std::string &published,
                                double step_time_s) {
  json runs;
  if (std::filesystem::exists(path)) {
    auto text = readTextFile(path);
    if (!text) return text.error();
    auto parsed = parseJsonLimited(*text);
    if (!parsed) return parsed.error();
    runs = std::move(*parsed);
    auto set = validationSetFromJson(runs, path);
    if (!set)
      return makeError("is not a validation file that loads (" + set.error().message +
                       "); give a new file or fix it");
    for (const auto &row : set->cases)
      if (row.id == id)
        return makeError("has a row '" + id + "' already; give the new one --row-id ID");
  } else {
    runs = {{"format", "pipescope.validation"},
            {"version", 1},
            {"title", "Measured runs"},
            {"source", "Megatron-LM launches read by pipescope megatron, each with the step time "
                       "its run measured"},
            {"rows", json::array()}};
  }
  json row = configuration;
  row["id"] = id;
  row["published"] = published;
  row["measured"] = {{"step_time_s", step_time_s}};
  runs["rows"].push_back(std::move(row));
  // What is written must load back as it will be read.
  if (auto set = validationSetFromJson(runs, path); !set)
    return makeError("the new row does not load (" + set.error().message + ")");
  return runs.dump(2) + "\n";
}

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
  auto parsed = Arguments::parse(
      args, {"gpus", "gpus-per-node", "hardware", "vocab", "out", "step-time", "add-row", "row-id"},
      {"json"}, "megatron");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  if (a.positional().empty())
    return fail("megatron: name one file with the launch's arguments (a script, a command line, "
                "a CI model_config.yaml or a training log; - for standard input)");
  // Several files: the logs of one run (one per node); the launch is the one with the arguments
  // block, the step the one with the most iteration lines.
  std::vector<std::string> texts;
  for (const auto &file : a.positional()) {
    currentActivity() = "reading " + file;
    auto read_file = readTextFile(file);
    if (!read_file) return fail(read_file.error().message);
    texts.push_back(std::move(*read_file));
  }
  // The launch: the log with the arguments block, else the first file (a script or YAML).
  const auto with_block = std::find_if(
      texts.begin(), texts.end(), [](const std::string &t) { return looksLikeMegatronLog(t); });
  const std::size_t main_file =
      with_block == texts.end() ? 0 : static_cast<std::size_t>(with_block - texts.begin());
  const std::string &path = a.positional()[main_file];
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
  target.name = launchName(path);
  if (const auto out = a.text("out"); out && *out == "-")
    return fail("megatron: --out - would mix the plan with the report; give a file name");
  auto given_step_time = a.number("step-time", 1e-6, 1e9);
  if (!given_step_time) return fail(given_step_time.error().message);
  std::optional<double> step_time = *given_step_time;
  const auto runs_path = a.text("add-row");
  if (a.has("row-id") && !runs_path)
    return fail("megatron: --row-id names the row --add-row RUNS adds; add --add-row");
  if (runs_path && *runs_path == "-")
    return fail("megatron: --add-row - would mix the runs file with the report; give a file name");

  // A training log: its arguments block is the launch, and its iteration lines the measured step.
  std::optional<MegatronLog> log;
  auto read = readMegatronLaunchOrLog(texts[main_file], target, &log);
  if (!read) return fail(path + ": " + read.error().message);
  // The iteration lines: the log's own, or another file's with more (the last rank's log).
  std::vector<MegatronLogIteration> lines;
  if (log) lines = log->iterations;
  std::string step_file = path; // the file the step is read from
  for (std::size_t f = 0; f < texts.size(); ++f)
    if (f != main_file) {
      auto iterations = megatronLogIterations(texts[f]);
      if (iterations.size() > lines.size()) {
        lines = std::move(iterations);
        step_file = a.positional()[f];
      }
    }
  if (texts.size() > 1 && lines.empty())
    return fail("megatron: no file given has Megatron-LM's iteration lines (\"elapsed time per "
                "iteration (ms)\"), which its last rank prints; name the run's logs, or give "
                "one launch or log alone");
  const bool logged = log || texts.size() > 1; // a measured step is looked for
  std::optional<MegatronLogStep> logged_step;
  std::string log_step_problem;
  if (logged) {
    if (auto measured = measuredStep(lines))
      logged_step = *measured;
    else
      log_step_problem = measured.error().message;
    if (!step_time && logged_step) step_time = logged_step->step_s;
  }
  if (runs_path && !step_time)
    return fail("megatron: --add-row needs the run's measured step: --step-time S (seconds per "
                "iteration; Megatron-LM logs it as \"elapsed time per iteration (ms)\")" +
                (log_step_problem.empty() ? std::string() : ", as " + log_step_problem));
  const MegatronArguments &launch = read->arguments;
  const MegatronTranslation &translation = read->translation;
  ValidationCase &configuration = read->configuration;
  configuration.id = path;
  currentActivity() = "predicting the run";
  auto result = predictValidationCase(configuration, true);
  if (!result) return fail(result.error().message);
  std::optional<double> step_error;
  if (step_time) step_error = (result->predicted_step_s - *step_time) / *step_time;
  // Where the measured step comes from, as the runs file's row and the report say it.
  const bool step_from_log = logged_step && !*given_step_time;
  std::string measured_how;
  if (step_from_log)
    measured_how = (step_file != path ? step_file + ": " : std::string()) +
                   "the median of iterations " + std::to_string(logged_step->first_kept) + "-" +
                   std::to_string(logged_step->last_kept) + " (" +
                   std::to_string(logged_step->kept) + " logged lines, " +
                   fixed(logged_step->fastest_s, 3) + "-" + fixed(logged_step->slowest_s, 3) +
                   " s; the first " + std::to_string(logged_step->skipped) + " left out)";
  // Both files are checked before either is written, so a refusal leaves both as they were.
  std::optional<std::string> runs_text;
  if (runs_path) {
    const std::string id = a.text("row-id").value_or(target.name);
    const std::string published = std::string(log ? "Megatron-LM log " : "Megatron-LM launch ") +
                                  path + ", measured " + number(*step_time) + " s per iteration" +
                                  (step_from_log ? ", " + measured_how : "");
    auto runs = runsWithRow(*runs_path, translation.row, id, published, *step_time);
    if (!runs) return fail("megatron: --add-row " + *runs_path + ": " + runs.error().message);
    runs_text = std::move(*runs);
  }
  if (const auto out = a.text("out")) {
    currentActivity() = "writing " + *out;
    if (auto status = savePlan(*out, validationCasePlan(configuration)); !status)
      return fail("megatron: " + status.error().message);
  }
  if (runs_text) {
    currentActivity() = "writing " + *runs_path;
    if (auto status = writeTextFile(*runs_path, *runs_text); !status)
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
                  {"speed_of_light_step_s", result->speed_of_light_step_s},
                  {"memory_gib_per_pipeline_rank", memory},
                  {"explanation", explanationJson(*result)}}}};
    if (const auto plan = a.text("out")) out["plan"] = *plan;
    if (step_error) {
      out["measured"] = {{"step_time_s", *step_time},
                         {"below_speed_of_light", *step_time < result->speed_of_light_step_s}};
      if (step_from_log)
        out["measured"]["from_log"] = {{"file", step_file},
                                       {"iterations", logged_step->kept},
                                       {"first_iteration", logged_step->first_kept},
                                       {"last_iteration", logged_step->last_kept},
                                       {"left_out", logged_step->skipped},
                                       {"fastest_s", logged_step->fastest_s},
                                       {"slowest_s", logged_step->slowest_s}};
      out["prediction"]["step_error"] = *step_error;
    }
    if (log)
      out["log"] = {{"logged_arguments", log->logged_arguments},
                    {"iteration_lines", log->iterations.size()},
                    {"world_size", log->world_size},
                    {"tokenizer_vocab", log->tokenizer_vocab}};
    if (runs_path) out["runs"] = *runs_path;
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  const json &row = translation.row;
  std::cout << wrappedLine("", "  ",
                           log ? "Megatron-LM log " + path + " (" +
                                     std::to_string(log->logged_arguments) + " logged arguments, " +
                                     std::to_string(launch.arguments.size()) + " of them set; " +
                                     std::to_string(log->iterations.size()) + " iteration lines)"
                               : "Megatron-LM launch " + path + " (" +
                                     std::to_string(launch.arguments.size()) + " arguments)");
  for (const char *part : {"model", "mesh", "schedule", "training"})
    std::cout << "  " << part << std::string(10 - std::string(part).size(), ' ') << row[part].dump()
              << '\n';
  std::cout << "  hardware  " << target.hardware << '\n';
  if (!translation.assumed.empty()) {
    std::cout << "\nassumed (the arguments are silent; Megatron-LM's defaults):\n";
    for (const auto &line : translation.assumed)
      std::cout << wrappedLine("  - ", "    ", line);
  }
  if (!translation.not_priced.empty()) {
    std::cout << "\nread but not priced (they change time or memory; the prediction leaves "
                 "them out):\n";
    for (const auto &line : translation.not_priced)
      std::cout << wrappedLine("  - ", "    ", line);
  }
  // A log sets every argument Megatron has; naming the hundreds not read would bury the rest.
  if (!translation.not_read.empty() && log)
    std::cout << '\n'
              << wrappedLine("", "  ",
                             "not read: " + std::to_string(translation.not_read.size()) +
                                 " of the logged settings (logging, data, optimizer "
                                 "hyper-parameters, checkpoints and the like; --json lists them)");
  else if (!translation.not_read.empty())
    std::cout << '\n'
              << wrappedLine("", "  ",
                             "not read (" + std::to_string(translation.not_read.size()) +
                                 "; logging, data, optimizer hyper-parameters, checkpoints and "
                                 "the like): " +
                                 listText(translation.not_read));
  if (logged && !logged_step && !*given_step_time)
    std::cout << "\nno measured step: " << log_step_problem << '\n';
  std::cout << "\nprediction on " << target.hardware << ": step "
            << fixed(result->predicted_step_s, 3) << " s, " << number(report.tokens_per_s)
            << " tokens/s";
  if (step_error)
    std::cout << " (measured " << fixed(*step_time, 3) << " s: " << signedPercent(*step_error)
              << ")";
  std::cout << '\n';
  if (step_from_log) std::cout << wrappedLine("  measured: ", "    ", measured_how);
  std::cout << wrappedLine(
      "  ", "    ",
      "speed of light: " + fixed(result->speed_of_light_step_s, 3) +
          " s (every kernel at the GPU's peak, every link at its line rate, nothing else)" +
          (step_time && *step_time < result->speed_of_light_step_s
               ? ": the measured step is below it, so the run was not this launch as read (an "
                 "argument its script sets elsewhere, another GPU) or it overlapped something "
                 "pipescope prices in series; calibrate leaves such a row out"
               : ""));
  for (const auto &line : explanationLines(*result)) {
    const bool nested = line.starts_with("  ");
    std::cout << wrappedLine(nested ? "    " : "  ", nested ? "      " : "    ",
                             nested ? line.substr(2) : line);
  }
  std::cout << "  peak memory per GPU by pipeline rank:";
  for (std::size_t rank = 0; rank < report.memory.size(); ++rank)
    std::cout << (rank ? ", " : " ") << fixed(report.memory[rank].total / kGiB, 1) << " GiB";
  std::cout << " (of " << fixed(configuration.setup.hardware.memory_gib, 1) << ")\n";
  if (const auto out = a.text("out"))
    std::cout << "\nThe plan is written to " << *out << " (pipescope simulate --plan " << *out
              << " predicts it again; the explorer opens it)\n";
  if (runs_path)
    std::cout << "\nThe run is a row of " << *runs_path << " (pipescope calibrate --published "
              << *runs_path << " fits the GEMM level to its rows)\n";
  return 0;
}

} // namespace pipescope::cli
