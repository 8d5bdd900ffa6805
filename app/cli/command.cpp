#include "command.h"

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

void printWarning(const std::string& message)
{
    fmt::print(stderr, "day0: warning: {}\n", message);
}

} // namespace day0::cli
