#include "command.h"

#include "history/recording.h"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>

namespace day0::cli {

namespace {

    std::vector<Command>& registry()
    {
        static std::vector<Command> list;
        return list;
    }

} // namespace

bool registerCommand(Command command)
{
    registry().push_back(std::move(command));
    return true;
}

const std::vector<Command>& commands()
{
    auto& list = registry();
    std::stable_sort(list.begin(), list.end(),
        [](const Command& a, const Command& b) { return a.order < b.order; });
    return list;
}

int reportError(const Error& error)
{
    fmt::print(stderr, "day0: error: {}\n", error.message);
    return exitCodeFor(error);
}

void configureRecording(const GlobalOptions& global, int argc, char** argv)
{
    std::string commandLine = "day0";
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg.empty() || arg.find_first_of(" \t\"'$\\") != std::string::npos) {
            std::string quoted = "'";
            for (const char c : arg) {
                quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
            }
            arg = quoted + "'";
        }
        commandLine += " " + arg;
    }
    history::setRecordingOptions({ global.store, !global.noRecord, DAY0_VERSION, commandLine });
}

std::optional<RunId> recordResult(const history::RunRecord& record)
{
    auto id = history::recordRun(record);
    if (!id) {
        printWarning("the run was not recorded: " + id.error().message);
        return std::nullopt;
    }
    return *id;
}

void printWarning(const std::string& message)
{
    fmt::print(stderr, "day0: warning: {}\n", message);
}

} // namespace day0::cli
