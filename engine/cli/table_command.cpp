// `pipescope table`: bubble tables over lists of P and M for chosen schedules.
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/cli/arguments.h"
#include "engine/cli/commands.h"
#include "engine/evaluation.h"

namespace pipescope::cli {

using nlohmann::json;

namespace {

constexpr const char *kTableHelp = R"(usage: pipescope table [options]

Bubble tables over lists of P and M: one table per schedule, a row per M, a column per P.
Each cell is simulated with uniform op times and free transfers (F=1, B=2, W=1 unless given).

  --schedules LIST     comma-separated schedule names (default gpipe)
  --pp LIST            pipeline ranks (default 4,8,16,32)
  --microbatches LIST  microbatch counts (default 4,8,16,32,64,128)
  --virtual-stages V   chunks per rank for interleaved-1f1b, looped-bfs, interleaved-zb
                       (default 2)
  --metric NAME        bubble_fraction (default) or bubble_ratio
  --format FORMAT      text (default), csv or json
  --forward F --backward B --weight W   op times
)";

} // namespace

int runTable(const std::vector<std::string> &args) {
  if (wantsHelp(args)) {
    std::cout << kTableHelp;
    return 0;
  }
  auto parsed = Arguments::parse(args,
                                 {"schedules", "pp", "microbatches", "virtual-stages", "metric",
                                  "format", "forward", "backward", "weight"},
                                 {}, "table");
  if (!parsed) return fail(parsed.error().message);
  const Arguments &a = *parsed;
  const auto schedules = splitList(a.text("schedules").value_or("gpipe"));
  if (schedules.empty())
    return fail("--schedules lists no schedule; give comma-separated names such as "
                "gpipe,1f1b,interleaved-1f1b (see 'pipescope schedules')");
  auto pps = a.integerList("pp", 1, 4096);
  auto ms = a.integerList("microbatches", 1, 1 << 16);
  auto v = a.integer("virtual-stages", 1, kMaxChunks);
  if (!pps) return fail(pps.error().message);
  if (!ms) return fail(ms.error().message);
  if (!v) return fail(v.error().message);
  const std::vector<int> pp_list = pps->value_or(std::vector<int>{4, 8, 16, 32});
  const std::vector<int> m_list = ms->value_or(std::vector<int>{4, 8, 16, 32, 64, 128});
  const std::string metric = a.text("metric").value_or("bubble_fraction");
  const std::string format = a.text("format").value_or("text");
  if (metric != "bubble_fraction" && metric != "bubble_ratio")
    return fail("--metric must be bubble_fraction or bubble_ratio, got '" + metric + "'");
  if (format != "text" && format != "csv" && format != "json")
    return fail("--format must be text, csv or json, got '" + format + "'");
  Costs costs;
  for (auto [name, target] :
       {std::pair{"forward", &costs.forward_us}, std::pair{"backward", &costs.backward_us},
        std::pair{"weight", &costs.weight_us}}) {
    auto value =
        a.number(name, std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max());
    if (!value) return fail(value.error().message);
    if (*value) *target = **value;
  }
  if (auto status = costs.check(-1, CostNaming::CommandLine); !status)
    return fail(status.error().message);
  bool any_uses_chunks = false;
  for (const auto &name : schedules) {
    const auto *family = findScheduleFamily(name);
    if (!family) return fail("unknown schedule '" + name + "'; see 'pipescope schedules'");
    any_uses_chunks = any_uses_chunks || family->uses_chunks;
  }
  if (a.has("virtual-stages") && !any_uses_chunks)
    return fail("--virtual-stages does not apply to " + a.text("schedules").value_or("gpipe") +
                ": only interleaved-1f1b, looped-bfs and interleaved-zb take a V; leave it out, or "
                "add one of them to --schedules");

  json tables = json::array();
  std::ostringstream text, csv;
  csv << "schedule,pp,microbatches,virtual_stages," << metric << ",analytic\n";
  for (const auto &name : schedules) {
    const auto *family = findScheduleFamily(name);
    const int chunks = family->uses_chunks ? v->value_or(2) : 1;
    text << family->title << " " << metric << " (%)";
    if (family->uses_chunks) text << ", V=" << chunks;
    text << "\n";
    char cell[32];
    std::snprintf(cell, sizeof cell, "%-8s", "M \\ P");
    text << cell;
    for (int p : pp_list) {
      std::snprintf(cell, sizeof cell, "%9s", ("P=" + std::to_string(p)).c_str());
      text << cell;
    }
    text << '\n';
    json rows = json::array();
    for (int m : m_list) {
      std::snprintf(cell, sizeof cell, "M=%-6d", m);
      text << cell;
      for (int p : pp_list) {
        ScheduleRequest request{name, p, m, chunks, 0};
        json entry = {{"pp", p}, {"microbatches", m}, {"virtual_stages", chunks}};
        if (auto status = checkScheduleRequest(request); !status) {
          text << "        -";
          entry[metric] = nullptr;
          entry["refused"] = status.error().message;
          csv << name << ',' << p << ',' << m << ',' << chunks << ",,\n";
          rows.push_back(std::move(entry));
          continue;
        }
        auto evaluation = evaluate(request, costs);
        if (!evaluation) return fail(evaluation.error().message);
        const double value = metric == "bubble_fraction" ? evaluation->simulation.bubble_fraction
                                                         : evaluation->simulation.bubble_ratio;
        const auto &analytic = evaluation->analytic;
        std::string closed_text; // empty where no closed form is published
        entry["analytic"] = nullptr;
        if (analytic) {
          const double closed =
              metric == "bubble_fraction" ? analytic->bubble_fraction : analytic->bubble_ratio;
          entry["analytic"] = closed;
          closed_text = json(closed).dump();
        }
        std::snprintf(cell, sizeof cell, "%9.1f", value * 100);
        text << cell;
        entry[metric] = value;
        csv << name << ',' << p << ',' << m << ',' << chunks << ',' << json(value).dump() << ','
            << closed_text << '\n';
        rows.push_back(std::move(entry));
      }
      text << '\n';
    }
    text << '\n';
    tables.push_back({{"schedule", name}, {"metric", metric}, {"cells", std::move(rows)}});
  }
  if (format == "json")
    std::cout << tables.dump(2) << '\n';
  else if (format == "csv")
    std::cout << csv.str();
  else
    std::cout << text.str();
  return 0;
}

} // namespace pipescope::cli
