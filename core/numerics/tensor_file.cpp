#include "numerics/tensor_file.h"

#include "base/file_util.h"
#include "base/json_util.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

namespace day0::numerics {

namespace {

constexpr std::uint64_t kMaxHeader = 100'000'000;

void appendU64(std::string& out, std::uint64_t v)
{
    for (int i = 0; i < 8; ++i) {
        out.push_back(char((v >> (8 * i)) & 0xFFu));
    }
}

} // namespace

Result<void> writeTensorFile(const std::filesystem::path& path,
    const std::vector<NamedTensor>& tensors, const std::map<std::string, std::string>& metadata)
{
    std::vector<const NamedTensor*> order;
    for (const auto& t : tensors) {
        if (t.name == "__metadata__" || t.name.empty()) {
            return Error::badInput(
                fmt::format("{}: invalid tensor name '{}'", path.string(), t.name));
        }
        order.push_back(&t);
    }
    std::sort(
        order.begin(), order.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) {
        header["__metadata__"] = metadata;
    }
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < order.size(); ++i) {
        if (i > 0 && order[i]->name == order[i - 1]->name) {
            return Error::badInput(
                fmt::format("{}: duplicate tensor name '{}'", path.string(), order[i]->name));
        }
        const Tensor& t = order[i]->tensor;
        const auto bytes = std::uint64_t(t.byteSize());
        header[order[i]->name] = { { "dtype", std::string(dtypeName(t.dtype())) },
            { "shape", t.shape() }, { "data_offsets", { offset, offset + bytes } } };
        offset += bytes;
    }
    std::string json = header.dump();
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string out;
    out.reserve(8 + json.size() + offset);
    appendU64(out, json.size());
    out += json;
    for (const auto* t : order) {
        const Tensor c = t->tensor.contiguous();
        const auto b = c.bytes();
        out.append(reinterpret_cast<const char*>(b.data()), b.size());
    }
    return writeFileAtomic(path, out);
}

Result<std::vector<NamedTensor>> readTensorFile(const std::filesystem::path& path)
{
    const std::string where = path.string();
    auto content = readFile(path);
    if (!content) {
        return content.error();
    }
    const std::string& data = *content;
    if (data.size() < 8) {
        return Error::badInput(where + ": too small for a safetensors file (under 8 bytes)");
    }
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) {
        n = (n << 8) | std::uint8_t(data[std::size_t(i)]);
    }
    if (n > kMaxHeader || n > data.size() - 8) {
        return Error::badInput(
            fmt::format("{}: header length {} exceeds the file ({} bytes) or the 100 MB limit",
                where, n, data.size()));
    }
    auto header = parseJson(data.substr(8, n), where);
    if (!header) {
        return header.error();
    }
    if (!header->is_object()) {
        return Error::badInput(where + ": the header is not a JSON object");
    }
    const std::uint64_t dataStart = 8 + n;
    const std::uint64_t dataSize = data.size() - dataStart;
    struct Span {
        std::uint64_t begin;
        std::uint64_t end;
        std::string name;
    };
    std::vector<Span> spans;
    std::vector<NamedTensor> out;
    for (const auto& [name, entry] : header->items()) {
        if (name == "__metadata__") {
            continue;
        }
        const std::string at = fmt::format("{}: tensor '{}'", where, name);
        if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape")
            || !entry.contains("data_offsets") || !entry["dtype"].is_string()
            || !entry["shape"].is_array() || !entry["data_offsets"].is_array()
            || entry["data_offsets"].size() != 2) {
            return Error::badInput(at + ": needs 'dtype', 'shape' and two 'data_offsets'");
        }
        const auto dtype = parseDType(entry["dtype"].get<std::string>());
        if (!dtype) {
            return Error::badInput(
                fmt::format("{}: unknown dtype '{}'", at, entry["dtype"].get<std::string>()));
        }
        Shape shape;
        std::uint64_t numel = 1;
        for (const auto& d : entry["shape"]) {
            if (!d.is_number_unsigned()) {
                return Error::badInput(at + ": shape entries must be non-negative integers");
            }
            const auto v = d.get<std::uint64_t>();
            if (v != 0 && numel > (std::uint64_t(1) << 48) / v) {
                return Error::badInput(at + ": shape is too large");
            }
            numel *= v;
            shape.push_back(std::int64_t(v));
        }
        const auto& offs = entry["data_offsets"];
        if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) {
            return Error::badInput(at + ": data_offsets must be non-negative integers");
        }
        const auto begin = offs[0].get<std::uint64_t>();
        const auto end = offs[1].get<std::uint64_t>();
        if (end < begin || end > dataSize) {
            return Error::badInput(
                fmt::format("{} ends at byte {} but the data section has {}", at, end, dataSize));
        }
        if (end - begin != numel * std::uint64_t(dtypeSize(*dtype))) {
            return Error::badInput(fmt::format("{}: {} {} needs {} bytes but data_offsets span {}",
                at, entry["dtype"].get<std::string>(), shapeString(shape),
                numel * std::uint64_t(dtypeSize(*dtype)), end - begin));
        }
        spans.push_back({ begin, end, name });
        const auto* p = reinterpret_cast<const std::byte*>(data.data() + dataStart + begin);
        out.push_back({ name, Tensor::fromBytes(shape, *dtype, { p, std::size_t(end - begin) }) });
    }
    std::sort(
        spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < spans.size(); ++i) {
        if (spans[i].begin < spans[i - 1].end) {
            return Error::badInput(fmt::format(
                "{}: tensors '{}' and '{}' overlap", where, spans[i - 1].name, spans[i].name));
        }
    }
    return out;
}

