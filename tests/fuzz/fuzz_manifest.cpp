// Fuzzes the manifest readers (day0-manifest.json and SHA256SUMS): accepted manifests must
// serialise and parse back unchanged.
#include "checkpoint/manifest.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

void roundTrip(const day0::checkpoint::Manifest& m)
{
    const auto again
        = day0::checkpoint::parseManifest(day0::checkpoint::serializeManifest(m), "again.json");
    if (!again || again->files.size() != m.files.size()) {
        std::abort();
    }
    for (std::size_t i = 0; i < m.files.size(); ++i) {
        if (again->files[i].file != m.files[i].file
            || again->files[i].sha256 != m.files[i].sha256) {
            std::abort();
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto m = day0::checkpoint::parseManifest(text, "fuzz.json")) {
        roundTrip(*m);
    }
    if (auto m = day0::checkpoint::parseSha256Sums(text, "SHA256SUMS")) {
        // Names with newlines cannot round-trip through JSON-free text, but JSON handles them.
        roundTrip(*m);
    }
    return 0;
}
