#include "engine/model/layer_layout.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace pipescope {

namespace {

/// The most layer characters a layout may expand to: far beyond any model (kMaxLayers is 1e5),
/// small enough that "(t)*999999999" cannot exhaust memory.
constexpr std::size_t kMaxExpandedLayout = std::size_t{1} << 20;

constexpr const char *kLayoutAlphabet = "Megatron's layout uses E (embedding), t (transformer "
                                        "layer), m (MTP layer), L (loss), | between stages, "
                                        "(...)*n and x*n repeats";

std::string at(std::size_t index) {
  return "column " + std::to_string(index + 1);
}

bool isLayerCharacter(char c) {
  return c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|';
}

/// Reads the repeat count after '*' at text[index]; advances index past the digits.
Result<std::size_t> readCount(std::string_view text, std::size_t &index) {
  const std::size_t star = index;
  ++index;
  std::size_t count = 0, digits = 0;
  while (index < text.size() && std::isdigit(static_cast<unsigned char>(text[index]))) {
    count = count * 10 + static_cast<std::size_t>(text[index] - '0');
    if (count > kMaxExpandedLayout)
      return makeError("layout: the repeat count at " + at(star + 1) + " is too large (at most " +
                       std::to_string(kMaxExpandedLayout) + ")");
    ++index;
    ++digits;
  }
  if (digits == 0)
    return makeError("layout: '*' at " + at(star) +
                     " needs a repeat count after it, as in (tt|)*4 or t*3");
  return count;
}

} // namespace

Result<LayerLayout> parseMegatronLayout(std::string_view text) {
  // Expand the repeats into (character, column) pairs, checking the syntax as we go.
  struct Item {
    char character;
    std::size_t column;
  };
  std::vector<Item> expanded;
  std::size_t group_start = std::string_view::npos; // index of '(' of the open group
  std::size_t group_first_item = 0;                 // where its items start in `expanded`
  bool can_repeat = false;                          // the last thing read was an element
  std::size_t last_element = 0;                     // its index in `expanded`
  auto grow = [&](std::size_t added, std::size_t index) -> Status {
    if (expanded.size() + added > kMaxExpandedLayout)
      return makeError("layout: the repeat at " + at(index) + " expands to more than " +
                       std::to_string(kMaxExpandedLayout) + " layers; check the counts");
    return Ok{};
  };
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == ',' || c == ' ') { // cosmetic, as Megatron strips commas
      ++i;
      continue;
    }
    if (isLayerCharacter(c)) {
      if (auto s = grow(1, i); !s) return s.error();
      last_element = expanded.size();
      expanded.push_back({c, i});
      can_repeat = true;
      ++i;
      continue;
    }
    if (c == '(') {
      if (group_start != std::string_view::npos)
        return makeError("layout: '(' at " + at(i) + " opens a group inside the group opened at " +
                         at(group_start) +
                         "; Megatron's layout grammar does not nest groups, write the inner "
                         "repeat out");
      group_start = i;
      group_first_item = expanded.size();
      can_repeat = false;
      ++i;
      continue;
    }
    if (c == ')') {
      if (group_start == std::string_view::npos)
        return makeError("layout: ')' at " + at(i) + " closes no group; remove it or add '('");
      if (expanded.size() == group_first_item)
        return makeError("layout: the group at " + at(group_start) +
                         " is empty; put layers in it, as in (tt|)*4");
      if (i + 1 >= text.size() || text[i + 1] != '*')
        return makeError("layout: the group closed at " + at(i) +
                         " needs a repeat count, as in (tt|)*4");
      std::size_t next = i + 1;
      auto count = readCount(text, next);
      if (!count) return count.error();
      const std::vector<Item> group(
          expanded.begin() + static_cast<std::ptrdiff_t>(group_first_item), expanded.end());
      expanded.resize(group_first_item);
      if (*count > 0)
        if (auto s = grow(group.size() * *count, i); !s) return s.error();
      for (std::size_t k = 0; k < *count; ++k)
        expanded.insert(expanded.end(), group.begin(), group.end());
      group_start = std::string_view::npos;
      can_repeat = false;
      i = next;
      continue;
    }
    if (c == '*') {
      if (!can_repeat)
        return makeError("layout: '*' at " + at(i) +
                         " follows nothing to repeat; write x*n after a layer character or "
                         "(...)*n after a group");
      const Item element = expanded[last_element];
      auto count = readCount(text, i);
      if (!count) return count.error();
      expanded.pop_back();
      if (*count > 0)
        if (auto s = grow(*count, element.column); !s) return s.error();
      expanded.insert(expanded.end(), *count, element);
      can_repeat = false;
      continue;
    }
    return makeError("layout: unexpected '" + std::string(1, c) + "' at " + at(i) + "; " +
                     kLayoutAlphabet);
  }
  if (group_start != std::string_view::npos)
    return makeError("layout: the group opened at " + at(group_start) +
                     " is not closed; add ')*n'");

  // Split into stages and check the order Megatron's validate_layer_layout requires: the
  // embedding first, the loss last, MTP layers after every transformer layer.
  LayerLayout layout(1);
  bool seen_layer = false, seen_mtp = false, seen_loss = false, seen_embedding = false;
  for (const Item &item : expanded) {
    if (seen_loss && item.character != '|')
      return makeError("layout: '" + std::string(1, item.character) + "' at " + at(item.column) +
                       " comes after the loss L; L must be the last layer of the layout");
    StageLayers &stage = layout.back();
    switch (item.character) {
    case '|': layout.emplace_back(); break;
    case 'E':
      if (seen_embedding)
        return makeError("layout: a second embedding E at " + at(item.column) +
                         "; the layout has exactly one E, first");
      if (seen_layer || seen_mtp)
        return makeError("layout: the embedding E at " + at(item.column) +
                         " comes after a layer; E must be the first layer of the layout");
      seen_embedding = stage.embedding = true;
      break;
    case 't':
      if (seen_mtp)
        return makeError("layout: transformer layer t at " + at(item.column) +
                         " comes after an MTP layer; Megatron places MTP layers after every "
                         "transformer layer");
      seen_layer = true;
      ++stage.layers;
      break;
    case 'm':
      seen_mtp = true;
      ++stage.mtp_layers;
      break;
    case 'L': seen_loss = stage.loss = true; break;
    default: break;
    }
    if (!seen_embedding && item.character != '|')
      return makeError("layout: '" + std::string(1, item.character) + "' at " + at(item.column) +
                       " comes before the embedding; E must be the first layer of the layout");
  }
  if (!seen_embedding)
    return makeError("layout: no embedding E; the layout starts with E, as in Ettt|tttL");
  if (!seen_loss) return makeError("layout: no loss L; the layout ends with L, as in Ettt|tttL");
  return layout;
}

