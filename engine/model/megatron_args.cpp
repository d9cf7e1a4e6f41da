// Megatron-LM arguments as a pipescope configuration (megatron_args.h).
#include "engine/model/megatron_args.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "engine/model/layer_layout.h"
#include "engine/model/model_setup.h"

namespace pipescope {

namespace {

using nlohmann::json;

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

std::string unquoted(std::string text) {
  if (text.size() >= 2 && (text.front() == '"' || text.front() == '\'') &&
      text.back() == text.front())
    return text.substr(1, text.size() - 2);
  return text;
}

// A YAML value without its trailing comment (" # ..."; a '#' inside quotes stays).
std::string yamlValue(std::string_view text) {
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
      return unquoted(trimmed(text.substr(0, i)));
    }
  }
  return unquoted(trimmed(text));
}

bool isYaml(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    if (trimmed(text.substr(start, end - start)) == "MODEL_ARGS:") return true;
    start = end + 1;
  }
  return false;
}

Result<MegatronArguments> parseYaml(std::string_view text) {
  MegatronArguments out;
  std::string block; // the top-level key whose entries the indented lines are
  std::size_t start = 0;
  int line_number = 0;
  while (start < text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    const std::string content = trimmed(line);
    if (content.empty() || content.front() == '#') continue;
    const bool indented = line.front() == ' ' || line.front() == '\t';
    if (!indented) {
      block = content.substr(0, content.find(':'));
      continue;
    }
    if (block != "MODEL_ARGS" && block != "ENV_VARS") continue;
    const auto colon = content.find(':');
    if (colon == std::string::npos)
      return makeError("line " + std::to_string(line_number) + ": '" + content +
                       "' is not a 'name: value' entry of " + block);
    const std::string name = trimmed(content.substr(0, colon));
    const std::string value = yamlValue(std::string_view(content).substr(colon + 1));
    if (block == "ENV_VARS") {
      out.environment.emplace_back(name, value);
      continue;
    }
    if (!name.starts_with("--"))
      return makeError("line " + std::to_string(line_number) + ": MODEL_ARGS entry '" + name +
                       "' is not an argument (--name)");
    // A flag: true means given, false means left out (as Megatron's CI turns them into argv).
    if (value == "true" || value == "True")
      out.arguments.push_back({name, "", false});
    else if (value != "false" && value != "False")
      out.arguments.push_back({name, value, true});
  }
  return out;
}

// Shell words: quotes, backslash escapes and line continuations, '#' comments at a word's start.
// An unescaped newline or ';' ends a command and becomes the word ";".
Result<std::vector<std::string>> shellWords(std::string_view text) {
  // Where each '(' and '{' closes, found in one pass (quotes not considered), so grouping
  // $( ... ) and ${ ... } below costs no rescans whatever the text.
  std::vector<std::size_t> closes(text.size(), std::string_view::npos);
  {
    std::vector<std::size_t> parens, braces;
    for (std::size_t k = 0; k < text.size(); ++k) {
      if (text[k] == '(') parens.push_back(k);
      if (text[k] == '{') braces.push_back(k);
      if (text[k] == ')' && !parens.empty()) {
        closes[parens.back()] = k;
        parens.pop_back();
      }
      if (text[k] == '}' && !braces.empty()) {
        closes[braces.back()] = k;
        braces.pop_back();
      }
    }
  }
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  int line = 1;
  char quote = 0;
  const auto endWord = [&] {
    if (in_word) words.push_back(std::move(word));
    word.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (quote) {
      if (c == quote)
        quote = 0;
      else if (c == '\\' && quote == '"' && i + 1 < text.size() &&
               (text[i + 1] == '"' || text[i + 1] == '\\' || text[i + 1] == '$'))
        word += text[++i];
      else
        word += c;
      continue;
    }
    if (c == '\\' && i + 1 < text.size()) {
      const bool crlf = text[i + 1] == '\r' && i + 2 < text.size() && text[i + 2] == '\n';
      if (text[i + 1] == '\n' || crlf) { // a line continuation
        i += crlf ? 2 : 1;
        ++line;
        continue;
      }
      in_word = true;
      word += text[++i];
      continue;
    }
    if (c == '\'' || c == '"') {
      in_word = true;
      quote = c;
      continue;
    }
    // $( ... ), $(( ... )) and ${ ... } are one word whatever spaces they hold.
    if (c == '$' && i + 1 < text.size() && (text[i + 1] == '(' || text[i + 1] == '{') &&
        closes[i + 1] != std::string_view::npos) {
      const std::size_t j = closes[i + 1];
      const std::string_view group = text.substr(i, j - i + 1);
      line += static_cast<int>(std::count(group.begin(), group.end(), '\n'));
      in_word = true;
      word.append(group);
      i = j;
      continue;
    }
    if (c == '#' && !in_word) {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      endWord();
      continue;
    }
    if (c == '\n' || c == ';') {
      endWord();
      if (!words.empty() && words.back() != ";") words.emplace_back(";");
      continue;
    }
    in_word = true;
    word += c;
  }
  if (quote)
    return makeError("line " + std::to_string(line) + ": a quote (" + std::string(1, quote) +
                     ") is not closed");
  endWord();
  return words;
}

// Options of Megatron-LM (and torchrun) that take several words (argparse nargs '+' or '*').
bool takesSeveralWords(const std::string &name) {
  static const std::set<std::string> names = {
      "--recompute-modules", "--cuda-graph-scope", "--data-path",           "--train-data-path",
      "--valid-data-path",   "--test-data-path",   "--moe-layer-recompute", "--offload-modules"};
  return names.count(name) > 0;
}

bool endsCommand(const std::string &word) {
  return word == ";" || word == "&&" || word == "||" || word == "|" || word == "&";
}

