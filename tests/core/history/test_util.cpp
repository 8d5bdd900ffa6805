#include "test_util.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

namespace day0::history::test {

TempDir::TempDir(const std::string& name)
    : m_path(std::filesystem::temp_directory_path()
        / fmt::format("day0_history_{}_{}_{}", name, ::getpid(), std::random_device()()))
{
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
}

TempDir::~TempDir()
{
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
}

RunRecord makeSeededRecord(std::uint64_t seed, std::size_t layerRows)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    RunRecord record(RunKind(seed % 6));
    record.info.label = fmt::format("seed:{}", seed);
    record.info.status = RunStatus(seed % 4);
    record.info.modelName = fmt::format("model-{}", seed % 5);
    record.info.modelFingerprint = fmt::format("{:016x}", rng());
    record.info.plan = fmt::format("tp={},pp={}", 1 << (seed % 4), 1 + seed % 3);
    record.info.precision = seed % 2 ? "bf16" : "fp8";
    record.info.backend = "cpu-reference";
    record.info.host = "test-host";
    record.info.softwareVersion = "0.1.0";
    record.info.duration = Seconds(unit(rng) * 100.0);
    record.addMetric("tokens_per_s", unit(rng) * 1000.0, "tok/s");
    record.addMetric("max_rel_err", unit(rng), "");
    record.setProperty("cluster", "h200:4x8");
    for (int rank = 0; rank < 4; ++rank) {
        record.addMemory(rank, rank / 2, "weights", Bytes(std::int64_t(rng() % (1ULL << 40))));
        record.addMemory(rank, rank / 2, "kv_cache", Bytes(std::int64_t(rng() % (1ULL << 36))));
    }
    record.addArtifact({ "dump", fmt::format("/dumps/{}", seed), Bytes(std::int64_t(seed)), "" });
    record.events.push_back(
        { Timestamp(std::chrono::microseconds(1'700'000'000'000'000LL + std::int64_t(seed))),
            LogLevel::Info, fmt::format("event of {}", seed) });
    const char* subModules[] = { "self_attn.q_proj", "self_attn", "mlp", "" };
    record.layers.reserve(layerRows);
    for (std::size_t i = 0; i < layerRows; ++i) {
        const std::size_t layer = i / 8;
        const char* sub = subModules[(i / 2) % 4];
        const std::string anchor = *sub ? fmt::format("model.layers.{}.{}", layer, sub)
                                        : fmt::format("model.layers.{}", layer);
        record.layers.add(anchor, i % 2 ? "rel_l2" : "max_abs", unit(rng));
    }
    return record;
}

std::uint64_t seedOf(const RunInfo& info)
{
    if (info.label.rfind("seed:", 0) != 0) {
        return 0;
    }
    return std::stoull(info.label.substr(5));
}

std::string differenceFromSeed(const RunRecord& stored, std::uint64_t seed, std::size_t layerRows)
{
    const RunRecord expected = makeSeededRecord(seed, layerRows);
    const RunInfo& a = stored.info;
    const RunInfo& b = expected.info;
    if (a.kind != b.kind || a.status != b.status || a.label != b.label || a.modelName != b.modelName
        || a.modelFingerprint != b.modelFingerprint || a.plan != b.plan
        || a.precision != b.precision || a.duration != b.duration) {
        return fmt::format("run {}: header differs", a.label);
    }
    if (stored.metrics.size() != expected.metrics.size()
        || stored.memory.size() != expected.memory.size()
        || stored.artifacts.size() != expected.artifacts.size()
        || stored.events.size() != expected.events.size()
        || stored.properties.size() != expected.properties.size()) {
        return fmt::format("run {}: child row counts differ", a.label);
    }
    for (std::size_t i = 0; i < expected.metrics.size(); ++i) {
        if (stored.metrics[i].name != expected.metrics[i].name
            || stored.metrics[i].value != expected.metrics[i].value) {
            return fmt::format("run {}: metric {} differs", a.label, i);
        }
    }
    for (std::size_t i = 0; i < expected.memory.size(); ++i) {
        if (stored.memory[i].bytes != expected.memory[i].bytes
            || stored.memory[i].component != expected.memory[i].component) {
            return fmt::format("run {}: memory entry {} differs", a.label, i);
        }
    }
    if (stored.layers.size() != expected.layers.size()) {
        return fmt::format("run {}: {} layer rows stored, {} written", a.label,
            stored.layers.size(), expected.layers.size());
    }
    for (std::size_t i = 0; i < expected.layers.size(); ++i) {
        if (stored.layers.anchor(i) != expected.layers.anchor(i)
            || stored.layers.metric(i) != expected.layers.metric(i)
            || stored.layers.row(i).value != expected.layers.row(i).value) {
            return fmt::format("run {}: layer row {} differs", a.label, i);
        }
    }
    return {};
}

std::string fileBytes(const std::filesystem::path& file)
{
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace day0::history::test
