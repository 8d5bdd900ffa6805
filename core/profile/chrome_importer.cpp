#include "profile/chrome_importer.h"

#include "base/json_util.h"
#include "base/utf8.h"
#include "profile/chrome_events.h"
#include "profile/json_event_scanner.h"
#include "profile/pipelined_sink.h"
#include "profile/privacy.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

namespace day0::profile {

namespace od = simdjson::ondemand;

bool parseMicrosToNanos(std::string_view text, std::int64_t& ns)
{
    std::size_t i = 0;
    while (i < text.size() && (text[i] == ' ' || text[i] == '"')) {
        ++i;
    }
    bool negative = false;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
        negative = text[i] == '-';
        ++i;
    }
    const std::size_t intStart = i;
    std::int64_t whole = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        if (whole > (INT64_MAX / 1000 - 9) / 10) {
            return false;
        }
        whole = whole * 10 + (text[i] - '0');
        ++i;
    }
    std::int64_t frac = 0;
    int digits = 0;
    bool roundUp = false;
    bool anyDigit = i > intStart;
    if (i < text.size() && text[i] == '.') {
        ++i;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
            if (digits < 3) {
                frac = frac * 10 + (text[i] - '0');
                ++digits;
            } else if (digits == 3) {
                roundUp = text[i] >= '5';
                ++digits;
            }
            anyDigit = true;
            ++i;
        }
    }
    if (!anyDigit) {
        return false;
    }
    if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        // Exponents are rare in traces; a double is precise enough for them.
        double v = 0.0;
        const std::string copy(text.substr(intStart - (negative ? 1 : 0)));
        if (std::sscanf(copy.c_str(), "%lf", &v) != 1 || !std::isfinite(v) || std::fabs(v) > 9e15) {
            return false;
        }
        ns = std::llround(v * 1000.0);
        return true;
    }
    while (digits < 3) {
        frac *= 10;
        ++digits;
    }
    if (whole > INT64_MAX / 1000 - 1) {
        return false;
    }
    std::int64_t value = whole * 1000 + frac + (roundUp ? 1 : 0);
    ns = negative ? -value : value;
    return true;
}

