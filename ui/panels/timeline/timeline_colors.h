#pragma once

#include "profile/string_table.h"
#include "profile/trace.h"

#include <QColor>

namespace day0::ui {

/// The base colour of a slice category (kernel blue, communication orange, memcpy green, ...),
/// the same in the timeline, its legend and the statistics table.
QColor categoryColor(profile::Category category);

/// The colour of one slice: its category's hue, varied in lightness and slightly in hue by its
/// name, so neighbouring kernels of different names are told apart while the category stays
/// recognisable.
QColor sliceColor(profile::Category category, profile::StringId name);

/// Black or white, whichever reads better on `background`.
QColor textColorOn(const QColor& background);

} // namespace day0::ui
