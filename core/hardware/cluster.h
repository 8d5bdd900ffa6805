#pragma once

#include "base/result.h"
#include "hardware/device_profile.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace day0::hardware {

/// The largest cluster Day0 plans for (262,144 GPUs, beyond today's largest training
/// clusters) and the most devices one node or fast-link domain may hold: beyond them a
/// cluster is refused rather than enumerated for ever or overflowed.
inline constexpr int kMaxWorldSize = 1 << 18;
inline constexpr int kMaxGpusPerNode = 1024;

/// Consecutive nodes that share a scale-out link speed (a cluster may mix several).
struct NodeGroup {
    int count = 0; ///< nodes in this group
    Link interNode; ///< scale-out link per device in these nodes
};

/// A set of identical devices: nodes × devices per node, grouped into fast-link domains.
/// Device d sits on node d / gpusPerNode; rank r of a parallel job runs on device r.
/// Value type; thread-safe to read.
struct Cluster {
    std::string name; ///< "h200:32x8" or the file it came from
    DeviceProfile device;
    int numNodes = 1;
    int gpusPerNode = 8;
    int domainSize = 8; ///< devices per fast-link domain (a node, or an NVL72 rack)
    Link intraNode; ///< link inside a domain
    std::vector<NodeGroup> nodeGroups; ///< in node order; counts sum to numNodes

    /// Number of devices.
    [[nodiscard]] int worldSize() const { return numNodes * gpusPerNode; }
    /// Node that holds a device.
    [[nodiscard]] int nodeOf(int device) const { return device / gpusPerNode; }
    /// Fast-link domain that holds a device.
    [[nodiscard]] int domainOf(int device) const { return device / domainSize; }
    /// The scale-out link collectives that leave a domain are limited by: the slowest group's.
    [[nodiscard]] const Link& interNodeLink() const;
    /// True when node groups have different scale-out links.
    [[nodiscard]] bool mixedInterNode() const;
    /// Device memory in bytes.
    [[nodiscard]] double deviceMemory() const { return device.memoryBytes; }
    /// One-line description: "256 × NVIDIA H200 (32 nodes × 8), NVLink 4 450 GB/s in 8-GPU
    /// domains, 50 GB/s/GPU between nodes".
    [[nodiscard]] std::string describe() const;
};

/// Builds a uniform cluster of `nodes` × `gpusPerNode` devices of one profile.
Result<Cluster> makeCluster(const DeviceProfile& device, int nodes, int gpusPerNode);

/// Parses a cluster argument: "h200:32x8" (profile : nodes × GPUs per node), "h200:8" (one node
/// of 8), "h200" (one node of the profile's default size) or the path of a cluster JSON file.
Result<Cluster> parseCluster(const std::string& text);

/// Reads a cluster JSON document (see resources/hardware/SOURCES.md for the format).
Result<Cluster> parseClusterJson(const nlohmann::json& json, const std::string& origin);

/// Reads a cluster JSON file.
Result<Cluster> loadClusterFile(const std::filesystem::path& path);

} // namespace day0::hardware
