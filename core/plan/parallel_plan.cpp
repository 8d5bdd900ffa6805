#include "plan/parallel_plan.h"

#include <fmt/format.h>

#include <charconv>

namespace day0::plan {

namespace {

constexpr const char* kKnownKeys = "tp, pp, ep, etp, dp, cp, sp, zero, recompute, mb, gbs, m, "
                                   "vpp, layers, split, weights, kv, grads, optimizer";

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

std::optional<int> toInt(std::string_view s)
{
    int v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size()) {
        return std::nullopt;
    }
    return v;
}

std::string lower(std::string_view s)
{
    std::string out(s);
    for (auto& c : out) {
        c = char(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

} // namespace

std::string recomputeName(Recompute recompute)
{
    switch (recompute) {
    case Recompute::None:
        return "none";
    case Recompute::Selective:
        return "selective";
    case Recompute::Full:
        return "full";
    }
    return "none";
}

std::optional<Recompute> parseRecompute(std::string_view name)
{
    const auto n = lower(name);
    if (n == "none" || n == "off" || n == "0") {
        return Recompute::None;
    }
    if (n == "selective" || n == "sel") {
        return Recompute::Selective;
    }
    if (n == "full") {
        return Recompute::Full;
    }
    return std::nullopt;
}

std::string modeName(Mode mode) { return mode == Mode::Train ? "train" : "infer"; }

std::optional<Mode> parseMode(std::string_view name)
{
    const auto n = lower(name);
    if (n == "train" || n == "training") {
        return Mode::Train;
    }
    if (n == "infer" || n == "inference") {
        return Mode::Infer;
    }
    return std::nullopt;
}

std::string shortDtypeName(DType dtype)
{
    switch (dtype) {
    case DType::F64:
        return "fp64";
    case DType::F32:
        return "fp32";
    case DType::F16:
        return "fp16";
    case DType::BF16:
        return "bf16";
    case DType::F8E4M3:
        return "fp8";
    case DType::F8E5M2:
        return "fp8_e5m2";
    default:
        return lower(dtypeName(dtype));
    }
}

int defaultExpertTp(Mode mode, int tp, int ep) { return mode == Mode::Infer && ep > 1 ? 1 : tp; }

Result<ParallelPlan> parsePlan(std::string_view text)
{
    ParallelPlan plan;
    const std::string whole(text);
    auto bad = [&](std::string_view key, const std::string& what) {
        return Error::badInput(fmt::format("plan '{}': '{}' {}", whole, key, what));
    };
    if (trim(text).empty()) {
        return Error::badInput("empty plan: expected e.g. 'tp=8,pp=4,ep=16'");
    }
    std::string_view rest = text;
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        const std::string_view item = trim(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        if (item.empty()) {
            continue;
        }
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) {
            return Error::badInput(fmt::format(
                "plan '{}': '{}' is not key=value (known keys: {})", whole, item, kKnownKeys));
        }
        const std::string key = lower(trim(item.substr(0, eq)));
        const std::string_view value = trim(item.substr(eq + 1));

        auto positive = [&](int& field) -> Result<void> {
            const auto v = toInt(value);
            if (!v || *v <= 0) {
                return bad(key, fmt::format("must be a positive integer, found '{}'", value));
            }
            field = *v;
            return success();
        };
        auto dtype = [&](std::optional<DType>& field, bool allowCheckpoint) -> Result<void> {
            if (allowCheckpoint && lower(value) == "checkpoint") {
                field.reset();
                return success();
            }
            const auto d = parseDTypeLoose(value);
            if (!d || !isFloat(*d)) {
                return bad(key,
                    fmt::format(
                        "must be a float dtype (bf16, fp16, fp32, fp8), found '{}'", value));
            }
            field = *d;
            return success();
        };

        if (key == "tp") {
            DAY0_TRY(positive(plan.tp));
        } else if (key == "pp") {
            DAY0_TRY(positive(plan.pp));
        } else if (key == "ep") {
            DAY0_TRY(positive(plan.ep));
        } else if (key == "etp") {
            DAY0_TRY(positive(plan.etp));
        } else if (key == "dp") {
            DAY0_TRY(positive(plan.dp));
        } else if (key == "cp") {
            DAY0_TRY(positive(plan.cp));
        } else if (key == "vpp") {
            DAY0_TRY(positive(plan.vpp));
        } else if (key == "mb" || key == "micro_batch") {
            DAY0_TRY(positive(plan.microBatch));
        } else if (key == "gbs" || key == "global_batch") {
            DAY0_TRY(positive(plan.globalBatch));
        } else if (key == "m" || key == "micro_batches") {
            DAY0_TRY(positive(plan.numMicroBatches));
        } else if (key == "zero") {
            const auto v = toInt(value);
            if (!v || *v < 0 || *v > 3) {
                return bad(key, fmt::format("must be 0, 1, 2 or 3, found '{}'", value));
            }
            plan.zero = *v;
        } else if (key == "sp") {
            const auto v = lower(value);
            if (v == "on" || v == "true" || v == "1" || v == "yes") {
                plan.sp = true;
            } else if (v == "off" || v == "false" || v == "0" || v == "no") {
                plan.sp = false;
            } else {
                return bad(key, fmt::format("must be on or off, found '{}'", value));
            }
        } else if (key == "recompute") {
            const auto r = parseRecompute(value);
            if (!r) {
                return bad(key, fmt::format("must be none, selective or full, found '{}'", value));
            }
            plan.recompute = *r;
        } else if (key == "split") {
            const auto v = lower(value);
            if (v == "balanced") {
                plan.split = StageSplit::Balanced;
            } else if (v == "ends" || v == "light-ends" || v == "light_ends") {
                plan.split = StageSplit::LightEnds;
            } else {
                return bad(key, fmt::format("must be balanced or ends, found '{}'", value));
            }
        } else if (key == "layers") {
            plan.stageLayers.clear();
            std::string_view list = value;
            while (true) {
                const auto sep = list.find_first_of("/:");
                const auto v = toInt(trim(list.substr(0, sep)));
                if (!v || *v <= 0) {
                    return bad(key,
                        fmt::format("must list positive layer counts per stage, e.g. 15/16/15/15; "
                                    "found '{}'",
                            value));
                }
                plan.stageLayers.push_back(*v);
                if (sep == std::string_view::npos) {
                    break;
                }
                list = list.substr(sep + 1);
            }
        } else if (key == "weights") {
            DAY0_TRY(dtype(plan.weights, true));
        } else if (key == "kv") {
            DAY0_TRY(dtype(plan.kv, false));
        } else if (key == "grads" || key == "optimizer") {
            std::optional<DType> d;
            DAY0_TRY(dtype(d, false));
            (key == "grads" ? plan.grads : plan.optimizer) = *d;
        } else {
            return Error::badInput(fmt::format(
                "plan '{}': unknown key '{}' (known keys: {})", whole, key, kKnownKeys));
        }
    }
    if (!plan.stageLayers.empty() && plan.stageLayers.size() != std::size_t(plan.pp)) {
        if (plan.pp == 1) {
            plan.pp = int(plan.stageLayers.size());
        } else {
            return bad("layers",
                fmt::format("lists {} stages but pp={}", plan.stageLayers.size(), plan.pp));
        }
    }
    return plan;
}

std::string formatPlan(const ParallelPlan& plan, bool full)
{
    std::string out = fmt::format("tp={},pp={}", plan.tp, plan.pp);
    auto add = [&](bool show, const std::string& item) {
        if (show || full) {
            out += "," + item;
        }
    };
    add(plan.ep != 1, fmt::format("ep={}", plan.ep));
    add(plan.etp != 0, fmt::format("etp={}", plan.expertTp()));
    if (plan.dp != 0) {
        add(true, fmt::format("dp={}", plan.dp));
    }
    add(plan.cp != 1, fmt::format("cp={}", plan.cp));
    if (plan.sp) {
        add(true, fmt::format("sp={}", *plan.sp ? "on" : "off"));
    }
    add(plan.zero != 0, fmt::format("zero={}", plan.zero));
    add(plan.recompute != Recompute::None, "recompute=" + recomputeName(plan.recompute));
    add(plan.microBatch != 1, fmt::format("mb={}", plan.microBatch));
    // Left at 0 these are derived later, and 0 is not a value parsePlan accepts.
    if (plan.globalBatch != 0) {
        add(true, fmt::format("gbs={}", plan.globalBatch));
    }
    if (plan.numMicroBatches != 0) {
        add(true, fmt::format("m={}", plan.numMicroBatches));
    }
    add(plan.vpp != 1, fmt::format("vpp={}", plan.vpp));
    if (!plan.stageLayers.empty()) {
        std::string list;
        for (const int n : plan.stageLayers) {
            if (!list.empty()) {
                list += '/';
            }
            list += std::to_string(n);
        }
        add(true, "layers=" + list);
    } else {
        add(plan.split != StageSplit::Balanced,
            std::string("split=") + (plan.split == StageSplit::Balanced ? "balanced" : "ends"));
    }
    if (plan.weights) {
        add(true, "weights=" + shortDtypeName(*plan.weights));
    }
    if (plan.kv) {
        add(true, "kv=" + shortDtypeName(*plan.kv));
    }
    add(plan.grads != DType::F32, "grads=" + shortDtypeName(plan.grads));
    add(plan.optimizer != DType::F32, "optimizer=" + shortDtypeName(plan.optimizer));
    return out;
}

} // namespace day0::plan
