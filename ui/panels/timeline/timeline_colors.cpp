#include "panels/timeline/timeline_colors.h"

#include <algorithm>
#include <array>

namespace day0::ui {

namespace {

// Hue (degrees), saturation and value per category, in profile::Category order. Kernels are
// blue as in Nsight Systems, collectives orange so overlap with compute stands out, copies green,
// sets teal, synchronisation red, host work violet/amber, annotations slate.
struct Hsv {
    int h;
    int s;
    int v;
};
constexpr std::array<Hsv, profile::kCategoryCount> kBase = { {
    { 213, 170, 215 }, // kernel
    { 140, 160, 175 }, // memcpy
    { 174, 170, 170 }, // memset
    { 2, 175, 215 }, // sync
    { 28, 200, 240 }, // communication
    { 262, 105, 205 }, // cpu_op
    { 44, 175, 235 }, // runtime
    { 205, 55, 185 }, // annotation
    { 0, 0, 170 }, // other
} };

} // namespace

QColor categoryColor(profile::Category category)
{
    const auto i = std::min<std::size_t>(std::size_t(category), kBase.size() - 1);
    return QColor::fromHsv(kBase[i].h, kBase[i].s, kBase[i].v);
}

QColor sliceColor(profile::Category category, profile::StringId name)
{
    const auto i = std::min<std::size_t>(std::size_t(category), kBase.size() - 1);
    // A cheap integer hash of the name id: stable within a trace, spread over its bits.
    std::uint32_t h = name * 2654435761u;
    h ^= h >> 15;
    const int dh = int(h % 11u) - 5; // ±5°: neighbouring categories stay apart
    const int dv = int((h >> 8) % 41u) - 20; // ±20 of 255
    const int ds = int((h >> 16) % 31u) - 15;
    const Hsv& b = kBase[i];
    return QColor::fromHsv(
        (b.h + dh + 360) % 360, std::clamp(b.s + ds, 0, 255), std::clamp(b.v + dv, 60, 255));
}

QColor textColorOn(const QColor& background)
{
    // Perceived luminance (Rec. 601 weights).
    const double y
        = 0.299 * background.redF() + 0.587 * background.greenF() + 0.114 * background.blueF();
    return y > 0.58 ? QColor(0x15, 0x18, 0x1c) : QColor(0xfa, 0xfb, 0xfc);
}

} // namespace day0::ui