std::string formatMegatronLayout(const LayerLayout &layout) {
  const auto repeated = [](char c, int n) {
    if (n > 3) return std::string(1, c) + "*" + std::to_string(n);
    return std::string(static_cast<std::size_t>(n), c);
  };
  std::vector<std::string> stages;
  stages.reserve(layout.size());
  for (const StageLayers &stage : layout)
    stages.push_back((stage.embedding ? "E" : "") + repeated('t', stage.layers) +
                     repeated('m', stage.mtp_layers) + (stage.loss ? "L" : ""));
  std::string out;
  for (std::size_t i = 0; i < stages.size();) {
    std::size_t run = 1;
    while (i + run < stages.size() && stages[i + run] == stages[i])
      ++run;
    const bool last_run = i + run == stages.size();
    // A folded run "(s|)*n" ends with its own separator, so the last run keeps one copy out.
    const std::size_t folded = last_run ? run - 1 : run;
    if (folded >= 2)
      out += "(" + stages[i] + "|)*" + std::to_string(folded);
    else if (folded == 1)
      out += stages[i] + "|";
    if (last_run) out += stages[i];
    i += run;
  }
  return out;
}

Result<LayerLayout> torchtitanLayout(int layers, int stages, int first_stage_less_layers,
                                     int last_stage_less_layers) {
  if (stages < 1) return makeError("torchtitan layout: the number of stages must be at least 1");
  if (first_stage_less_layers < 0 || last_stage_less_layers < 0)
    return makeError("torchtitan layout: first/last-stage-less-layers must be 0 or more");
  if (stages == 1) {
    StageLayers only;
    only.layers = layers;
    only.embedding = only.loss = true;
    return LayerLayout{only};
  }
  const int effective = layers + first_stage_less_layers + last_stage_less_layers;
  const int per_stage = effective / stages;
  const int extra = effective % stages;
  const std::string what =
      " (torchtitan treats the embedding as " + std::to_string(first_stage_less_layers) +
      " and the head as " + std::to_string(last_stage_less_layers) +
      " layers: " + std::to_string(layers) + " + both = " + std::to_string(effective) + " over " +
      std::to_string(stages) + " stages)";
  if (per_stage == 0)
    return makeError("torchtitan layout: " + std::to_string(stages) +
                     " stages would leave stages empty" + what + "; use at most " +
                     std::to_string(effective) + " stages");
  if (first_stage_less_layers > per_stage || last_stage_less_layers > per_stage)
    return makeError("torchtitan layout: the first/last-stage-less-layers (" +
                     std::to_string(first_stage_less_layers) + ", " +
                     std::to_string(last_stage_less_layers) + ") exceed the layers per stage (" +
                     std::to_string(per_stage) + ")" + what + "; use at most " +
                     std::to_string(per_stage));
  LayerLayout layout(static_cast<std::size_t>(stages));
  for (int k = 0; k < stages; ++k) {
    StageLayers &stage = layout[static_cast<std::size_t>(k)];
    int count = per_stage + (k < extra ? 1 : 0);
    if (k == 0) count -= first_stage_less_layers;
    if (k == stages - 1) count -= last_stage_less_layers;
    stage.layers = count;
  }
  layout.front().embedding = true;
  layout.back().loss = true;
  return layout;
}

