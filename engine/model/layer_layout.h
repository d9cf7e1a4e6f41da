#pragma once
// Uneven stages: which layers each model stage (virtual pipeline stage) computes (DESIGN.md §2
// "Layers", §4). Three ways to say it, as the tools people use say it:
// - Megatron-LM's --pipeline-model-parallel-layout string (E embedding, t transformer layer,
//   m multi-token-prediction layer, L loss/head, '|' between stages, (...)*n and x*n repeats,
//   ',' ignored, empty stages allowed);
// - torchtitan's pipeline_parallel_first_stage_less_layers / _last_stage_less_layers;
// - an explicit list of transformer layers per stage.
#include <string>
#include <string_view>
#include <vector>

#include "engine/result.h"

namespace pipescope {

/// What one model stage holds.
struct StageLayers {
  int layers = 0;     ///< transformer (decoder) layers, Megatron's 't'
  int mtp_layers = 0; ///< multi-token-prediction layers, Megatron's 'm'
  bool embedding = false;
  bool loss = false; ///< final norm, output head and loss, Megatron's 'L'
  friend bool operator==(const StageLayers &, const StageLayers &) = default;
};

/// Per model stage, in model order (stage k of Megatron's flattened layout is model stage k: for
/// interleaved schedules stage k runs on rank k mod P as chunk k / P, as in Megatron).
using LayerLayout = std::vector<StageLayers>;

/// Parses Megatron-LM's layout grammar (megatron/core/transformer/pipeline_parallel_layer_layout.py
/// parse_str_to_list): commas are cosmetic, "(...)*n" repeats a group (groups do not nest), "x*n"
/// repeats one character, '|' separates stages. The error names the column (1-based) and the fix.
Result<LayerLayout> parseMegatronLayout(std::string_view text);

/// The layout as a Megatron string, repeats folded: "Ett|(tt|)*2ttL".
std::string formatMegatronLayout(const LayerLayout &layout);

/// torchtitan's split (torchtitan/distributed/pipeline_parallel.py,
/// _generate_llm_fqn_per_model_part): the embedding counts as `first_stage_less_layers` layers and
/// the head as `last_stage_less_layers`, L + both are split evenly (the remainder on the first
/// stages), and the first and last stages give up that many transformer layers.
Result<LayerLayout> torchtitanLayout(int layers, int stages, int first_stage_less_layers,
                                     int last_stage_less_layers);

/// Transformer layers per stage as given; the embedding on the first stage, the head on the last.
LayerLayout layoutFromLayerCounts(const std::vector<int> &layers_per_stage);

/// Whether the layout fits a model of `layers` transformer and `mtp_layers` MTP layers split over
/// `stages` model stages, with Megatron's rules: one embedding in the first non-empty stage
/// before any layer, one loss after every layer, the layer counts equal to the model's, MTP layers
/// after every transformer layer. The error says what would work.
Status checkLayerLayout(const LayerLayout &layout, int layers, int mtp_layers, int stages);

/// Transformer layers per stage.
std::vector<int> layoutLayerCounts(const LayerLayout &layout);

/// The layout spread over another number of model stages, as Megatron-LM splits a model whose
/// embedding and loss count as one layer each (--account-for-embedding-in-pipeline-split,
/// --account-for-loss-in-pipeline-split): its units in model order (the embedding, each
/// transformer layer, each MTP layer, the loss) cut into `stages` contiguous runs whose lengths
/// differ by at most one, the longer runs first (where the engine's even split puts its
/// remainder). "E|(t|)*94L" over 32 stages is "Ett|(ttt|)*30ttL". What the explorer does when P
/// or V changes a plan's stage count. An empty layout, or one of `stages` stages, comes back as
/// it is; fewer units than stages is an error naming the most stages the units fill.
Result<LayerLayout> resplitLayout(const LayerLayout &layout, int stages);

/// resplitLayout's layout, or none (the engine's even split) where the units are too few.
LayerLayout layoutForStages(const LayerLayout &layout, int stages);

} // namespace pipescope
