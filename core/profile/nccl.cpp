#include "profile/nccl.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

namespace day0::profile {

namespace {

constexpr std::array<std::string_view, kCollectiveCount> kNames = {
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "Broadcast",
    "Reduce",
    "AllToAll",
    "SendRecv",
    "Send",
    "Recv",
    "Generic",
    "Unknown",
};

std::string_view stripVoid(std::string_view name)
{
    if (name.substr(0, 5) == "void ") {
        name.remove_prefix(5);
    }
    return name;
}

bool startsWith(std::string_view s, std::string_view prefix)
{
    return s.substr(0, prefix.size()) == prefix;
}

std::string lower(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    for (const char c : s) {
        out.push_back(char(std::tolower(static_cast<unsigned char>(c))));
    }
    return out;
}

std::vector<std::string_view> splitTokens(std::string_view s)
{
    std::vector<std::string_view> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= s.size(); ++i) {
        if (i == s.size() || s[i] == '_') {
            if (i > start) {
                out.push_back(s.substr(start, i - start));
            }
            start = i + 1;
        }
    }
    return out;
}

std::string join(const std::vector<std::string_view>& tokens, std::size_t from, std::size_t to)
{
    std::string out;
    for (std::size_t i = from; i < to && i < tokens.size(); ++i) {
        if (!out.empty()) {
            out.push_back('_');
        }
        out.append(tokens[i]);
    }
    return out;
}

bool isProtocol(std::string_view t) { return t == "LL" || t == "LL128" || t == "SIMPLE"; }

bool isShortDataType(std::string_view t)
{
    static constexpr std::array<std::string_view, 12> kTypes = { "i8", "u8", "i32", "u32", "i64",
        "u64", "f16", "f32", "f64", "bf16", "f8e4m3", "f8e5m2" };
    return std::find(kTypes.begin(), kTypes.end(), t) != kTypes.end();
}

bool isLowerReduceOp(std::string_view t)
{
    static constexpr std::array<std::string_view, 9> kOps
        = { "sum", "prod", "min", "max", "minmax", "avg", "premulsum", "sumpostdiv", "ncclsum" };
    return std::find(kOps.begin(), kOps.end(), t) != kOps.end();
}

} // namespace

std::string_view collectiveName(Collective collective)
{
    const auto i = std::size_t(collective);
    return i < kNames.size() ? kNames[i] : "Unknown";
}

Collective collectiveFromText(std::string_view text)
{
    std::string t;
    for (const char c : text) {
        if (c != '_' && c != ' ' && c != '-') {
            t.push_back(char(std::tolower(static_cast<unsigned char>(c))));
        }
    }
    if (startsWith(t, "nccl:")) {
        t = t.substr(5);
    }
    // Longer names first: "reducescatter" before "reduce", "sendrecv" before "send".
    static constexpr std::array<std::pair<std::string_view, Collective>, 12> kPrefixes = { {
        { "allreduce", Collective::AllReduce },
        { "allgather", Collective::AllGather },
        { "reducescatter", Collective::ReduceScatter },
        { "alltoall", Collective::AllToAll },
        { "broadcast", Collective::Broadcast },
        { "reduce", Collective::Reduce },
        { "sendrecv", Collective::SendRecv },
        { "send", Collective::Send },
        { "recv", Collective::Recv },
        { "generic", Collective::Generic },
        { "gather", Collective::AllGather },
        { "scatter", Collective::ReduceScatter },
    } };
    for (const auto& [prefix, collective] : kPrefixes) {
        if (startsWith(t, prefix)) {
            return collective;
        }
    }
    return Collective::Unknown;
}

bool isCollectiveKernelName(std::string_view name)
{
    const auto n = stripVoid(name);
    return startsWith(n, "nccl") || startsWith(n, "rccl") || startsWith(n, "hccl")
        || name.find("ncclKernel") != std::string_view::npos
        || name.find("ncclDevKernel") != std::string_view::npos;
}

std::optional<CollectiveKernel> parseNcclKernelName(std::string_view name)
{
    auto n = stripVoid(name);
    // The signature and template arguments are not part of the scheme.
    n = n.substr(0, std::min(n.find('('), n.find('<')));
    CollectiveKernel k;
    std::string_view rest;
    if (startsWith(n, "ncclSymkDevKernel_")) {
        k.naming = NcclNaming::Symmetric;
        rest = n.substr(18);
    } else if (startsWith(n, "ncclDevKernel_")) {
        k.naming = NcclNaming::Device;
        rest = n.substr(14);
    } else if (startsWith(n, "ncclKernel_")) {
        k.naming = NcclNaming::Legacy;
        rest = n.substr(11);
    } else {
        return std::nullopt;
    }
    const auto tokens = splitTokens(rest);
    if (tokens.empty()) {
        return k;
    }
    k.collective = collectiveFromText(tokens[0]);
    const std::size_t count = tokens.size();
    switch (k.naming) {
    case NcclNaming::Legacy: {
        // <Coll>_<ALGO...>_<PROTO>_<RedOp>_<type...>; algorithms may contain '_' (COLLNET_DIRECT).
        std::size_t proto = 1;
        while (proto < count && !isProtocol(tokens[proto])) {
            ++proto;
        }
        if (proto < count) {
            k.algorithm = join(tokens, 1, proto);
            k.protocol = std::string(tokens[proto]);
            if (proto + 1 < count) {
                k.reduceOp = std::string(tokens[proto + 1]);
            }
            k.dataType = join(tokens, proto + 2, count);
        }
        break;
    }
    case NcclNaming::Device:
        // <Coll>_<RedOp>_<ty>_<ALGO...>_<PROTO>, or short forms (SendRecv, Generic_4).
        if (count >= 5 && isProtocol(tokens[count - 1]) && isShortDataType(tokens[2])) {
            k.reduceOp = std::string(tokens[1]);
            k.dataType = std::string(tokens[2]);
            k.algorithm = join(tokens, 3, count - 1);
            k.protocol = std::string(tokens[count - 1]);
        }
        break;
    case NcclNaming::Symmetric: {
        std::size_t algoEnd = count;
        if (count >= 3 && isShortDataType(tokens[count - 1])
            && isLowerReduceOp(lower(tokens[count - 2]))) {
            k.reduceOp = std::string(tokens[count - 2]);
            k.dataType = std::string(tokens[count - 1]);
            algoEnd = count - 2;
        } else if (count >= 2 && isShortDataType(tokens[count - 1])) {
            k.dataType = std::string(tokens[count - 1]);
            algoEnd = count - 1;
        }
        k.algorithm = join(tokens, 1, algoEnd);
        break;
    }
    case NcclNaming::Other:
        break;
    }
    return k;
}

} // namespace day0::profile
