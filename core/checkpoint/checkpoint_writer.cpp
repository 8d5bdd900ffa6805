#include "checkpoint/checkpoint_writer.h"

#include "base/file_util.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/shard_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace day0::checkpoint {

namespace fs = std::filesystem;

bool naturalLess(const std::string& a, const std::string& b)
{
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < a.size() && j < b.size()) {
        const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
        const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
        if (da && db) {
            std::size_t ei = i;
            std::size_t ej = j;
            while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) {
                ++ei;
            }
            while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) {
                ++ej;
            }
            // Compare digit runs by value: longer (without leading zeros) is larger.
            auto ta = std::string_view(a).substr(i, ei - i);
            auto tb = std::string_view(b).substr(j, ej - j);
            while (ta.size() > 1 && ta.front() == '0') {
                ta.remove_prefix(1);
            }
            while (tb.size() > 1 && tb.front() == '0') {
                tb.remove_prefix(1);
            }
            if (ta.size() != tb.size()) {
                return ta.size() < tb.size();
            }
            if (ta != tb) {
                return ta < tb;
            }
            i = ei;
            j = ej;
            continue;
        }
        if (a[i] != b[j]) {
            return a[i] < b[j];
        }
        ++i;
        ++j;
    }
    return a.size() - i < b.size() - j;
}

Result<WrittenShards> writeShardedCheckpoint(const fs::path& dir, std::vector<TensorSource> tensors,
    const ShardingOptions& options, Progress& progress, std::stop_token stop)
{
    std::sort(tensors.begin(), tensors.end(),
        [](const TensorSource& a, const TensorSource& b) { return naturalLess(a.name, b.name); });
    // Greedy packing in reading order, as Hugging Face's splitter does.
    std::vector<std::vector<TensorSource>> shards(1);
    std::uint64_t current = 0;
    WrittenShards written;
    for (auto& t : tensors) {
        const auto size = t.bytes();
        if (current > 0 && current + size > options.maxShardBytes) {
            shards.emplace_back();
            current = 0;
        }
        current += size;
        written.tensorBytes += size;
        shards.back().push_back(std::move(t));
    }
    written.tensors = tensors.size();
    ShardIndex index;
    const int count = int(shards.size());
    for (int i = 0; i < count; ++i) {
        const auto name = shardFileName(i + 1, count);
        for (const auto& t : shards[std::size_t(i)]) {
            index.weightMap.emplace_back(t.name, name);
        }
        progress.setStage(fmt::format("writing {}", name));
        auto size = writeSafetensors(
            dir / name, std::move(shards[std::size_t(i)]), { { "format", "pt" } }, &progress, stop);
        if (!size) {
            return size.error();
        }
        written.files.push_back(name);
    }
    std::sort(index.weightMap.begin(), index.weightMap.end());
    index.totalSize = written.tensorBytes;
    DAY0_TRY(writeFileAtomic(dir / kShardIndexName, serializeShardIndex(index)));
    return written;
}

Result<void> copyAuxiliaryFiles(
    const fs::path& src, const fs::path& dst, const std::vector<std::string>& skip)
{
    std::error_code ec;
    if (!fs::is_directory(src, ec)) {
        return success();
    }
    for (const auto& entry : fs::directory_iterator(src, ec)) {
        const auto name = entry.path().filename().string();
        const bool weights = entry.path().extension() == ".safetensors"
            || entry.path().extension() == ".gguf" || isPickleName(entry.path());
        if (name.empty() || name.front() == '.' || weights || name == kShardIndexName
            || name == kManifestName || name == kSha256SumsName || name.ends_with(".index.json")
            || !entry.is_regular_file(ec)
            || std::find(skip.begin(), skip.end(), name) != skip.end()) {
            continue;
        }
        fs::copy_file(entry.path(), dst / name, fs::copy_options::overwrite_existing, ec);
        if (ec) {
            return Error::badInput(
                fmt::format("{}: cannot copy: {}", displayPath(entry.path()), ec.message()));
        }
    }
    return success();
}

Result<Manifest> finishOutput(
    OutputDir& out, const HashOptions& hash, Progress& progress, std::stop_token stop)
{
    progress.setStage("hashing");
    auto manifest
        = buildManifest(out.tempPath(), manifestCandidates(out.tempPath()), hash, progress, stop);
    if (!manifest) {
        return manifest.error();
    }
    DAY0_TRY(writeManifest(out.tempPath(), *manifest));
    DAY0_TRY(out.commit());
    return manifest;
}

} // namespace day0::checkpoint
