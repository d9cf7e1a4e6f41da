#pragma once
// A configuration's speed of light: the step it would take on its hardware if every kernel ran
// at the GPU's peak and every link at its line rate, with nothing else in the way. A measured
// step is never below it; one that is says the run was not the configuration described, or
// that the model misses an overlap the run had (docs/validation.md, "Speed of light").
#include "engine/model/model_setup.h"
#include "engine/plan_file.h"
#include "engine/result.h"

namespace pipescope {

/// `setup` with its hardware at its peaks: GEMMs and attention at 100 % of the tensor-core peak
/// of their precision, memory-bound work at the full HBM bandwidth, collectives at the links'
/// full bandwidth with no latency, and none of what the presets price beyond the kernels' work
/// (GEMMs slowed beside a collective, the SMs a MoE dispatcher holds, a layer's fixed overhead,
/// the MoE layers' host time). The schedule, the mesh, the model and what overlaps what stay as
/// they are, so the bubbles and the exposed communication the configuration cannot avoid stay.
ModelSetup speedOfLightSetup(const ModelSetup &setup);

/// The step time (s) of a plan with a model at its speed of light: the plan evaluated again with
/// speedOfLightSetup. An error for a plan without a model (its costs are given, not derived).
Result<double> speedOfLightStepS(const Plan &plan);

} // namespace pipescope