// A script's shell variables, as far as a launch needs them: NAME=value assignments (export
// too), read top to bottom, and $NAME, ${NAME}, ${NAME:-default}, ${NAME-default},
// ${NAME:=default} and integer $(( )) arithmetic over them. Conditionals are not evaluated (every
// branch's assignments count, the last one wins), command substitution is not run: what cannot be
// expanded stays as written, and a priced argument left with a '$' is refused by name.
class ShellVariables {
public:
  static bool isName(std::string_view text) {
    if (text.empty() || !(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_'))
      return false;
    return std::all_of(text.begin(), text.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
  }

  void assign(const std::string &name, std::string value) { values_[name] = std::move(value); }

  /// `word` with every expansion that can be made made (at most a fixed depth, so a variable
  /// that names itself ends).
  std::string expand(const std::string &word, int depth = 0) {
    // A launch's words are short; longer ones, and expansions that would grow past the bound
    // (a variable doubled on itself line after line), are left as written.
    constexpr std::size_t kLongest = 1 << 16;
    if (depth > 8 || word.size() > kLongest || word.find('$') == std::string::npos) return word;
    std::string out;
    for (std::size_t i = 0; i < word.size();) {
      if (out.size() > kLongest) return word;
      if (word[i] != '$' || i + 1 >= word.size()) {
        out += word[i++];
        continue;
      }
      if (word.compare(i, 3, "$((") == 0) {
        const auto close = word.find("))", i + 3);
        if (close != std::string::npos) {
          const std::string expression = expand(word.substr(i + 3, close - i - 3), depth + 1);
          if (const auto value = arithmetic(expression)) {
            out += std::to_string(*value);
            i = close + 2;
            continue;
          }
        }
        out += word[i++];
        continue;
      }
      if (word[i + 1] == '{') {
        const auto close = word.find('}', i + 2);
        if (close == std::string::npos) {
          out += word[i++];
          continue;
        }
        const std::string inside = word.substr(i + 2, close - i - 2);
        std::size_t name_end = 0;
        while (
            name_end < inside.size() &&
            (std::isalnum(static_cast<unsigned char>(inside[name_end])) || inside[name_end] == '_'))
          ++name_end;
        const std::string name = inside.substr(0, name_end);
        const std::string rest = inside.substr(name_end);
        const auto found = values_.find(name);
        if (isName(name) && rest.empty() && found != values_.end()) {
          out += found->second;
        } else if (isName(name) && (rest.starts_with(":-") || rest.starts_with(":=") ||
                                    rest.starts_with("-") || rest.starts_with("="))) {
          const std::string fallback = rest.substr(rest[0] == ':' ? 2 : 1);
          const bool unset = found == values_.end() || (rest[0] == ':' && found->second.empty());
          const std::string value = unset ? expand(fallback, depth + 1) : found->second;
          if (unset && (rest[1] == '=' || rest[0] == '=')) values_[name] = value;
          out += value;
        } else {
          out += word.substr(i, close - i + 1); // ${#x}, ${x[@]}, ${1}: left as written
        }
        i = close + 1;
        continue;
      }
      std::size_t end = i + 1;
      while (end < word.size() &&
             (std::isalnum(static_cast<unsigned char>(word[end])) || word[end] == '_'))
        ++end;
      const std::string name = word.substr(i + 1, end - i - 1);
      if (const auto found = values_.find(name); isName(name) && found != values_.end()) {
        out += found->second;
        i = end;
      } else {
        out += word[i++];
      }
    }
    return out;
  }

private:
  // + - * / % and parentheses over integers; nullopt for anything else (or a division by 0).
  static std::optional<long long> arithmetic(const std::string &text) {
    std::size_t at = 0;
    const auto skip = [&] {
      while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
        ++at;
    };
    std::function<std::optional<long long>()> sum;
    int depth = 0; // parentheses nest at most 64 deep (a hostile file cannot exhaust the stack)
    std::function<std::optional<long long>()> primary = [&]() -> std::optional<long long> {
      skip();
      if (at < text.size() && text[at] == '(') {
        if (++depth > 64) return std::nullopt;
        ++at;
        auto value = sum();
        --depth;
        skip();
        if (!value || at >= text.size() || text[at] != ')') return std::nullopt;
        ++at;
        return value;
      }
      bool negative = false;
      if (at < text.size() && (text[at] == '-' || text[at] == '+')) negative = text[at++] == '-';
      const std::size_t start = at;
      while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])))
        ++at;
      if (at == start || at - start > 15) return std::nullopt;
      const long long value = std::stoll(text.substr(start, at - start));
      return negative ? -value : value;
    };
    const auto product = [&]() -> std::optional<long long> {
      auto value = primary();
      while (value) {
        skip();
        if (at >= text.size() || (text[at] != '*' && text[at] != '/' && text[at] != '%')) break;
        const char op = text[at++];
        const auto right = primary();
        if (!right || (op != '*' && *right == 0)) return std::nullopt;
        if (op == '*' && std::abs(*value) > (1LL << 31) / std::max(1LL, std::abs(*right)))
          return std::nullopt;
        value = op == '*' ? *value * *right : op == '/' ? *value / *right : *value % *right;
      }
      return value;
    };
    sum = [&]() -> std::optional<long long> {
      auto value = product();
      while (value) {
        skip();
        if (at >= text.size() || (text[at] != '+' && text[at] != '-')) break;
        const char op = text[at++];
        const auto right = product();
        if (!right) return std::nullopt;
        value = op == '+' ? *value + *right : *value - *right;
        if (std::abs(*value) > 1'000'000'000'000'000LL) return std::nullopt;
      }
      return value;
    };
    auto value = sum();
    skip();
    return at == text.size() ? value : std::nullopt;
  }

  std::map<std::string, std::string> values_;
};

// Splits an expanded word that holds several arguments ("--fp8-format hybrid", a variable of
// arguments used unquoted) at its spaces, as bash's word splitting does.
std::vector<std::string> splitArgumentWords(const std::string &word) {
  if (!word.starts_with("--") || word.find(' ') == std::string::npos) return {word};
  std::vector<std::string> words;
  std::istringstream stream(word);
  std::string part;
  while (stream >> part)
    words.push_back(part);
  return words;
}

