#include "base/resident_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace day0 {

namespace {

// madvise over the whole pages spanning `bytes`.
void adviseWholePages(std::span<const std::byte> bytes, int advice)
{
    if (bytes.empty()) {
        return;
    }
    static const auto page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data()) & ~(page - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size();
    ::madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

} // namespace

void releaseResidentPages(std::span<const std::byte> bytes)
{
    adviseWholePages(bytes, MADV_DONTNEED);
}

void prefetchPages(std::span<const std::byte> bytes) { adviseWholePages(bytes, MADV_WILLNEED); }

} // namespace day0
