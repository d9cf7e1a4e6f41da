#pragma once
// Every colour the explorer paints or styles, in one place: op kinds, pipeline stages, the
// timeline's surfaces, the charts' series, the mesh's groups and the tones of status messages.
// Widgets, the SVG export and the charts ask here; none of them holds a colour literal.
#include <QColor>
#include <QString>

#include "engine/op.h"

namespace pipescope::gui {

/// Colors by op kind (F blue, I orange, W green, B red, overlapped pair purple), shaded lighter
/// and darker in a short cycle by microbatch so neighbours stay distinguishable.
QColor opKindColor(OpKind kind);
QColor opColor(OpKind kind, int microbatch);
/// Color of pipeline stage p of P (a hue sweep), shared by the mesh and the legend.
QColor pipelineStageColor(int p, int pp);

namespace palette {

// Surfaces and text of the painted views (timeline, memory over time, mesh, SVG).
QColor background();     ///< behind every painted view
QColor rowBackground();  ///< a rank's row
QColor axisBackground(); ///< the time axis band
QColor axisLine();       ///< the axis' bottom line
QColor minorTick();
QColor gridLine(); ///< faint vertical lines under the rows
QColor text();     ///< axis labels, legends drawn by hand
QColor rowLabel(); ///< "rank 3" in the row headers
QColor sectionTitle();
QColor opLabel();        ///< microbatch numbers on the ops
QColor opLabelFaded();   ///< the same on faded ops
QColor idleHatch();      ///< idle (bubble) time
QColor playhead();       ///< the playhead line
QColor path();           ///< a highlighted microbatch's path and the hover outline
QColor criticalPath();   ///< the step's critical path (View > Critical path)
QColor measuredEdge();   ///< outline of measured bars
QColor predictedGhost(); ///< legend swatch of predicted outlines
QColor measuredSwatch(); ///< legend swatch of measured bars

// Rich text and labels.
QColor secondaryText(); ///< quieter labels
QColor hintText();      ///< notes and units
QColor faintText();     ///< hints such as "wheel zoom"
QColor staleText();     ///< what the error banner says is still shown
QColor badValue();      ///< a value that is out of bounds (over capacity)
QColor refusedText();   ///< schedules the comparison could not show
/// Background of the planner's runners-up within the model's validated error of #1.
QColor withinErrorShade();

// Charts.
QColor memorySegment(int segment);      ///< 0 params, 1 grads, 2 optimizer, 3 activations
QColor capacityLine();                  ///< the device memory line
QColor rankSeries(int rank, int ranks); ///< one line per rank (memory over time)
QColor curveSeries(int index);          ///< one line per schedule (bubble against M)
/// One scatter series per schedule family (the planner's chart), by the family's index in the
/// registry, so a schedule keeps its colour across searches.
QColor scheduleSeries(int family_index);
QColor paretoLine();  ///< the Pareto front of step time against memory
QColor chosenPoint(); ///< outline of the plan loaded from the search

// The mesh.
QColor gpuFrame();   ///< a node's frame
QColor nodeFill();   ///< a node's background
QColor gpuText();    ///< labels on GPUs
QColor hoveredGpu(); ///< the hovered GPU's outline
QColor tpGroup();
QColor ppGroup();
QColor dpGroup();
QColor cpGroup();
QColor epGroup();

/// Tones of status messages: a banner or label background, its text and border, and the color
/// of a log line of that tone.
enum class Tone { Neutral, Busy, Ok, Warning, Error };
struct ToneColors {
  QColor background, text, border;
};
ToneColors tone(Tone tone);
/// A QLabel style sheet in that tone ("QLabel { background: ...; }"), with `padding_px`.
QString toneStyleSheet(Tone tone, int padding_px = 4);
/// Log lines: errors, warnings, progress, and the backend's unclassified output.
QColor logColor(Tone tone);

} // namespace palette
} // namespace pipescope::gui