Result<MegatronArguments> parseShell(std::string_view text) {
  auto parsed = shellWords(text);
  if (!parsed) return parsed.error();
  MegatronArguments out;
  // First the words as the shell would pass them: variables assigned and expanded top to bottom.
  ShellVariables variables;
  std::vector<std::string> w;
  bool in_array = false; // between NAME=( and its closing parenthesis
  for (std::size_t i = 0; i < parsed->size(); ++i) {
    std::string word = (*parsed)[i];
    const bool exported = word == "export" && i + 1 < parsed->size();
    if (exported) word = (*parsed)[++i];
    const auto eq = word.find('=');
    if (eq != std::string::npos && ShellVariables::isName(std::string_view(word).substr(0, eq))) {
      const std::string value = word.substr(eq + 1);
      if (value.starts_with("(")) {
        // An array: its elements are words of their own, the first one on the same line as
        // NAME=( where it is written there (ARGS=(--mock-data --split 100,0,0)).
        in_array = true;
        word = value.substr(1);
      } else {
        const std::string expanded = variables.expand(value);
        variables.assign(word.substr(0, eq), expanded);
        if (exported) out.environment.emplace_back(word.substr(0, eq), expanded);
        continue;
      }
    }
    if (in_array) {
      // The array closes at the word with one ')' more than it opens ($((N*2))) closes
      // nothing); the parenthesis is not part of the element.
      const auto opens = std::count(word.begin(), word.end(), '(');
      const auto closes = std::count(word.begin(), word.end(), ')');
      if (closes > opens && word.ends_with(')')) {
        word.pop_back();
        in_array = false;
      }
    }
    if (word.empty()) continue;
    for (auto &part : splitArgumentWords(variables.expand(word)))
      w.push_back(std::move(part));
  }
  for (std::size_t i = 0; i < w.size(); ++i) {
    const std::string &word = w[i];
    if (word.ends_with(".py")) out.scripts.push_back(word.substr(word.rfind('/') + 1));
    if (!word.starts_with("--") || word.size() <= 2) continue;
    if (const auto eq = word.find('='); eq != std::string::npos) {
      out.arguments.push_back({word.substr(0, eq), word.substr(eq + 1), true});
      continue;
    }
    // The value: the next word (every word up to the next option for the options that take
    // several); a word after a single-valued option's value is positional, e.g. the script.
    MegatronArgument argument{word, "", false};
    while (i + 1 < w.size() && !w[i + 1].starts_with("--") && !endsCommand(w[i + 1]) &&
           (!argument.has_value || takesSeveralWords(word))) {
      ++i;
      argument.value += (argument.has_value ? " " : "") + w[i];
      argument.has_value = true;
    }
    out.arguments.push_back(std::move(argument));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Translation

// Read, changing time or memory, not priced: what each does.
const std::map<std::string, std::string> &unpricedArguments() {
  static const std::map<std::string, std::string> what = {
      {"--deterministic-mode", "deterministic kernels, slower than the default ones"},
      {"--cuda-graph-impl", "CUDA graphs: less host time per layer"},
      {"--cuda-graph-scope", "CUDA graphs: less host time per layer"},
      {"--enable-cuda-graph", "CUDA graphs: less host time per layer"},
      {"--external-cuda-graph", "CUDA graphs: less host time per layer"},
      {"--cpu-offloading", "activations or weights offloaded to the host"},
      {"--cpu-offloading-num-layers", "activations or weights offloaded to the host"},
      {"--optimizer-cpu-offload", "the optimizer step on the host"},
      {"--use-precision-aware-optimizer", "optimizer states in lower precision"},
      {"--qk-layernorm", "a norm on queries and keys (a few memory-bound passes)"},
      {"--fp8-recipe", "the FP8 scaling recipe (pipescope prices one FP8 GEMM curve)"},
      {"--fp4-format", "FP4 GEMMs"},
      {"--no-rope-fusion", "rotary embeddings as unfused PyTorch ops"},
      {"--no-bias-gelu-fusion", "GeLU as unfused PyTorch ops"},
      {"--no-bias-dropout-fusion", "dropout and residual as unfused PyTorch ops"},
      {"--no-overlap-p2p-communication", "pipeline sends and receives not overlapped"},
      {"--moe-router-dtype", "the router in fp32"},
      {"--moe-aux-loss-coeff", "the load-balancing loss (a few small kernels)"},
      {"--moe-router-load-balancing-type", "the load-balancing loss (a few small kernels)"},
      {"--moe-pad-expert-input-to-capacity", "expert inputs padded to capacity"},
      {"--moe-shared-expert-overlap", "the shared expert overlapped with the dispatch"},
      {"--delay-wgrad-compute", "weight gradients delayed to hide the combine all-to-all"},
      {"--defer-embedding-wgrad-compute",
       "the output layer's weight gradients deferred into the pipeline's drain (the last stage "
       "faster)"},
      {"--wgrad-deferral-limit", "how many microbatches' output-layer weight gradients wait"},
      {"--manual-gc", "Python's garbage collector run at fixed steps"},
      {"--rotary-percent", "rotary embeddings on part of each head (priced on all of it)"},
      {"--sequence-packing", "packed sequences"},
      {"--reset-attention-mask", "document masks inside a sequence"},
  };
  return what;
}

// Megatron's --step-batch-size-schedule, "THRESHOLD:BATCH ..." (spaces or commas between
// entries; K, M, B, T suffixes; thresholds in tokens, as Megatron passes the sequence length),
// checked as num_microbatches_calculator.py's StepBatchsizeNumMicroBatchesCalculator checks it:
// sorted by threshold, the first at 0, thresholds strictly increasing, batches positive.
struct BatchStep {
  long long samples = 0; ///< the step applies from this many consumed samples on
  long long batch = 0;
};

Result<std::vector<BatchStep>> parseStepBatchSizeSchedule(const std::string &text,
                                                          long long sequence) {
  auto number = [](std::string value) -> std::optional<long long> {
    double multiplier = 1;
    if (!value.empty()) {
      const char suffix = static_cast<char>(std::toupper(static_cast<unsigned char>(value.back())));
      const double scale = suffix == 'T'   ? 1e12
                           : suffix == 'B' ? 1e9
                           : suffix == 'M' ? 1e6
                           : suffix == 'K' ? 1e3
                                           : 1;
      if (scale != 1) {
        multiplier = scale;
        value.pop_back();
      }
    }
    double parsed = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (value.empty() || error != std::errc() || end != value.data() + value.size() ||
        !std::isfinite(parsed) || parsed < 0 || parsed * multiplier > 9e18)
      return std::nullopt;
    return static_cast<long long>(parsed * multiplier);
  };
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), ',', ' ');
  std::istringstream entries(spaced);
  std::vector<BatchStep> steps;
  for (std::string entry; entries >> entry;) {
    const auto colon = entry.find(':');
    const auto threshold =
        colon == std::string::npos ? std::nullopt : number(entry.substr(0, colon));
    const auto batch = colon == std::string::npos ? std::nullopt : number(entry.substr(colon + 1));
    if (!threshold || !batch)
      return makeError("'" + entry + "' is not THRESHOLD:BATCH (e.g. 0:384 200B:768)");
    if (*batch <= 0) return makeError("'" + entry + "': a batch must be positive");
    steps.push_back({*threshold / sequence, *batch});
  }
  if (steps.empty()) return makeError("no THRESHOLD:BATCH entry (e.g. 0:384 200B:768)");
  std::stable_sort(steps.begin(), steps.end(),
                   [](const BatchStep &a, const BatchStep &b) { return a.samples < b.samples; });
  if (steps.front().samples != 0)
    return makeError("the first step must start at 0 (Megatron refuses it too), got " +
                     std::to_string(steps.front().samples) + " samples");
  for (std::size_t k = 1; k < steps.size(); ++k)
    if (steps[k].samples == steps[k - 1].samples)
      return makeError("two steps start at " + std::to_string(steps[k].samples) +
                       " samples; thresholds must increase (Megatron refuses it too)");
  return steps;
}

class Reader {
public:
  explicit Reader(const MegatronArguments &arguments) {
    for (const auto &argument : arguments.arguments) {
      // torchrun spells its options with '_' or '-'; Megatron's use '-'.
      std::string name = argument.name;
      if (name == "--nproc_per_node") name = "--nproc-per-node";
      values_[name] = argument;
    }
  }

  bool has(const std::string &name) {
    used_.insert(name);
    return values_.count(name) > 0;
  }
  bool flag(const std::string &name) { return has(name); }

  Result<std::optional<std::string>> text(const std::string &name) {
    if (!has(name)) return std::optional<std::string>();
    const auto &argument = values_.at(name);
    if (!argument.has_value) return makeError(name + " needs a value");
    if (argument.value.find('$') != std::string::npos)
      return makeError(name + " is '" + argument.value +
                       "', a shell variable pipescope cannot expand; give its value (run the "
                       "script with `bash -x` and copy the command it prints)");
    return std::optional<std::string>(argument.value);
  }

