#pragma once
// The harness of the day0 serve tests: a `day0 serve` process on loopback (port 0), requests to
// it through cpp-httplib, SSE parsing, /metrics scraping and the small models they run on.
#include "cli_runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace day0::test {

namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

std::string readFile(const fs::path& p);

/// A day0 process with stdout and stderr in files; killed (SIGKILL) if still running at the end.
class Process {
public:
    /// Runs `program` (day0 by default; a bare name is looked up on PATH) with `args`.
    Process(const std::vector<std::string>& args, const fs::path& dir, const std::string& tag,
        const std::string& program = DAY0_CLI_PATH)
        : m_out(dir / (tag + ".out"))
        , m_err(dir / (tag + ".err"))
    {
        std::vector<std::string> argv { program };
        argv.insert(argv.end(), args.begin(), args.end());
        std::vector<char*> cargv;
        for (auto& a : argv) {
            cargv.push_back(a.data());
        }
        cargv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(
            &actions, 1, m_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(
            &actions, 2, m_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (posix_spawnp(&m_pid, program.c_str(), &actions, nullptr, cargv.data(), environ) != 0) {
            m_pid = -1;
        }
        posix_spawn_file_actions_destroy(&actions);
    }
    ~Process()
    {
        if (m_pid > 0 && !m_status) {
            ::kill(m_pid, SIGKILL);
            int status = 0;
            ::waitpid(m_pid, &status, 0);
        }
    }
    void signal(int sig) const { ::kill(m_pid, sig); }
    /// Exit code (or 128 + signal), waiting at most `bound`; -1 when it did not end.
    int wait(std::chrono::seconds bound)
    {
        const auto deadline = std::chrono::steady_clock::now() + bound;
        int status = 0;
        while (!m_status) {
            if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
                m_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                break;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return *m_status;
    }
    [[nodiscard]] std::string out() const { return readFile(m_out); }
    [[nodiscard]] std::string err() const { return readFile(m_err); }
    [[nodiscard]] pid_t pid() const { return m_pid; }

private:
    fs::path m_out;
    fs::path m_err;
    pid_t m_pid = -1;
    std::optional<int> m_status;
};

/// `day0 serve CKPT --port 0 ...`, and the port it printed.
struct Server {
    std::unique_ptr<Process> process;
    int port = 0;
    std::string url;

    Server(const std::string& checkpoint, const fs::path& dir, std::vector<std::string> extra = {})
    {
        std::vector<std::string> args { "serve", checkpoint, "--port", "0", "-q", "--no-record" };
        args.insert(args.end(), extra.begin(), extra.end());
        process = std::make_unique<Process>(args, dir, "serve");
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        const std::regex printed(R"(http://127\.0\.0\.1:(\d+))");
        while (std::chrono::steady_clock::now() < deadline) {
            std::smatch m;
            const std::string out = process->out();
            if (std::regex_search(out, m, printed)) {
                port = std::stoi(m[1]);
                url = m[0];
                return;
            }
            if (process->wait(std::chrono::seconds(0)) >= 0) {
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ADD_FAILURE() << "day0 serve printed no URL: " << process->out() << process->err();
    }
    [[nodiscard]] httplib::Client client() const
    {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(120, 0);
        return c;
    }
};

httplib::Result post(const Server& s, const std::string& path, const std::string& body);

/// The events of an SSE body ("data: ..." payloads, in order).
std::vector<std::string> sseEvents(const std::string& body);

/// `day0 run CKPT --ids IDS --tokens N`'s greedy tokens.
std::vector<std::int64_t> runGreedy(const std::string& checkpoint, const std::string& ids, int n);

/// /metrics as {"series{labels}": value}.
json metricsOf(const Server& s);

/// A model slow enough (tens of ms per token here) that requests overlap: llama-3.1-8b shrunk to
/// 4 layers of width 512, made once per test run.
const std::string& slowModel();

template <typename Pred> bool waitFor(Pred pred, std::chrono::seconds bound)
{
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < deadline) {
        if (pred()) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

/// tiny-llama with a byte-level BPE tokenizer of its 256 ids (one per byte, in GPT-2's
/// byte-to-unicode alphabet, no merges) and, when `chatTemplate` is not empty, a
/// tokenizer_config.json with that chat template, bos_token "\x01" and eos_token "\x02".
std::string tinyWithTokenizer(const std::string& name, const std::string& chatTemplate = {});

} // namespace day0::test
