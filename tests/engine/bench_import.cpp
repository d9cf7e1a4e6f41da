// Benchmark of `pipescope import` (README "Import"): a large trace set made by replicating the
// events of a real profiled run (tests/data/torch_runs) step after step, each copy shifted by the
// run's span and its ProfilerStep markers renumbered, then imported. Reports MB/s of trace JSON
// and the peak RSS against the files' size. Not a test: timings vary with the machine.
//
// usage: bench_import [MB per rank (default 256)] [run folder] [scratch folder (default /tmp)]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/json_io.h"
#include "engine/run_import.h"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// CPU time of this process (user + system), which other jobs on a shared machine do not inflate.
double cpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

double peakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0; // ru_maxrss is in KiB on Linux
}

json readJson(const std::string &path) {
  auto text = pipescope::readTextFile(path);
  if (!text) {
    std::fprintf(stderr, "%s\n", text.error().message.c_str());
    std::exit(2);
  }
  return json::parse(*text);
}

} // namespace

int main(int argc, char **argv) {
  const double target_mb = argc > 1 ? std::stod(argv[1]) : 256;
  const std::string run =
      argc > 2 ? argv[2] : std::string(PIPESCOPE_TORCH_RUNS) + "/interleaved-1f1b-p2-m4";
  const fs::path scratch = fs::path(argc > 3 ? argv[3] : "/tmp") / "pipescope-bench-import";
  fs::remove_all(scratch);
  fs::create_directories(scratch);

  std::vector<std::string> sources;
  for (const auto &entry : fs::directory_iterator(run))
    if (entry.path().filename().string().find("_trace.json") != std::string::npos)
      sources.push_back(entry.path().string());
  std::sort(sources.begin(), sources.end());
  // One period for every rank, so the copies stay aligned across ranks on their shared clock.
  double first = 1e300, last = 0;
  int step_count = 0;
  for (const auto &source : sources) {
    const json trace = readJson(source);
    int steps = 0;
    for (const auto &e : trace["traceEvents"]) {
      if (!e.contains("ts")) continue;
      first = std::min(first, e["ts"].get<double>());
      last = std::max(last, e["ts"].get<double>() + e.value("dur", 0.0));
      steps += e.value("name", "").starts_with("ProfilerStep#") ? 1 : 0;
    }
    step_count = std::max(step_count, steps);
  }
  const double period = last - first + 1000;

  std::size_t total_bytes = 0;
  int copies = 0, copies_per_rank = 0; // rank 0's file reaches the size; the others match it
  for (const auto &source : sources) {
    const json trace = readJson(source);
    const fs::path target = scratch / fs::path(source).filename().replace_extension("");
    std::ofstream out(target, std::ios::binary);
    std::string head = "{";
    for (const auto &[key, value] : trace.items())
      if (key != "traceEvents") head += json(key).dump() + ":" + value.dump() + ",\n";
    out << head << "\"traceEvents\":[\n";
    std::size_t bytes = head.size();
    bool comma = false;
    for (copies = 0; copies_per_rank ? copies < copies_per_rank : bytes < target_mb * 1e6; ++copies)
      for (json e : trace["traceEvents"]) {
        if (e.value("ph", "") == "M" && copies > 0) continue; // metadata once
        if (e.contains("ts")) e["ts"] = e["ts"].get<double>() + copies * period;
        const std::string name = e.value("name", "");
        if (name.starts_with("ProfilerStep#"))
          e["name"] =
              "ProfilerStep#" + std::to_string(std::stoi(name.substr(13)) + copies * step_count);
        const std::string text = (comma ? ",\n" : "") + e.dump();
        comma = true;
        out << text;
        bytes += text.size();
      }
    out << "\n]}\n";
    total_bytes += bytes;
    copies_per_rank = copies;
  }
  const double generated_rss = peakRssMb();

  const double cpu_start = cpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  auto imported = pipescope::importRun({scratch.string()});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cpuSeconds() - cpu_start;
  if (!imported) {
    std::fprintf(stderr, "%s\n", imported.error().message.c_str());
    return 2;
  }
  const double mb = static_cast<double>(total_bytes) / 1e6;
  std::printf(
      "{\"run\": \"%s\", \"ranks\": %zu, \"trace_mb\": %.1f, \"steps\": %zu, \"ops\": %zu, "
      "\"seconds\": %.3f, \"mb_per_s\": %.1f, \"cpu_seconds\": %.3f, \"mb_per_cpu_s\": %.1f, "
      "\"peak_rss_mb\": %.1f, "
      "\"peak_rss_mb_before_import\": %.1f}\n",
      fs::path(run).filename().c_str(), sources.size(), mb, imported->summary.steps.size(),
      imported->summary.ops, seconds, mb / seconds, cpu, mb / cpu, peakRssMb(), generated_rss);
  fs::remove_all(scratch);
  return 0;
}