namespace {

using detail::RawArg;
using detail::RawEvent;
using detail::RawId;

simdjson::error_code readId(od::value v, RawId& out)
{
    od::json_type type;
    if (auto err = v.type().get(type)) {
        return err;
    }
    out.present = true;
    if (type == od::json_type::string) {
        out.isString = true;
        return v.get_string().get(out.text);
    }
    if (type == od::json_type::number) {
        const std::string_view raw = v.raw_json_token();
        std::int64_t n = 0;
        const auto r = std::from_chars(raw.data(), raw.data() + raw.size(), n);
        if (r.ec != std::errc()) {
            return simdjson::NUMBER_ERROR;
        }
        out.number = n;
        return simdjson::SUCCESS;
    }
    out.present = false;
    return simdjson::SUCCESS;
}

simdjson::error_code readTime(od::value v, bool& has, std::int64_t& out)
{
    std::string_view raw;
    od::json_type type;
    if (auto err = v.type().get(type)) {
        return err;
    }
    if (type == od::json_type::string) {
        if (auto err = v.get_string().get(raw)) {
            return err;
        }
    } else if (type == od::json_type::number) {
        raw = v.raw_json_token();
    } else {
        return simdjson::SUCCESS;
    }
    has = parseMicrosToNanos(raw, out);
    return simdjson::SUCCESS;
}

simdjson::error_code readFlowId(od::value v, bool& has, std::uint64_t& out)
{
    od::json_type type;
    if (auto err = v.type().get(type)) {
        return err;
    }
    if (type == od::json_type::number) {
        const std::string_view raw = v.raw_json_token();
        std::int64_t n = 0;
        std::from_chars(raw.data(), raw.data() + raw.size(), n);
        out = std::uint64_t(n);
        has = true;
    } else if (type == od::json_type::string) {
        std::string_view s;
        if (auto err = v.get_string().get(s)) {
            return err;
        }
        const bool hex = s.substr(0, 2) == "0x" || s.substr(0, 2) == "0X";
        const auto body = hex ? s.substr(2) : s;
        const auto r = std::from_chars(body.data(), body.data() + body.size(), out, hex ? 16 : 10);
        if (r.ec != std::errc() || r.ptr != body.data() + body.size()) {
            out = hashBytes(s.data(), s.size());
        }
        has = true;
    } else if (type == od::json_type::object) {
        // id2: {"local": ...} or {"global": ...}
        od::object o;
        if (auto err = v.get_object().get(o)) {
            return err;
        }
        for (auto field : o) {
            od::value inner;
            if (auto err = field.value().get(inner)) {
                return err;
            }
            if (auto err = readFlowId(inner, has, out)) {
                return err;
            }
        }
    }
    return simdjson::SUCCESS;
}

simdjson::error_code readArgs(od::value v, std::vector<RawArg>& out)
{
    od::object o;
    if (auto err = v.get_object().get(o)) {
        return err;
    }
    for (auto field : o) {
        RawArg a;
        if (auto err = field.unescaped_key().get(a.key)) {
            return err;
        }
        od::value value;
        if (auto err = field.value().get(value)) {
            return err;
        }
        od::json_type type;
        if (auto err = value.type().get(type)) {
            return err;
        }
        switch (type) {
        case od::json_type::number: {
            od::number n;
            if (auto err = value.get_number().get(n)) {
                return err;
            }
            if (n.is_int64()) {
                a.type = ArgType::Int;
                a.intValue = n.get_int64();
            } else {
                a.type = ArgType::Double;
                a.doubleValue = n.is_uint64() ? double(n.get_uint64()) : n.get_double();
            }
            break;
        }
        case od::json_type::string:
            a.type = ArgType::String;
            if (auto err = value.get_string().get(a.text)) {
                return err;
            }
            break;
        case od::json_type::boolean: {
            bool b = false;
            if (auto err = value.get_bool().get(b)) {
                return err;
            }
            a.type = b ? ArgType::True : ArgType::False;
            break;
        }
        case od::json_type::null:
            a.type = ArgType::Null;
            break;
        case od::json_type::array: {
            od::array arr;
            if (auto err = value.get_array().get(arr)) {
                return err;
            }
            a.type = ArgType::Json;
            if (auto err = arr.raw_json().get(a.text)) {
                return err;
            }
            break;
        }
        case od::json_type::object: {
            od::object obj;
            if (auto err = value.get_object().get(obj)) {
                return err;
            }
            a.type = ArgType::Json;
            if (auto err = obj.raw_json().get(a.text)) {
                return err;
            }
            break;
        }
        }
        out.push_back(a);
    }
    return simdjson::SUCCESS;
}

/// Which top-level event field a key names; compared by length and bytes, which is much cheaper
/// than a chain of string comparisons on every field of every event.
enum class Field { Ph, Name, Cat, Ts, Dur, Pid, Tid, Id, Bp, Args, Other };

Field fieldOf(std::string_view k)
{
    switch (k.size()) {
    case 2:
        if (k[0] == 'p' && k[1] == 'h') {
            return Field::Ph;
        }
        if (k[0] == 't' && k[1] == 's') {
            return Field::Ts;
        }
        if (k[0] == 'i' && k[1] == 'd') {
            return Field::Id;
        }
        if (k[0] == 'b' && k[1] == 'p') {
            return Field::Bp;
        }
        return Field::Other;
    case 3:
        if (k[1] == 'i' && k[2] == 'd') {
            return k[0] == 'p'
                ? Field::Pid
                : (k[0] == 't' ? Field::Tid : (k[0] == 'i' ? Field::Id : Field::Other));
        }
        if (k[0] == 'c' && k[1] == 'a' && k[2] == 't') {
            return Field::Cat;
        }
        if (k[0] == 'd' && k[1] == 'u' && k[2] == 'r') {
            return Field::Dur;
        }
        return Field::Other;
    case 4:
        if (std::memcmp(k.data(), "name", 4) == 0) {
            return Field::Name;
        }
        if (std::memcmp(k.data(), "args", 4) == 0) {
            return Field::Args;
        }
        return Field::Other;
    default:
        return Field::Other;
    }
}

simdjson::error_code readEvent(od::object obj, RawEvent& e)
{
    for (auto field : obj) {
        std::string_view key;
        if (auto err = field.unescaped_key().get(key)) {
            return err;
        }
        od::value v;
        if (auto err = field.value().get(v)) {
            return err;
        }
        simdjson::error_code err = simdjson::SUCCESS;
        switch (fieldOf(key)) {
        case Field::Ph: {
            std::string_view ph;
            err = v.get_string().get(ph);
            e.ph = ph.empty() ? '?' : ph[0];
            break;
        }
        case Field::Name:
            err = v.get_string().get(e.name);
            break;
        case Field::Cat:
            err = v.get_string().get(e.cat);
            break;
        case Field::Ts:
            err = readTime(v, e.hasTs, e.ts);
            break;
        case Field::Dur:
            err = readTime(v, e.hasDur, e.dur);
            break;
        case Field::Pid:
            err = readId(v, e.pid);
            break;
        case Field::Tid:
            err = readId(v, e.tid);
            break;
        case Field::Id:
            err = readFlowId(v, e.hasId, e.id);
            break;
        case Field::Bp: {
            std::string_view bp;
            err = v.get_string().get(bp);
            e.bindEnclosing = bp == "e";
            break;
        }
        case Field::Args: {
            od::json_type type;
            err = v.type().get(type);
            if (!err && type == od::json_type::object) {
                err = readArgs(v, e.args);
            }
            break;
        }
        case Field::Other:
            break;
        }
        if (err) {
            return err;
        }
    }
    return simdjson::SUCCESS;
}

/// Feeds scanner batches through simdjson into a ChromeEventHandler.
class ChromeSink final : public JsonEventSink {
public:
    ChromeSink(TraceBuilder& builder, std::uint16_t source, std::string fileName)
        : m_handler(builder, source)
        , m_file(std::move(fileName))
    {
    }

