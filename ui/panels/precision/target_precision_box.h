#pragma once

#include "exec/precision.h"

class QComboBox;
class QWidget;

namespace day0::ui {

/// A combo box of the emulated target precisions the precision panel's views offer: the item
/// data packs the mode and, for fp8, its scaling (the serving engines' recipes); fp32 last.
QComboBox* createTargetPrecisionBox(QWidget* parent);

/// The target plan of the box's current item (mode and fp8 scaling).
exec::PrecisionPlan targetPrecisionOf(const QComboBox& box);

} // namespace day0::ui
