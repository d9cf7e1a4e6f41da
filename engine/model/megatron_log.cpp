// A Megatron-LM training log read as its launch and its measured step (megatron_log.h).
#include "engine/model/megatron_log.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <set>

#include "engine/mesh.h"

namespace pipescope {

namespace {

constexpr std::string_view kBlockStart = "--- arguments ---";
constexpr std::string_view kBlockEnd = "--- end of arguments ---";
constexpr std::string_view kPaddedVocab = "padded vocab (size: ";
constexpr std::string_view kElapsed = "elapsed time per iteration (ms):";

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

std::string_view trimmedView(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())) != 0)
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0)
    text.remove_suffix(1);
  return text;
}

/// "  name ........ value" (any launcher's prefix before the name, e.g. "[rank0]: "): the name
/// and the value, or false for another line.
bool argumentLine(std::string_view line, std::string &name, std::string &value) {
  // The first " ." that starts a run of dots followed by a space, after a name.
  for (std::size_t at = line.find(" ."); at != std::string_view::npos;
       at = line.find(" .", at + 1)) {
    std::size_t end = at + 1;
    while (end < line.size() && line[end] == '.')
      ++end;
    if (end >= line.size() || line[end] != ' ') continue;
    std::size_t begin = at;
    while (begin > 0 && isNameChar(line[begin - 1]))
      --begin;
    if (begin == at) continue;
    name = std::string(line.substr(begin, at - begin));
    value = std::string(trimmedView(line.substr(end + 1)));
    return true;
  }
  return false;
}

/// The whole number that `text` starts with (after spaces), or -1.
long long leadingNumber(std::string_view text) {
  text = trimmedView(text);
  long long value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end != text.data() ? value : -1;
}

/// Megatron's flags that turn a default-on setting off, by the setting's name in the block.
const std::map<std::string, std::string> &offFlags() {
  static const std::map<std::string, std::string> flags = {
      {"add_bias_linear", "--disable-bias-linear"},
      {"add_position_embedding", "--no-position-embedding"},
      {"apply_rope_fusion", "--no-rope-fusion"},
      {"bias_dropout_fusion", "--no-bias-dropout-fusion"},
      {"bias_gelu_fusion", "--no-bias-gelu-fusion"},
      {"bias_swiglu_fusion", "--no-bias-swiglu-fusion"},
      {"gradient_accumulation_fusion", "--no-gradient-accumulation-fusion"},
      {"masked_softmax_fusion", "--no-masked-softmax-fusion"},
      {"overlap_p2p_comm", "--no-overlap-p2p-communication"},
  };
  return flags;
}

/// Settings Megatron resolves on every launch that a launch written by hand would not give:
/// they would read as another kind of model (encoder layers, image sizes) or are the block's own.
const std::set<std::string> &alwaysResolved() {
  static const std::set<std::string> names = {"encoder_num_layers",
                                              "decoder_num_layers",
                                              "encoder_seq_length",
                                              "decoder_seq_length",
                                              "img_h",
                                              "img_w",
                                              "world_size",
                                              "rank",
                                              "local_rank",
                                              "data_parallel_size",
                                              "transformer_pipeline_model_parallel_size"};
  return names;
}

/// The block's value as a command-line value: None, "none" and [] give nothing, a list its
/// elements, an enum (AttnBackend.auto) its member's name.
std::optional<std::string> commandLineValue(std::string value) {
  if (value == "None" || value == "none" || value == "[]" || value.empty()) return std::nullopt;
  if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
    std::string words;
    std::string_view rest(value);
    rest = rest.substr(1, rest.size() - 2);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      std::string_view item = trimmedView(rest.substr(0, comma));
      if (item.size() >= 2 && (item.front() == '\'' || item.front() == '"') &&
          item.back() == item.front())
        item = item.substr(1, item.size() - 2);
      if (!item.empty()) words += (words.empty() ? "" : " ") + std::string(item);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    return words.empty() ? std::nullopt : std::optional<std::string>(words);
  }
  const auto dot = value.find('.');
  if (dot != std::string::npos && dot > 0 && std::isupper(static_cast<unsigned char>(value[0])) &&
      std::all_of(value.begin(), value.begin() + static_cast<std::ptrdiff_t>(dot), isNameChar) &&
      dot + 1 < value.size() &&
      std::all_of(value.begin() + static_cast<std::ptrdiff_t>(dot) + 1, value.end(), isNameChar))
    return value.substr(dot + 1);
  return value;
}

