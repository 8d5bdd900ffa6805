#include "hardware/cluster.h"

#include "base/file_util.h"
#include "base/json_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace day0::hardware {

namespace fs = std::filesystem;

namespace {

std::optional<int> parsePositive(std::string_view text)
{
    int value = 0;
    const auto* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end || value <= 0) {
        return std::nullopt;
    }
    return value;
}

Result<void> checkShape(const Cluster& c, const std::string& origin)
{
    if (c.numNodes <= 0 || c.gpusPerNode <= 0) {
        return Error::badInput(fmt::format("{}: nodes and GPUs per node must be positive", origin));
    }
    if (c.gpusPerNode > kMaxGpusPerNode || c.domainSize > kMaxGpusPerNode) {
        return Error::badInput(fmt::format("{}: {} GPUs per node (domain {}) is more than the {} "
                                           "Day0 plans for",
            origin, c.gpusPerNode, c.domainSize, kMaxGpusPerNode));
    }
    if (std::int64_t(c.numNodes) * c.gpusPerNode > kMaxWorldSize) {
        return Error::badInput(fmt::format("{}: {} nodes × {} GPUs is more than the {} GPUs Day0 "
                                           "plans for",
            origin, c.numNodes, c.gpusPerNode, kMaxWorldSize));
    }
    const bool compatible = c.domainSize >= c.gpusPerNode ? c.domainSize % c.gpusPerNode == 0
                                                          : c.gpusPerNode % c.domainSize == 0;
    if (!compatible) {
        return Error::badInput(
            fmt::format("{}: fast-link domain of {} devices does not tile nodes of {} devices",
                origin, c.domainSize, c.gpusPerNode));
    }
    return success();
}

std::string gbps(double bytesPerSecond) { return fmt::format("{:.0f} GB/s", bytesPerSecond / 1e9); }

} // namespace

const Link& Cluster::interNodeLink() const
{
    if (nodeGroups.empty()) {
        return device.interNode;
    }
    const auto it = std::min_element(
        nodeGroups.begin(), nodeGroups.end(), [](const NodeGroup& a, const NodeGroup& b) {
            return a.interNode.effectiveBandwidth() < b.interNode.effectiveBandwidth();
        });
    return it->interNode;
}

bool Cluster::mixedInterNode() const
{
    for (const auto& g : nodeGroups) {
        if (g.interNode.bandwidth != nodeGroups.front().interNode.bandwidth) {
            return true;
        }
    }
    return false;
}

std::string Cluster::describe() const
{
    std::string inter;
    if (mixedInterNode()) {
        for (const auto& g : nodeGroups) {
            inter += fmt::format("{}{} nodes at {}/GPU", inter.empty() ? "" : ", ", g.count,
                gbps(g.interNode.bandwidth));
        }
    } else {
        inter = fmt::format("{}/GPU {}", gbps(interNodeLink().bandwidth), interNodeLink().kind);
    }
    const int domain = std::min(domainSize, worldSize());
    return fmt::format("{} × {} ({} node{} × {}), {} {} in {}-GPU domains; between nodes: {}",
        worldSize(), device.name, numNodes, numNodes == 1 ? "" : "s", gpusPerNode, intraNode.kind,
        gbps(intraNode.bandwidth), domain, inter);
}

Result<Cluster> makeCluster(const DeviceProfile& device, int nodes, int gpusPerNode)
{
    Cluster c;
    c.name = fmt::format("{}:{}x{}", device.id, nodes, gpusPerNode);
    c.device = device;
    c.numNodes = nodes;
    c.gpusPerNode = gpusPerNode;
    c.domainSize = device.domainSize;
    // A node smaller than the profile's domain (e.g. h200:4x4) still has all of its devices on
    // the fast link; a domain larger than a node (NVL72) spans several nodes.
    if (device.domainSize > gpusPerNode && device.domainSize == device.defaultGpusPerNode) {
        c.domainSize = gpusPerNode;
    }
    c.intraNode = device.intraNode;
    c.nodeGroups.push_back({ nodes, device.interNode });
    DAY0_TRY(checkShape(c, c.name));
    return c;
}

