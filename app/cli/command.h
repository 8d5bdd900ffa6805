#pragma once

#include "base/result.h"

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace day0::cli {

/// Options every subcommand shares.
struct GlobalOptions {
    bool json = false; ///< machine-readable output on stdout
    bool quiet = false; ///< no progress bars
};

/// A subcommand: `setup` declares its options on `app` and returns the function that runs it
/// after parsing, which returns the process exit code (DESIGN.md §3).
struct Command {
    std::string name;
    std::string description;
    int order = 100; ///< position in `day0 --help`
    std::function<std::function<int()>(CLI::App& app, const GlobalOptions& global)> setup;
};

/// Adds a command to the registry; used from a static initialiser in each cmd_*.cpp file.
bool registerCommand(Command command);
/// All registered commands sorted by `order`.
const std::vector<Command>& commands();

/// Prints "day0: error: <message>" on stderr and returns the exit code for the error.
int reportError(const Error& error);

/// Prints a warning line on stderr.
void printWarning(const std::string& message);

} // namespace day0::cli
