// `pipescope bench`: times generation + lowering + simulation over a ladder of sizes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/evaluation.h"

namespace pipescope::cli {

using nlohmann::json;

int runBench(const std::vector<std::string> &args) {
  // `bench --search`: the planner's configurations simulated per second (search_command.cpp).
  if (std::find(args.begin(), args.end(), "--search") != args.end()) return runSearchBench(args);
  if (wantsHelp(args)) {
    std::cout << "usage: pipescope bench [--schedules LIST] [--repeat N] [--json]\n"
                 "       pipescope bench --search [...]   (see 'pipescope bench --search --help')"
                 "\n\nTimes "
                 "generation + lowering + simulation over a ladder of sizes up to P=64, M=1024, "
                 "V=4 (about a million ops; one rung beyond at M=2048) and prints ops per second "
                 "(the best of N runs, default 5). Default schedules: 1f1b, interleaved-1f1b, "
                 "looped-bfs, zb-h1, interleaved-zb, zb-v, v-half, v-min, dualpipev.\n";
    return 0;
  }
  auto parsed = Arguments::parse(args, {"schedules", "repeat"}, {"json"}, "bench");
  if (!parsed) return fail(parsed.error().message);
  const auto schedules = splitList(
      parsed->text("schedules")
          .value_or(
              "1f1b,interleaved-1f1b,looped-bfs,zb-h1,interleaved-zb,zb-v,v-half,v-min,dualpipev"));
  auto repeat = parsed->integer("repeat", 1, 1000);
  if (!repeat) return fail(repeat.error().message);
  const int runs = repeat->value_or(5);
  struct Size {
    int pp, microbatches, chunks;
  };
  const Size ladder[] = {{4, 8, 4},    {8, 32, 4},    {16, 64, 4},  {32, 256, 4},
                         {64, 512, 4}, {64, 1024, 4}, {64, 2048, 4}};
  json rows = json::array();
  std::printf("%-18s %5s %6s %3s %10s %12s %12s %14s\n", "schedule", "P", "M", "V", "ops",
              "generate ms", "total ms", "ops/s");
  for (const auto &name : schedules) {
    const auto *family = findScheduleFamily(name);
    if (!family) return fail("unknown schedule '" + name + "'; see 'pipescope schedules'");
    for (const auto &size : ladder) {
      ScheduleRequest request{name, size.pp, size.microbatches,
                              family->uses_chunks ? size.chunks : 1, 0};
      if (!checkScheduleRequest(request)) continue;
      double best_total = 1e30, best_generate = 1e30;
      std::size_t ops = 0;
      for (int run = 0; run < runs; ++run) {
        const auto t0 = std::chrono::steady_clock::now();
        auto schedule = generateSchedule(request);
        const auto t1 = std::chrono::steady_clock::now();
        if (!schedule) return fail(schedule.error().message);
        ops = schedule->opCount();
        auto evaluation = evaluateGenerated(std::move(*schedule), Costs{});
        const auto t2 = std::chrono::steady_clock::now();
        if (!evaluation) return fail(evaluation.error().message);
        best_generate =
            std::min(best_generate, std::chrono::duration<double, std::milli>(t1 - t0).count());
        best_total =
            std::min(best_total, std::chrono::duration<double, std::milli>(t2 - t0).count());
      }
      const double ops_per_s = static_cast<double>(ops) / (best_total / 1e3);
      std::printf("%-18s %5d %6d %3d %10zu %12.3f %12.3f %14.3g\n", name.c_str(), request.pp,
                  request.microbatches, request.chunks, ops, best_generate, best_total, ops_per_s);
      rows.push_back({{"schedule", name},
                      {"pp", request.pp},
                      {"microbatches", request.microbatches},
                      {"virtual_stages", request.chunks},
                      {"ops", ops},
                      {"generate_ms", best_generate},
                      {"total_ms", best_total},
                      {"ops_per_s", ops_per_s}});
    }
  }
  if (parsed->has("json")) std::cout << rows.dump(2) << '\n';
  return 0;
}

} // namespace pipescope::cli
