#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace day0 {

/// An integer id that does not convert to or from ids of another Tag (a LayerId is not a RankId).
template <typename Tag, typename Rep = std::int32_t> class StrongId {
public:
    constexpr StrongId() = default;
    constexpr explicit StrongId(Rep value)
        : m_value(value)
    {
    }
    [[nodiscard]] constexpr Rep value() const { return m_value; }
    constexpr auto operator<=>(const StrongId&) const = default;

private:
    Rep m_value = 0;
};

/// Index of a decoder layer (0-based, as in HF module names).
using LayerId = StrongId<struct LayerIdTag>;
/// Global rank in a parallel job.
using RankId = StrongId<struct RankIdTag>;
/// Row id of a run in the history store.
using RunId = StrongId<struct RunIdTag, std::int64_t>;

} // namespace day0

template <typename Tag, typename Rep> struct std::hash<day0::StrongId<Tag, Rep>> {
    std::size_t operator()(const day0::StrongId<Tag, Rep>& id) const noexcept
    {
        return std::hash<Rep>()(id.value());
    }
};
