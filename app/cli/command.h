#pragma once

#include "base/result.h"
#include "base/strong_id.h"
#include "model/config_reader.h"
#include "model/model_spec.h"

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
    /// `--partial`: read a model whose config has structure Day0 does not model; the figures
    /// leave it out and every output says so (verbs that compute from or write the model
    /// refuse such a reading).
    bool partial = false;
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

/// How a verb reads model configs under the global options (--partial).
model::ReadOptions readOptions(const GlobalOptions& global);

/// The "PARTIAL reading" banner of a spec read with --partial (empty for an exact reading):
/// what every figure leaves out, one key per line.
std::string partialBanner(const model::ModelSpec& spec);

/// `"partial": bool, "ignored_keys": [{"path", "reason"}]` for a verb's --json output.
void addPartialJson(nlohmann::json& out, const model::ModelSpec& spec);

/// For verbs that compute from or write the model (run, shrink, convert, shard): with
/// --partial, reads `modelArg` partially and, when the reading is partial, prints why the verb
/// cannot go on (naming every ignored key) and returns exit code 2. Returns nullopt to go on.
std::optional<int> refusePartial(
    const std::string& verb, const std::string& modelArg, const GlobalOptions& global);

} // namespace day0::cli
