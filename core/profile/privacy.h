#pragma once

#include <string>
#include <string_view>

namespace day0::profile {

/// True when `text` holds a home-folder path whose next component is a user name
/// ("/home/alice/...", "/Users/alice/...", "C:\Users\alice\...").
bool containsUserPath(std::string_view text);

/// `text` with the user-name component of home-folder paths replaced by "<user>", so that traces
/// never store or print who recorded them. Returns the text unchanged when there is nothing to
/// hide.
std::string redactUserPaths(std::string_view text);

/// The last component of a path ("/home/alice/run.py" → "run.py"); process names from Nsight
/// Systems are full executable paths.
std::string_view baseName(std::string_view path);

} // namespace day0::profile
