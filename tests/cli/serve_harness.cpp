#include "serve_harness.h"

#include <fstream>
#include <sstream>

namespace day0::test {

std::string readFile(const fs::path& p)
{
    std::ifstream in(p);
    return { std::istreambuf_iterator<char>(in), {} };
}

httplib::Result post(const Server& s, const std::string& path, const std::string& body)
{
    return s.client().Post(path.c_str(), body, "application/json");
}

std::vector<std::string> sseEvents(const std::string& body)
{
    std::vector<std::string> out;
    std::size_t start = 0;
    std::size_t end = 0;
    while ((end = body.find("\n\n", start)) != std::string::npos) {
        const std::string event = body.substr(start, end - start);
        if (event.rfind("data: ", 0) == 0) {
            out.push_back(event.substr(6));
        }
        start = end + 2;
    }
    return out;
}

std::vector<std::int64_t> runGreedy(const std::string& checkpoint, const std::string& ids, int n)
{
    const auto r = runDay0({ "run", checkpoint, "--ids", ids, "--tokens", std::to_string(n),
        "--json", "-q", "--no-record" });
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return r.json()["target"]["generated"].get<std::vector<std::int64_t>>();
}

json metricsOf(const Server& s)
{
    auto res = s.client().Get("/metrics");
    json m = json::object();
    if (!res) {
        return m;
    }
    std::istringstream in(res->body);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        const auto space = line.rfind(' ');
        m[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return m;
}

const std::string& slowModel()
{
    static const std::string path = [] {
        const std::string dir = scratchDir("serve_slow_model") + "/m";
        const auto r = runDay0({ "shrink", "llama-3.1-8b", "--layers", "4", "--hidden", "512",
            "--vocab", "4096", "--out", dir, "-q", "--no-record" });
        EXPECT_EQ(r.exitCode, 0) << r.err;
        return dir;
    }();
    return path;
}

namespace {

std::string utf8(std::uint32_t cp)
{
    std::string s;
    if (cp < 0x80) {
        s += char(cp);
    } else if (cp < 0x800) {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
    } else {
        s += char(0xE0 | (cp >> 12));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    }
    return s;
}

} // namespace

std::string tinyWithTokenizer(const std::string& name, const std::string& chatTemplate)
{
    const fs::path dir = fs::path(scratchDir(name)) / "tiny-text";
    fs::create_directories(dir);
    for (const auto* f : { "config.json", "model.safetensors" }) {
        fs::copy_file(fs::path(kTiny) / f, dir / f);
    }
    json vocab = json::object();
    int shifted = 0;
    for (std::uint32_t b = 0; b < 256; ++b) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        vocab[utf8(printable ? b : 256 + std::uint32_t(shifted++))] = b;
    }
    const json tok
        = { { "model", { { "type", "BPE" }, { "vocab", vocab }, { "merges", json::array() } } },
              { "pre_tokenizer", { { "type", "ByteLevel" }, { "add_prefix_space", false } } },
              { "decoder", { { "type", "ByteLevel" } } }, { "added_tokens", json::array() } };
    std::ofstream(dir / "tokenizer.json") << tok.dump();
    if (!chatTemplate.empty()) {
        std::ofstream(dir / "tokenizer_config.json") << json {
            { "chat_template", chatTemplate }, { "bos_token", "\u0001" }, { "eos_token", "\u0002" }
        }.dump();
    }
    return dir.string();
}

} // namespace day0::test
