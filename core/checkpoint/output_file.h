#pragma once

#include "base/result.h"
#include "base/temp_output.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace day0::checkpoint {

/// A new file of known size written through a shared memory map under a temporary name in the
/// target folder; `commit()` renames it into place. Destroyed without commit (error, cancel),
/// the temporary is removed, so no half-written output is ever visible. Move-only.
class OutputFile {
public:
    /// Creates the temporary file for `path`, sized `size` bytes.
    static Result<OutputFile> create(const std::filesystem::path& path, std::uint64_t size);

    OutputFile() = default;
    ~OutputFile();
    OutputFile(OutputFile&& other) noexcept;
    OutputFile& operator=(OutputFile&& other) noexcept;
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    /// The writable bytes of the file.
    [[nodiscard]] std::span<std::byte> bytes() const { return { m_data, m_size }; }
    /// Unmaps, closes and renames the temporary over the target path.
    Result<void> commit();

private:
    void discard() noexcept;

    std::filesystem::path m_target;
    TempOutput m_temp;
    std::byte* m_data = nullptr;
    std::size_t m_size = 0;
    int m_fd = -1;
};

/// A temporary sibling folder for a multi-file output (a converted or sharded checkpoint) that
/// `commit()` renames to the final path; removed with its contents when dropped uncommitted.
/// Refuses to replace an existing non-empty folder unless `replace` is set.
class OutputDir {
public:
    static Result<OutputDir> create(const std::filesystem::path& path, bool replace);

    OutputDir() = default;
    ~OutputDir();
    OutputDir(OutputDir&& other) noexcept;
    OutputDir& operator=(OutputDir&& other) noexcept;
    OutputDir(const OutputDir&) = delete;
    OutputDir& operator=(const OutputDir&) = delete;

    /// Where to write the files now.
    [[nodiscard]] const std::filesystem::path& tempPath() const { return m_temp.path(); }
    /// The final path.
    [[nodiscard]] const std::filesystem::path& path() const { return m_target; }
    /// Renames the temporary folder to the final path (replacing an old one when allowed).
    Result<void> commit();

private:
    std::filesystem::path m_target;
    TempOutput m_temp;
};

} // namespace day0::checkpoint