  Result<std::optional<long long>> integer(const std::string &name, long long low, long long high) {
    auto value = text(name);
    if (!value) return value.error();
    if (!*value) return std::optional<long long>();
    long long parsed = 0;
    const std::string &s = **value;
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), parsed);
    if (error != std::errc() || end != s.data() + s.size())
      return makeError(name + " is '" + s + "', not a whole number");
    if (parsed < low || parsed > high)
      return makeError(name + " is " + s + "; pipescope takes " + std::to_string(low) + " to " +
                       std::to_string(high));
    return std::optional<long long>(parsed);
  }

  Result<std::optional<double>> number(const std::string &name) {
    auto value = text(name);
    if (!value) return value.error();
    if (!*value) return std::optional<double>();
    try {
      std::size_t used = 0;
      const double parsed = std::stod(**value, &used);
      if (used != (*value)->size()) throw std::invalid_argument("trailing");
      return std::optional<double>(parsed);
    } catch (const std::exception &) {
      return makeError(name + " is '" + **value + "', not a number");
    }
  }

  /// The arguments given that no reader asked for.
  std::vector<std::string> unread() const {
    std::vector<std::string> names;
    for (const auto &[name, argument] : values_)
      if (!used_.count(name)) names.push_back(name);
    return names;
  }

private:
  std::map<std::string, MegatronArgument> values_;
  std::set<std::string> used_;
};

// `target` = the value `read` (a Reader call) returns, or the function returns its error.
#define READ(read, target)                                                                         \
  do {                                                                                             \
    auto read_ = (read);                                                                           \
    if (!read_) return read_.error();                                                              \
    (target) = *read_;                                                                             \
  } while (0)

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// "([0]*3+[1]*58)", "[0,0,1,1]" or "1": the number of leading dense layers when every layer
// after them is MoE; nullopt for any other pattern.
std::optional<int> leadingDenseLayers(const std::string &pattern, int layers) {
  std::string s;
  for (const char c : pattern)
    if (c != ' ') s += c;
  if (s == "1") return 0;
  if (s.size() > 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  // Terms "[a,b,...]*n" or "[a,b,...]" joined by '+', expanded.
  std::vector<int> flags;
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '[') return std::nullopt;
    const auto close = s.find(']', i);
    if (close == std::string::npos) return std::nullopt;
    std::vector<int> group;
    for (const char c : s.substr(i + 1, close - i - 1))
      if (c == '0' || c == '1')
        group.push_back(c - '0');
      else if (c != ',')
        return std::nullopt;
    i = close + 1;
    long repeat = 1;
    if (i < s.size() && s[i] == '*') {
      const auto next = s.find('+', i);
      const std::string count =
          s.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
      const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), repeat);
      if (error != std::errc() || end != count.data() + count.size() || repeat < 0 ||
          repeat > 1 << 20)
        return std::nullopt;
      i = next == std::string::npos ? s.size() : next;
    }
    for (long r = 0; r < repeat; ++r)
      flags.insert(flags.end(), group.begin(), group.end());
    if (i < s.size()) {
      if (s[i] != '+') return std::nullopt;
      ++i;
    }
  }
  if (static_cast<int>(flags.size()) != layers) return std::nullopt;
  int dense = 0;
  while (dense < layers && flags[static_cast<std::size_t>(dense)] == 0)
    ++dense;
  for (int k = dense; k < layers; ++k)
    if (flags[static_cast<std::size_t>(k)] != 1) return std::nullopt;
  return dense;
}

std::string repeatChar(char c, int n) {
  return n > 0 ? std::string(static_cast<std::size_t>(n), c) : std::string();
}

} // namespace

Result<MegatronArguments> parseMegatronArguments(std::string_view text) {
  if (isYaml(text)) return parseYaml(text);
  return parseShell(text);
}

