#include "numerics/dump.h"

#include "base/json_util.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace day0::numerics {

namespace {

/// JSON has no NaN/Inf: they are written as null and read back as NaN.
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

double readNumber(const nlohmann::json& j, const char* key)
{
    if (!j.contains(key) || !j[key].is_number()) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    return j[key].get<double>();
}

nlohmann::json statsToJson(const TensorStats& s)
{
    return { { "count", s.count }, { "nan", s.nanCount }, { "inf", s.infCount },
        { "min", number(s.min) }, { "max", number(s.max) }, { "mean", number(s.mean) },
        { "rms", number(s.rms) }, { "abs_max", number(s.absMax) } };
}

Result<std::vector<std::int64_t>> readIntArray(
    const nlohmann::json& j, const char* key, const std::string& origin)
{
    std::vector<std::int64_t> out;
    if (!j.contains(key) || j[key].is_null()) {
        return out;
    }
    if (!j[key].is_array()) {
        return Error::badInput(fmt::format("{}: '{}' must be an array of integers", origin, key));
    }
    for (const auto& v : j[key]) {
        if (!v.is_number_integer()) {
            return Error::badInput(fmt::format("{}: '{}' must hold integers only", origin, key));
        }
        out.push_back(v.get<std::int64_t>());
    }
    return out;
}

} // namespace

void Dump::add(const std::string& name, const Tensor& tensor, bool store, std::string op,
    std::string precision)
{
    CaptureInfo c;
    c.name = name;
    c.shape = tensor.shape();
    c.dtype = tensor.dtype();
    c.stored = store;
    c.stats = computeStats(tensor);
    c.op = std::move(op);
    c.precision = std::move(precision);
    if (store) {
        m_tensors[name] = tensor.contiguous();
    } else {
        m_tensors.erase(name);
    }
    addInfo(std::move(c));
}

void Dump::addInfo(CaptureInfo info)
{
    const auto it = m_index.find(info.name);
    if (it != m_index.end()) {
        m_captures[it->second] = std::move(info);
        return;
    }
    m_index[info.name] = m_captures.size();
    m_captures.push_back(std::move(info));
}

Result<void> Dump::attach(const std::string& name, Tensor tensor)
{
    const auto it = m_index.find(name);
    if (it == m_index.end()) {
        return Error::badInput(
            fmt::format("tensor '{}' is not a capture listed in dump.json", name));
    }
    CaptureInfo& c = m_captures[it->second];
    if (tensor.shape() != c.shape) {
        return Error::badInput(fmt::format("tensor '{}' has shape {} but dump.json says {}", name,
            shapeString(tensor.shape()), shapeString(c.shape)));
    }
    c.stored = true;
    m_tensors[name] = std::move(tensor);
    return success();
}

const CaptureInfo* Dump::find(const std::string& name) const
{
    const auto it = m_index.find(name);
    return it == m_index.end() ? nullptr : &m_captures[it->second];
}

const Tensor* Dump::tensor(const std::string& name) const
{
    const auto it = m_tensors.find(name);
    return it == m_tensors.end() ? nullptr : &it->second;
}

nlohmann::json dumpToJson(const Dump& dump)
{
    const DumpInfo& i = dump.info;
    nlohmann::json captures = nlohmann::json::array();
    for (const auto& c : dump.captures()) {
        nlohmann::json entry = { { "name", c.name }, { "shape", c.shape },
            { "dtype", std::string(dtypeName(c.dtype)) }, { "stored", c.stored },
            { "stats", statsToJson(c.stats) } };
        if (!c.op.empty()) {
            entry["op"] = c.op;
        }
        if (!c.precision.empty()) {
            entry["precision"] = c.precision;
        }
        captures.push_back(std::move(entry));
    }
    return { { "format", "day0-dump" }, { "version", i.formatVersion }, { "model", i.model },
        { "fingerprint", i.fingerprint }, { "precision", i.precision }, { "backend", i.backend },
        { "mode", i.mode }, { "input_ids", i.inputIds }, { "prompt_length", i.promptLength },
        { "generated_ids", i.generatedIds }, { "num_layers", i.numLayers },
        { "captures", std::move(captures) }, { "extra", i.extra } };
}