/// The block as command-line arguments (megatron_log.h says how).
MegatronArguments blockArguments(const std::vector<std::pair<std::string, std::string>> &block) {
  std::map<std::string, std::string> values(block.begin(), block.end());
  const auto off = [&](const char *name) {
    const auto it = values.find(name);
    return it == values.end() || it->second == "None" || it->second == "False" ||
           it->second == "none" || it->second == "0";
  };
  const bool experts = !off("num_experts"), fp8 = !off("fp8"), fp4 = !off("fp4");
  const bool offloading = !off("cpu_offloading");
  // With a step batch-size schedule Megatron fills global_batch_size with micro-batch × DP
  // (arguments.py, after refusing both on the command line): the steps run the schedule's batch.
  const bool batch_schedule = !off("step_batch_size_schedule");
  const bool pipelined = values.count("pipeline_model_parallel_size") != 0 &&
                         leadingNumber(values["pipeline_model_parallel_size"]) > 1;
  const bool rotary = values.count("position_embedding_type") != 0 &&
                      values["position_embedding_type"].find("rope") != std::string::npos;
  MegatronArguments out;
  for (const auto &[name, raw] : block) {
    if (alwaysResolved().count(name)) continue;
    if (!experts && (name.starts_with("moe_") || name.starts_with("expert_"))) continue;
    if (!fp8 && name.starts_with("fp8_")) continue;
    if (!fp4 && name.starts_with("fp4_")) continue;
    if (!offloading && name.starts_with("cpu_offloading_")) continue;
    if (batch_schedule && name == "global_batch_size") continue;
    std::string flag = "--" + name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (name == "fp8") flag = "--fp8-format"; // argparse's dest for --fp8-format
    if (raw == "True") {
      out.arguments.push_back({flag, "", false});
      continue;
    }
    if (raw == "False") {
      const auto it = offFlags().find(name);
      // Two of them matter only where their setting runs: P2P overlap with a pipeline, rotary
      // fusion with rotary embeddings.
      if (it != offFlags().end() && (name != "overlap_p2p_comm" || pipelined) &&
          (name != "apply_rope_fusion" || rotary))
        out.arguments.push_back({it->second, "", false});
      continue;
    }
    if (auto value = commandLineValue(raw)) out.arguments.push_back({flag, *value, true});
  }
  return out;
}

} // namespace

bool looksLikeMegatronLog(std::string_view text) {
  return text.find(kBlockStart) != std::string_view::npos;
}

