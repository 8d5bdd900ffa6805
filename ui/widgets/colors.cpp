#include "widgets/colors.h"

#include <array>
#include <cmath>
#include <cstdlib>

namespace day0::ui {

namespace {
constexpr std::array<QRgb, 10> kTableau = { 0x4e79a7, 0xf28e2b, 0x59a14f, 0xe15759, 0x76b7b2,
    0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac };
} // namespace

QColor categoricalColor(int index)
{
    const int n = int(kTableau.size());
    if (index >= 0 && index < n) {
        return QColor::fromRgb(kTableau[std::size_t(index)]);
    }
    // Beyond ten groups: golden-ratio hue steps at medium saturation and value, so neighbours
    // differ and no colour washes out to white or black.
    const double hue = std::fmod(0.11 + double(std::abs(index)) * 0.6180339887, 1.0);
    const double value = (index / n) % 2 == 0 ? 0.78 : 0.62;
    return QColor::fromHsvF(float(hue), 0.55f, float(value));
}

QColor memoryColor(MemoryColor component)
{
    switch (component) {
    case MemoryColor::Weights:
        return QColor(0x4e, 0x79, 0xa7);
    case MemoryColor::Gradients:
        return QColor(0xf2, 0x8e, 0x2b);
    case MemoryColor::Optimizer:
        return QColor(0x59, 0xa1, 0x4f);
    case MemoryColor::Activations:
        return QColor(0xe1, 0x57, 0x59);
    case MemoryColor::KvCache:
        return QColor(0xb0, 0x7a, 0xa1);
    case MemoryColor::Buffers:
        return QColor(0x9c, 0x75, 0x5f);
    case MemoryColor::Free:
        break;
    }
    return QColor(0xba, 0xb0, 0xac);
}

QColor errorColor() { return QColor(0xd6, 0x3b, 0x3b); }
QColor okColor() { return QColor(0x3c, 0x9a, 0x4a); }

} // namespace day0::ui
