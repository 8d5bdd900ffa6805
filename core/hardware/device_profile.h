#pragma once

#include "base/result.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace day0::hardware {

/// A link between devices: its kind, bandwidth per device per direction and latency.
struct Link {
    std::string kind; ///< "NVLink 4 (NVSwitch)", "InfiniBand NDR 400 Gb/s", "PCIe Gen4 x16"
    double bandwidth = 0.0; ///< bytes/s per device, one direction (what a ring collective sees)
    double latency = 0.0; ///< seconds per collective step (alpha of the alpha-beta model)
    double efficiency = 1.0; ///< fraction of `bandwidth` collectives reach in practice (0, 1]
    /// Bandwidth collectives reach: bandwidth × efficiency, bytes/s.
    [[nodiscard]] double effectiveBandwidth() const { return bandwidth * efficiency; }
};

/// One accelerator model with the figures the planner needs. Values come from vendor datasheets
/// (resources/hardware/SOURCES.md); all rates are dense (no structured sparsity).
struct DeviceProfile {
    std::string id; ///< short name used in cluster strings ("h200")
    std::string name; ///< "NVIDIA H200 SXM 141GB"
    std::string vendor;
    std::vector<std::string> aliases; ///< other accepted short names ("h200-sxm")
    double memoryBytes = 0.0; ///< device memory, bytes
    double bf16Flops = 0.0; ///< dense BF16/FP16 tensor peak, FLOP/s
    double fp8Flops = 0.0; ///< dense FP8 tensor peak, FLOP/s; 0 when the device has no FP8
    double hbmBandwidth = 0.0; ///< device-memory bandwidth, bytes/s
    Link intraNode; ///< link inside the fast domain (NVLink, Infinity Fabric, HCCS, PCIe)
    int domainSize = 8; ///< devices that share the fast intra-node link (NVL72: 72)
    Link interNode; ///< scale-out network per device
    int defaultGpusPerNode = 8; ///< devices in one node of the reference system
    std::string source; ///< where the figures come from

    /// Peak dense FLOP/s for GEMMs in FP8 when `fp8` and the device has FP8, else BF16.
    [[nodiscard]] double peakFlops(bool fp8) const
    {
        return fp8 && fp8Flops > 0.0 ? fp8Flops : bf16Flops;
    }
};

/// Reads a link object {"kind", "bandwidth_gbs", "latency_us", "efficiency"}; `origin` names it in
/// errors. With `defaults`, missing fields take their values from it; else kind and bandwidth
/// are required.
Result<Link> parseLink(
    const nlohmann::json& json, const std::string& origin, const Link* defaults = nullptr);

/// Reads a device profile from parsed JSON; `origin` names the file in errors.
Result<DeviceProfile> parseDeviceProfile(const nlohmann::json& json, const std::string& origin);

/// Reads a device profile file (resources/hardware/<id>.json format).
Result<DeviceProfile> loadDeviceProfile(const std::filesystem::path& path);

/// Every profile in resources/hardware/, sorted by id. Fails if a bundled file is malformed.
Result<std::vector<DeviceProfile>> bundledDeviceProfiles();

/// Finds a bundled profile by id or alias, case-insensitively; the error lists the known ids.
Result<DeviceProfile> findDeviceProfile(const std::string& name);

/// Serialises a profile in the file format parseDeviceProfile reads.
nlohmann::json deviceProfileToJson(const DeviceProfile& profile);

} // namespace day0::hardware