    Result<void> onEvents(std::string& json, std::vector<std::uint32_t>& starts) override
    {
        std::size_t done = 0;
        const auto err = parseBatch(json, done);
        if (err == simdjson::SUCCESS) {
            return success();
        }
        // Something in this batch is malformed: parse the rest one event at a time, so only the
        // bad events are lost.
        for (std::size_t i = done; i < starts.size(); ++i) {
            const std::size_t begin = starts[i];
            const std::size_t end = i + 1 < starts.size() ? starts[i + 1] - 1 : json.size() - 1;
            m_single.assign(json, begin, end - begin);
            m_single.reserve(m_single.size() + simdjson::SIMDJSON_PADDING);
            od::document doc;
            od::object obj;
            m_event.clear();
            auto e
                = m_parser.iterate(m_single.data(), m_single.size(), m_single.capacity()).get(doc);
            if (e == simdjson::UTF8_ERROR) {
                // A name with bytes that are not UTF-8 (a path, a kernel name from a foreign
                // locale): import the event with U+FFFD for those bytes, as a decoder would,
                // and say how many there were.
                std::size_t replaced = 0;
                m_single = replaceInvalidUtf8(m_single, &replaced);
                m_single.reserve(m_single.size() + simdjson::SIMDJSON_PADDING);
                m_utf8Bytes += replaced;
                ++m_utf8Events;
                e = m_parser.iterate(m_single.data(), m_single.size(), m_single.capacity())
                        .get(doc);
            }
            if (!e) {
                e = doc.get_object().get(obj);
            }
            if (!e) {
                e = readEvent(obj, m_event);
            }
            if (e) {
                if (m_badCount++ == 0) {
                    m_firstBad = fmt::format(
                        "event {} ({})", m_eventIndex + i, simdjson::error_message(e));
                }
                m_handler.countMalformed();
                continue;
            }
            m_handler.handle(m_event);
        }
        m_eventIndex += starts.size();
        return success();
    }

