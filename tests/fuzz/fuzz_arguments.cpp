// Fuzz target for the CLI's argument parser (engine/cli/arguments.h): the input, split on NUL
// bytes or newlines, is the argument list of a command. Whatever it holds, parsing and every
// typed accessor return a value or an error — never crash, and never let an exception out.
// Built with libFuzzer by tests/fuzz/run-fuzzer.sh, replayed over corpus_arguments/ by CTest.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cli/arguments.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  std::vector<std::string> args;
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\0' || text[i] == '\n') {
      if (i > begin || i < text.size()) args.emplace_back(text.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  // The options of `pipescope simulate`, the busiest command.
  static const std::set<std::string> valued = {
      "schedule", "pp",       "microbatches", "virtual-stages",
      "forward",  "backward", "weight",       "p2p-bandwidth",
      "plan",     "trace",    "csv",          "pps",
      "dp"};
  static const std::set<std::string> flags = {"json", "ops", "balance", "zero1"};
  auto parsed = pipescope::cli::Arguments::parse(args, valued, flags, "simulate");
  if (!parsed) return 0;
  for (const auto &name : valued) {
    (void)parsed->text(name);
    (void)parsed->integer(name, 1, 16384);
    (void)parsed->integer(name, -5, 0);
    (void)parsed->number(name, 0, 1e12);
    (void)parsed->number(name, -1e300, 1e300);
    (void)parsed->integerList(name, 1, 1 << 20);
  }
  for (const auto &name : flags)
    (void)parsed->has(name);
  (void)parsed->positional();
  return 0;
}
