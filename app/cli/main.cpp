// day0: the command-line twin of the workbench. Parses, dispatches to a registered command.
#include "base/log.h"
#include "command.h"
#include "option_checks.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv)
{
    using namespace day0::cli;

    CLI::App app(
        "day0: plan, load, verify, run, compare and profile a new LLM on day zero", "day0");
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string(DAY0_VERSION));
    GlobalOptions global;
    app.add_flag("--json", global.json, "machine-readable output on stdout")->configurable(false);
    app.add_flag("-q,--quiet", global.quiet, "no progress bars");
    app.add_option("--store", global.store,
        "run store file (default: $DAY0_STORE, else "
        "$XDG_DATA_HOME/day0/runs.sqlite)");
    app.add_flag("--no-record", global.noRecord, "do not record this command's result as a run");
    app.add_flag("--partial", global.partial,
        "read a model whose config has structure Day0 does not model: figures leave it out "
        "and every output lists it");

    std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
    for (const auto& command : commands()) {
        CLI::App* sub = app.add_subcommand(command.name, command.description);
        // "--json" is accepted after the verb too, as documented for every subcommand.
        sub->add_flag("--json", global.json, "machine-readable output on stdout");
        sub->add_flag("-q,--quiet", global.quiet, "no progress bars");
        sub->add_option("--store", global.store, "run store file");
        sub->add_flag("--no-record", global.noRecord, "do not record this command's result");
        sub->add_flag("--partial", global.partial,
            "read a model with structure Day0 does not model; outputs list what was left out");
        runners.emplace_back(sub, command.setup(*sub, global));
    }

    applyOptionChecks(app);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        fmt::print(stderr, "day0: error: {}\n", e.what());
        fmt::print(stderr, "run 'day0 --help' for usage\n");
        return 2;
    }

    configureRecording(global, argc, argv);

    if (global.json) {
        // Keep stdout clean for the JSON document; diagnostics go to stderr only.
        day0::setLogLevel(day0::LogLevel::Warning);
    }
    for (auto& [sub, run] : runners) {
        if (sub->parsed()) {
            int code = 3;
            std::string writeError;
            try {
                code = run();
            } catch (const std::exception& e) {
                if (std::ferror(stdout) == 0) {
                    fmt::print(stderr, "day0: internal error: {}\n", e.what());
                    return 3;
                }
                // fmt::print throws when stdout cannot take the text: reported below.
                code = 2;
                writeError = e.what();
            }
            // Output that did not reach its file (a full disk, a closed pipe) is a failure,
            // not exit 0 with nothing written.
            errno = 0;
            if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
                const int error = errno;
                fmt::print(stderr, "day0: error: writing standard output: {}\n",
                    error != 0               ? std::string(std::strerror(error))
                        : writeError.empty() ? std::string("write failed")
                                             : writeError);
                return code == 0 ? 2 : code;
            }
            return code;
        }
    }
    return 2;
}
