#include "checkpoint/safetensors_writer.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/resident_pages.h"
#include "checkpoint/output_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

namespace day0::checkpoint {

std::uint64_t TensorSource::bytes() const
{
    std::uint64_t n = std::uint64_t(dtypeSize(dtype));
    for (const auto d : shape) {
        n *= std::uint64_t(d);
    }
    return n;
}

TensorSource tensorFromBytes(
    std::string name, DType dtype, std::vector<std::int64_t> shape, std::span<const std::byte> data)
{
    TensorSource source { std::move(name), dtype, std::move(shape), {} };
    const auto expected = source.bytes();
    const auto tensorName = source.name;
    source.fill = [data, expected, tensorName](std::span<std::byte> out) -> Result<void> {
        if (data.size() != expected || out.size() != expected) {
            return Error::internal(fmt::format("tensor '{}': {} bytes given for a {} byte tensor",
                tensorName, data.size(), expected));
        }
        std::memcpy(out.data(), data.data(), data.size());
        return success();
    };
    return source;
}

Result<std::string> buildSafetensorsHeader(
    std::vector<TensorSource>& tensors, const std::map<std::string, std::string>& metadata)
{
    std::stable_sort(
        tensors.begin(), tensors.end(), [](const TensorSource& a, const TensorSource& b) {
            const int sa = dtypeSize(a.dtype);
            const int sb = dtypeSize(b.dtype);
            return sa != sb ? sa > sb : a.name < b.name;
        });
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) {
        header["__metadata__"] = metadata;
    }
    std::set<std::string_view> seen;
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        if (t.name == "__metadata__" || t.name.empty()) {
            return Error::badInput(fmt::format("tensor name '{}' is reserved", t.name));
        }
        if (!seen.insert(t.name).second) {
            return Error::badInput(fmt::format("tensor '{}' given twice", t.name));
        }
        for (const auto d : t.shape) {
            if (d < 0) {
                return Error::badInput(fmt::format("tensor '{}' has a negative dimension", t.name));
            }
        }
        const auto size = t.bytes();
        header[t.name] = { { "dtype", std::string(dtypeName(t.dtype)) }, { "shape", t.shape },
            { "data_offsets", { offset, offset + size } } };
        offset += size;
    }
    std::string text = dumpJson(header);
    // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    const std::uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) {
        out[std::size_t(i)] = char((n >> (8 * i)) & 0xFF);
    }
    return out + text;
}

Result<std::uint64_t> writeSafetensors(const std::filesystem::path& path,
    std::vector<TensorSource> tensors, const std::map<std::string, std::string>& metadata,
    Progress* progress, std::stop_token stop)
{
    auto header = buildSafetensorsHeader(tensors, metadata);
    if (!header) {
        return header.error().withContext(displayPath(path));
    }
    std::uint64_t total = header->size();
    for (const auto& t : tensors) {
        total += t.bytes();
    }
    auto out = OutputFile::create(path, total);
    if (!out) {
        return out.error();
    }
    auto bytes = out->bytes();
    std::memcpy(bytes.data(), header->data(), header->size());
    std::uint64_t offset = header->size();
    for (auto& t : tensors) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        const auto size = t.bytes();
        const auto region = bytes.subspan(std::size_t(offset), std::size_t(size));
        auto filled = t.fill(region);
        if (!filled) {
            return filled.error().withContext(displayPath(path));
        }
        // Written (the shared mapping's pages stay in the page cache until written back): they
        // leave the process, so writing a file larger than memory holds a tensor at a time.
        releaseResidentPages(region);
        offset += size;
        if (progress != nullptr) {
            progress->advance(std::int64_t(size));
        }
    }
    DAY0_TRY(out->commit());
    return total;
}

} // namespace day0::checkpoint