LayerLayout layoutFromLayerCounts(const std::vector<int> &layers_per_stage) {
  LayerLayout layout(layers_per_stage.size());
  for (std::size_t k = 0; k < layers_per_stage.size(); ++k)
    layout[k].layers = layers_per_stage[k];
  if (!layout.empty()) {
    layout.front().embedding = true;
    layout.back().loss = true;
  }
  return layout;
}

std::vector<int> layoutLayerCounts(const LayerLayout &layout) {
  std::vector<int> counts(layout.size());
  std::transform(layout.begin(), layout.end(), counts.begin(),
                 [](const StageLayers &stage) { return stage.layers; });
  return counts;
}

Result<LayerLayout> resplitLayout(const LayerLayout &layout, int stages) {
  if (layout.empty() || static_cast<int>(layout.size()) == stages) return layout;
  enum class Unit { Embedding, Layer, Mtp, Loss };
  std::vector<Unit> units;
  for (const StageLayers &stage : layout) {
    if (stage.embedding) units.push_back(Unit::Embedding);
    units.insert(units.end(), static_cast<std::size_t>(std::max(0, stage.layers)), Unit::Layer);
    units.insert(units.end(), static_cast<std::size_t>(std::max(0, stage.mtp_layers)), Unit::Mtp);
    if (stage.loss) units.push_back(Unit::Loss);
  }
  const auto count = static_cast<int>(units.size());
  if (stages < 1 || count < stages)
    return makeError("layout: its " + std::to_string(count) +
                     " units (embedding, layers, loss) cannot fill " + std::to_string(stages) +
                     " model stages; use at most " + std::to_string(count) +
                     " stages (P × V), or an even split");
  LayerLayout split(static_cast<std::size_t>(stages));
  std::size_t next = 0;
  for (int k = 0; k < stages; ++k) {
    StageLayers &stage = split[static_cast<std::size_t>(k)];
    const int length = count / stages + (k < count % stages ? 1 : 0);
    for (int i = 0; i < length; ++i, ++next) {
      switch (units[next]) {
      case Unit::Embedding: stage.embedding = true; break;
      case Unit::Layer: ++stage.layers; break;
      case Unit::Mtp: ++stage.mtp_layers; break;
      case Unit::Loss: stage.loss = true; break;
      }
    }
  }
  return split;
}

LayerLayout layoutForStages(const LayerLayout &layout, int stages) {
  auto split = resplitLayout(layout, stages);
  return split ? std::move(*split) : LayerLayout{};
}

Status checkLayerLayout(const LayerLayout &layout, int layers, int mtp_layers, int stages) {
  const auto n = static_cast<int>(layout.size());
  if (n != stages)
    return makeError("layout: it has " + std::to_string(n) + " stages but the schedule has " +
                     std::to_string(stages) +
                     " model stages (P × V); give one stage per model stage, or choose P and V "
                     "with P × V = " +
                     std::to_string(n));
  int total = 0, total_mtp = 0, embeddings = 0, losses = 0;
  int first_used = -1, last_used = -1, last_transformer = -1, first_mtp = -1;
  for (int k = 0; k < n; ++k) {
    const StageLayers &stage = layout[static_cast<std::size_t>(k)];
    if (stage.layers < 0 || stage.mtp_layers < 0)
      return makeError("layout: stage " + std::to_string(k) +
                       " has a negative layer count; counts are 0 or more");
    total += stage.layers;
    total_mtp += stage.mtp_layers;
    embeddings += stage.embedding ? 1 : 0;
    losses += stage.loss ? 1 : 0;
    const bool used = stage.layers > 0 || stage.mtp_layers > 0 || stage.embedding || stage.loss;
    if (used && first_used < 0) first_used = k;
    if (used) last_used = k;
    if (stage.layers > 0) last_transformer = k;
    if (stage.mtp_layers > 0 && first_mtp < 0) first_mtp = k;
  }
  if (total != layers)
    return makeError("layout: it has " + std::to_string(total) +
                     " transformer layers but the model has " + std::to_string(layers) +
                     "; the stage counts must add up to " + std::to_string(layers));
  if (total_mtp != mtp_layers)
    return makeError("layout: it has " + std::to_string(total_mtp) +
                     " MTP layers but the model has " + std::to_string(mtp_layers) + "; use " +
                     std::to_string(mtp_layers) + " 'm'");
  if (embeddings != 1 || !layout[static_cast<std::size_t>(first_used)].embedding)
    return makeError("layout: the embedding must appear once, in the first non-empty stage");
  if (losses != 1 || !layout[static_cast<std::size_t>(last_used)].loss)
    return makeError("layout: the loss must appear once, in the last non-empty stage");
  if (first_mtp >= 0 && first_mtp < last_transformer)
    return makeError("layout: MTP layers (stage " + std::to_string(first_mtp) +
                     ") come before transformer layers (stage " + std::to_string(last_transformer) +
                     "); place them after every layer");
  return Ok{};
}

} // namespace pipescope
