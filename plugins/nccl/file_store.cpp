#include "file_store.h"

#include "base/file_util.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace day0::nccl {

namespace {

constexpr char kMagic[8] = { 'D', 'A', 'Y', '0', 'N', 'C', 'C', 'L' };
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = sizeof kMagic + 3 * sizeof(std::uint32_t);

void putU32(std::string& out, std::uint32_t v)
{
    for (int i = 0; i < 4; ++i) {
        out.push_back(char((v >> (8 * i)) & 0xFF));
    }
}

std::uint32_t getU32(std::string_view in, std::size_t at)
{
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
        v |= std::uint32_t(std::uint8_t(in[at + std::size_t(i)])) << (8 * i);
    }
    return v;
}

} // namespace

Result<void> publishBlob(
    const std::filesystem::path& file, const std::vector<std::uint8_t>& payload, int worldSize)
{
    if (worldSize < 1) {
        return Error::badInput(
            fmt::format("{}: world size {} is not positive", displayPath(file), worldSize));
    }
    std::string contents(kMagic, sizeof kMagic);
    putU32(contents, kVersion);
    putU32(contents, std::uint32_t(worldSize));
    putU32(contents, std::uint32_t(payload.size()));
    contents.append(reinterpret_cast<const char*>(payload.data()), payload.size());
    return writeFileAtomic(file, contents);
}

Result<std::vector<std::uint8_t>> parseBlob(
    std::string_view contents, std::size_t expectedBytes, int worldSize)
{
    if (contents.size() < kHeaderBytes
        || std::memcmp(contents.data(), kMagic, sizeof kMagic) != 0) {
        return Error::badInput("is not a day0 NCCL bootstrap file");
    }
    const std::uint32_t version = getU32(contents, sizeof kMagic);
    const std::uint32_t world = getU32(contents, sizeof kMagic + 4);
    const std::uint32_t size = getU32(contents, sizeof kMagic + 8);
    if (version != kVersion) {
        return Error::badInput(
            fmt::format("has format version {}, expected {}", version, kVersion));
    }
    if (world != std::uint32_t(worldSize)) {
        return Error::badInput(
            fmt::format("was written for {} ranks, this run has {}", world, worldSize));
    }
    if (size != expectedBytes || contents.size() != kHeaderBytes + size) {
        return Error::badInput(fmt::format("holds {} payload bytes in {} bytes, expected {}", size,
            contents.size(), expectedBytes));
    }
    const auto* p = reinterpret_cast<const std::uint8_t*>(contents.data() + kHeaderBytes);
    return std::vector<std::uint8_t>(p, p + size);
}

Result<std::vector<std::uint8_t>> waitForBlob(const std::filesystem::path& file,
    std::size_t expectedBytes, int worldSize, const FileStoreOptions& options, std::stop_token stop)
{
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now()
        + std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(options.timeout.value));
    std::string lastProblem = "it does not exist";
    for (;;) {
        if (stop.stop_requested()) {
            return Error::cancelled();
        }
        std::error_code ec;
        const auto written = std::filesystem::last_write_time(file, ec);
        if (!ec) {
            if (written < options.notBefore) {
                lastProblem = "it was left by an earlier run (written before this one started)";
            } else {
                std::ifstream in(file, std::ios::binary);
                std::stringstream buffer;
                buffer << in.rdbuf();
                auto blob = parseBlob(buffer.str(), expectedBytes, worldSize);
                if (blob) {
                    return blob;
                }
                lastProblem = "it " + blob.error().message;
            }
        }
        if (Clock::now() >= deadline) {
            return Error::checkFailed(fmt::format("{}: waited {} for rank 0's NCCL id, but {}",
                displayPath(file), formatDuration(options.timeout), lastProblem));
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(options.pollInterval.value));
    }
}

} // namespace day0::nccl