Result<void> writeDump(const Dump& dump, const std::filesystem::path& dir)
{
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        return Error::badInput(
            fmt::format("{}: cannot create the dump folder: {}", dir.string(), ec.message()));
    }
    std::vector<NamedTensor> tensors;
    for (const auto& [name, t] : dump.tensors()) {
        tensors.push_back({ name, t });
    }
    DAY0_TRY(writeTensorFile(dir / "tensors.safetensors", tensors, { { "format", "day0-dump" } }));
    return writeFileAtomic(dir / "dump.json", dumpToJson(dump).dump(1) + "\n");
}

Result<Dump> readDump(const std::filesystem::path& dir)
{
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
        return Error::badInput(
            fmt::format("{}: not a dump folder (expected a folder with dump.json "
                        "and tensors.safetensors)",
                dir.string()));
    }
    const auto jsonPath = dir / "dump.json";
    auto json = readJsonFile(jsonPath);
    if (!json) {
        return json.error();
    }
    auto dump = dumpFromJson(*json, jsonPath.string());
    if (!dump) {
        return dump.error();
    }
    const auto tensorPath = dir / "tensors.safetensors";
    const bool anyStored = std::any_of(dump->captures().begin(), dump->captures().end(),
        [](const CaptureInfo& c) { return c.stored; });
    if (!std::filesystem::exists(tensorPath, ec)) {
        if (anyStored) {
            return Error::badInput(
                tensorPath.string() + ": missing, but dump.json lists stored tensors");
        }
        return dump;
    }
    auto tensors = readTensorFile(tensorPath);
    if (!tensors) {
        return tensors.error();
    }
    for (auto& t : *tensors) {
        auto attached = dump->attach(t.name, std::move(t.tensor));
        if (!attached) {
            return attached.error().withContext(tensorPath.string());
        }
    }
    for (const auto& c : dump->captures()) {
        if (c.stored && dump->tensor(c.name) == nullptr) {
            return Error::badInput(
                fmt::format("{}: dump.json lists '{}' as stored but the tensor file lacks it",
                    tensorPath.string(), c.name));
        }
    }
    return dump;
}

} // namespace day0::numerics
