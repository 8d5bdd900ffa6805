#include "command.h"

#include "history/recording.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

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

model::ReadOptions readOptions(const GlobalOptions& global)
{
    model::ReadOptions options;
    options.partial = global.partial;
    return options;
}

std::string partialBanner(const model::ModelSpec& spec)
{
    if (!spec.partial) {
        return {};
    }
    std::string out = fmt::format("PARTIAL reading of {}: Day0 does not model {} key(s) of its "
                                  "config; every figure below leaves them out:\n",
        spec.origin, spec.ignored.size());
    for (const auto& key : spec.ignored) {
        out += fmt::format("  - {}: {}\n", key.path, key.reason);
    }
    return out;
}

void addPartialJson(nlohmann::json& out, const model::ModelSpec& spec)
{
    nlohmann::json ignored = nlohmann::json::array();
    for (const auto& key : spec.ignored) {
        ignored.push_back({ { "path", key.path }, { "reason", key.reason } });
    }
    out["partial"] = spec.partial;
    out["ignored_keys"] = ignored;
}

std::optional<int> refusePartial(
    const std::string& verb, const std::string& modelArg, const GlobalOptions& global)
{
    if (!global.partial) {
        return std::nullopt;
    }
    auto spec = model::loadModel(modelArg, readOptions(global));
    if (!spec || !spec->partial) {
        // An exact reading (or an error the verb itself reports) needs no refusal.
        return std::nullopt;
    }
    std::string keys;
    for (const auto& key : spec->ignored) {
        keys += fmt::format("{}{} ({})", keys.empty() ? "" : ", ", key.path, key.reason);
    }
    return reportError(Error::badInput(fmt::format(
        "day0 {}: {} can only be read partially (Day0 does not model {}); {} needs an exact "
        "reading, so nothing is computed or written",
        verb, spec->origin, keys, verb)));
}

} // namespace day0::cli
