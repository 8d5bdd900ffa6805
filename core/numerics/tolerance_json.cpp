// A tolerance table's file form: reading a table (versioned JSON, format 1 or 2) and its rules,
// writing one back, the dtype spellings a table uses, and finding a bundled table by name.
#include "base/json_util.h"
#include "base/resources.h"
#include "numerics/float_formats.h"
#include "numerics/tolerance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <regex>

namespace day0::numerics {

namespace {

Result<std::vector<EndToEndRule>> parseEndToEndRules(
    const nlohmann::json& json, const std::string& origin)
{
    if (!json.is_array()) {
        return Error::badInput(origin + ": 'end_to_end' must be an array of rules");
    }
    std::vector<EndToEndRule> rules;
    for (std::size_t i = 0; i < json.size(); ++i) {
        const std::string where = fmt::format("{}: end_to_end[{}]", origin, i);
        if (!json[i].is_object()) {
            return Error::badInput(where + ": must be an object");
        }
        JsonReader r(json[i], where);
        EndToEndRule rule;
        rule.id = r.stringOr("id", "");
        if (rule.id.empty()) {
            r.fail("id", "is required");
        }
        const std::string dtype = r.stringOr("dtype", "");
        const auto parsed = parseToleranceDType(dtype);
        if (!parsed) {
            r.fail("dtype", fmt::format("'{}' is not a dtype (bf16, fp8, int8, fp4, ...)", dtype));
        }
        rule.dtype = parsed.value_or(DType::F32);
        // Every limit is required: a rule that silently allowed anything would pass all.
        for (auto [key, field] : { std::pair { "max_kl_mean", &rule.maxKlMean },
                 std::pair { "max_kl_p99", &rule.maxKlP99 },
                 std::pair { "max_kl_position", &rule.maxKlPosition } }) {
            *field = r.numberOr(key, -1.0);
            if (!(*field > 0.0)) {
                r.fail(key, "must be a positive number");
            }
        }
        rule.minSameTop = r.numberOr("min_same_top", -1.0);
        if (!(rule.minSameTop >= 0.0 && rule.minSameTop <= 1.0)) {
            r.fail("min_same_top", "must be a share between 0 and 1");
        }
        rule.note = r.stringOr("note", "");
        if (!r.ok()) {
            return r.error();
        }
        for (const auto& existing : rules) {
            if (existing.dtype == rule.dtype || existing.id == rule.id) {
                return Error::badInput(fmt::format(
                    "{}: '{}' judges the same dtype or id as '{}'", where, rule.id, existing.id));
            }
        }
        rules.push_back(std::move(rule));
    }
    return rules;
}

Result<ToleranceRule> parseRule(
    const nlohmann::json& j, const std::string& origin, std::size_t index, bool gradient)
{
    const std::string where
        = fmt::format("{}: {}[{}]", origin, gradient ? "gradient_rules" : "rules", index);
    if (!j.is_object()) {
        return Error::badInput(where + ": must be an object");
    }
    JsonReader r(j, where);
    ToleranceRule rule;
    rule.id = r.stringOr("id", "");
    if (rule.id.empty()) {
        r.fail("id", "is required");
    }
    const std::string dtype = r.stringOr("dtype", "*");
    if (dtype != "*") {
        rule.dtype = parseToleranceDType(dtype);
        if (!rule.dtype) {
            r.fail("dtype",
                fmt::format("'{}' is not a dtype (bf16, fp16, fp8_e4m3, int8, fp4, ...)", dtype));
        }
    }
    const std::string op = r.stringOr("op", "*");
    if (op != "*") {
        rule.op = parseOpKind(op);
        if (!rule.op) {
            r.fail("op", fmt::format("'{}' is not an op kind", op));
        }
    }
    if (gradient) {
        rule.isGradientRule = true;
        const std::string of = r.stringOr("gradient", "");
        if (of != "*") {
            rule.gradient = parseGradientOf(of);
            if (!rule.gradient) {
                r.fail(
                    "gradient", fmt::format("'{}' must be 'activation', 'parameter' or '*'", of));
            }
        }
    } else if (r.has("gradient")) {
        r.fail("gradient", "belongs to a rule of 'gradient_rules', not of 'rules'");
    }
    rule.maxRelL2 = r.numberOr("max_rel_l2", -1.0);
    if (rule.maxRelL2 <= 0.0) {
        r.fail("max_rel_l2", "must be a positive number");
    }
    rule.floorUnits = r.numberOr("floor_units", 1.0);
    rule.maxFloorRatio = r.numberOr("max_floor_ratio", 4.0);
    if (r.has("max_kl")) {
        rule.maxKl = r.numberOr("max_kl", 0.0);
    }
    if (r.has("min_top1")) {
        rule.minTop1 = r.numberOr("min_top1", 0.0);
    }
    rule.looserBecause = r.stringOr("looser_because", "");
    rule.note = r.stringOr("note", "");
    if (!r.ok()) {
        return r.error();
    }
    if (rule.dtype) {
        const auto limit = tolerancePolicyLimit(*rule.dtype);
        if (limit && rule.maxRelL2 > *limit && rule.looserBecause.empty()) {
            return Error::badInput(fmt::format(
                "{} ('{}'): max_rel_l2 {:g} is looser than the {} policy limit {:g}; say why in "
                "'looser_because'",
                where, rule.id, rule.maxRelL2, dtypeName(*rule.dtype), *limit));
        }
    }
    return rule;
}

Result<std::vector<ToleranceRule>> parseRules(
    const nlohmann::json& json, const std::string& origin, bool gradient)
{
    const char* key = gradient ? "gradient_rules" : "rules";
    std::vector<ToleranceRule> out;
    for (std::size_t i = 0; i < json.size(); ++i) {
        auto rule = parseRule(json[i], origin, i, gradient);
        if (!rule) {
            return rule.error();
        }
        for (const auto& existing : out) {
            if (existing.id == rule->id) {
                return Error::badInput(
                    fmt::format("{}: {}[{}]: duplicate rule id '{}'", origin, key, i, rule->id));
            }
            if (existing.dtype == rule->dtype && existing.op == rule->op
                && existing.gradient == rule->gradient) {
                return Error::badInput(
                    fmt::format("{}: {}[{}] '{}' covers the same dtype{} and op as '{}'", origin,
                        key, i, rule->id, gradient ? ", gradient kind" : "", existing.id));
            }
        }
        out.push_back(std::move(*rule));
    }
    return out;
}

} // namespace

std::string toleranceDTypeName(DType d)
{
    switch (d) {
    case DType::F64:
        return "fp64";
    case DType::F32:
        return "fp32";
    case DType::BF16:
        return "bf16";
    case DType::F16:
        return "fp16";
    case DType::F8E4M3:
        return "fp8";
    case DType::F8E5M2:
        return "fp8_e5m2";
    case DType::I8:
        return "int8";
    case DType::F4E2M1:
        return "fp4";
    case DType::I4:
        return "int4";
    default:
        return std::string(dtypeName(d));
    }
}

nlohmann::json toleranceRuleToJson(const ToleranceRule& rule)
{
    nlohmann::json j;
    j["id"] = rule.id;
    j["dtype"] = rule.dtype ? toleranceDTypeName(*rule.dtype) : "*";
    if (rule.isGradientRule) {
        j["gradient"] = rule.gradient ? std::string(gradientOfName(*rule.gradient)) : "*";
    }
    j["op"] = rule.op ? std::string(opKindName(*rule.op)) : "*";
    j["max_rel_l2"] = rule.maxRelL2;
    j["floor_units"] = rule.floorUnits;
    j["max_floor_ratio"] = rule.maxFloorRatio;
    if (rule.maxKl) {
        j["max_kl"] = *rule.maxKl;
    }
    if (rule.minTop1) {
        j["min_top1"] = *rule.minTop1;
    }
    if (!rule.looserBecause.empty()) {
        j["looser_because"] = rule.looserBecause;
    }
    if (!rule.note.empty()) {
        j["note"] = rule.note;
    }
    return j;
}

nlohmann::json endToEndRuleToJson(const EndToEndRule& rule)
{
    nlohmann::json j;
    j["id"] = rule.id;
    j["dtype"] = toleranceDTypeName(rule.dtype);
    j["max_kl_mean"] = rule.maxKlMean;
    j["max_kl_p99"] = rule.maxKlP99;
    j["max_kl_position"] = rule.maxKlPosition;
    j["min_same_top"] = rule.minSameTop;
    if (!rule.note.empty()) {
        j["note"] = rule.note;
    }
    return j;
}

nlohmann::json toleranceTableToJson(const ToleranceTable& table)
{
    nlohmann::json j;
    j["name"] = table.name;
    j["version"] = table.version;
    const bool gradients
        = !table.gradientRules.empty() || !table.gradientDerivationRecord.is_null();
    if (gradients || table.format > 1) {
        j["format"] = std::max(table.format, gradients ? 2 : 1);
    }
    if (!table.description.empty()) {
        j["description"] = table.description;
    }
    j["accumulated_growth"] = table.accumulatedGrowth == DepthGrowth::Linear
        ? "linear"
        : (table.accumulatedGrowth == DepthGrowth::None ? "none" : "sqrt");
    if (!table.derivationRecord.is_null()) {
        j["derivation"] = table.derivationRecord;
    } else if (!table.derivation.empty()) {
        j["derivation"] = { { "summary", table.derivation } };
    }
    j["rules"] = nlohmann::json::array();
    for (const auto& r : table.rules) {
        j["rules"].push_back(toleranceRuleToJson(r));
    }
    if (!table.endToEnd.empty()) {
        j["end_to_end"] = nlohmann::json::array();
        for (const auto& r : table.endToEnd) {
            j["end_to_end"].push_back(endToEndRuleToJson(r));
        }
    }
    if (!table.gradientDerivationRecord.is_null()) {
        j["gradient_derivation"] = table.gradientDerivationRecord;
    } else if (!table.gradientDerivation.empty()) {
        j["gradient_derivation"] = { { "summary", table.gradientDerivation } };
    }
    if (!table.gradientRules.empty()) {
        j["gradient_rules"] = nlohmann::json::array();
        for (const auto& r : table.gradientRules) {
            j["gradient_rules"].push_back(toleranceRuleToJson(r));
        }
    }
    return j;
}

std::optional<DType> parseToleranceDType(std::string_view name)
{
    std::string s(name);
    std::transform(
        s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    for (const char* fp4 : { "fp4", "e2m1", "f4e2m1", "float4_e2m1fn", "nvfp4", "mxfp4", "f4" }) {
        if (s == fp4) {
            return DType::F4E2M1;
        }
    }
    for (const char* int4 : { "int4", "i4", "int4-g32", "int4_g32", "int4-g128", "int4_g128" }) {
        if (s == int4) {
            return DType::I4;
        }
    }
    return parseDTypeLoose(name);
}

Result<ToleranceTable> parseToleranceTable(const nlohmann::json& json, const std::string& origin)
{
    if (!json.is_object()) {
        return Error::badInput(origin + ": a tolerance table must be a JSON object");
    }
    JsonReader r(json, origin);
    ToleranceTable table;
    table.source = origin;
    table.name = r.stringOr("name", "");
    if (table.name.empty()) {
        r.fail("name", "is required");
    }
    table.version = int(r.intOr("version", 0));
    if (table.version <= 0) {
        r.fail("version", "must be a positive integer");
    }
    table.description = r.stringOr("description", "");
    table.format = int(r.intOr("format", 1));
    if (table.format < 1 || table.format > kToleranceFormat) {
        r.fail("format",
            fmt::format("{} is not a table format this build reads (1 to {}); a newer day0 wrote "
                        "it?",
                table.format, kToleranceFormat));
    }
    if (json.contains("derivation")) {
        const auto& d = json["derivation"];
        if (!d.is_object() || !d.contains("summary") || !d["summary"].is_string()) {
            r.fail("derivation", "must be an object with a 'summary' string");
        } else {
            table.derivation = d["summary"].get<std::string>();
            table.derivationRecord = d;
        }
    }
    const std::string growth = r.stringOr("accumulated_growth", "sqrt");
    if (growth == "sqrt") {
        table.accumulatedGrowth = DepthGrowth::Sqrt;
    } else if (growth == "linear") {
        table.accumulatedGrowth = DepthGrowth::Linear;
    } else if (growth == "none") {
        table.accumulatedGrowth = DepthGrowth::None;
    } else {
        r.fail("accumulated_growth", "must be 'sqrt', 'linear' or 'none'");
    }
    if (!r.ok()) {
        return r.error();
    }
    if (!json.contains("rules") || !json["rules"].is_array() || json["rules"].empty()) {
        return Error::badInput(origin + ": 'rules' must be a non-empty array");
    }
    auto forward = parseRules(json["rules"], origin, false);
    if (!forward) {
        return forward.error();
    }
    table.rules = std::move(*forward);
    if (json.contains("gradient_rules")) {
        if (table.format < 2) {
            return Error::badInput(
                fmt::format("{}: 'gradient_rules' need \"format\": 2 (this table says format {})",
                    origin, table.format));
        }
        if (!json["gradient_rules"].is_array()) {
            return Error::badInput(origin + ": 'gradient_rules' must be an array of rules");
        }
        auto gradient = parseRules(json["gradient_rules"], origin, true);
        if (!gradient) {
            return gradient.error();
        }
        table.gradientRules = std::move(*gradient);
    }
    if (json.contains("gradient_derivation")) {
        const auto& d = json["gradient_derivation"];
        if (!d.is_object() || !d.contains("summary") || !d["summary"].is_string()) {
            return Error::badInput(
                origin + ": 'gradient_derivation' must be an object with a 'summary' string");
        }
        table.gradientDerivation = d["summary"].get<std::string>();
        table.gradientDerivationRecord = d;
    }
    if (json.contains("end_to_end")) {
        auto rules = parseEndToEndRules(json["end_to_end"], origin);
        if (!rules) {
            return rules.error();
        }
        table.endToEnd = std::move(*rules);
    }
    return table;
}

Result<ToleranceTable> loadToleranceTable(const std::filesystem::path& path)
{
    auto json = readJsonFile(path);
    if (!json) {
        return json.error();
    }
    return parseToleranceTable(*json, path.string());
}

Result<ToleranceTable> resolveToleranceTable(const std::string& nameOrPath)
{
    const std::string name = nameOrPath.empty() ? "day0-default" : nameOrPath;
    if (name.find('/') != std::string::npos || name.ends_with(".json")) {
        return loadToleranceTable(name);
    }
    const auto dir = resourceDir() / "tolerances";
    std::error_code ec;
    if (dir.empty() || !std::filesystem::is_directory(dir, ec)) {
        return Error::badInput(fmt::format(
            "tolerance table '{}': no bundled tolerances folder found (set DAY0_RESOURCES)", name));
    }
    const std::regex versioned(R"((.+)-v([0-9]+)\.json)");
    std::filesystem::path best;
    int bestVersion = -1;
    std::vector<std::string> available;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string file = entry.path().filename().string();
        std::smatch m;
        if (!std::regex_match(file, m, versioned)) {
            continue;
        }
        available.push_back(file.substr(0, file.size() - 5));
        const int version = std::stoi(m[2].str());
        if (file == name + ".json" || (m[1].str() == name && version > bestVersion)) {
            best = entry.path();
            bestVersion = file == name + ".json" ? 1 << 30 : version;
        }
    }
    if (best.empty()) {
        std::sort(available.begin(), available.end());
        return Error::badInput(fmt::format("tolerance table '{}' not found in {} (available: {})",
            name, dir.string(), fmt::join(available, ", ")));
    }
    return loadToleranceTable(best);
}

} // namespace day0::numerics
