// `pipescope presets`: the model and hardware presets.
#include <iostream>

#include "engine/cli/commands.h"
#include "engine/model/model_setup.h"

namespace pipescope::cli {

int runPresets(const std::vector<std::string> &args) {
  if (!args.empty() && !wantsHelp(args)) return fail("'presets' takes no arguments");
  std::cout << "models:\n";
  for (const auto &name : modelPresetNames()) {
    auto model = loadModelSpec(name);
    std::cout << "  " << name;
    if (model)
      std::cout << "  (" << model->layers << " layers, h=" << model->hidden << ", " << model->heads
                << " heads; " << model->source.substr(0, model->source.find(';')) << ")";
    std::cout << '\n';
  }
  std::cout << "hardware:\n";
  for (const auto &name : hardwarePresetNames()) {
    auto hardware = loadHardwareSpec(name);
    std::cout << "  " << name;
    if (hardware)
      std::cout << "  (" << hardware->peak_tflops << " TFLOP/s bf16, " << hardware->memory_gib
                << " GiB; " << hardware->source.substr(0, hardware->source.find(" (")) << ")";
    std::cout << '\n';
  }
  std::cout
      << "--model and --hardware also take a JSON file of your own (see resources/presets).\n";
  return 0;
}

} // namespace pipescope::cli
