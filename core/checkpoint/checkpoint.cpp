#include "checkpoint/checkpoint.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/mapped_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

namespace day0::checkpoint {

namespace fs = std::filesystem;

struct Checkpoint::Files {
    std::map<std::string, SafetensorsFile, std::less<>> safetensors;
    std::optional<GgufFile> gguf;
};

namespace {

bool hasExtension(const fs::path& path, std::string_view ext)
{
    auto e = path.extension().string();
    std::transform(
        e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return e == ext;
}

/// Regular, non-hidden files of `dir` whose names satisfy `pred`, sorted.
template <typename Pred> std::vector<std::string> filesIn(const fs::path& dir, Pred pred)
{
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const auto name = entry.path().filename().string();
        if (!name.empty() && name.front() != '.' && entry.is_regular_file(ec)
            && pred(entry.path())) {
            out.push_back(name);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// True if the bytes look like a torch.save file: a zip archive or a raw pickle stream.
bool looksLikePickle(std::span<const std::byte> head)
{
    if (head.size() >= 4 && std::memcmp(head.data(), "PK\x03\x04", 4) == 0) {
        return true;
    }
    // Pickle protocol 2-5 streams start with PROTO (0x80) and the protocol number.
    return head.size() >= 2 && std::to_integer<unsigned>(head[0]) == 0x80
        && std::to_integer<unsigned>(head[1]) >= 2 && std::to_integer<unsigned>(head[1]) <= 5;
}

} // namespace

std::string_view checkpointFormatName(CheckpointFormat format)
{
    switch (format) {
    case CheckpointFormat::Safetensors:
        return "safetensors";
    case CheckpointFormat::ShardedSafetensors:
        return "sharded safetensors";
    case CheckpointFormat::SafetensorsFolder:
        return "safetensors folder";
    case CheckpointFormat::RankShards:
        return "per-rank shards";
    case CheckpointFormat::Gguf:
        return "gguf";
    }
    return "?";
}

bool isPickleName(const fs::path& path)
{
    for (const auto* ext : { ".bin", ".pt", ".pth", ".ckpt", ".pkl" }) {
        if (hasExtension(path, ext)) {
            return true;
        }
    }
    return false;
}

Error pickleRefusal(const fs::path& path)
{
    const auto shown = displayPath(path);
    const auto stem = path.stem().string();
    return Error::unsupported(fmt::format(
        "{}: PyTorch pickle checkpoints are never loaded (unpickling can run arbitrary code); "
        "convert it to safetensors first, e.g. python3 -c \"import torch; from safetensors.torch "
        "import save_file; sd = torch.load('{}', map_location='cpu', weights_only=True); "
        "save_file({{k: v.contiguous() for k, v in sd.items()}}, '{}.safetensors')\" (for a "
        "Hugging "
        "Face folder: AutoModelForCausalLM.from_pretrained(dir).save_pretrained(out, "
        "safe_serialization=True))",
        shown, shown, stem));
}

Checkpoint::Checkpoint()
    : m_open(std::make_unique<Files>())
{
}
Checkpoint::~Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;

Result<Checkpoint> Checkpoint::open(const fs::path& path)
{
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        return Error::badInput(fmt::format("{}: no such file or folder", displayPath(path)));
    }
    Checkpoint ckpt;
    if (!fs::is_directory(path, ec)) {
        ckpt.m_root = path.has_parent_path() ? path.parent_path() : fs::path(".");
        const auto name = path.filename().string();
        if (isPickleName(path)) {
            return pickleRefusal(path);
        }
        auto mapped = MappedFile::open(path);
        if (!mapped) {
            return mapped.error();
        }
        const auto head = mapped->bytes().first(std::min<std::size_t>(mapped->size(), 8));
        if (hasGgufMagic(head)) {
            auto gguf = GgufFile::open(path);
            if (!gguf) {
                return gguf.error();
            }
            ckpt.m_format = CheckpointFormat::Gguf;
            ckpt.m_files = { name };
            for (const auto& t : gguf->header().tensors) {
                const auto plain = ggmlPlainDType(t.type.id);
                ckpt.m_tensors.push_back({ t.name, std::string(t.type.name), plain, t.shape(), name,
                    gguf->header().dataOffset + t.offset, t.bytes });
            }
            ckpt.m_open->gguf = std::move(*gguf);
        } else if (!hasExtension(path, ".safetensors") && looksLikePickle(head)) {
            return pickleRefusal(path);
        } else {
            ckpt.m_format = CheckpointFormat::Safetensors;
            ckpt.m_files = { name };
            ckpt.openSafetensorsShards();
        }
    } else {
        ckpt.m_root = path;
        const auto indexPath = path / kShardIndexName;
        const auto planPath = path / "plan.json";
        if (!fs::exists(indexPath, ec) && fs::exists(planPath, ec)) {
            auto plan = readJsonFile(planPath);
            if (!plan) {
                return plan.error();
            }
            if (!plan->is_object() || plan->value("format", "") != "day0-shard-plan"
                || !plan->contains("ranks") || !(*plan)["ranks"].is_array()) {
                return Error::badInput(
                    fmt::format("{}: not a day0 shard plan (format day0-shard-plan with ranks)",
                        displayPath(planPath)));
            }
            ckpt.m_format = CheckpointFormat::RankShards;
            for (const auto& r : (*plan)["ranks"]) {
                if (!r.is_object() || !r.contains("file") || !r["file"].is_string()) {
                    return Error::badInput(
                        fmt::format("{}: a rank without a 'file'", displayPath(planPath)));
                }
                ckpt.m_files.push_back(r["file"].get<std::string>());
            }
            ckpt.openSafetensorsShards();
            ckpt.checkAgainstShardPlan(*plan);
        } else if (fs::exists(indexPath, ec)) {
            auto index = readShardIndex(indexPath);
            if (!index) {
                return index.error();
            }
            ckpt.m_format = CheckpointFormat::ShardedSafetensors;
            ckpt.m_files = index->shardFiles();
            ckpt.m_index = std::move(*index);
            ckpt.openSafetensorsShards();
            ckpt.checkAgainstIndex();
        } else if (auto shards = filesIn(
                       path, [](const fs::path& p) { return hasExtension(p, ".safetensors"); });
                   !shards.empty()) {
            ckpt.m_format = shards.size() == 1 ? CheckpointFormat::Safetensors
                                               : CheckpointFormat::SafetensorsFolder;
            ckpt.m_files = std::move(shards);
            ckpt.checkShardSeries();
            ckpt.openSafetensorsShards();
        } else if (auto ggufs
                   = filesIn(path, [](const fs::path& p) { return hasExtension(p, ".gguf"); });
                   !ggufs.empty()) {
            if (ggufs.size() > 1) {
                return Error::badInput(
                    fmt::format("{}: holds {} GGUF files ({}, ...); name the one to open",
                        displayPath(path), ggufs.size(), ggufs.front()));
            }
            return open(path / ggufs.front());
        } else if (auto pickles = filesIn(path, [](const fs::path& p) { return isPickleName(p); });
                   !pickles.empty()) {
            return pickleRefusal(path / pickles.front());
        } else {
            return Error::badInput(
                fmt::format("{}: no weights found (expected {}, *.safetensors or *.gguf)",
                    displayPath(path), kShardIndexName));
        }
    }
    std::sort(ckpt.m_tensors.begin(), ckpt.m_tensors.end(),
        [](const CheckpointTensor& a, const CheckpointTensor& b) { return a.name < b.name; });
    return ckpt;
}

void Checkpoint::openSafetensorsShards()
{
    std::error_code ec;
    for (const auto& file : m_files) {
        const auto full = m_root / file;
        if (!fs::exists(full, ec)) {
            continue; // reported by checkAgainstIndex with the tensors that are lost
        }
        auto opened = SafetensorsFile::open(full);
        if (!opened) {
            m_problems.push_back({ file, {}, opened.error(), false });
            continue;
        }
        for (const auto& t : opened->tensors()) {
            m_tensors.push_back({ t.name, std::string(dtypeName(t.dtype)), t.dtype, t.shape, file,
                opened->header().dataOffset + t.begin, t.bytes() });
        }
        m_open->safetensors.emplace(file, std::move(*opened));
    }
    if (m_index || m_format == CheckpointFormat::RankShards) {
        return; // the index or the shard plan says which file owns a name
    }
    // Without an index nothing says which file owns a name, so a name in two files is ambiguous.
    std::unordered_map<std::string_view, const CheckpointTensor*> seen;
    for (const auto& t : m_tensors) {
        const auto [it, fresh] = seen.emplace(t.name, &t);
        if (!fresh) {
            m_problems.push_back({ t.file, t.name,
                Error::badInput(fmt::format("{}: tensor '{}' is also in {}",
                    displayPath(m_root / t.file), t.name, it->second->file)),
                false });
        }
    }
}

void Checkpoint::checkAgainstShardPlan(const nlohmann::json& plan)
{
    const std::string planName = displayPath(m_root / "plan.json");
    const auto bad = [&](const std::string& file, const std::string& tensor, std::string what) {
        m_problems.push_back({ file, tensor, Error::badInput(std::move(what)), false });
    };
    std::error_code ec;
    for (const auto& file : m_files) {
        if (!fs::exists(m_root / file, ec)) {
            bad(file, {},
                fmt::format(
                    "{}: rank file named by {} is missing", displayPath(m_root / file), planName));
        }
    }
    if (!plan.contains("tensors") || !plan["tensors"].is_object()) {
        bad("plan.json", {}, planName + ": 'tensors' must be an object");
        return;
    }
    // (file, tensor) pairs the plan accounts for.
    std::set<std::pair<std::string, std::string>> planned;
    try {
        for (const auto& [name, t] : plan["tensors"].items()) {
            const auto shape = t.at("shape").get<std::vector<std::int64_t>>();
            const auto dtype = parseDType(t.at("dtype").get<std::string>());
            for (const auto& piece : t.at("pieces")) {
                const auto rank = piece.at("rank").get<std::int64_t>();
                if (rank < 0 || rank >= std::int64_t(m_files.size())) {
                    bad("plan.json", name,
                        fmt::format("{}: tensor '{}' names rank {} of {}", planName, name, rank,
                            m_files.size()));
                    continue;
                }
                std::vector<std::int64_t> expected = shape;
                for (const auto& cut : piece.value("slice", nlohmann::json::array())) {
                    const auto dim = cut.at("dim").get<std::size_t>();
                    std::int64_t extent = 0;
                    for (const auto& range : cut.at("ranges")) {
                        extent += range.at(1).get<std::int64_t>() - range.at(0).get<std::int64_t>();
                    }
                    if (dim < expected.size()) {
                        expected[dim] = extent;
                    }
                }
                const std::string& file = m_files[std::size_t(rank)];
                planned.emplace(file, name);
                const auto it = m_open->safetensors.find(file);
                if (it == m_open->safetensors.end()) {
                    continue; // the missing file is reported above
                }
                const auto* held = it->second.find(name);
                if (held == nullptr) {
                    bad(file, name,
                        fmt::format("{}: tensor '{}' is planned on this rank by {} but is not here",
                            displayPath(m_root / file), name, planName));
                } else if (held->shape != expected || (dtype && held->dtype != *dtype)) {
                    bad(file, name,
                        fmt::format("{}: tensor '{}' is {} [{}], {} plans {} [{}]",
                            displayPath(m_root / file), name, dtypeName(held->dtype),
                            fmt::join(held->shape, ", "), planName,
                            dtype ? std::string(dtypeName(*dtype)) : std::string("?"),
                            fmt::join(expected, ", ")));
                }
            }
        }
    } catch (const nlohmann::json::exception& e) {
        bad("plan.json", {}, fmt::format("{}: {}", planName, jsonErrorText(e)));
        return;
    }
    for (const auto& t : m_tensors) {
        if (planned.count({ t.file, t.name }) == 0) {
            bad(t.file, t.name,
                fmt::format("{}: tensor '{}' is not planned on this rank by {}",
                    displayPath(m_root / t.file), t.name, planName));
        }
    }
}

void Checkpoint::checkShardSeries()
{
    // Without an index the shard names are the only record of how many there were:
    // "model-00003-of-00007.safetensors" says seven. A series with a gap is incomplete (an
    // interrupted download or copy), whatever its headers say.
    struct Series {
        std::set<int> present;
        std::string example;
    };
    std::map<std::pair<std::string, int>, Series> series; // (prefix, total)
    for (const auto& file : m_files) {
        const std::string name = fs::path(file).filename().string();
        const auto of = name.rfind("-of-");
        const auto dot = name.rfind(".safetensors");
        const auto dash = of == std::string::npos ? of : name.rfind('-', of - 1);
        if (of == std::string::npos || dot == std::string::npos || dash == std::string::npos
            || dot < of) {
            continue;
        }
        const std::string index = name.substr(dash + 1, of - dash - 1);
        const std::string total = name.substr(of + 4, dot - of - 4);
        int i = 0;
        int n = 0;
        const auto parse = [](const std::string& text, int& value) {
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
            return ec == std::errc() && end == text.data() + text.size() && !text.empty();
        };
        if (!parse(index, i) || !parse(total, n) || n <= 0 || n > 1000000) {
            continue;
        }
        auto& s = series[{ fs::path(file).parent_path().string() + "/" + name.substr(0, dash), n }];
        s.present.insert(i);
        s.example = file;
    }
    for (const auto& [key, s] : series) {
        const int total = key.second;
        std::vector<int> missing;
        for (int i = 1; i <= total && missing.size() < 4; ++i) {
            if (s.present.count(i) == 0) {
                missing.push_back(i);
            }
        }
        const bool outOfRange
            = !s.present.empty() && (*s.present.begin() < 1 || *s.present.rbegin() > total);
        if (missing.empty() && !outOfRange) {
            continue;
        }
        m_problems.push_back({ {}, {},
            Error::checkFailed(fmt::format(
                "{}: incomplete checkpoint: {} of the {} shards its names count (like {}) are "
                "here{}{}",
                displayPath(m_root), s.present.size(), total, s.example,
                missing.empty() ? std::string()
                                : fmt::format("; missing shard {}", fmt::join(missing, ", ")),
                outOfRange ? "; a shard number is out of its series" : "")),
            false });
    }
}

void Checkpoint::checkAgainstIndex()
{
    const auto& index = *m_index;
    const auto indexName = displayPath(m_root / kShardIndexName);
    std::error_code ec;
    // Shards the index names that are not there.
    std::map<std::string, std::pair<std::size_t, std::string>> perShard; // count, first tensor
    for (const auto& [tensor, file] : index.weightMap) {
        auto& [count, first] = perShard[file];
        if (count++ == 0) {
            first = tensor;
        }
    }
    for (const auto& [file, info] : perShard) {
        if (!fs::exists(m_root / file, ec)) {
            m_problems.push_back({ file, info.second,
                Error::badInput(
                    fmt::format("{}: shard named by {} is missing ({} tensors, first '{}')",
                        displayPath(m_root / file), indexName, info.first, info.second)),
                false });
        }
    }
    // Every indexed tensor must be in the shard the index names.
    for (const auto& [tensor, file] : index.weightMap) {
        const auto it = m_open->safetensors.find(file);
        if (it != m_open->safetensors.end() && it->second.find(tensor) == nullptr) {
            m_problems.push_back({ file, tensor,
                Error::badInput(fmt::format("{}: tensor '{}' is mapped to this shard by {} but the "
                                            "shard does not hold it",
                    displayPath(m_root / file), tensor, indexName)),
                false });
        }
    }
    // Every shard tensor must be indexed, to this shard, and live in one shard only.
    std::unordered_map<std::string_view, std::string_view> owner;
    std::uint64_t total = 0;
    for (const auto& t : m_tensors) {
        total += t.bytes;
        const auto [it, fresh] = owner.emplace(t.name, t.file);
        if (!fresh) {
            m_problems.push_back({ t.file, t.name,
                Error::badInput(fmt::format("{}: tensor '{}' is also in {}",
                    displayPath(m_root / t.file), t.name, it->second)),
                false });
            continue;
        }
        const auto* mapped = index.shardOf(t.name);
        if (mapped == nullptr) {
            m_problems.push_back({ t.file, t.name,
                Error::badInput(fmt::format("{}: tensor '{}' is not listed in {}",
                    displayPath(m_root / t.file), t.name, indexName)),
                false });
        } else if (*mapped != t.file) {
            m_problems.push_back({ t.file, t.name,
                Error::badInput(fmt::format("{}: tensor '{}' is here but {} maps it to {}",
                    displayPath(m_root / t.file), t.name, indexName, *mapped)),
                false });
        }
    }
    const bool allShardsRead = m_open->safetensors.size() == perShard.size();
    if (index.totalSize && allShardsRead && *index.totalSize != total) {
        m_problems.push_back({ std::string(kShardIndexName), {},
            Error::checkFailed(fmt::format("{}: metadata.total_size is {} but the shards' tensors "
                                           "hold {} bytes",
                indexName, *index.totalSize, total)),
            true });
    }
}

const CheckpointTensor* Checkpoint::find(std::string_view name) const
{
    const auto it = std::lower_bound(m_tensors.begin(), m_tensors.end(), name,
        [](const CheckpointTensor& t, std::string_view n) { return t.name < n; });
    return it != m_tensors.end() && it->name == name ? &*it : nullptr;
}

bool Checkpoint::hasErrors() const
{
    return std::any_of(
        m_problems.begin(), m_problems.end(), [](const auto& p) { return !p.warning; });
}

Result<void> Checkpoint::firstError() const
{
    for (const auto& p : m_problems) {
        if (!p.warning) {
            return p.error;
        }
    }
    return success();
}

const GgufHeader* Checkpoint::gguf() const
{
    return m_open->gguf ? &m_open->gguf->header() : nullptr;
}

std::uint64_t Checkpoint::totalTensorBytes() const
{
    std::uint64_t total = 0;
    for (const auto& t : m_tensors) {
        total += t.bytes;
    }
    return total;
}

const SafetensorsFile* Checkpoint::safetensorsFile(std::string_view file) const
{
    const auto it = m_open->safetensors.find(file);
    return it == m_open->safetensors.end() ? nullptr : &it->second;
}

Result<std::span<const std::byte>> Checkpoint::data(const CheckpointTensor& tensor) const
{
    std::span<const std::byte> whole;
    if (const auto* st = safetensorsFile(tensor.file)) {
        whole = st->mapped().bytes();
    } else if (m_open->gguf && tensor.file == m_files.front()) {
        whole = m_open->gguf->mappedBytes();
    } else {
        return Error::badInput(fmt::format("{}: cannot read tensor '{}': the file did not open",
            displayPath(m_root / tensor.file), tensor.name));
    }
    if (tensor.offset > whole.size() || tensor.bytes > whole.size() - tensor.offset) {
        return Error::internal(fmt::format("{}: tensor '{}' lies outside the file",
            displayPath(m_root / tensor.file), tensor.name));
    }
    return whole.subspan(std::size_t(tensor.offset), std::size_t(tensor.bytes));
}

} // namespace day0::checkpoint
