#include "shell/panel_registry.h"

#include <algorithm>

namespace day0::ui {

void PanelRegistry::add(PanelDescriptor descriptor)
{
    std::erase_if(m_panels, [&](const PanelDescriptor& p) { return p.id == descriptor.id; });
    const auto pos = std::upper_bound(m_panels.begin(), m_panels.end(), descriptor.order,
        [](int order, const PanelDescriptor& p) { return order < p.order; });
    m_panels.insert(pos, std::move(descriptor));
}

const PanelDescriptor* PanelRegistry::find(const QString& id) const
{
    const auto it
        = std::find_if(m_panels.begin(), m_panels.end(), [&](const auto& p) { return p.id == id; });
    return it == m_panels.end() ? nullptr : &*it;
}

} // namespace day0::ui
