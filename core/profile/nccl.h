#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace day0::profile {

/// The collective a communication kernel performs.
enum class Collective : std::uint8_t {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    AllToAll,
    SendRecv,
    Send,
    Recv,
    Generic, ///< NCCL's generic kernel (the collective is only in the launch arguments)
    Unknown,
};
inline constexpr int kCollectiveCount = 11;

/// Which NCCL kernel naming scheme a name follows.
enum class NcclNaming : std::uint8_t {
    Legacy, ///< NCCL ≤ 2.18: ncclKernel_<Coll>_<ALGO>_<PROTO>_<RedOp>_<type>
    Device, ///< NCCL ≥ 2.19: ncclDevKernel_<Coll>_<RedOp>_<ty>_<ALGO>_<PROTO>
    Symmetric, ///< NCCL ≥ 2.28: ncclSymkDevKernel_<Coll>_<algo...>[_<red>_<ty>]
    Other, ///< RCCL/HCCL or a name without the NCCL prefix
};

/// What a collective kernel's name says.
struct CollectiveKernel {
    Collective collective = Collective::Unknown;
    NcclNaming naming = NcclNaming::Other;
    std::string algorithm; ///< "RING", "TREE", "NVLS", "COLLNET_DIRECT", "AGxLL_R", ...
    std::string protocol; ///< "LL", "LL128", "SIMPLE" (empty for symmetric kernels)
    std::string reduceOp; ///< "Sum", "sum", ...
    std::string dataType; ///< "float", "f32", "bf16", "int8_t", ...
};

/// True for the kernels of collective libraries (HTA's communication class): names that start
/// with nccl, rccl or hccl (after an optional "void "), or contain ncclKernel/ncclDevKernel.
bool isCollectiveKernelName(std::string_view name);

/// Parses an NCCL kernel name of any of the three schemes; std::nullopt for other names.
std::optional<CollectiveKernel> parseNcclKernelName(std::string_view name);

/// "AllReduce", "AllGather", ..., "Unknown".
std::string_view collectiveName(Collective collective);

/// Maps a collective as named elsewhere (Kineto's "Collective name" arg: "allreduce",
/// "_allgather_base", "all_to_all", "send"; or our own names) to a Collective.
Collective collectiveFromText(std::string_view text);

} // namespace day0::profile
