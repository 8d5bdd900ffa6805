#include "cli_runner.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace day0::test {

namespace {

std::string shellQuote(const std::string& s)
{
    std::string out = "'";
    for (const char c : s) {
        if (c == '\'') {
            out += "'\\''";
        } else {
            out += c;
        }
    }
    return out + "'";
}

} // namespace

std::string scratchDir(const std::string& name)
{
    const auto dir
        = std::filesystem::temp_directory_path() / fmt::format("day0_cli_{}_{}", name, ::getpid());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir.string();
}

CliResult runDay0(const std::vector<std::string>& args)
{
    const auto errFile
        = std::filesystem::temp_directory_path() / fmt::format("day0_cli_err_{}", ::getpid());
    const auto store = std::filesystem::temp_directory_path()
        / fmt::format("day0_cli_store_{}.sqlite", ::getpid());
    std::string cmd
        = fmt::format("DAY0_STORE={} {}", shellQuote(store.string()), shellQuote(DAY0_CLI_PATH));
    for (const auto& a : args) {
        cmd += " " + shellQuote(a);
    }
    cmd += " 2>" + shellQuote(errFile.string());
    CliResult result;
    FILE* pipe = ::popen(cmd.c_str(), "r");
    if (!pipe) {
        return result;
    }
    std::array<char, 65536> buffer {};
    std::size_t n = 0;
    while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
        result.out.append(buffer.data(), n);
    }
    const int status = ::pclose(pipe);
    result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream err(errFile);
    std::stringstream ss;
    ss << err.rdbuf();
    result.err = ss.str();
    std::filesystem::remove(errFile);
    return result;
}

std::set<std::string> captureNames(const std::string& dump)
{
    std::ifstream in(dump + "/dump.json");
    const auto j = nlohmann::json::parse(in);
    std::set<std::string> names;
    for (const auto& c : j["captures"]) {
        names.insert(c["name"].get<std::string>());
    }
    return names;
}

std::size_t routingCaptures(const std::set<std::string>& names)
{
    std::size_t routing = 0;
    for (const auto& name : names) {
        routing += name.starts_with("model.layers.") && !name.ends_with("#grad") ? 1 : 0;
    }
    return routing;
}

} // namespace day0::test
