#include "train/checkpoints.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/sha256.h"
#include "base/temp_output.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

namespace day0::train {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = { 'D', '0', 'T', 'R', 'S', 'H', 'D', '1' };
constexpr const char* kFormat = "day0-train-checkpoint";
constexpr int kVersion = 1;
constexpr std::size_t kPathBuffer = 4096;

template <typename T> void put(std::string& out, T value)
{
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    out.append(bytes, sizeof(T));
}

void putArray(std::string& out, const std::vector<double>& values)
{
    put<std::uint64_t>(out, values.size());
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
}

/// Reads fixed-size values from a byte string; the first short read names the field.
class Reader {
public:
    Reader(std::string_view bytes, std::string origin)
        : m_bytes(bytes)
        , m_origin(std::move(origin))
    {
    }

    template <typename T> Result<T> get(const char* field)
    {
        if (m_bytes.size() - m_pos < sizeof(T)) {
            return truncated(field);
        }
        T value;
        std::memcpy(&value, m_bytes.data() + m_pos, sizeof(T));
        m_pos += sizeof(T);
        return value;
    }

    Result<std::vector<double>> array(const char* field)
    {
        auto count = get<std::uint64_t>(field);
        if (!count) {
            return count.error();
        }
        if (*count > (m_bytes.size() - m_pos) / sizeof(double)) {
            return truncated(field);
        }
        std::vector<double> values(*count);
        std::memcpy(values.data(), m_bytes.data() + m_pos, *count * sizeof(double));
        m_pos += *count * sizeof(double);
        return values;
    }

    [[nodiscard]] bool atEnd() const { return m_pos == m_bytes.size(); }

private:
    Error truncated(const char* field) const
    {
        return Error::badInput(fmt::format(
            "{}: ends at byte {} inside the field '{}'", m_origin, m_bytes.size(), field));
    }

    std::string_view m_bytes;
    std::string m_origin;
    std::size_t m_pos = 0;
};

nlohmann::json historyJson(const std::vector<StepRecord>& history)
{
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : history) {
        steps.push_back({ { "step", s.step }, { "loss", s.loss }, { "grad_norm", s.gradNorm },
            { "lr", s.lr } });
    }
    return steps;
}

/// The checkpoint folders in `dir` ("step-" and a step number, as checkpointFolderName writes
/// them), oldest step first.
Result<std::vector<fs::path>> stepFolders(const fs::path& dir)
{
    std::vector<std::pair<std::int64_t, fs::path>> found;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const auto name = it->path().filename().string();
        std::int64_t step = -1;
        const char* first = name.data() + 5;
        const char* last = name.data() + name.size();
        if (name.rfind("step-", 0) != 0 || name.size() == 5
            || std::from_chars(first, last, step).ptr != last || step < 0
            || !it->is_directory(ec)) {
            continue;
        }
        found.emplace_back(step, it->path());
    }
    if (ec) {
        return Error::badInput(
            fmt::format("{}: cannot list the checkpoints: {}", displayPath(dir), ec.message()));
    }
    std::sort(found.begin(), found.end());
    std::vector<fs::path> out;
    for (auto& f : found) {
        out.push_back(std::move(f.second));
    }
    return out;
}

/// Rank 0's part of save(): history, digests, manifest, rename, pruning.
Result<void> finishOnRankZero(TempOutput& out, const fs::path& target, const CheckpointMeta& meta,
    const std::vector<StepRecord>& history, int keepLast)
{
    const fs::path temp = out.path();
    DAY0_TRY(writeFileAtomic(temp / "history.json", dumpJson(historyJson(history))));
    nlohmann::json files = nlohmann::json::object();
    std::vector<std::string> names { "history.json" };
    for (int r = 0; r < meta.worldSize; ++r) {
        names.push_back(shardFileName(r));
    }
    for (const auto& name : names) {
        auto digest = sha256File(temp / name, nullptr);
        if (!digest) {
            return digest.error();
        }
        std::error_code sizeError;
        const auto bytes = fs::file_size(temp / name, sizeError);
        if (sizeError) {
            return Error::badInput(fmt::format(
                "{}: cannot read its size: {}", displayPath(temp / name), sizeError.message()));
        }
        files[name] = { { "sha256", *digest }, { "bytes", bytes } };
    }
    const nlohmann::json manifest { { "format", kFormat }, { "version", kVersion },
        { "step", meta.step }, { "world_size", meta.worldSize },
        { "configuration", meta.configuration }, { "files", files } };
    DAY0_TRY(writeFileAtomic(temp / "manifest.json", dumpJson(manifest, 1)));
    // A resumed run rewrites a step an interrupted one wrote (possibly corrupt): the name
    // always holds a complete checkpoint or none.
    DAY0_TRY(out.moveOver(target));
    std::error_code ec;
    // Keep the newest keepLast.
    auto all = stepFolders(target.parent_path());
    if (!all) {
        return all.error();
    }
    for (std::size_t i = 0; i + std::size_t(std::max(keepLast, 1)) < all->size(); ++i) {
        fs::remove_all((*all)[i], ec);
    }
    return success();
}