    [[nodiscard]] bool wantsKey(std::string_view key) const override
    {
        // Only what the trace model needs; never host or user names (Kineto traces may carry
        // "host_name", "username" and job metadata at the top level).
        return key == "distributedInfo" || key == "baseTimeNanoseconds"
            || key == "deviceProperties";
    }

    void onTopLevel(std::string_view key, std::string_view rawJson) override
    {
        auto j = checkJsonDepth(rawJson, m_file)
            ? nlohmann::json::parse(rawJson, nullptr, false)
            : nlohmann::json(nlohmann::json::value_t::discarded);
        if (j.is_discarded()) {
            // Called on the reading thread while another one builds: keep it for later.
            m_topLevelWarnings.push_back(
                fmt::format("{}: top-level \"{}\" is not valid JSON and was ignored", m_file, key));
            return;
        }
        if (key == "baseTimeNanoseconds") {
            if (j.is_number_integer()) {
                m_baseNs = j.get<std::int64_t>();
            } else if (j.is_string()) {
                std::int64_t v = 0;
                const auto s = j.get<std::string>();
                if (std::from_chars(s.data(), s.data() + s.size(), v).ec == std::errc()) {
                    m_baseNs = v;
                }
            }
        } else if (key == "distributedInfo" && j.is_object()) {
            if (j.contains("rank") && j["rank"].is_number_integer()) {
                m_rank = j["rank"].get<std::int32_t>();
            }
            if (j.contains("world_size") && j["world_size"].is_number_integer()) {
                m_worldSize = j["world_size"].get<std::int32_t>();
            }
            if (j.contains("backend") && j["backend"].is_string()) {
                m_backend = j["backend"].get<std::string>();
            }
        } else if (key == "deviceProperties" && j.is_array()) {
            for (const auto& d : j) {
                if (d.is_object() && d.contains("id") && d["id"].is_number_integer()
                    && d.contains("name") && d["name"].is_string()) {
                    m_devices.emplace_back(
                        d["id"].get<std::int32_t>(), redactUserPaths(d["name"].get<std::string>()));
                }
            }
        }
    }

    detail::ChromeEventHandler m_handler;
    std::int64_t m_baseNs = 0;
    std::optional<std::int32_t> m_rank;
    std::int32_t m_worldSize = 0;
    std::string m_backend;
    std::vector<std::pair<std::int32_t, std::string>> m_devices;
    std::size_t m_badCount = 0;
    std::string m_firstBad;
    std::size_t m_utf8Events = 0; ///< events imported with bytes that are not UTF-8 replaced
    std::size_t m_utf8Bytes = 0;
    std::vector<std::string> m_topLevelWarnings;

private:
    simdjson::error_code parseBatch(std::string& json, std::size_t& done)
    {
        od::document doc;
        if (auto err = m_parser.iterate(json.data(), json.size(), json.capacity()).get(doc)) {
            return err;
        }
        od::array events;
        if (auto err = doc.get_array().get(events)) {
            return err;
        }
        for (auto element : events) {
            od::object obj;
            if (auto err = element.get_object().get(obj)) {
                return err;
            }
            m_event.clear();
            if (auto err = readEvent(obj, m_event)) {
                return err;
            }
            m_handler.handle(m_event);
            ++done;
        }
        m_eventIndex += done;
        return simdjson::SUCCESS;
    }

    std::string m_file;
    od::parser m_parser;
    RawEvent m_event;
    std::string m_single;
    std::size_t m_eventIndex = 0;
};

} // namespace

