#include "history/run_record.h"

#include "base/file_util.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <random>
#include <set>
#include <system_error>
#include <tuple>

namespace day0::history {

namespace {

constexpr std::array kKindNames { "plan", "verify", "run", "compare", "trace", "validate" };
constexpr std::array kStatusNames { "ok", "failed", "error", "cancelled" };

template <typename Enum, std::size_t N>
Result<Enum> parseName(
    std::string_view text, const std::array<const char*, N>& names, const char* what)
{
    for (std::size_t i = 0; i < N; ++i) {
        if (text == names[i]) {
            return Enum(i);
        }
    }
    std::string valid;
    for (const char* name : names) {
        valid += valid.empty() ? "" : ", ";
        valid += name;
    }
    return Error::badInput(
        fmt::format("unknown run {} '{}' (expected one of: {})", what, text, valid));
}

} // namespace

std::string_view toString(RunKind kind) { return kKindNames[std::size_t(kind)]; }

std::string_view toString(RunStatus status) { return kStatusNames[std::size_t(status)]; }

Result<RunKind> parseRunKind(std::string_view text)
{
    return parseName<RunKind>(text, kKindNames, "kind");
}

Result<RunStatus> parseRunStatus(std::string_view text)
{
    return parseName<RunStatus>(text, kStatusNames, "status");
}

std::string kindLabel(const RunInfo& info)
{
    return info.tool.empty() ? std::string(toString(info.kind))
                             : fmt::format("{} ({})", toString(info.kind), info.tool);
}

std::string_view levelName(LogLevel level)
{
    switch (level) {
    case LogLevel::Debug:
        return "debug";
    case LogLevel::Info:
        return "info";
    case LogLevel::Warning:
        return "warning";
    case LogLevel::Error:
        return "error";
    }
    return "info";
}

LogLevel parseLevel(std::string_view text)
{
    if (text == "debug") {
        return LogLevel::Debug;
    }
    if (text == "warning") {
        return LogLevel::Warning;
    }
    if (text == "error") {
        return LogLevel::Error;
    }
    return LogLevel::Info;
}

Result<Artifact> makeArtifact(std::string kind, const std::filesystem::path& path)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (ec || !fs::exists(status)) {
        return Error::badInput(fmt::format("{}: no such file or folder", displayPath(path)));
    }
    std::int64_t size = 0;
    if (fs::is_directory(status)) {
        for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
             it.increment(ec)) {
            if (it->is_regular_file(ec)) {
                size += std::int64_t(it->file_size(ec));
            }
        }
    } else {
        size = std::int64_t(fs::file_size(path, ec));
    }
    if (ec) {
        return Error::badInput(
            fmt::format("{}: cannot read size: {}", displayPath(path), ec.message()));
    }
    Artifact artifact;
    artifact.kind = std::move(kind);
    artifact.path = fs::absolute(path, ec).lexically_normal().string();
    artifact.size = Bytes(size);
    return artifact;
}

RunRecord& RunRecord::addMetric(std::string name, double value, std::string unit)
{
    metrics.push_back({ std::move(name), value, std::move(unit) });
    return *this;
}

RunRecord& RunRecord::setProperty(std::string key, std::string value)
{
    for (auto& property : properties) {
        if (property.key == key) {
            property.value = std::move(value);
            return *this;
        }
    }
    properties.push_back({ std::move(key), std::move(value) });
    return *this;
}

RunRecord& RunRecord::addMemory(int rank, int stage, std::string component, Bytes bytes)
{
    memory.push_back({ rank, stage, std::move(component), bytes });
    return *this;
}

RunRecord& RunRecord::addArtifact(Artifact artifact)
{
    artifacts.push_back(std::move(artifact));
    return *this;
}

RunRecord& RunRecord::addEvent(LogLevel level, std::string message)
{
    events.push_back({ history::now(), level, std::move(message) });
    return *this;
}

const Metric* RunRecord::findMetric(std::string_view name) const
{
    const auto it = std::find_if(
        metrics.begin(), metrics.end(), [&](const Metric& m) { return m.name == name; });
    return it == metrics.end() ? nullptr : &*it;
}

const Property* RunRecord::findProperty(std::string_view key) const
{
    const auto it = std::find_if(
        properties.begin(), properties.end(), [&](const Property& p) { return p.key == key; });
    return it == properties.end() ? nullptr : &*it;
}

namespace {

bool sameValue(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool sameLayers(const LayerMetrics& a, const LayerMetrics& b)
{
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto& x = a.row(i);
        const auto& y = b.row(i);
        if (x.layer != y.layer || !sameValue(x.value, y.value) || a.anchor(i) != b.anchor(i)
            || a.metric(i) != b.metric(i) || a.subModule(i) != b.subModule(i)) {
            return false;
        }
    }
    return true;
}

} // namespace

