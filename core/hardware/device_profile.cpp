#include "hardware/device_profile.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/resources.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace day0::hardware {

namespace fs = std::filesystem;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string lower(std::string text)
{
    std::transform(text.begin(), text.end(), text.begin(),
        [](unsigned char c) { return char(std::tolower(c)); });
    return text;
}

/// A required number > 0 (or >= 0 when `allowZero`); records the failure on the reader.
double requireNumber(JsonReader& reader, const std::string& key, bool allowZero = false)
{
    if (!reader.has(key)) {
        reader.fail(key, "is missing");
        return 0.0;
    }
    const double v = reader.numberOr(key, std::nan(""));
    if (reader.ok() && (std::isnan(v) || v < 0.0 || (!allowZero && v == 0.0))) {
        reader.fail(key, allowZero ? "must be a number >= 0" : "must be a number > 0");
    }
    return v;
}

nlohmann::json linkToJson(const Link& link)
{
    return nlohmann::json { { "kind", link.kind }, { "bandwidth_gbs", link.bandwidth / 1e9 },
        { "latency_us", link.latency * 1e6 }, { "efficiency", link.efficiency } };
}

} // namespace

Result<Link> parseLink(const nlohmann::json& json, const std::string& origin, const Link* defaults)
{
    if (!json.is_object()) {
        return Error::badInput(origin + ": expected an object");
    }
    JsonReader reader(json, origin);
    Link link = defaults ? *defaults : Link { "", 0.0, 5e-6, 1.0 };
    link.kind = reader.stringOr("kind", link.kind);
    if (!defaults || reader.has("bandwidth_gbs")) {
        link.bandwidth = requireNumber(reader, "bandwidth_gbs") * 1e9;
    }
    link.latency = reader.numberOr("latency_us", link.latency * 1e6) * 1e-6;
    link.efficiency = reader.numberOr("efficiency", link.efficiency);
    if (reader.ok() && (link.efficiency <= 0.0 || link.efficiency > 1.0)) {
        reader.fail("efficiency", "must be in (0, 1]");
    }
    if (reader.ok() && link.latency < 0.0) {
        reader.fail("latency_us", "must be >= 0");
    }
    if (reader.ok() && link.kind.empty()) {
        reader.fail("kind", "is missing");
    }
    if (!reader.ok()) {
        return reader.error();
    }
    return link;
}

Result<DeviceProfile> parseDeviceProfile(const nlohmann::json& json, const std::string& origin)
{
    JsonReader reader(json, origin);
    DeviceProfile p;
    p.id = lower(reader.stringOr("id", ""));
    p.name = reader.stringOr("name", p.id);
    p.vendor = reader.stringOr("vendor", "");
    p.source = reader.stringOr("source", "");
    p.memoryBytes = requireNumber(reader, "memory_gib") * kGiB;
    p.bf16Flops = requireNumber(reader, "bf16_dense_tflops") * 1e12;
    p.fp8Flops = reader.numberOr("fp8_dense_tflops", 0.0) * 1e12;
    p.hbmBandwidth = requireNumber(reader, "hbm_bandwidth_gbs") * 1e9;
    p.defaultGpusPerNode = int(reader.intOr("gpus_per_node", 8));
    if (reader.ok() && p.id.empty()) {
        reader.fail("id", "is missing");
    }
    if (reader.ok() && p.fp8Flops < 0.0) {
        reader.fail("fp8_dense_tflops", "must be >= 0 (0: no FP8)");
    }
    if (reader.ok() && p.defaultGpusPerNode <= 0) {
        reader.fail("gpus_per_node", "must be a positive integer");
    }
    if (reader.ok() && json.contains("aliases")) {
        const auto& aliases = json.at("aliases");
        if (!aliases.is_array()) {
            reader.fail("aliases", "must be a list of strings");
        } else {
            for (const auto& a : aliases) {
                if (!a.is_string()) {
                    reader.fail("aliases", "must be a list of strings");
                    break;
                }
                p.aliases.push_back(lower(a.get<std::string>()));
            }
        }
    }
    if (!reader.ok()) {
        return reader.error();
    }
    for (const char* key : { "intra_node", "inter_node" }) {
        if (!json.contains(key) || !json.at(key).is_object()) {
            return Error::badInput(
                fmt::format("{}: '{}' is missing or not an object", origin, key));
        }
    }
    auto intra = parseLink(json.at("intra_node"), origin + ": intra_node");
    if (!intra) {
        return intra.error();
    }
    p.intraNode = *intra;
    JsonReader domain(json.at("intra_node"), origin + ": intra_node");
    p.domainSize = int(domain.requirePositive("domain_size"));
    if (!domain.ok()) {
        return domain.error();
    }
    auto inter = parseLink(json.at("inter_node"), origin + ": inter_node");
    if (!inter) {
        return inter.error();
    }
    p.interNode = *inter;
    return p;
}

Result<DeviceProfile> loadDeviceProfile(const fs::path& path)
{
    auto json = readJsonFile(path);
    if (!json) {
        return json.error();
    }
    return parseDeviceProfile(*json, displayPath(path));
}

Result<std::vector<DeviceProfile>> bundledDeviceProfiles()
{
    const fs::path dir = resourceDir() / "hardware";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        return Error::internal(fmt::format(
            "{}: bundled hardware profiles not found (set DAY0_RESOURCES)", displayPath(dir)));
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (entry.is_regular_file() && entry.path().extension() == ".json") {
            files.push_back(entry.path());
        }
    }
    std::sort(files.begin(), files.end());
    std::vector<DeviceProfile> profiles;
    for (const auto& file : files) {
        auto profile = loadDeviceProfile(file);
        if (!profile) {
            return profile.error();
        }
        profiles.push_back(std::move(profile.value()));
    }
    std::sort(profiles.begin(), profiles.end(),
        [](const DeviceProfile& a, const DeviceProfile& b) { return a.id < b.id; });
    return profiles;
}

Result<DeviceProfile> findDeviceProfile(const std::string& name)
{
    auto profiles = bundledDeviceProfiles();
    if (!profiles) {
        return profiles.error();
    }
    const std::string key = lower(name);
    std::string known;
    for (const auto& p : *profiles) {
        if (p.id == key || std::find(p.aliases.begin(), p.aliases.end(), key) != p.aliases.end()) {
            return p;
        }
        known += (known.empty() ? "" : ", ") + p.id;
    }
    return Error::badInput(fmt::format("unknown device '{}' (known: {})", name, known));
}

nlohmann::json deviceProfileToJson(const DeviceProfile& p)
{
    auto intra = linkToJson(p.intraNode);
    intra["domain_size"] = p.domainSize;
    return nlohmann::json { { "id", p.id }, { "name", p.name }, { "vendor", p.vendor },
        { "aliases", p.aliases }, { "memory_gib", p.memoryBytes / kGiB },
        { "bf16_dense_tflops", p.bf16Flops / 1e12 }, { "fp8_dense_tflops", p.fp8Flops / 1e12 },
        { "hbm_bandwidth_gbs", p.hbmBandwidth / 1e9 }, { "intra_node", intra },
        { "inter_node", linkToJson(p.interNode) }, { "gpus_per_node", p.defaultGpusPerNode },
        { "source", p.source } };
}

} // namespace day0::hardware
