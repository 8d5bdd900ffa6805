// A child process for the CLI tests (day0 serve, day0 bench serve, a test endpoint, node): stdout
// and stderr in files, its URL read from what it prints, killed (SIGKILL) if still running at the
// end.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace day0::test {

class ChildProcess {
public:
    /// Runs `exe` (a bare name is looked up on PATH) with `args`.
    ChildProcess(const std::string& exe, const std::vector<std::string>& args,
        const std::filesystem::path& dir, const std::string& tag)
        : m_out(dir / (tag + ".out"))
        , m_err(dir / (tag + ".err"))
    {
        std::vector<std::string> argv { exe };
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
        if (posix_spawnp(&m_pid, exe.c_str(), &actions, nullptr, cargv.data(), environ) != 0) {
            m_pid = -1;
        }
        posix_spawn_file_actions_destroy(&actions);
    }
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess(ChildProcess&&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;
    ~ChildProcess()
    {
        if (m_pid > 0 && !m_status) {
            ::kill(m_pid, SIGKILL);
            int status = 0;
            ::waitpid(m_pid, &status, 0);
        }
    }
    /// Exit code (or 128 + signal), waiting at most `bound`; -1 when it did not end.
    int wait(std::chrono::seconds bound)
    {
        const auto deadline = std::chrono::steady_clock::now() + bound;
        int status = 0;
        while (!m_status && m_pid > 0) {
            if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
                m_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                break;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return m_status.value_or(-1);
    }
    /// The first http://127.0.0.1:PORT it prints within `bound`; empty when it prints none.
    std::string url(std::chrono::seconds bound)
    {
        const auto deadline = std::chrono::steady_clock::now() + bound;
        const std::regex printed(R"(http://127\.0\.0\.1:\d+)");
        while (m_pid > 0 && std::chrono::steady_clock::now() < deadline) {
            std::smatch m;
            const std::string text = out();
            if (std::regex_search(text, m, printed)) {
                return m[0];
            }
            if (wait(std::chrono::seconds(0)) >= 0) {
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return {};
    }
    void signal(int sig) const
    {
        if (m_pid > 0) {
            ::kill(m_pid, sig);
        }
    }
    [[nodiscard]] pid_t pid() const { return m_pid; }
    [[nodiscard]] std::string out() const { return read(m_out); }
    [[nodiscard]] std::string err() const { return read(m_err); }

private:
    static std::string read(const std::filesystem::path& p)
    {
        std::ifstream in(p);
        return { std::istreambuf_iterator<char>(in), {} };
    }
    std::filesystem::path m_out;
    std::filesystem::path m_err;
    pid_t m_pid = -1;
    std::optional<int> m_status;
};

} // namespace day0::test