Result<MegatronTranslation> translateMegatronArguments(const MegatronArguments &arguments,
                                                       const MegatronTarget &target) {
  MegatronTranslation out;
  Reader r(arguments);
  auto &assumed = out.assumed;

  // pipescope prices decoder-only transformers: what pretrain_gpt.py trains.
  for (const auto &script : arguments.scripts)
    if (script.starts_with("pretrain_") && script != "pretrain_gpt.py")
      return makeError("the launch runs " + script +
                       "; pipescope prices decoder-only GPT "
                       "models, what pretrain_gpt.py trains");
  for (const char *name :
       {"--hybrid-override-pattern", "--hybrid-layer-pattern", "--is-hybrid-model",
        "--encoder-num-layers", "--decoder-num-layers", "--bert-no-binary-head",
        "--vision-model-type", "--language-model-type", "--img-h"})
    if (r.has(name))
      return makeError(std::string("the launch gives ") + name +
                       ", a model other than a decoder-only GPT (hybrid, encoder-decoder, "
                       "BERT or vision); pipescope prices decoder-only GPT models");

  // --- The model -----------------------------------------------------------------------------
  std::optional<long long> layers, hidden, heads, sequence;
  READ(r.integer("--num-layers", 1, 100000), layers);
  READ(r.integer("--hidden-size", 1, 1 << 20), hidden);
  READ(r.integer("--num-attention-heads", 1, 1 << 16), heads);
  READ(r.integer("--seq-length", 1, 1 << 26), sequence);
  for (const auto &[name, value] : {std::pair{"--num-layers", layers.has_value()},
                                    {"--hidden-size", hidden.has_value()},
                                    {"--num-attention-heads", heads.has_value()},
                                    {"--seq-length", sequence.has_value()}})
    if (!value)
      return makeError(std::string(name) +
                       " is not in the arguments; Megatron-LM needs it, and so does pipescope");
  const int h = static_cast<int>(*hidden), a = static_cast<int>(*heads);
  const bool swiglu = r.flag("--swiglu");
  if (r.flag("--squared-relu"))
    assumed.push_back("--squared-relu: priced as GeLU, one elementwise pass over the FFN's "
                      "hidden activations whose input the backward keeps, as Megatron's does");

  json model = {{"name", target.name}, {"layers", *layers}, {"hidden", h}};
  std::optional<long long> ffn;
  READ(r.integer("--ffn-hidden-size", 1, 1LL << 30), ffn);
  if (!ffn) {
    // arguments.py: SwiGLU keeps the parameters of a 4h MLP, in multiples of 64.
    ffn = swiglu ? static_cast<long long>(4.0 * h * 2 / 3 / 64) * 64 : 4LL * h;
    assumed.push_back("ffn_hidden " + std::to_string(*ffn) +
                      (swiglu ? ": Megatron's SwiGLU default, int(8h/3 / 64) × 64"
                              : ": Megatron's default 4 × hidden"));
  }
  model["ffn_hidden"] = *ffn;
  model["heads"] = a;

  const bool mla = r.flag("--multi-latent-attention");
  std::optional<long long> groups, kv_channels;
  READ(r.integer("--num-query-groups", 1, 1 << 16), groups);
  READ(r.integer("--kv-channels", 1, 1 << 16), kv_channels);
  const bool gqa = r.flag("--group-query-attention");
  if (mla) {
    model["kv_heads"] = a;
    std::optional<long long> q_lora, kv_lora, qk_head, qk_rope, v_head;
    READ(r.integer("--q-lora-rank", 0, 1 << 20), q_lora);
    READ(r.integer("--kv-lora-rank", 1, 1 << 20), kv_lora);
    READ(r.integer("--qk-head-dim", 1, 1 << 16), qk_head);
    READ(r.integer("--qk-pos-emb-head-dim", 1, 1 << 16), qk_rope);
    READ(r.integer("--v-head-dim", 1, 1 << 16), v_head);
    // arguments.py's defaults: no query compression, kv_lora_rank 32, 128/64/128.
    const auto with_default = [&](const std::optional<long long> &value, long long fallback,
                                  const char *name) {
      if (!value)
        assumed.push_back(std::string(name) + " " + std::to_string(fallback) +
                          ": Megatron's default");
      return value.value_or(fallback);
    };
    model["q_lora_rank"] = q_lora.value_or(0);
    model["kv_lora_rank"] = with_default(kv_lora, 32, "kv_lora_rank");
    model["qk_nope_head_dim"] = with_default(qk_head, 128, "qk_nope_head_dim (--qk-head-dim)");
    model["qk_rope_head_dim"] =
        with_default(qk_rope, 64, "qk_rope_head_dim (--qk-pos-emb-head-dim)");
    model["v_head_dim"] = with_default(v_head, 128, "v_head_dim");
  } else {
    // Without --group-query-attention every head has its keys and values (groups ignored).
    const long long kv = gqa ? groups.value_or(1) : a;
    if (a % kv != 0)
      return makeError("--num-query-groups " + std::to_string(kv) + " does not divide the " +
                       std::to_string(a) + " attention heads; give a divisor");
    model["kv_heads"] = kv;
    if (kv_channels && *kv_channels * a != h) model["head_dim"] = *kv_channels;
  }

  // Vocabulary: the tokenizer's size padded to a multiple of make-vocab-size-divisible-by × TP
  // (megatron/training/tokenizer: _vocab_size_with_padding).
  std::optional<long long> tp_arg, divisible, vocab_size;
  READ(r.integer("--tensor-model-parallel-size", 1, 1 << 16), tp_arg);
  READ(r.integer("--make-vocab-size-divisible-by", 1, 1 << 20), divisible);
  READ(r.integer("--vocab-size", 1, 1 << 30), vocab_size);
  std::optional<std::string> tokenizer, vocab_file;
  READ(r.text("--tokenizer-type"), tokenizer);
  if (r.has("--vocab-file")) vocab_file = "given"; // a path: only its presence matters
  long long vocab = 0;
  std::string vocab_why;
  if (target.vocab > 0) {
    vocab = target.vocab;
    vocab_why = target.vocab_source;
  } else if (vocab_size && (!tokenizer || *tokenizer == "NullTokenizer")) {
    // NullTokenizer's vocab_size was --vocab-size plus its end-of-document token until
    // Megatron-LM c9dfe34798 (2026-04-22, "Enable NullTokenizer for pretraining"), which takes
    // the end-of-document token from inside the vocabulary; a log's "padded vocab" line settles
    // it (megatron_log.h).
    vocab = *vocab_size + 1;
    vocab_why = "--vocab-size + 1 (NullTokenizer's end-of-document token before Megatron-LM "
                "2026-04; later ones take --vocab-size as it is: give --vocab N)";
  } else if (vocab_size) {
    vocab = *vocab_size;
    vocab_why = "--vocab-size";
  } else if (vocab_file && (!tokenizer || *tokenizer == "GPT2BPETokenizer")) {
    vocab = 50257;
    vocab_why = "GPT-2's BPE vocabulary (--vocab-file)";
  } else {
    return makeError("the vocabulary size is not in the arguments" +
                     (tokenizer ? " (--tokenizer-type " + *tokenizer + " reads it from its files)"
                                : std::string()) +
                     "; give pipescope --vocab N, the tokenizer's size before Megatron pads it");
  }
  const long long tp = tp_arg.value_or(1);
  const long long multiple = divisible.value_or(128) * tp;
  const long long padded = (vocab + multiple - 1) / multiple * multiple;
  model["vocab"] = padded;
  assumed.push_back("vocab " + std::to_string(padded) + ": " + std::to_string(vocab) + " (" +
                    vocab_why + ") padded to a multiple of " + std::to_string(multiple) +
                    " (make-vocab-size-divisible-by × TP)");
  model["sequence_length"] = *sequence;
  std::optional<long long> microbatch;
  READ(r.integer("--micro-batch-size", 1, 1 << 20), microbatch);
  model["microbatch_size"] = microbatch.value_or(1);
  const bool bf16 = r.flag("--bf16"), fp16 = r.flag("--fp16");
  model["dtype"] = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
  model["tied_embeddings"] = !r.flag("--untie-embeddings-and-output-weights");
  model["gated_mlp"] = swiglu;

  std::optional<std::string> position;
  READ(r.text("--position-embedding-type"), position);
  if (r.flag("--use-rotary-position-embeddings")) position = "rope";
  std::optional<long long> max_positions;
  READ(r.integer("--max-position-embeddings", 1, 1LL << 30), max_positions);
  const std::string position_type = position.value_or("learned_absolute");
  if (position_type == "learned_absolute") {
    model["position_embeddings"] = max_positions.value_or(*sequence);
    if (!position) assumed.push_back("learned absolute positions: Megatron's default");
  } else if (position_type == "rope" || position_type == "yarn" || position_type == "mrope" ||
             position_type == "none") {
    model["position_embeddings"] = 0;
  } else {
    return makeError("--position-embedding-type " + position_type +
                     " is not priced; pipescope knows learned_absolute, rope, yarn, mrope "
                     "and none");
  }
  model["linear_biases"] = !r.flag("--disable-bias-linear");
  std::optional<std::string> normalization;
  READ(r.text("--normalization"), normalization);
  const std::string norm = normalization.value_or("LayerNorm");
  if (norm != "LayerNorm" && norm != "RMSNorm")
    return makeError("--normalization " + norm + " is not priced; use LayerNorm or RMSNorm");
  model["norm"] = norm == "RMSNorm" ? "rmsnorm" : "layernorm";
  if (r.flag("--apply-layernorm-1p"))
    assumed.push_back("--apply-layernorm-1p: priced as the norm it is (its weights stored as "
                      "1 + w, the same passes)");

  // Attention: Transformer Engine's fused (flash) kernels unless the run asks for the unfused
  // path (scores materialized).
  std::optional<std::string> backend, impl;
  READ(r.text("--attention-backend"), backend);
  READ(r.text("--transformer-impl"), impl);
  const bool local = impl && *impl == "local";
  // With Megatron's own layers, "auto" (the default) is their unfused attention too.
  const bool unfused = (backend && (*backend == "unfused" || *backend == "local")) ||
                       (local && !r.flag("--use-flash-attn") && (!backend || *backend == "auto"));
  model["attention"] = unfused ? "materialized" : "flash";
  std::optional<double> hidden_dropout, attention_dropout;
  READ(r.number("--hidden-dropout"), hidden_dropout);
  READ(r.number("--attention-dropout"), attention_dropout);
  const double hd = hidden_dropout.value_or(0.1), ad = attention_dropout.value_or(0.1);
  model["dropout"] = hd > 0 || ad > 0;
  if ((hd > 0) != (ad > 0))
    assumed.push_back("dropout on: pipescope prices attention and hidden dropout together");

  std::optional<long long> mtp;
  READ(r.integer("--mtp-num-layers", 0, 1 << 10), mtp);
  if (mtp && *mtp > 0) model["mtp_layers"] = *mtp;

  // Mixture of experts.
  std::optional<long long> experts;
  READ(r.integer("--num-experts", 1, 1 << 20), experts);
  std::string dispatcher = "alltoall";
  if (experts) {
    std::optional<long long> topk, expert_ffn, shared_size, router_groups, group_topk;
    READ(r.integer("--moe-router-topk", 1, 1 << 20), topk);
    READ(r.integer("--moe-ffn-hidden-size", 1, 1LL << 30), expert_ffn);
    READ(r.integer("--moe-shared-expert-intermediate-size", 1, 1LL << 30), shared_size);
    READ(r.integer("--moe-router-num-groups", 1, 1 << 20), router_groups);
    READ(r.integer("--moe-router-group-topk", 1, 1 << 20), group_topk);
    if (!topk) assumed.push_back("top-k 2: Megatron's default --moe-router-topk");
    model["experts"] = *experts;
    model["experts_per_token"] = topk.value_or(2);
    const long long e_ffn = expert_ffn.value_or(*ffn);
    long long shared = 0;
    if (shared_size) {
      if (*shared_size % e_ffn != 0)
        return makeError("--moe-shared-expert-intermediate-size " + std::to_string(*shared_size) +
                         " is not a multiple of the expert FFN size " + std::to_string(e_ffn) +
                         "; pipescope prices shared experts of the routed experts' size");
      shared = *shared_size / e_ffn;
    }
    model["shared_experts"] = shared;
    model["expert_ffn_hidden"] = e_ffn;
    std::optional<std::string> frequency;
    READ(r.text("--moe-layer-freq"), frequency);
    const auto dense = leadingDenseLayers(frequency.value_or("1"), static_cast<int>(*layers));
    if (!dense)
      return makeError("--moe-layer-freq " + frequency.value_or("1") +
                       " is not priced; pipescope takes dense layers first, then MoE layers "
                       "(\"([0]*k+[1]*n)\" with k + n = --num-layers, or 1)");
    model["first_dense_layers"] = *dense;
    std::optional<double> capacity;
    READ(r.number("--moe-expert-capacity-factor"), capacity);
    model["capacity_factor"] = capacity.value_or(0);
    if (router_groups) model["router_groups"] = *router_groups;
    if (group_topk) model["router_group_topk"] = *group_topk;
    std::optional<std::string> dispatcher_type, flex_backend;
    READ(r.text("--moe-token-dispatcher-type"), dispatcher_type);
    READ(r.text("--moe-flex-dispatcher-backend"), flex_backend);
    if (r.flag("--moe-enable-deepep")) flex_backend = "deepep";
    if (dispatcher_type && *dispatcher_type == "allgather")
      out.not_priced.push_back("--moe-token-dispatcher-type allgather: priced as alltoall");
    if ((dispatcher_type && *dispatcher_type == "flex") || flex_backend)
      dispatcher = flex_backend.value_or("deepep");
    if (dispatcher != "alltoall" && dispatcher != "deepep" && dispatcher != "hybridep")
      return makeError("--moe-flex-dispatcher-backend " + dispatcher +
                       " is not priced; use deepep or hybridep");
    r.flag("--moe-router-force-load-balancing"); // balanced routing is what pipescope prices
    r.flag("--moe-grouped-gemm");
    r.flag("--moe-permute-fusion");
  }

  // --- The mesh ------------------------------------------------------------------------------
  std::optional<long long> pp_arg, cp_arg, ep_arg, etp_arg, nproc, nnodes;
  READ(r.integer("--pipeline-model-parallel-size", 1, 1 << 16), pp_arg);
  READ(r.integer("--context-parallel-size", 1, 1 << 16), cp_arg);
  READ(r.integer("--expert-model-parallel-size", 1, 1 << 20), ep_arg);
  READ(r.integer("--expert-tensor-parallel-size", 1, 1 << 16), etp_arg);
  READ(r.integer("--nproc-per-node", 1, 1 << 16), nproc);
  READ(r.integer("--nnodes", 1, 1 << 20), nnodes);
  const long long pp = pp_arg.value_or(1), cp = cp_arg.value_or(1);
  long long gpus = target.gpus;
  if (gpus <= 0) {
    gpus = torchrunWorldSize(arguments);
    if (gpus <= 0)
      return makeError("the number of GPUs is not in the arguments; give pipescope --gpus N "
                       "(torchrun's --nproc-per-node × --nnodes)");
    assumed.push_back(std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs") +
                      ": torchrun's --nproc-per-node × --nnodes");
  }
  const long long model_parallel = tp * pp * cp;
  if (gpus % model_parallel != 0)
    return makeError(std::to_string(gpus) + " GPUs do not divide into TP " + std::to_string(tp) +
                     " × PP " + std::to_string(pp) + " × CP " + std::to_string(cp) +
                     "; give a GPU count that is a multiple of " + std::to_string(model_parallel));
  const long long dp = gpus / model_parallel;
  json mesh = {{"dp", dp}, {"tp", tp}, {"pp", pp}};
  if (cp > 1) mesh["cp"] = cp;
  auto hardware = loadHardwareSpec(target.hardware);
  if (!hardware)
    return makeError("--hardware " + target.hardware + ": " + hardware.error().message);
  // A world smaller than a node fills part of one.
  mesh["gpus_per_node"] =
      target.gpus_per_node > 0 ? target.gpus_per_node
      : nproc                  ? static_cast<int>(*nproc)
              : static_cast<int>(std::min<long long>(gpus, hardware->gpus_per_node));
  if (experts) {
    mesh["ep"] = ep_arg.value_or(1);
    mesh["etp"] = etp_arg.value_or(tp);
  }
  mesh["rank_order"] = r.flag("--use-tp-pp-dp-mapping") ? "tp-cp-pp-dp" : "tp-cp-dp-pp";

  // --- The schedule --------------------------------------------------------------------------
  std::optional<long long> global_batch, layers_per_virtual, virtual_stages, virtual_old;
  READ(r.integer("--global-batch-size", 1, 1LL << 40), global_batch);
  READ(r.integer("--num-layers-per-virtual-pipeline-stage", 1, 1 << 20), layers_per_virtual);
  READ(r.integer("--num-virtual-stages-per-pipeline-rank", 1, 1 << 10), virtual_stages);
  READ(r.integer("--virtual-pipeline-model-parallel-size", 1, 1 << 10), virtual_old);
  long long chunks = virtual_stages.value_or(virtual_old.value_or(1));
  const bool count_embedding = r.flag("--account-for-embedding-in-pipeline-split");
  const bool count_loss = r.flag("--account-for-loss-in-pipeline-split");
  if (layers_per_virtual) {
    // arguments.py: the embedding and the loss count as layers when the split accounts for them.
    const long long units = *layers + (count_embedding ? 1 : 0) + (count_loss ? 1 : 0);
    if (units % (pp * *layers_per_virtual) != 0)
      return makeError("--num-layers-per-virtual-pipeline-stage " +
                       std::to_string(*layers_per_virtual) + " does not divide the " +
                       std::to_string(units) + " layers" +
                       (units != *layers ? " (the embedding and loss counted)" : "") + " over PP " +
                       std::to_string(pp) + " evenly; give a divisor of " +
                       std::to_string(units / pp) + " (Megatron refuses it too)");
    chunks = units / (pp * *layers_per_virtual);
  }
  // A layout sets V itself: its stages over PP (arguments.py, validate_args, which allows only
  // one of the three ways to say V).
  std::optional<std::string> layout;
  READ(r.text("--pipeline-model-parallel-layout"), layout);
  if (layout) {
    if (layers_per_virtual || virtual_stages || virtual_old)
      return makeError("--pipeline-model-parallel-layout sets the virtual stages itself; give "
                       "it or --num-layers-per-virtual-pipeline-stage / "
                       "--num-virtual-stages-per-pipeline-rank, not both (Megatron refuses it "
                       "too)");
    auto parsed = parseMegatronLayout(*layout);
    if (!parsed) return makeError("--pipeline-model-parallel-layout: " + parsed.error().message);
    const auto layout_stages = static_cast<long long>(parsed->size());
    if (layout_stages % pp != 0)
      return makeError("--pipeline-model-parallel-layout has " + std::to_string(layout_stages) +
                       " stages, not a multiple of PP " + std::to_string(pp) +
                       " (Megatron refuses it too); give PP × V stages");
    chunks = layout_stages / pp;
  }
  const long long per_step = microbatch.value_or(1) * dp;
  // A batch that grows during training (num_microbatches_calculator.py): without
  // --global-batch-size Megatron sets args.global_batch_size to micro-batch × DP, but the step
  // runs the schedule's batch.
  std::optional<std::string> batch_schedule_text;
  READ(r.text("--step-batch-size-schedule"), batch_schedule_text);
  if (batch_schedule_text) {
    if (global_batch)
      return makeError("--step-batch-size-schedule and --global-batch-size are both given; give "
                       "one (Megatron refuses both too)");
    auto steps = parseStepBatchSizeSchedule(*batch_schedule_text, *sequence);
    if (!steps) return makeError("--step-batch-size-schedule: " + steps.error().message);
    global_batch = steps->front().batch;
    std::string later;
    for (std::size_t k = 1; k < steps->size(); ++k)
      later += (k > 1 ? ", " : "") + std::to_string((*steps)[k].batch) + " from sample " +
               std::to_string((*steps)[k].samples);
    assumed.push_back("global batch " + std::to_string(*global_batch) +
                      ": the first of --step-batch-size-schedule, where training starts" +
                      (later.empty() ? std::string()
                                     : " (then " + later + ": later steps run more microbatches)"));
  }
  const long long batch = global_batch.value_or(per_step);
  if (!global_batch)
    assumed.push_back("global batch " + std::to_string(batch) +
                      ": Megatron's default, micro-batch × DP");
  if (batch % per_step != 0)
    return makeError("--global-batch-size " + std::to_string(batch) +
                     " is not a multiple of micro-batch × DP = " + std::to_string(per_step) +
                     " (Megatron refuses it too); give a multiple");
  std::string schedule_name = chunks > 1 ? "interleaved-1f1b" : "1f1b";
  if (r.flag("--overlap-moe-expert-parallel-comm")) schedule_name = "combined-1f1b";
  json schedule = {{"name", schedule_name}, {"microbatches", batch / per_step}};
  if (chunks > 1) schedule["virtual_stages"] = chunks;

  // --- Training ------------------------------------------------------------------------------
  json training;
  std::optional<std::string> granularity, method, modules;
  READ(r.text("--recompute-granularity"), granularity);
  READ(r.text("--recompute-method"), method);
  READ(r.text("--recompute-modules"), modules);
  std::optional<long long> recompute_layers;
  READ(r.integer("--recompute-num-layers", 1, 1 << 20), recompute_layers);
  if (r.flag("--recompute-activations")) granularity = "selective";
  std::string recompute = "none";
  if (granularity && *granularity == "full") {
    recompute = "full";
    const long long stage_layers = *layers / (pp * chunks);
    if (recompute_layers && *recompute_layers < stage_layers)
      out.not_priced.push_back("--recompute-num-layers " + std::to_string(*recompute_layers) +
                               ": pipescope recomputes every layer of a stage under full "
                               "recomputation, more than the run does");
  } else if (granularity && *granularity == "selective") {
    // Megatron recomputes --recompute-modules (default core_attn): core_attn is pipescope's
    // selective recomputation, layernorm, mla_up_proj, mlp and moe_act its recompute modules
    // (TrainingSetup::recompute_modules); others (moe, shared_experts, ...) are named as not
    // priced, their activations counted as kept. A YAML list arrives as "[a b]" or "[a, b]".
    std::string list = modules.value_or("core_attn");
    for (char &c : list)
      if (c == '[' || c == ']' || c == ',' || c == '"' || c == '\'') c = ' ';
    bool attention = false;
    std::vector<std::string> priced;
    std::string others;
    std::istringstream words(list);
    for (std::string module; words >> module;) {
      const auto &known = recomputeModuleNames();
      if (module == "core_attn")
        attention = true;
      else if (std::find(known.begin(), known.end(), module) != known.end())
        priced.push_back(module);
      else
        others += (others.empty() ? "" : " ") + module;
    }
    recompute = attention ? "selective" : "none";
    if (!priced.empty()) training["recompute_modules"] = priced;
    if (!others.empty())
      out.not_priced.push_back("--recompute-modules " + others +
                               ": their recomputation (pipescope recomputes core attention, "
                               "layernorm, mla_up_proj, mlp and moe_act; these activations are "
                               "counted as kept)");
  } else if (granularity) {
    return makeError("--recompute-granularity " + *granularity +
                     " is not known; Megatron takes "
                     "full or selective");
  }
  training["recompute"] = recompute;
  std::optional<std::string> sharding;
  READ(r.text("--data-parallel-sharding-strategy"), sharding);
  if (r.flag("--use-torch-fsdp2") || r.flag("--use-megatron-fsdp")) {
    const std::string s = sharding.value_or("optim_grads_params");
    training["zero_stage"] = s == "optim_grads_params" ? 3
                             : s == "optim_grads"      ? 2
                             : s == "optim"            ? 1
                                                       : 0;
  } else if (r.flag("--use-distributed-optimizer")) {
    training["zero1"] = true;
  } else {
    training["zero_stage"] = 0;
  }
  training["sequence_parallel"] = r.flag("--sequence-parallel") && tp > 1;
  training["overlap_gradient_sync"] = r.flag("--overlap-grad-reduce");
  r.flag("--overlap-param-gather"); // with the distributed optimizer, part of the overlap above
  if (r.flag("--tp-comm-overlap")) training["tp_comm_overlap"] = true;
  // Without it Megatron still runs each column-parallel layer's backward collectives beside
  // that layer's GEMMs, always (megatron/core/tensor_parallel/layers.py,
  // LinearWithGradAccumulationAndAsyncCommunication.backward; Transformer Engine's Linear alike).
  else if (tp > 1)
    training["tp_backward_overlap"] = true;
  // arguments.py: bf16 accumulates and reduces gradients in fp32 unless told otherwise.
  const bool grads_fp32 =
      (bf16 && !r.flag("--grad-reduce-in-bf16")) || r.flag("--accumulate-allreduce-grads-in-fp32");
  training["fp32_gradients"] = grads_fp32;
  // SwiGLU fused by default (arguments.py: bias_swiglu_fusion, passed on as the config's
  // bias_activation_fusion): without it autograd keeps silu's output too.
  // The weight gradients' separate add and the unfused softmax's mask pass are priced
  // (TrainingSetup::gradient_accumulation_fusion, masked_softmax_fusion).
  if (r.flag("--no-gradient-accumulation-fusion")) training["gradient_accumulation_fusion"] = false;
  if (r.flag("--no-masked-softmax-fusion") && model["attention"] == "materialized")
    training["masked_softmax_fusion"] = false;
  if (r.flag("--no-bias-swiglu-fusion")) {
    training["swiglu_fusion"] = false;
    out.not_priced.push_back("--no-bias-swiglu-fusion: the activations it keeps are priced, its "
                             "extra passes over them are not");
  }
  std::optional<std::string> fp8;
  READ(r.text("--fp8-format"), fp8);
  if (fp8) training["gemm_precision"] = "fp8";
  // arguments.py: "Keep the compute param in fp8 (do not use any other intermediate dtype) and
  // perform the param all-gather in fp8." Megatron refuses it without --fp8-format.
  if (r.flag("--fp8-param-gather") && fp8) training["fp8_params"] = true;
  std::optional<std::string> fusion_impl;
  READ(r.text("--cross-entropy-fusion-impl"), fusion_impl);
  training["cross_entropy"] = !r.flag("--cross-entropy-loss-fusion")   ? "vocab-parallel-unfused"
                              : fusion_impl.value_or("native") == "te" ? "te"
                                                                       : "vocab-parallel";
  if (experts) {
    training["moe_dispatcher"] = dispatcher;
    std::optional<long long> sms, sms_old;
    READ(r.integer("--moe-flex-dispatcher-num-sms", 1, 1 << 16), sms);
    READ(r.integer("--moe-deepep-num-sms", 1, 1 << 16), sms_old);
    if (sms || sms_old) training["moe_dispatcher_sms"] = sms.value_or(sms_old.value_or(0));
  }
  for (const auto &[name, value] : arguments.environment)
    if (name == "NCCL_ALGO") {
      const std::string algorithm = lower(value);
      if (algorithm == "ring" || algorithm == "tree") training["collective_algorithm"] = algorithm;
    }

  // Layer layout: Megatron's string as given, or the one its split options make.
  std::optional<long long> first_layers, last_layers;
  READ(r.integer("--decoder-first-pipeline-num-layers", 0, 1 << 20), first_layers);
  READ(r.integer("--decoder-last-pipeline-num-layers", 0, 1 << 20), last_layers);
  const long long stages = pp * chunks;
  const int mtp_count = static_cast<int>(mtp.value_or(0));
  if (layout) {
    training["layout"] = *layout;
  } else if (stages > 1 && (first_layers || last_layers || count_embedding || count_loss)) {
    // Transformer layers per model stage, as Megatron's TransformerConfig splits them.
    std::vector<long long> counts(static_cast<std::size_t>(stages), 0);
    if (first_layers || last_layers) {
      long long rest = *layers - first_layers.value_or(0) - last_layers.value_or(0);
      const long long middle = stages - (first_layers ? 1 : 0) - (last_layers ? 1 : 0);
      if (rest < 0 || middle <= 0 || rest % middle != 0)
        return makeError("--decoder-first/last-pipeline-num-layers leave " + std::to_string(rest) +
                         " layers that do not split evenly over " + std::to_string(middle) +
                         " stages; Megatron refuses it too");
      for (auto &count : counts)
        count = rest / middle;
      if (first_layers) counts.front() = *first_layers;
      if (last_layers) counts.back() = *last_layers;
    } else {
      const long long units = *layers + (count_embedding ? 1 : 0) + (count_loss ? 1 : 0);
      if (units % stages != 0)
        return makeError(std::to_string(*layers) + " layers" +
                         (count_embedding ? " + the embedding" : "") +
                         (count_loss ? " + the loss" : "") + " do not split evenly over " +
                         std::to_string(stages) +
                         " model stages (PP × V); Megatron refuses "
                         "it too");
      for (auto &count : counts)
        count = units / stages;
      if (count_embedding) --counts.front();
      if (count_loss) --counts.back();
    }
    std::string text;
    for (long long k = 0; k < stages; ++k) {
      if (k > 0) text += '|';
      if (k == 0) text += 'E';
      text += repeatChar('t', static_cast<int>(counts[static_cast<std::size_t>(k)]));
      if (k == stages - 1) text += repeatChar('m', mtp_count) + 'L';
    }
    training["layout"] = text;
    assumed.push_back("layout " + text + ": Megatron's split with the arguments above");
  }

  out.row = {{"model", model},
             {"hardware", target.hardware},
             {"mesh", mesh},
             {"schedule", schedule},
             {"training", training}};

  // What was given but not priced, and what was not read.
  const auto &unpriced = unpricedArguments();
  // An argument read only with another (--moe-router-topk with --num-experts) is not read
  // without it, as Megatron ignores it then too.
  for (const std::string &name : r.unread()) {
    if (const auto it = unpriced.find(name); it != unpriced.end())
      out.not_priced.push_back(name + ": " + it->second);
    else
      out.not_read.push_back(name);
  }
  return out;
}

