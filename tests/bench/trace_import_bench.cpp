// How fast traces import.
// 1. The 109k-event Kineto file A8 (hta_trace_diff_control.json.gz; goal < 0.5 s), against
//    inflating the same file with zlib (the floor for any importer of a .gz) and against Python's
//    gzip + json.load, all in this run. Without the shared reference folder a generated file of
//    the same size stands in.
// 2. A generated Kineto JSON of ten million events (~1 GB; DAY0_BENCH_QUICK: 200 000 events),
//    imported in a fresh child process so that its peak memory is its own (goals: < 30 s and
//    peak RSS < 3× the file size), against `python3 -c "json.load(...)"` on the same file, run
//    the same way (with an address-space limit so it cannot exhaust the machine).

#include "bench_support.h"
#include "profile/byte_source.h"
#include "profile/importer.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace day0;
using namespace day0::profile;

bool quick() { return std::getenv("DAY0_BENCH_QUICK") != nullptr; }

fs::path scratchDir() { return bench::scratchDir("trace_bench"); }

/// Writes a Kineto-style trace (current dialect: float µs relative to baseTimeNanoseconds, ac2g
/// flows) of about `events` events: per launch a cpu_op, a cudaLaunchKernel, its flow start and
/// end, and the kernel.
void generateKineto(const fs::path& path, std::size_t events)
{
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
        fmt::print(stderr, "cannot write {}\n", path.string());
        std::exit(1);
    }
    std::string out;
    out.reserve(1 << 21);
    out += R"({"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":0,"world_size":8},"traceEvents":[)";
    out += "\n";
    out += R"({"ph":"M","name":"process_labels","pid":0,"tid":0,"args":{"labels":"GPU 0"}},)";
    out += "\n";
    std::int64_t ts = 1000000000; // ns relative to the base
    std::size_t written = 0;
    for (std::uint64_t g = 1; written < events; ++g) {
        const unsigned op = unsigned(g % 97);
        const std::int64_t cpuStart = ts;
        const std::int64_t launch = ts + 2100 + std::int64_t(g % 7) * 10;
        const std::int64_t kernel = ts + 9000;
        const std::int64_t kdur = 1500 + std::int64_t(g % 40) * 125;
        auto us = [](std::int64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); };
        fmt::format_to(std::back_inserter(out),
            R"({{"ph":"X","cat":"cpu_op","name":"aten::op_{}","pid":4242,"tid":4242,"ts":{},"dur":{},"args":{{"External id":{}}}}},)"
            "\n",
            op, us(cpuStart), us(6000), g);
        fmt::format_to(std::back_inserter(out),
            R"({{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":4242,"tid":4242,"ts":{},"dur":{},"args":{{"External id":{},"cbid":211,"correlation":{}}}}},)"
            "\n",
            us(launch), us(3100), g, g);
        fmt::format_to(std::back_inserter(out),
            R"({{"ph":"s","id":{},"pid":4242,"tid":4242,"ts":{},"cat":"ac2g","name":"ac2g"}},)"
            "\n",
            g, us(launch));
        fmt::format_to(std::back_inserter(out),
            R"({{"ph":"f","id":{},"pid":0,"tid":7,"ts":{},"cat":"ac2g","name":"ac2g","bp":"e"}},)"
            "\n",
            g, us(kernel));
        fmt::format_to(std::back_inserter(out),
            R"j({{"ph":"X","cat":"kernel","name":"void at::native::kernel_{}<float>(float*)","pid":0,"tid":7,"ts":{},"dur":{},"args":{{"External id":{},"correlation":{},"grid":[{},1,1],"block":[256,1,1]}}}})j",
            op, us(kernel), us(kdur), g, g, 64 << (g % 6));
        written += 5;
        out += written < events ? ",\n" : "\n";
        ts += 12000;
        if (out.size() > (1 << 20)) {
            std::fwrite(out.data(), 1, out.size(), f);
            out.clear();
        }
    }
    out += R"(],"traceName":"generated","displayTimeUnit":"ms","baseTimeNanoseconds":1735632360000000000})";
    out += "\n";
    std::fwrite(out.data(), 1, out.size(), f);
    std::fclose(f);
}

