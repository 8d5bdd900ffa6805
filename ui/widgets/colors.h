#pragma once

#include <QColor>

namespace day0::ui {

/// The n-th colour of a categorical palette that stays distinguishable on light and dark
/// backgrounds (Tableau-10 order, then golden-ratio hues).
QColor categoricalColor(int index);

/// Fixed colours of the memory components, shared by every chart and table.
enum class MemoryColor { Weights, Gradients, Optimizer, Activations, KvCache, Buffers, Free };
QColor memoryColor(MemoryColor component);

/// Red used for "does not fit" messages and limit lines; green for fitting ones.
QColor errorColor();
QColor okColor();

} // namespace day0::ui
