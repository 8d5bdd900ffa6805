#pragma once

// What every <name>_bench.cpp shares: a console reporter that prints the usual table and records
// each run's times, and a main that runs the benchmarks with it and then calls the bench's
// summary, which prints its figures as ratios to a baseline measured in the same run.

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace day0::bench {

/// One run's adjusted times per iteration, in seconds whatever the benchmark's unit.
struct BenchTime {
    double real = 0.0;
    double cpu = 0.0;
};

/// Every run's times, by name.
struct BenchTimes {
    /// By the full benchmark_name(), e.g. "hashFiles/4/real_time".
    std::map<std::string, BenchTime> byName;
    /// By the part of the name before the first '/', e.g. "hashFiles" (the last run wins).
    std::map<std::string, BenchTime> byFamily;

    /// The times of `name`, a full name or the part before the first '/'; zero if it did not run.
    [[nodiscard]] BenchTime find(const std::string& name) const
    {
        if (const auto it = byName.find(name); it != byName.end()) {
            return it->second;
        }
        if (const auto it = byFamily.find(name); it != byFamily.end()) {
            return it->second;
        }
        return {};
    }
    [[nodiscard]] double real(const std::string& name) const { return find(name).real; }
    [[nodiscard]] double cpu(const std::string& name) const { return find(name).cpu; }
};

/// Prints the usual table, records every run's times and, once all ran, calls the summary.
class RatioReporter : public benchmark::ConsoleReporter {
public:
    explicit RatioReporter(std::function<void(const BenchTimes&)> summary)
        : ConsoleReporter(::isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular)
        , m_summary(std::move(summary))
    {
    }

    void ReportRuns(const std::vector<Run>& runs) override
    {
        ConsoleReporter::ReportRuns(runs);
        for (const auto& run : runs) {
            const double toSeconds = 1.0 / benchmark::GetTimeUnitMultiplier(run.time_unit);
            const BenchTime time { run.GetAdjustedRealTime() * toSeconds,
                run.GetAdjustedCPUTime() * toSeconds };
            const std::string name = run.benchmark_name();
            m_times.byName[name] = time;
            m_times.byFamily[name.substr(0, name.find('/'))] = time;
        }
    }

    void Finalize() override
    {
        ConsoleReporter::Finalize();
        if (m_summary) {
            m_summary(m_times);
        }
    }

private:
    std::function<void(const BenchTimes&)> m_summary;
    BenchTimes m_times;
};

/// Runs the benchmarks named on the command line (all by default) with a RatioReporter that
/// calls `summary` after the table.
inline int runBenchmarks(int argc, char** argv, std::function<void(const BenchTimes&)> summary)
{
    benchmark::Initialize(&argc, argv);
    RatioReporter reporter(std::move(summary));
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    return 0;
}

/// Stops a benchmark whose setup or measured work went wrong: its figures would mean nothing.
[[noreturn]] inline void fail(const char* bench, const std::string& what)
{
    fmt::print(stderr, "{}: {}\n", bench, what);
    std::abort();
}

/// An empty folder for this benchmark process under the temporary directory
/// (day0_<bench>_<pid>), made on first use and removed at exit.
inline const std::filesystem::path& scratchDir(const char* bench)
{
    static const std::filesystem::path dir = [bench] {
        auto path
            = std::filesystem::temp_directory_path() / fmt::format("day0_{}_{}", bench, ::getpid());
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(dir, ec);
        });
        return path;
    }();
    return dir;
}

} // namespace day0::bench
