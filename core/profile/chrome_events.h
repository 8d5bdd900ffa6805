#pragma once

#include "profile/trace_builder.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace day0::profile::detail {

/// A pid or tid as written: a number or a string ("Spans", "stream 7").
struct RawId {
    bool present = false;
    bool isString = false;
    std::int64_t number = 0;
    std::string_view text;
};

/// One argument as parsed, before interning.
struct RawArg {
    std::string_view key;
    ArgType type = ArgType::Null;
    std::int64_t intValue = 0;
    double doubleValue = 0.0;
    std::string_view text;
};

/// One Chrome trace event as parsed; views point into the parser's buffers.
struct RawEvent {
    char ph = 0;
    std::string_view name;
    std::string_view cat;
    bool hasTs = false;
    std::int64_t ts = 0; ///< ns
    bool hasDur = false;
    std::int64_t dur = 0; ///< ns
    RawId pid;
    RawId tid;
    bool hasId = false;
    std::uint64_t id = 0;
    bool bindEnclosing = false; ///< bp == "e"
    std::vector<RawArg> args;

    void clear()
    {
        ph = 0;
        name = {};
        cat = {};
        hasTs = hasDur = hasId = bindEnclosing = false;
        ts = dur = 0;
        pid = {};
        tid = {};
        id = 0;
        args.clear();
    }
};

/// Maps a Chrome/Kineto category (current or 2021 names) and kernel name to a Category.
Category classifyChromeEvent(std::string_view cat, std::string_view name);

/// Turns parsed Chrome trace events into tracks, slices, instants, counters and flow endpoints
/// of one source; independent of the JSON parser. finish() applies the metadata events (process
/// and thread names, sort order), marks GPU processes and reports what was skipped.
class ChromeEventHandler {
public:
    ChromeEventHandler(TraceBuilder& builder, std::uint16_t source);

    void handle(const RawEvent& event);
    void finish(std::int32_t rank);
    /// Counts an event that could not be parsed at all.
    void countMalformed() { ++m_malformed; }
    [[nodiscard]] std::uint64_t handled() const { return m_handled; }

private:
    struct Key {
        std::int64_t pid;
        std::int64_t tid;
        Lane lane;
        bool operator==(const Key&) const = default;
    };
    struct KeyHash {
        std::size_t operator()(const Key& k) const noexcept
        {
            // Unsigned: string ids are large negative numbers and must not overflow.
            const std::uint64_t h = std::uint64_t(k.pid) * 1000003u ^ std::uint64_t(k.tid);
            return std::size_t(h ^ (h >> 29)) ^ std::size_t(k.lane);
        }
    };
    struct Process {
        std::string name;
        std::string label;
        std::int64_t sortIndex = 0;
        bool hasSort = false;
        bool gpu = false;
        std::int32_t device = -1;
        std::string text; ///< the pid as written when it is a string
    };
    struct Thread {
        std::string name;
        std::int64_t sortIndex = 0;
        bool hasSort = false;
    };
    struct OpenSlice {
        std::int64_t start;
        StringId name;
        Category category;
        ArgsRef args;
        std::uint32_t correlation;
        std::uint32_t externalId;
    };

    std::int64_t idKey(const RawId& id);
    TrackId trackFor(const RawEvent& e, Lane lane);
    ArgsRef encodeArgs(const RawEvent& e, std::uint32_t& correlation, std::uint32_t& externalId,
        bool extractIds, std::int32_t* device);
    StringId internText(std::string_view text);
    void handleMetadata(const RawEvent& e);
    void handleCounter(const RawEvent& e);
    void handleSlice(const RawEvent& e, Category category);

    TraceBuilder& m_builder;
    std::uint16_t m_source;
    std::unordered_map<Key, TrackId, KeyHash> m_tracks;
    Key m_lastKey { 0, 0, Lane::Main };
    TrackId m_lastTrack = 0xFFFFFFFFu;
    std::vector<std::pair<Key, TrackId>> m_created;
    std::unordered_map<std::int64_t, Process> m_processes;
    std::map<std::pair<std::int64_t, std::int64_t>, Thread> m_threads;
    std::unordered_map<StringId, std::int64_t> m_stringIds;
    std::unordered_map<TrackId, std::vector<OpenSlice>> m_openB;
    std::map<std::pair<StringId, std::uint64_t>, std::pair<TrackId, OpenSlice>> m_openAsync;
    std::unordered_map<std::string, TrackId> m_counterTracks;
    std::map<char, std::uint64_t> m_skippedPhases;
    std::uint64_t m_handled = 0;
    std::uint64_t m_malformed = 0;
    std::uint64_t m_missingTs = 0;
    std::uint64_t m_outOfRange = 0;
    std::uint64_t m_unmatchedE = 0;
    std::uint64_t m_negativeDur = 0;
    std::string m_scratch;
};

} // namespace day0::profile::detail
