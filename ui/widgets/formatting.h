#pragma once

#include "base/units.h"

#include <QString>

#include <string>

namespace day0::ui {

/// std::string (UTF-8) to QString.
inline QString toQString(const std::string& text) { return QString::fromStdString(text); }
/// QString to std::string (UTF-8).
inline std::string fromQString(const QString& text) { return text.toStdString(); }

/// Byte counts as the tables and the CLI print them ("1.50 GiB").
inline QString bytesText(Bytes bytes) { return toQString(formatBytes(bytes)); }
/// Durations as the tables and the CLI print them ("12.3 ms").
inline QString durationText(Seconds seconds) { return toQString(formatDuration(seconds)); }
/// Parameter and token counts ("1.03T", "37.6B").
inline QString countText(double count) { return toQString(formatCount(count)); }

} // namespace day0::ui
