#pragma once

#include <cstddef>
#include <span>

namespace day0 {

/// Drops the pages spanning `bytes` from this process's resident set (MADV_DONTNEED). Only for
/// file mappings that are read-only or shared: the page cache keeps the data (written pages
/// included) and a later read faults it back in. Best effort: a failure changes nothing.
void releaseResidentPages(std::span<const std::byte> bytes);

/// Asks the kernel to start reading the pages spanning `bytes` of a file mapping ahead of their
/// use (MADV_WILLNEED). Best effort: a failure changes nothing.
void prefetchPages(std::span<const std::byte> bytes);

} // namespace day0
