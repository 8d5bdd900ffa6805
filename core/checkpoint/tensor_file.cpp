#include "checkpoint/tensor_file.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_writer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

namespace day0::checkpoint {

Result<void> writeTensorFile(const std::filesystem::path& path,
    const std::vector<NamedTensor>& tensors, const std::map<std::string, std::string>& metadata)
{
    std::vector<numerics::Tensor> keep; // contiguous copies stay alive until the file is written
    keep.reserve(tensors.size());
    std::vector<TensorSource> sources;
    sources.reserve(tensors.size());
    for (const auto& t : tensors) {
        keep.push_back(t.tensor.contiguous());
        sources.push_back(
            tensorFromBytes(t.name, keep.back().dtype(), keep.back().shape(), keep.back().bytes()));
    }
    auto written = writeSafetensors(path, std::move(sources), metadata);
    if (!written) {
        return written.error();
    }
    return success();
}

Result<std::vector<NamedTensor>> readTensorFile(const std::filesystem::path& path)
{
    auto file = SafetensorsFile::open(path);
    if (!file) {
        return file.error();
    }
    std::vector<NamedTensor> out;
    out.reserve(file->tensors().size());
    for (const auto& entry : file->tensors()) {
        out.push_back({ entry.name,
            numerics::Tensor::fromBytes(entry.shape, entry.dtype, file->data(entry)) });
    }
    return out;
}

Result<void> writeDump(const numerics::Dump& dump, const std::filesystem::path& dir)
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
    auto written
        = writeTensorFile(dir / "tensors.safetensors", tensors, { { "format", "day0-dump" } });
    if (written) {
        written
            = writeFileAtomic(dir / "dump.json", dumpJson(numerics::dumpToJson(dump), 1) + "\n");
    }
    if (!written) {
        // Half a dump (new tensors beside an old dump.json) must not read as a dump.
        std::filesystem::remove(dir / "tensors.safetensors", ec);
        std::filesystem::remove(dir / "dump.json", ec);
    }
    return written;
}

Result<numerics::Dump> readDump(const std::filesystem::path& dir)
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
    auto dump = numerics::dumpFromJson(*json, jsonPath.string());
    if (!dump) {
        return dump.error();
    }
    const auto tensorPath = dir / "tensors.safetensors";
    const bool anyStored = std::any_of(dump->captures().begin(), dump->captures().end(),
        [](const numerics::CaptureInfo& c) { return c.stored; });
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

} // namespace day0::checkpoint
