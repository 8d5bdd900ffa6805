#pragma once
// The harness of the day0 serve tests: a `day0 serve` process on loopback (port 0), requests to
// it through cpp-httplib, SSE parsing, /metrics scraping and the small models they run on.
#include "child_process.h"
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace day0::test {

namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string kTiny = std::string(DAY0_TEST_DATA_DIR) + "/exec/tiny-llama";

std::string readFile(const fs::path& p);

/// A day0 process (or `program`) with stdout and stderr in files; killed (SIGKILL) if still
/// running at the end.
class Process : public ChildProcess {
public:
    Process(const std::vector<std::string>& args, const fs::path& dir, const std::string& tag,
        const std::string& program = DAY0_CLI_PATH)
        : ChildProcess(program, args, dir, tag)
    {
    }
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
        url = process->url(std::chrono::seconds(120));
        if (!url.empty()) {
            port = std::stoi(url.substr(url.rfind(':') + 1));
            return;
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