bool sameResult(const RunRecord& a, const RunRecord& b)
{
    const RunInfo& x = a.info;
    const RunInfo& y = b.info;
    if (x.kind != y.kind || x.label != y.label || x.status != y.status || x.modelName != y.modelName
        || x.modelFingerprint != y.modelFingerprint || x.plan != y.plan
        || x.precision != y.precision || x.backend != y.backend || x.message != y.message) {
        return false;
    }
    const auto sameMetric = [](const Metric& m, const Metric& n) {
        return m.name == n.name && m.unit == n.unit && sameValue(m.value, n.value);
    };
    const auto sameProperty
        = [](const Property& p, const Property& q) { return p.key == q.key && p.value == q.value; };
    const auto sameMemory = [](const MemoryEntry& e, const MemoryEntry& f) {
        return e.rank == f.rank && e.stage == f.stage && e.component == f.component
            && e.bytes == f.bytes;
    };
    return std::equal(
               a.metrics.begin(), a.metrics.end(), b.metrics.begin(), b.metrics.end(), sameMetric)
        && std::equal(a.properties.begin(), a.properties.end(), b.properties.begin(),
            b.properties.end(), sameProperty)
        && std::equal(
            a.memory.begin(), a.memory.end(), b.memory.begin(), b.memory.end(), sameMemory)
        && sameLayers(a.layers, b.layers);
}

Result<void> RunRecord::validate() const
{
    if (!info.uuid.empty() && !isUuid(info.uuid)) {
        return Error::badInput(fmt::format("run record: uuid '{}' is not a UUID", info.uuid));
    }
    std::set<std::string_view> names;
    for (const auto& metric : metrics) {
        if (metric.name.empty()) {
            return Error::badInput("run record: a metric has an empty name");
        }
        if (!names.insert(metric.name).second) {
            return Error::badInput(fmt::format("run record: metric '{}' given twice", metric.name));
        }
    }
    names.clear();
    for (const auto& property : properties) {
        if (property.key.empty()) {
            return Error::badInput("run record: a property has an empty key");
        }
        if (!names.insert(property.key).second) {
            return Error::badInput(
                fmt::format("run record: property '{}' given twice", property.key));
        }
    }
    std::set<std::tuple<int, int, std::string_view>> parts;
    for (const auto& entry : memory) {
        if (entry.component.empty()) {
            return Error::badInput("run record: a memory entry has an empty component name");
        }
        if (!parts.insert({ entry.rank, entry.stage, entry.component }).second) {
            return Error::badInput(
                fmt::format("run record: memory component '{}' of rank {} stage {} "
                            "given twice",
                    entry.component, entry.rank, entry.stage));
        }
    }
    for (const auto& artifact : artifacts) {
        if (artifact.path.empty()) {
            return Error::badInput(
                fmt::format("run record: artifact of kind '{}' has an empty path", artifact.kind));
        }
    }
    for (const auto& row : layers.rows()) {
        if (layers.name(row.anchor).empty() || layers.name(row.metric).empty()) {
            return Error::badInput("run record: a layer metric has an empty anchor or metric name");
        }
    }
    if (const auto duplicate = layers.firstDuplicate(); !duplicate.empty()) {
        return Error::badInput(fmt::format("run record: layer metric {} given twice", duplicate));
    }
    return success();
}

std::string makeUuid()
{
    // Straight from the kernel each time: a process-local generator would repeat itself in a
    // forked child and hand out the same UUIDs twice.
    std::array<std::uint8_t, 16> bytes {};
    std::size_t filled = 0;
    while (filled < bytes.size()) {
        const auto n = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
        if (n > 0) {
            filled += std::size_t(n);
        } else if (errno != EINTR) {
            std::random_device device;
            for (auto& b : bytes) {
                b = std::uint8_t(device());
            }
            break;
        }
    }
    bytes[6] = std::uint8_t((bytes[6] & 0x0f) | 0x40); // version 4
    bytes[8] = std::uint8_t((bytes[8] & 0x3f) | 0x80); // RFC 4122 variant
    std::string text;
    text.reserve(36);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            text += '-';
        }
        text += fmt::format("{:02x}", bytes[i]);
    }
    return text;
}

bool isUuid(std::string_view text)
{
    if (text.size() != 36) {
        return false;
    }
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') {
                return false;
            }
        } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
            return false;
        }
    }
    return true;
}

} // namespace day0::history
