#include "base/resident_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace day0 {

void releaseResidentPages(std::span<const std::byte> bytes)
{
    if (bytes.empty()) {
        return;
    }
    static const auto page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data()) & ~(page - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size();
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

} // namespace day0
