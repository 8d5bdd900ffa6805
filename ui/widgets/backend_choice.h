#pragma once

#include "base/result.h"
#include "exec/backend.h"

#include <memory>
#include <string>

class QComboBox;
class QWidget;

namespace day0::ui {

/// A combo box of where a target runs: "CPU reference" (item data "cpu") and every backend
/// plugin the plugin registry finds (item data: its name), each with a tooltip of its description
/// and the operators it runs natively — read from the manifests, without loading the plugins
/// (a missing device is reported when a run opens the backend).
QComboBox* createBackendCombo(QWidget* parent);

/// The backend named `name` on `device`, opened for a run; null for the CPU reference ("cpu",
/// "day0-cpu"). Errors name what is missing: the plugin, its libraries or its device.
Result<std::shared_ptr<exec::Backend>> openBackend(const std::string& name, int device = 0);

} // namespace day0::ui