/// The file the A8 figures use: the real A8 when the shared folder exists, else a stand-in.
const fs::path& a8File()
{
    static const fs::path path = [] {
        const char* env = std::getenv("DAY0_SHARED_DIR");
        const fs::path shared = env != nullptr ? env : DAY0_SHARED_DIR;
        const auto real
            = shared / "refdata" / "traces" / "kineto" / "hta_trace_diff_control.json.gz";
        std::error_code ec;
        if (fs::exists(real, ec)) {
            return real;
        }
        const auto plain = scratchDir() / "a8_standin.json";
        generateKineto(plain, 109123);
        const auto gz = scratchDir() / "a8_standin.json.gz";
        std::system(fmt::format("gzip -c '{}' > '{}'", plain.string(), gz.string()).c_str());
        return gz;
    }();
    return path;
}

void inflateA8(benchmark::State& state)
{
    std::vector<char> buf(1 << 20);
    for (auto _ : state) {
        auto src = ByteSource::open(a8File());
        std::size_t total = 0;
        while (true) {
            auto n = (*src)->read(buf.data(), buf.size());
            if (!n.ok() || *n == 0) {
                break;
            }
            total += *n;
        }
        benchmark::DoNotOptimize(total);
    }
}

void importA8(benchmark::State& state)
{
    std::size_t slices = 0;
    for (auto _ : state) {
        Progress progress;
        auto trace = importTrace(a8File(), {}, progress, {});
        if (!trace.ok()) {
            state.SkipWithError(trace.error().message.c_str());
            return;
        }
        slices = trace->sliceCount();
    }
    state.counters["slices"] = double(slices);
}

BENCHMARK(inflateA8)->Unit(benchmark::kMillisecond)->Iterations(5)->MeasureProcessCPUTime();
BENCHMARK(importA8)->Unit(benchmark::kMillisecond)->Iterations(5)->MeasureProcessCPUTime();

struct ChildRun {
    bool ok = false;
    double seconds = 0.0;
    double cpuSeconds = 0.0;
    double peakBytes = 0.0;
    std::string output;
};

/// Runs a program, waits for it, and reports its wall time, peak RSS and stdout.
ChildRun runChild(const std::vector<std::string>& argv)
{
    ChildRun r;
    int pipeFds[2];
    if (::pipe(pipeFds) != 0) {
        return r;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipeFds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipeFds[0]);
    std::vector<char*> args;
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    pid_t pid = 0;
    const auto started = std::chrono::steady_clock::now();
    const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipeFds[1]);
    if (rc != 0) {
        ::close(pipeFds[0]);
        return r;
    }
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(pipeFds[0], buf, sizeof buf)) > 0) {
        r.output.append(buf, std::size_t(n));
    }
    ::close(pipeFds[0]);
    int status = 0;
    rusage usage {};
    ::wait4(pid, &status, 0, &usage);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    r.peakBytes = double(usage.ru_maxrss) * 1024.0;
    r.cpuSeconds = double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
    r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    return r;
}

/// The 1-minute load average: wall times on a busy machine mostly measure the neighbours.
double loadAverage()
{
    double load = 0.0;
    if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &load) != 1) {
            load = 0.0;
        }
        std::fclose(f);
    }
    return load;
}

/// `trace_import_bench --import-child FILE`: import once, print slices and seconds.
int importChild(const char* file)
{
    const auto started = std::chrono::steady_clock::now();
    Progress progress;
    auto trace = importTrace(file, {}, progress, {});
    if (!trace.ok()) {
        fmt::print(stderr, "{}\n", trace.error().message);
        return 1;
    }
    const double seconds
        = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    fmt::print(
        "{} {} {} {}\n", trace->sliceCount(), trace->flowCount(), seconds, trace->memory().total());
    return 0;
}

