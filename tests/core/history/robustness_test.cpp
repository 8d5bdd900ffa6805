// Concurrent writers and writers killed at random moments must never corrupt the store nor lose
// a committed run.
#include "history/run_store.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <thread>

using namespace day0;
using namespace day0::history;
using day0::history::test::differenceFromSeed;
using day0::history::test::makeSeededRecord;
using day0::history::test::seedOf;
using day0::history::test::TempDir;

namespace {

constexpr std::size_t kRowsPerRun = 600;

// Every run in the store must be exactly what its seed says (no half-written run).
void expectEveryRunComplete(
    RunStore& store, std::size_t rows, std::set<std::uint64_t>* seeds = nullptr)
{
    auto runs = store.list();
    ASSERT_TRUE(runs.ok()) << runs.error().message;
    for (const RunInfo& info : *runs) {
        auto run = store.load(info.id);
        ASSERT_TRUE(run.ok()) << run.error().message;
        const auto seed = seedOf(info);
        EXPECT_EQ(differenceFromSeed(*run, seed, rows), "");
        if (seeds) {
            seeds->insert(seed);
        }
    }
}

// Writes `count` runs with seeds base+1..base+count from a child process, then exits.
[[noreturn]] void writeInChild(const std::filesystem::path& file, std::uint64_t base, int count)
{
    auto store = RunStore::open(file);
    if (!store) {
        std::fprintf(stderr, "child: %s\n", store.error().message.c_str());
        ::_exit(2);
    }
    for (int i = 1; i <= count; ++i) {
        auto id = store->commit(makeSeededRecord(base + std::uint64_t(i), kRowsPerRun));
        if (!id) {
            std::fprintf(stderr, "child: %s\n", id.error().message.c_str());
            ::_exit(3);
        }
    }
    ::_exit(0);
}

} // namespace

TEST(RunStoreConcurrency, ThreadsWritingAndReadingAtOnce)
{
    TempDir dir("threads");
    const auto file = dir / "runs.sqlite";
    constexpr int kWriters = 4;
    constexpr int kRunsEach = 15;
    std::atomic<bool> writing { true };
    std::atomic<int> failures { 0 };
    std::vector<std::string> errors(kWriters + 1);

    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w) {
        threads.emplace_back([&, w] {
            auto store = RunStore::open(file);
            if (!store) {
                errors[std::size_t(w)] = store.error().message;
                ++failures;
                return;
            }
            for (int i = 1; i <= kRunsEach; ++i) {
                auto id = store->commit(makeSeededRecord(std::uint64_t(w * 1000 + i), kRowsPerRun));
                if (!id) {
                    errors[std::size_t(w)] = id.error().message;
                    ++failures;
                    return;
                }
            }
        });
    }
    // A reader (the GUI refreshing its list) polls while the writers work.
    std::thread reader([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        auto store = RunStore::open(file);
        if (!store) {
            errors[kWriters] = store.error().message;
            ++failures;
            return;
        }
        while (writing) {
            auto runs = store->list();
            if (!runs) {
                errors[kWriters] = runs.error().message;
                ++failures;
                return;
            }
            if (!runs->empty()) {
                auto run = store->load(runs->front().id);
                if (!run || !differenceFromSeed(*run, seedOf(run->info), kRowsPerRun).empty()) {
                    errors[kWriters] = run ? "reader saw a partial run" : run.error().message;
                    ++failures;
                    return;
                }
            }
        }
    });
    for (auto& t : threads) {
        t.join();
    }
    writing = false;
    reader.join();
    for (const auto& e : errors) {
        EXPECT_EQ(e, "");
    }
    ASSERT_EQ(failures.load(), 0);

    auto store = RunStore::open(file);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(*store->count(), kWriters * kRunsEach);
    EXPECT_TRUE(store->checkIntegrity().ok());
    std::set<std::uint64_t> seeds;
    expectEveryRunComplete(*store, kRowsPerRun, &seeds);
    EXPECT_EQ(seeds.size(), std::size_t(kWriters * kRunsEach));
}

TEST(RunStoreConcurrency, ProcessesWritingAtOnce)
{
    TempDir dir("processes");
    const auto file = dir / "runs.sqlite";
    constexpr int kRunsEach = 20;
    std::vector<pid_t> children;
    for (int c = 0; c < 2; ++c) {
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            writeInChild(file, std::uint64_t(c + 1) * 100000, kRunsEach);
        }
        children.push_back(pid);
    }
    // The parent writes too, like the GUI while a CLI job records its run.
    {
        auto store = RunStore::open(file);
        ASSERT_TRUE(store.ok()) << store.error().message;
        for (int i = 1; i <= kRunsEach; ++i) {
            auto id = store->commit(makeSeededRecord(std::uint64_t(i), kRowsPerRun));
            ASSERT_TRUE(id.ok()) << id.error().message;
        }
    }
    for (const pid_t pid : children) {
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer process failed";
    }
    auto store = RunStore::open(file);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(*store->count(), 3 * kRunsEach);
    EXPECT_TRUE(store->checkIntegrity().ok());
    std::set<std::uint64_t> seeds;
    expectEveryRunComplete(*store, kRowsPerRun, &seeds);
    EXPECT_EQ(seeds.size(), std::size_t(3 * kRunsEach));
}

