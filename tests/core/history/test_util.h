#pragma once

#include "history/run_record.h"

#include <cstdint>
#include <filesystem>
#include <string>

namespace day0::history::test {

/// A fresh folder under the system temp folder, removed when the object dies.
class TempDir {
public:
    explicit TempDir(const std::string& name);
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    [[nodiscard]] const std::filesystem::path& path() const { return m_path; }
    [[nodiscard]] std::filesystem::path operator/(const std::string& name) const
    {
        return m_path / name;
    }

private:
    std::filesystem::path m_path;
};

/// A run whose every field and value derives from `seed`, so a reader can rebuild what a writer
/// stored. Its label is "seed:<seed>".
RunRecord makeSeededRecord(std::uint64_t seed, std::size_t layerRows);

/// The seed of a record made by makeSeededRecord, read back from its label; 0 if none.
std::uint64_t seedOf(const RunInfo& info);

/// Empty when `stored` holds exactly what makeSeededRecord(seed, layerRows) produced, else a
/// description of the first difference.
std::string differenceFromSeed(const RunRecord& stored, std::uint64_t seed, std::size_t layerRows);

/// The whole file as bytes ("" when missing).
std::string fileBytes(const std::filesystem::path& file);

} // namespace day0::history::test