/// Why `folder` is not a usable checkpoint, or nothing when it is.
Result<std::optional<std::string>> validate(
    const fs::path& folder, const CheckpointMeta& expected, FoundCheckpoint& found)
{
    const auto name = folder.filename().string();
    auto manifest = readJsonFile(folder / "manifest.json");
    if (!manifest) {
        return std::optional<std::string>(manifest.error().message);
    }
    const auto& m = *manifest;
    if (!m.is_object() || m.value("format", "") != kFormat || m.value("version", 0) != kVersion
        || !m.contains("files") || !m["files"].is_object() || !m.contains("step")
        || !m["step"].is_number_integer()) {
        return std::optional<std::string>(
            fmt::format("{}/manifest.json: not a {} version {} manifest", name, kFormat, kVersion));
    }
    if (m.value("configuration", "") != expected.configuration
        || m.value("world_size", 0) != expected.worldSize) {
        return Error::badInput(fmt::format("{}: written by another configuration ({} on {} ranks) "
                                           "than this run's ({} on {} ranks); resharding a "
                                           "checkpoint is not modelled",
            displayPath(folder), m.value("configuration", "?"), m.value("world_size", 0),
            expected.configuration, expected.worldSize));
    }
    std::vector<std::string> names { "history.json" };
    for (int r = 0; r < expected.worldSize; ++r) {
        names.push_back(shardFileName(r));
    }
    for (const auto& file : names) {
        if (!m["files"].contains(file)) {
            return std::optional<std::string>(
                fmt::format("{}/manifest.json lists no {}", name, file));
        }
        const auto& entry = m["files"][file];
        const std::string want = entry.value("sha256", "");
        std::error_code ec;
        const auto size = fs::file_size(folder / file, ec);
        if (ec) {
            return std::optional<std::string>(fmt::format("{}/{}: {}", name, file, ec.message()));
        }
        if (size != entry.value("bytes", std::uintmax_t(0))) {
            return std::optional<std::string>(fmt::format("{}/{}: {} bytes but the manifest "
                                                          "records {}",
                name, file, size, entry.value("bytes", std::uintmax_t(0))));
        }
        auto digest = sha256File(folder / file, nullptr);
        if (!digest) {
            return std::optional<std::string>(digest.error().message);
        }
        if (*digest != want) {
            return std::optional<std::string>(fmt::format(
                "{}/{}: SHA-256 {} but the manifest records {}", name, file, *digest, want));
        }
    }
    auto history = readJsonFile(folder / "history.json");
    if (!history) {
        return std::optional<std::string>(history.error().message);
    }
    found.folder = folder;
    found.meta = expected;
    found.meta.step = m["step"].get<std::int64_t>();
    found.history.clear();
    try {
        for (const auto& s : *history) {
            found.history.push_back({ s.at("step").get<std::int64_t>(), s.at("loss").get<double>(),
                s.at("grad_norm").get<double>(), s.at("lr").get<double>() });
        }
    } catch (const nlohmann::json::exception& e) {
        return std::optional<std::string>(
            fmt::format("{}/history.json: {}", name, jsonErrorText(e)));
    }
    if (std::int64_t(found.history.size()) != found.meta.step) {
        return std::optional<std::string>(fmt::format("{}/history.json: {} steps for a checkpoint "
                                                      "after step {}",
            name, found.history.size(), found.meta.step));
    }
    return std::optional<std::string>();
}

} // namespace

std::string checkpointFolderName(std::int64_t step) { return fmt::format("step-{:08d}", step); }

std::string shardFileName(int rank) { return fmt::format("rank-{:05d}.bin", rank); }

std::string encodeShard(const RankShard& s)
{
    std::string out(kMagic, sizeof(kMagic));
    put<std::int64_t>(out, s.step);
    put<std::int32_t>(out, s.rank);
    put<std::int64_t>(out, s.shardBegin);
    putArray(out, s.master);
    putArray(out, s.expAvg);
    putArray(out, s.expAvgSq);
    putArray(out, s.residual);
    return out;
}

