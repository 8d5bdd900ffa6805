#pragma once

#include "settings/preferences.h"

#include <QPalette>

namespace day0::ui {

/// The workbench's light palette (Fusion style).
QPalette lightPalette();
/// The workbench's dark palette (Fusion style).
QPalette darkPalette();
/// True when a palette has a dark window background.
bool isDarkPalette(const QPalette& palette);

/// Applies the Fusion style and the palette for `choice`; System follows the platform's palette
/// (light or dark). Call again on QEvent::ThemeChange to follow a system switch.
void applyTheme(ThemeChoice choice);

} // namespace day0::ui
