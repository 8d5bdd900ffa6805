#pragma once

#include "base/result.h"
#include "base/strong_id.h"

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>

namespace day0::history {
struct RunRecord;
}

namespace day0::cli {

/// Options every subcommand shares.
struct GlobalOptions {
    bool json = false; ///< machine-readable output on stdout
    bool quiet = false; ///< no progress bars
    std::string store; ///< `--store PATH`: the run store file (else $DAY0_STORE, else the default)
    bool noRecord = false; ///< `--no-record`: do not record this command's result as a run
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

/// Hands --store, --no-record, the version and the command line to history::recordRun; main()
/// calls it once after parsing.
void configureRecording(const GlobalOptions& global, int argc, char** argv);

/// Records a command's result as a run in the store chosen by --store / $DAY0_STORE, unless
/// --no-record was given (history::recordRun). A store that cannot be written is a warning, not
/// a failed command. Returns the new run's id when one was recorded.
std::optional<RunId> recordResult(const history::RunRecord& record);

/// Prints a warning line on stderr.
void printWarning(const std::string& message);

} // namespace day0::cli