Result<void> importChromeJson(ByteSource& source, TraceBuilder& builder,
    const ImportOptions& options, Progress& progress, std::stop_token stop)
{
    const std::string file = std::string(baseName(source.displayName()));
    SourceInfo info;
    info.file = file;
    info.format = "chrome";
    const std::uint16_t sourceIndex = builder.addSource(info);
    const auto mark = builder.mark();
    ChromeSink sink(builder, sourceIndex, source.displayName());
    Result<void> scanned = success();
    Result<void> parsed = success();
    ScanReport report;
    {
        detail::PipelinedSink pipeline(sink);
        JsonEventScanner scanner(source, pipeline, 4 << 20);
        scanned = scanner.run(progress, stop);
        parsed = pipeline.finish();
        report = scanner.report();
    }
    DAY0_TRY(scanned);
    DAY0_TRY(parsed);
    for (auto& w : sink.m_topLevelWarnings) {
        builder.warn(std::move(w));
    }
    if (stop.stop_requested()) {
        return Error::cancelled();
    }
    if (report.noEventArray && report.events == 0) {
        return Error::badInput(
            fmt::format("{}: a JSON object without a \"traceEvents\" array", source.displayName()));
    }
    const std::int32_t rank = options.rank.value_or(sink.m_rank.value_or(0));
    sink.m_handler.finish(rank);
    if (sink.m_baseNs != 0) {
        if (validTime(sink.m_baseNs)) {
            builder.shiftSince(mark, sink.m_baseNs);
        } else {
            builder.warn(fmt::format("{}: baseTimeNanoseconds {} is out of range and was ignored",
                source.displayName(), sink.m_baseNs));
        }
    }
    auto& src = builder.source(sourceIndex);
    src.rank = rank;
    src.worldSize = sink.m_worldSize;
    src.backend = sink.m_backend;
    src.format = sink.m_rank.has_value() || sink.m_baseNs != 0 || !sink.m_devices.empty()
        ? "kineto"
        : "chrome";
    for (const auto& [id, name] : sink.m_devices) {
        builder.addDevice({ rank, id, name });
    }
    const auto& where = source.displayName();
    if (sink.m_badCount > 0) {
        builder.warn(fmt::format("{}: skipped {} malformed events (first: {})", where,
            sink.m_badCount, sink.m_firstBad));
    }
    if (sink.m_utf8Events > 0) {
        builder.warn(fmt::format("{}: replaced {} bytes that are not UTF-8 with U+FFFD in {} "
                                 "events",
            where, sink.m_utf8Bytes, sink.m_utf8Events));
    }
    if (report.controlCharsEscaped > 0) {
        builder.warn(fmt::format("{}: escaped {} raw control characters inside strings", where,
            report.controlCharsEscaped));
    }
    if (report.badEscapesRepaired > 0) {
        builder.warn(fmt::format("{}: kept {} invalid backslash escapes as literal text", where,
            report.badEscapesRepaired));
    }
    if (report.oversizedEvents > 0) {
        builder.warn(fmt::format(
            "{}: skipped {} events larger than 256 MiB each", where, report.oversizedEvents));
    }
    if (report.nonObjectEntries > 0) {
        builder.warn(fmt::format("{}: skipped {} traceEvents entries that are not objects", where,
            report.nonObjectEntries));
    }
    if (source.truncated()) {
        builder.warn(fmt::format("{}: the gzip data is truncated after {} decompressed bytes; "
                                 "imported what was complete",
            where, source.bytesProduced()));
    } else if (report.lastEventCut) {
        builder.warn(
            fmt::format("{}: the file ends inside an event; that last event was skipped", where));
    } else if (report.endedEarly && !report.noEventArray) {
        builder.warn(fmt::format(
            "{}: the JSON is not closed at the end of the file; imported all complete events",
            where));
    }
    if (source.trailingBytesIgnored() > 0) {
        builder.warn(fmt::format("{}: ignored {} bytes after the end of the gzip data", where,
            source.trailingBytesIgnored()));
    }
    return success();
}

} // namespace day0::profile