std::string pythonLoad(const fs::path& file, bool gz, double limitBytes)
{
    return fmt::format("import json,gzip,resource,time\n"
                       "lim={}\n"
                       "resource.setrlimit(resource.RLIMIT_AS,(lim,lim))\n"
                       "t=time.perf_counter()\n"
                       "d=json.load({}('{}'{}))\n"
                       "print(len(d['traceEvents']),time.perf_counter()-t)\n",
        std::int64_t(limitBytes), gz ? "gzip.open" : "open", file.string(), gz ? ",'rt'" : "");
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 3 && std::string(argv[1]) == "--import-child") {
        return importChild(argv[2]);
    }
    day0::bench::BenchTimes times;
    day0::bench::runBenchmarks(
        argc, argv, [&](const day0::bench::BenchTimes& measured) { times = measured; });

    // Python may use ten times the file size; cap it (DAY0_BENCH_PYTHON_GB, default 12) so that
    // it fails instead of the machine.
    const char* limitEnv = std::getenv("DAY0_BENCH_PYTHON_GB");
    const double pythonLimit
        = (limitEnv != nullptr ? std::atof(limitEnv) : 12.0) * double(1ull << 30);
    const double importA8 = times.real("importA8");
    const double inflate = times.real("inflateA8");
    const auto pyA8 = runChild({ "python3", "-c", pythonLoad(a8File(), true, pythonLimit) });
    double pyA8Seconds = 0.0;
    std::sscanf(pyA8.output.c_str(), "%*s %lf", &pyA8Seconds);
    fmt::print("\nLoad average {:.1f} on {} CPUs (wall times include waiting for them).\n",
        loadAverage(), std::thread::hardware_concurrency());
    fmt::print(
        "{}: import {:.3f} s wall, {:.3f} s CPU{} = {:.2f}x inflating it with zlib ({:.3f} s){}\n",
        a8File().filename().string(), importA8, times.cpu("importA8"),
        importA8 < 0.5 ? " (goal < 0.5 s: met)" : " (goal < 0.5 s: MISSED)",
        inflate > 0 ? importA8 / inflate : 0.0, inflate,
        pyA8.ok ? fmt::format(
            ", {:.2f}x Python gzip+json.load ({:.3f} s)", importA8 / pyA8Seconds, pyA8Seconds)
                : std::string(", Python json.load unavailable"));

    const std::size_t events = quick() ? 200000 : 10000000;
    const fs::path big = scratchDir() / "generated.json";
    generateKineto(big, events);
    const double fileBytes = double(fs::file_size(big));
    const auto ours = runChild({ "/proc/self/exe", "--import-child", big.string() });
    std::size_t slices = 0;
    std::size_t flows = 0;
    double seconds = 0.0;
    double modelBytes = 0.0;
    std::sscanf(ours.output.c_str(), "%zu %zu %lf %lf", &slices, &flows, &seconds, &modelBytes);
    const auto py = runChild({ "python3", "-c", pythonLoad(big, false, pythonLimit) });
    double pySeconds = 0.0;
    std::sscanf(py.output.c_str(), "%*s %lf", &pySeconds);
    fmt::print("\nGenerated Kineto JSON: {} events, {:.2f} GB\n", events, fileBytes / 1e9);
    if (!ours.ok) {
        fmt::print("  import FAILED\n");
        return 1;
    }
    fmt::print("  import {:.2f} s wall, {:.2f} s CPU ({:.0f} MB/s, {:.2f} M events/s){}; {} "
               "slices, {} flows\n",
        seconds, ours.cpuSeconds, fileBytes / seconds / 1e6, double(events) / seconds / 1e6,
        seconds < 30.0 ? " (goal < 30 s: met)" : " (goal < 30 s: MISSED)", slices, flows);
    fmt::print("  peak RSS {:.2f} GB = {:.2f}x the file{}; trace model {:.1f} bytes per event\n",
        ours.peakBytes / 1e9, ours.peakBytes / fileBytes,
        ours.peakBytes < 3.0 * fileBytes ? " (goal < 3x: met)" : " (goal < 3x: MISSED)",
        modelBytes / double(events));
    if (py.ok) {
        fmt::print("  Python json.load: {:.2f} s wall, {:.2f} s CPU, peak RSS {:.2f} GB: we are "
                   "{:.1f}x faster "
                   "({:.1f}x in CPU time) with {:.1f}x less memory\n",
            pySeconds, py.cpuSeconds, py.peakBytes / 1e9, pySeconds / seconds,
            ours.cpuSeconds > 0 ? py.cpuSeconds / ours.cpuSeconds : 0.0,
            py.peakBytes / ours.peakBytes);
    } else {
        fmt::print("  Python json.load did not finish (needs more than {:.0f} GB, or python3 is "
                   "missing)\n",
            pythonLimit / (1ull << 30));
    }
    std::error_code ec;
    fs::remove_all(scratchDir(), ec);
    return 0;
}
