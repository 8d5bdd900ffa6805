#pragma once

namespace day0::ui {

class PanelRegistry;

/// Registers every panel that ships with the workbench (model, memory, topology, planner).
/// Explicit rather than static-initialiser registration, so linking day0_ui statically never
/// drops a panel.
void registerBuiltinPanels(PanelRegistry& registry);

} // namespace day0::ui
