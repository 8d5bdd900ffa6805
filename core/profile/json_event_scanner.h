#pragma once

#include "base/progress.h"
#include "base/result.h"
#include "profile/byte_source.h"

#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace day0::profile {

/// Receives what JsonEventScanner finds.
class JsonEventSink {
public:
    virtual ~JsonEventSink() = default;
    /// A batch of whole events as one JSON array text "[{...},{...}]"; `starts` are the byte
    /// offsets of each event in `json`. The string has at least 64 bytes of spare capacity
    /// (simdjson's padding). The sink may take both (swap them out). Return an error to stop.
    virtual Result<void> onEvents(std::string& json, std::vector<std::uint32_t>& starts) = 0;
    /// Whether the raw text of a top-level key (other than traceEvents) is wanted.
    [[nodiscard]] virtual bool wantsKey(std::string_view key) const = 0;
    /// The raw JSON text of a wanted top-level value.
    virtual void onTopLevel(std::string_view key, std::string_view rawJson) = 0;
};

/// What the scanner repaired or skipped.
struct ScanReport {
    std::uint64_t controlCharsEscaped = 0; ///< raw control characters inside strings
    std::uint64_t badEscapesRepaired = 0; ///< backslashes not starting a valid escape
    std::uint64_t nonObjectEntries = 0; ///< array entries that are not objects
    std::uint64_t oversizedEvents = 0; ///< single events over 256 MiB, dropped
    std::uint64_t events = 0;
    bool endedEarly = false; ///< the data ended before the JSON was closed
    bool lastEventCut = false; ///< ... and inside an event, which was dropped
    bool noEventArray = false; ///< an object without a traceEvents array
};

/// Streams a Chrome trace (JSON Array or JSON Object format) from a ByteSource and cuts the
/// traceEvents array into batches of whole events, repairing what strict JSON parsers reject
/// (raw control characters, invalid escapes) and tolerating a missing end. Memory stays at one
/// batch (~4 MiB) plus the read buffer, whatever the file size.
class JsonEventScanner {
public:
    JsonEventScanner(ByteSource& source, JsonEventSink& sink, std::size_t batchBytes = 4 << 20);

    /// Scans everything. Errors name the file and byte offset of malformed top-level structure.
    Result<void> run(Progress& progress, std::stop_token stop);
    [[nodiscard]] const ScanReport& report() const { return m_report; }

private:
    enum class Copy { Done, EndOfData };
    Result<void> scan(Progress& progress, std::stop_token stop);
    bool fill();
    int peek();
    void skipWhitespace();
    Result<Copy> copyValue(std::string* out);
    Result<Copy> copyString(std::string* out, bool resume = false);
    Result<Copy> copyBalanced(std::string* out);
    Result<void> scanEventArray(Progress& progress, std::stop_token stop);
    Result<void> flush();
    [[nodiscard]] Error syntaxError(std::string_view what) const;

    ByteSource& m_source;
    JsonEventSink& m_sink;
    std::size_t m_batchBytes;
    std::vector<char> m_buf;
    std::size_t m_pos = 0;
    std::size_t m_len = 0;
    std::uint64_t m_bufferOffset = 0; // offset in the decompressed data of m_buf[0]
    bool m_eof = false;
    std::string m_batch;
    std::vector<std::uint32_t> m_starts;
    ScanReport m_report;
    std::optional<Error> m_readError;
    Progress* m_progress = nullptr;
};

} // namespace day0::profile