Result<RankShard> decodeShard(std::string_view bytes, const std::string& origin)
{
    if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
        return Error::badInput(fmt::format("{}: not a Day0 training shard (bad magic)", origin));
    }
    Reader in(bytes.substr(sizeof(kMagic)), origin);
    RankShard s;
    auto step = in.get<std::int64_t>("step");
    auto rank = in.get<std::int32_t>("rank");
    auto begin = in.get<std::int64_t>("shard_begin");
    if (!step || !rank || !begin) {
        return !step ? step.error() : (!rank ? rank.error() : begin.error());
    }
    s.step = *step;
    s.rank = *rank;
    s.shardBegin = *begin;
    for (auto [field, target] :
        { std::pair { "master", &s.master }, std::pair { "exp_avg", &s.expAvg },
            std::pair { "exp_avg_sq", &s.expAvgSq }, std::pair { "residual", &s.residual } }) {
        auto values = in.array(field);
        if (!values) {
            return values.error();
        }
        *target = std::move(*values);
    }
    if (!in.atEnd()) {
        return Error::badInput(fmt::format("{}: bytes after the last field", origin));
    }
    if (s.expAvg.size() != s.master.size() || s.expAvgSq.size() != s.master.size()) {
        return Error::badInput(fmt::format("{}: {} weights but {} and {} moments", origin,
            s.master.size(), s.expAvg.size(), s.expAvgSq.size()));
    }
    return s;
}

CheckpointStore::CheckpointStore(fs::path dir, int keepLast)
    : m_dir(std::move(dir))
    , m_keepLast(keepLast)
{
}

Result<void> CheckpointStore::save(comm::Communicator& comm, const RankShard& shard,
    const CheckpointMeta& meta, const std::vector<StepRecord>& history) const
{
    const fs::path target = m_dir / checkpointFolderName(meta.step);
    std::array<char, kPathBuffer> pathBytes {};
    Result<TempOutput> temp = Error::internal("no temporary on this rank");
    std::string failure;
    if (comm.rank() == 0) {
        std::error_code ec;
        fs::create_directories(m_dir, ec);
        temp = TempOutput::create(target, TempOutput::Kind::Folder);
        if (!temp) {
            failure = temp.error().message;
        } else if (temp->path().string().size() >= kPathBuffer) {
            failure = fmt::format("{}: path too long", displayPath(temp->path()));
        } else {
            std::memcpy(pathBytes.data(), temp->path().c_str(), temp->path().string().size());
        }
    }
    // An empty name tells every rank that rank 0 could not create the folder.
    DAY0_TRY(comm.broadcast(pathBytes.data(), pathBytes.size(), DType::U8, 0));
    const fs::path folder(std::string(pathBytes.data()));
    if (folder.empty()) {
        return Error::badInput(comm.rank() == 0
                ? failure
                : fmt::format("{}: rank 0 could not create the checkpoint", displayPath(target)));
    }
    DAY0_TRY(writeFileAtomic(folder / shardFileName(comm.rank()), encodeShard(shard)));
    DAY0_TRY(comm.barrier());
    if (comm.rank() == 0) {
        DAY0_TRY(finishOnRankZero(*temp, target, meta, history, m_keepLast));
    }
    return comm.barrier();
}

Result<std::optional<FoundCheckpoint>> CheckpointStore::findNewestValid(
    const CheckpointMeta& expected, std::vector<std::string>& notes) const
{
    std::error_code ec;
    if (!fs::is_directory(m_dir, ec)) {
        return std::optional<FoundCheckpoint>();
    }
    auto all = stepFolders(m_dir);
    if (!all) {
        return all.error();
    }
    std::reverse(all->begin(), all->end());
    for (const auto& folder : *all) {
        FoundCheckpoint found;
        auto why = validate(folder, expected, found);
        if (!why) {
            return why.error();
        }
        if (!why->has_value()) {
            return std::optional<FoundCheckpoint>(std::move(found));
        }
        notes.push_back(fmt::format("checkpoint {} refused: {}; falling back to an older one",
            folder.filename().string(), **why));
    }
    return std::optional<FoundCheckpoint>();
}

Result<RankShard> CheckpointStore::loadShard(const FoundCheckpoint& found, int rank) const
{
    const auto path = found.folder / shardFileName(rank);
    auto bytes = readFile(path);
    if (!bytes) {
        return bytes.error();
    }
    auto shard = decodeShard(*bytes, displayPath(path));
    if (!shard) {
        return shard.error();
    }
    if (shard->rank != rank || shard->step != found.meta.step) {
        return Error::badInput(fmt::format("{}: holds rank {} after step {}, expected rank {} "
                                           "after step {}",
            displayPath(path), shard->rank, shard->step, rank, found.meta.step));
    }
    return shard;
}

} // namespace day0::train