// A child writes runs (and deletes some) in a loop, telling the parent through a pipe after each
// commit; the parent kills it with SIGKILL at a random moment, many times over. Afterwards the
// store must pass SQLite's integrity check, hold every run whose commit returned, hold no run
// whose delete returned, and hold only complete runs.
TEST(RunStoreKill, KilledWritersNeverCorruptNorLoseCommittedRuns)
{
    TempDir dir("kill");
    const auto file = dir / "runs.sqlite";
    const unsigned seed = std::random_device()();
    SCOPED_TRACE(fmt::format("random seed {}", seed));
    std::mt19937 rng(seed);
    constexpr int kKills = 30;

    std::set<std::uint64_t> committed;
    std::set<std::uint64_t> deleted;
    std::set<std::uint64_t> deleting; // delete started, unknown whether it finished
    int killedWhileWriting = 0;

    for (int round = 0; round < kKills; ++round) {
        int fds[2];
        ASSERT_EQ(::pipe(fds), 0);
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::close(fds[0]);
            const auto say = [&](char what, std::uint64_t s) {
                const std::string line = fmt::format("{} {}\n", what, s);
                if (::write(fds[1], line.data(), line.size()) != ssize_t(line.size())) {
                    ::_exit(4);
                }
            };
            auto store = RunStore::open(file);
            if (!store) {
                std::fprintf(stderr, "child: %s\n", store.error().message.c_str());
                ::_exit(2);
            }
            std::vector<std::pair<std::uint64_t, RunId>> mine;
            for (std::uint64_t i = 1;; ++i) {
                const std::uint64_t s = std::uint64_t(round + 1) * 1'000'000 + i;
                const RunRecord record = makeSeededRecord(s, kRowsPerRun * 4);
                say('B', s);
                auto id = store->commit(record);
                if (!id) {
                    std::fprintf(stderr, "child: %s\n", id.error().message.c_str());
                    ::_exit(3);
                }
                say('C', s);
                mine.emplace_back(s, *id);
                if (i % 3 == 0) {
                    const auto [victim, victimId] = mine.front();
                    mine.erase(mine.begin());
                    say('d', victim);
                    if (!store->remove(victimId)) {
                        ::_exit(5);
                    }
                    say('D', victim);
                }
            }
        }
        ::close(fds[1]);
        // Let the writer commit a few runs (none in the first rounds, to also hit the creation
        // of the store and its schema), then kill it at a random moment of what follows.
        const int commitsToWait = round < 3 ? 0 : 1 + int(rng() % 3);
        std::string said;
        char buffer[4096];
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (std::count(said.begin(), said.end(), 'C') < commitsToWait
            && std::chrono::steady_clock::now() < deadline) {
            pollfd readable { fds[0], POLLIN, 0 };
            if (::poll(&readable, 1, 100) > 0) {
                const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
                if (n <= 0) {
                    break; // the writer died by itself; the status check below reports it
                }
                said.append(buffer, std::size_t(n));
            }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 40000));
        ASSERT_EQ(::kill(pid, SIGKILL), 0);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited by itself (status " << status << ")";

        for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) {
            said.append(buffer, std::size_t(n));
        }
        ::close(fds[0]);
        std::istringstream lines(said);
        char what = 0;
        std::uint64_t s = 0;
        char last = 0;
        while (lines >> what >> s) {
            last = what;
            if (what == 'C') {
                committed.insert(s);
            } else if (what == 'd') {
                deleting.insert(s);
            } else if (what == 'D') {
                deleting.erase(s);
                deleted.insert(s);
            }
        }
        // Killed after announcing a commit or a delete and before reporting it done.
        killedWhileWriting += (last == 'B' || last == 'd') ? 1 : 0;

        if (!std::filesystem::exists(file)) {
            continue; // killed before the store existed
        }
        auto store = RunStore::open(file);
        ASSERT_TRUE(store.ok()) << "round " << round << ": " << store.error().message;
        auto integrity = store->checkIntegrity();
        ASSERT_TRUE(integrity.ok()) << "round " << round << ": " << integrity.error().message;
        std::set<std::uint64_t> present;
        expectEveryRunComplete(*store, kRowsPerRun * 4, &present);
        for (const std::uint64_t c : committed) {
            if (!deleted.contains(c) && !deleting.contains(c)) {
                ASSERT_TRUE(present.contains(c))
                    << "round " << round << ": committed run " << c << " was lost";
            }
        }
        for (const std::uint64_t d : deleted) {
            ASSERT_FALSE(present.contains(d))
                << "round " << round << ": deleted run " << d << " came back";
        }
    }
    std::printf("killed %d writers, %d of them inside a transaction; %zu runs committed\n", kKills,
        killedWhileWriting, committed.size());
    EXPECT_GE(killedWhileWriting, kKills / 3) << "most kills should land inside a transaction";
    EXPECT_GE(committed.size(), std::size_t(kKills - 3))
        << "the writers should have committed runs";
}