Result<MegatronLog> parseMegatronLog(std::string_view text) {
  // The last start: its arguments block, then the lines after it.
  const std::size_t start = text.rfind(kBlockStart);
  if (start == std::string_view::npos)
    return makeError("no Megatron-LM arguments block (\"------------------------ arguments "
                     "------------------------\"); give the log of pretrain_gpt.py's first rank, "
                     "which prints it at start");
  const std::size_t block_end = text.find(kBlockEnd, start);
  if (block_end == std::string_view::npos)
    return makeError("the arguments block does not end (no \"end of arguments\" line): the log "
                     "is cut short; give the whole log");
  MegatronLog log;
  std::vector<std::pair<std::string, std::string>> block;
  std::string_view lines = text.substr(start, block_end - start);
  lines.remove_prefix(std::min(lines.size(), lines.find('\n') + 1)); // the header line
  while (!lines.empty()) {
    const auto eol = lines.find('\n');
    const std::string_view line = lines.substr(0, eol);
    lines.remove_prefix(eol == std::string_view::npos ? lines.size() : eol + 1);
    std::string name, value;
    if (!argumentLine(line, name, value)) continue;
    ++log.logged_arguments;
    if (name == "world_size") {
      const long long world = leadingNumber(value);
      if (world > 0 && world <= kMaxWorldSize) log.world_size = static_cast<int>(world);
    }
    block.emplace_back(std::move(name), std::move(value));
  }
  if (block.empty())
    return makeError("the arguments block holds no \"name ..... value\" lines; give the log as "
                     "Megatron-LM wrote it");
  log.arguments = blockArguments(block);
  log.arguments.scripts.emplace_back("pretrain_gpt.py"); // the block is pretrain_gpt.py's form

  const std::string_view rest = text.substr(block_end);
  if (const auto at = rest.find(kPaddedVocab); at != std::string_view::npos) {
    const long long vocab = leadingNumber(rest.substr(at + kPaddedVocab.size()));
    if (vocab > 0 && vocab <= (1 << 30)) log.tokenizer_vocab = vocab;
  }
  log.iterations = megatronLogIterations(rest);
  return log;
}

std::vector<MegatronLogIteration> megatronLogIterations(std::string_view text) {
  std::vector<MegatronLogIteration> iterations;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    const auto elapsed = line.find(kElapsed);
    if (elapsed == std::string_view::npos) continue;
    std::string_view number = trimmedView(line.substr(elapsed + kElapsed.size()));
    double ms = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), ms);
    if (error != std::errc() || end == number.data() || !(ms > 0) || ms > 1e12) continue;
    long long iteration = 0;
    if (const auto it = line.find("iteration "); it != std::string_view::npos && it < elapsed)
      iteration = leadingNumber(line.substr(it + 10));
    iterations.push_back({std::max(0LL, iteration), ms});
  }
  return iterations;
}

Result<MegatronLogStep> measuredStep(const std::vector<MegatronLogIteration> &iterations) {
  const int logged = static_cast<int>(iterations.size());
  if (logged < 2)
    return makeError("the log has " + std::to_string(logged) + " iteration line" +
                     (logged == 1 ? "" : "s") +
                     " (\"elapsed time per iteration (ms)\"); a step needs two or more: let "
                     "the run log more iterations, name its last rank's log too (Megatron-LM "
                     "prints them there), or give --step-time S");
  MegatronLogStep step;
  step.skipped = std::max(1, logged / 5);
  std::vector<double> kept;
  for (int k = step.skipped; k < logged; ++k)
    kept.push_back(iterations[static_cast<std::size_t>(k)].elapsed_ms / 1000);
  step.kept = static_cast<int>(kept.size());
  step.first_kept = iterations[static_cast<std::size_t>(step.skipped)].iteration;
  step.last_kept = iterations.back().iteration;
  std::sort(kept.begin(), kept.end());
  const std::size_t n = kept.size();
  step.step_s = n % 2 == 1 ? kept[n / 2] : (kept[n / 2 - 1] + kept[n / 2]) / 2;
  step.fastest_s = kept.front();
  step.slowest_s = kept.back();
  return step;
}

Result<MegatronLaunch> readMegatronLaunchOrLog(std::string_view text, MegatronTarget target,
                                               std::optional<MegatronLog> *log) {
  if (log) log->reset();
  if (!looksLikeMegatronLog(text)) return readMegatronLaunch(text, target);
  auto parsed = parseMegatronLog(text);
  if (!parsed) return parsed.error();
  if (target.gpus <= 0) target.gpus = parsed->world_size;
  if (target.vocab <= 0 && parsed->tokenizer_vocab > 0) {
    target.vocab = static_cast<int>(parsed->tokenizer_vocab);
    target.vocab_source = "the tokenizer's size the log gives, \"padded vocab (size: " +
                          std::to_string(parsed->tokenizer_vocab) + ")\"";
  }
  auto launch = launchFromArguments(parsed->arguments, target);
  if (launch && log) *log = std::move(*parsed);
  return launch;
}

} // namespace pipescope