Result<Cluster> parseCluster(const std::string& text)
{
    if (text.empty()) {
        return Error::badInput("empty cluster: expected e.g. 'h200:32x8' or a cluster JSON file");
    }
    std::error_code ec;
    if (text.ends_with(".json") || fs::is_regular_file(text, ec)) {
        return loadClusterFile(text);
    }
    const auto colon = text.find(':');
    auto device = findDeviceProfile(text.substr(0, colon));
    if (!device) {
        return Error::badInput(fmt::format("cluster '{}': {}", text, device.error().message));
    }
    int nodes = 1;
    int perNode = device->defaultGpusPerNode;
    if (colon != std::string::npos) {
        const std::string shape = text.substr(colon + 1);
        const auto x = shape.find('x');
        if (x == std::string::npos) {
            const auto n = parsePositive(shape);
            if (!n) {
                return Error::badInput(fmt::format(
                    "cluster '{}': expected <device>:<nodes>x<GPUs per node>, e.g. h200:32x8",
                    text));
            }
            perNode = *n;
        } else {
            const auto n = parsePositive(std::string_view(shape).substr(0, x));
            const auto g = parsePositive(std::string_view(shape).substr(x + 1));
            if (!n || !g) {
                return Error::badInput(fmt::format(
                    "cluster '{}': expected <device>:<nodes>x<GPUs per node>, e.g. h200:32x8",
                    text));
            }
            nodes = *n;
            perNode = *g;
        }
    }
    return makeCluster(*device, nodes, perNode);
}

Result<Cluster> parseClusterJson(const nlohmann::json& json, const std::string& origin)
{
    if (!json.is_object()) {
        return Error::badInput(origin + ": expected a JSON object");
    }
    DeviceProfile device;
    if (!json.contains("device")) {
        return Error::badInput(origin + ": 'device' is missing (a bundled id or a profile object)");
    }
    const auto& dev = json.at("device");
    if (dev.is_string()) {
        auto found = findDeviceProfile(dev.get<std::string>());
        if (!found) {
            return found.error().withContext(origin + ": 'device'");
        }
        device = *found;
    } else if (dev.is_object()) {
        auto parsed = parseDeviceProfile(dev, origin + ": device");
        if (!parsed) {
            return parsed.error();
        }
        device = *parsed;
    } else {
        return Error::badInput(origin + ": 'device' must be a bundled id or a profile object");
    }

    JsonReader reader(json, origin);
    Cluster c;
    c.name = reader.stringOr("name", origin);
    c.device = device;
    const std::int64_t perNode = reader.intOr("gpus_per_node", device.defaultGpusPerNode);
    const std::int64_t domain = reader.intOr("domain_size", device.domainSize);
    if (!reader.ok()) {
        return reader.error();
    }
    if (perNode > kMaxGpusPerNode || domain > kMaxGpusPerNode) {
        return Error::badInput(fmt::format(
            "{}: 'gpus_per_node' {} or 'domain_size' {} is more than the {} Day0 plans for", origin,
            perNode, domain, kMaxGpusPerNode));
    }
    c.gpusPerNode = int(perNode);
    c.domainSize = int(domain);
    if (c.gpusPerNode <= 0 || c.domainSize <= 0) {
        return Error::badInput(origin + ": 'gpus_per_node' and 'domain_size' must be positive");
    }
    c.intraNode = device.intraNode;
    if (json.contains("intra_node")) {
        auto link = parseLink(json.at("intra_node"), origin + ": intra_node", &device.intraNode);
        if (!link) {
            return link.error();
        }
        c.intraNode = *link;
    }

    if (!json.contains("nodes")) {
        return Error::badInput(origin + ": 'nodes' is missing (a count or a list of node groups)");
    }
    const auto& nodes = json.at("nodes");
    if (nodes.is_number_integer()) {
        const auto n = nodes.get<std::int64_t>();
        if (n <= 0 || n > kMaxWorldSize) {
            return Error::badInput(
                fmt::format("{}: 'nodes' must be in [1, {}], got {}", origin, kMaxWorldSize, n));
        }
        c.numNodes = int(n);
        c.nodeGroups.push_back({ c.numNodes, device.interNode });
    } else if (nodes.is_array() && !nodes.empty()) {
        c.numNodes = 0;
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            const std::string where = fmt::format("{}: nodes[{}]", origin, i);
            JsonReader group(nodes[i], where);
            NodeGroup g;
            const std::int64_t count = group.requirePositive("count");
            if (!group.ok()) {
                return group.error();
            }
            if (count > kMaxWorldSize || c.numNodes + count > kMaxWorldSize) {
                return Error::badInput(
                    fmt::format("{}: count {} makes more than the {} nodes Day0 plans for", where,
                        count, kMaxWorldSize));
            }
            g.count = int(count);
            g.interNode = device.interNode;
            if (nodes[i].contains("inter_node")) {
                auto link = parseLink(
                    nodes[i].at("inter_node"), where + ": inter_node", &device.interNode);
                if (!link) {
                    return link.error();
                }
                g.interNode = *link;
            }
            c.numNodes += g.count;
            c.nodeGroups.push_back(g);
        }
    } else {
        return Error::badInput(origin + ": 'nodes' must be a positive count or a non-empty list");
    }
    DAY0_TRY(checkShape(c, origin));
    return c;
}

Result<Cluster> loadClusterFile(const fs::path& path)
{
    auto json = readJsonFile(path);
    if (!json) {
        return json.error();
    }
    return parseClusterJson(*json, displayPath(path));
}

} // namespace day0::hardware
