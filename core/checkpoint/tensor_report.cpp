#include "checkpoint/tensor_report.h"

#include "checkpoint/checkpoint_writer.h"

#include <algorithm>

namespace day0::checkpoint {

std::string_view tensorStatusName(TensorStatus status)
{
    switch (status) {
    case TensorStatus::Unchecked:
        return "";
    case TensorStatus::Ok:
        return "ok";
    case TensorStatus::Missing:
        return "missing";
    case TensorStatus::Unexpected:
        return "unexpected";
    case TensorStatus::WrongShape:
        return "wrong shape";
    case TensorStatus::WrongDtype:
        return "wrong dtype";
    }
    return "?";
}

std::size_t TensorReport::count(TensorStatus status) const
{
    return std::size_t(std::count_if(
        rows.begin(), rows.end(), [&](const TensorRow& r) { return r.status == status; }));
}

bool TensorReport::ok() const { return checked && count(TensorStatus::Ok) == rows.size(); }

nlohmann::json TensorReport::toJson() const
{
    auto list = nlohmann::json::array();
    for (const auto& r : rows) {
        nlohmann::json j { { "name", r.name }, { "dtype", r.dtype }, { "shape", r.shape },
            { "file", r.file }, { "bytes", r.bytes } };
        if (checked) {
            j["status"] = std::string(tensorStatusName(r.status));
            j["expected_dtype"] = r.expectedDtype;
            j["expected_shape"] = r.expectedShape;
            if (!r.message.empty()) {
                j["message"] = r.message;
            }
        }
        list.push_back(std::move(j));
    }
    nlohmann::json out { { "format", format }, { "tensors", rows.size() }, { "bytes", bytes },
        { "checked", checked } };
    if (checked) {
        nlohmann::json counts = nlohmann::json::object();
        for (const auto s : { TensorStatus::Ok, TensorStatus::Missing, TensorStatus::Unexpected,
                 TensorStatus::WrongShape, TensorStatus::WrongDtype }) {
            counts[std::string(tensorStatusName(s))] = count(s);
        }
        out["counts"] = counts;
    }
    out["rows"] = std::move(list);
    return out;
}

TensorReport listTensors(const Checkpoint& checkpoint)
{
    TensorReport report;
    report.format = std::string(checkpointFormatName(checkpoint.format()));
    for (const auto& t : checkpoint.tensors()) {
        report.rows.push_back(
            { t.name, t.dtypeName, t.shape, t.file, t.bytes, TensorStatus::Unchecked, {}, {}, {} });
        report.bytes += t.bytes;
    }
    std::stable_sort(report.rows.begin(), report.rows.end(),
        [](const TensorRow& a, const TensorRow& b) { return naturalLess(a.name, b.name); });
    return report;
}

} // namespace day0::checkpoint