Result<Dump> dumpFromJson(const nlohmann::json& json, const std::string& origin)
{
    if (!json.is_object() || json.value("format", "") != "day0-dump") {
        return Error::badInput(origin + ": not a day0 dump ('format' must be \"day0-dump\")");
    }
    JsonReader r(json, origin);
    Dump dump;
    DumpInfo& i = dump.info;
    i.formatVersion = int(r.requirePositive("version"));
    i.model = r.stringOr("model", "");
    i.fingerprint = r.stringOr("fingerprint", "");
    i.precision = r.stringOr("precision", "fp32");
    i.backend = r.stringOr("backend", "");
    i.mode = r.stringOr("mode", "propagate");
    i.promptLength = r.intOr("prompt_length", 0);
    i.numLayers = r.intOr("num_layers", 0);
    if (!r.ok()) {
        return r.error();
    }
    if (i.formatVersion > kDumpFormatVersion) {
        return Error::unsupported(fmt::format("{}: dump format version {} is newer than this "
                                              "build understands ({})",
            origin, i.formatVersion, kDumpFormatVersion));
    }
    if (i.mode != "propagate" && i.mode != "inject") {
        return Error::badInput(origin + ": 'mode' must be \"propagate\" or \"inject\"");
    }
    auto input = readIntArray(json, "input_ids", origin);
    if (!input) {
        return input.error();
    }
    i.inputIds = std::move(*input);
    auto generated = readIntArray(json, "generated_ids", origin);
    if (!generated) {
        return generated.error();
    }
    i.generatedIds = std::move(*generated);
    if (json.contains("extra") && json["extra"].is_object()) {
        i.extra = json["extra"];
    }
    if (!json.contains("captures") || !json["captures"].is_array()) {
        return Error::badInput(origin + ": 'captures' must be an array");
    }
    for (std::size_t k = 0; k < json["captures"].size(); ++k) {
        const auto& e = json["captures"][k];
        const std::string where = fmt::format("{}: captures[{}]", origin, k);
        if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) {
            return Error::badInput(where + ": needs a string 'name'");
        }
        CaptureInfo c;
        c.name = e["name"].get<std::string>();
        if (dump.find(c.name) != nullptr) {
            return Error::badInput(fmt::format("{}: duplicate capture '{}'", where, c.name));
        }
        auto shape = readIntArray(e, "shape", where);
        if (!shape) {
            return shape.error();
        }
        c.shape = std::move(*shape);
        const auto dtype = parseDType(e.value("dtype", ""));
        if (!dtype) {
            return Error::badInput(
                fmt::format("{} ('{}'): unknown dtype '{}'", where, c.name, e.value("dtype", "")));
        }
        c.dtype = *dtype;
        c.stored = e.value("stored", false);
        c.op = e.value("op", "");
        c.precision = e.value("precision", "");
        if (e.contains("stats") && e["stats"].is_object()) {
            const auto& s = e["stats"];
            c.stats.count = s.value("count", std::int64_t(0));
            c.stats.nanCount = s.value("nan", std::int64_t(0));
            c.stats.infCount = s.value("inf", std::int64_t(0));
            c.stats.min = readNumber(s, "min");
            c.stats.max = readNumber(s, "max");
            c.stats.mean = readNumber(s, "mean");
            c.stats.rms = readNumber(s, "rms");
            c.stats.absMax = readNumber(s, "abs_max");
        }
        // `stored` keeps what dump.json declares; the reader checks that the tensor file
        // delivers every declared tensor.
        dump.addInfo(std::move(c));
    }
    return dump;
}

} // namespace day0::numerics
