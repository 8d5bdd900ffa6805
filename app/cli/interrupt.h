#pragma once

#include <stop_token>

namespace day0::cli {

/// A stop token that is requested when the user presses Ctrl-C (SIGINT) or the process gets
/// SIGTERM, so long work (hashing, conversion) ends cleanly and removes its temporary output.
/// The first call installs the handlers; a second Ctrl-C after a stop is requested kills the
/// process as usual.
std::stop_token interruptToken();

} // namespace day0::cli
