#include "checkpoint/checkpoint.h"

#include "base/file_util.h"
#include "base/mapped_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
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
        if (fs::exists(indexPath, ec)) {
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
    if (m_index) {
        return;
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