int torchrunWorldSize(const MegatronArguments &arguments) {
  long long per_node = 0, nodes = 1;
  for (const auto &argument : arguments.arguments) {
    long long value = 0;
    const std::string &text = argument.value;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 1) continue;
    if (argument.name == "--nproc-per-node" || argument.name == "--nproc_per_node")
      per_node = value;
    if (argument.name == "--nnodes") nodes = value;
  }
  const long long gpus = per_node * nodes;
  return per_node > 0 && nodes <= kMaxWorldSize && gpus <= kMaxWorldSize ? static_cast<int>(gpus)
                                                                         : 0;
}

std::string launchName(std::string_view path) {
  std::string name(path.substr(path.find_last_of('/') + 1));
  for (const std::string_view suffix : {".sh", ".yaml", ".yml", ".txt", ".log", ".model_config"})
    if (name.size() > suffix.size() && name.ends_with(suffix))
      name.resize(name.size() - suffix.size());
  return name.empty() ? std::string("megatron-args") : name;
}

Result<MegatronLaunch> readMegatronLaunch(std::string_view text, const MegatronTarget &target) {
  auto arguments = parseMegatronArguments(text);
  if (!arguments) return arguments.error();
  if (arguments->arguments.empty())
    return makeError("no --arguments found; give a training script, a command line or a "
                     "Megatron-LM CI model_config.yaml");
  return launchFromArguments(std::move(*arguments), target);
}

Result<MegatronLaunch> launchFromArguments(MegatronArguments arguments,
                                           const MegatronTarget &target) {
  MegatronLaunch launch;
  auto translation = translateMegatronArguments(arguments, target);
  if (!translation) return translation.error();
  auto configuration = configurationFromJson(translation->row, "");
  if (!configuration)
    return makeError("the arguments make a configuration pipescope refuses: " +
                     configuration.error().message);
  launch.arguments = std::move(arguments);
  launch.translation = std::move(*translation);
  launch.configuration = std::move(*configuration);
  return launch;
}

} // namespace pipescope
