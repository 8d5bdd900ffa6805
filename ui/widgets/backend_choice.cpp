#include "widgets/backend_choice.h"

#include "extend/plugin_registry.h"
#include "widgets/formatting.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QStringList>

#include <cstdlib>
#include <map>
#include <mutex>

namespace day0::ui {

namespace {

/// The plugin folders scanned once per value of DAY0_PLUGIN_PATH and shared by the panels'
/// combos and their runs (a scan reads every manifest).
std::shared_ptr<const extend::PluginRegistry> sharedRegistry()
{
    static std::mutex mutex;
    static std::map<std::string, std::shared_ptr<const extend::PluginRegistry>> registries;
    const char* path = std::getenv("DAY0_PLUGIN_PATH");
    const std::lock_guard lock(mutex);
    auto& registry = registries[path != nullptr ? path : ""];
    if (!registry) {
        registry = std::make_shared<const extend::PluginRegistry>();
    }
    return registry;
}

} // namespace

QComboBox* createBackendCombo(QWidget* parent)
{
    auto* combo = new QComboBox(parent);
    combo->setObjectName(QStringLiteral("targetBackend"));
    combo->addItem(
        QCoreApplication::translate("BackendChoice", "CPU reference"), QStringLiteral("cpu"));
    combo->setItemData(0,
        QCoreApplication::translate(
            "BackendChoice", "day0-cpu: the reference kernels with emulated rounding"),
        Qt::ToolTipRole);
    const auto registry = sharedRegistry();
    for (const auto& plugin : registry->plugins()) {
        if (plugin.kind != "backend") {
            continue;
        }
        QStringList ops;
        for (const auto op : plugin.ops) {
            ops << toQString(std::string(exec::backendOpName(op)));
        }
        combo->addItem(toQString(plugin.name), toQString(plugin.name));
        combo->setItemData(combo->count() - 1,
            QCoreApplication::translate(
                "BackendChoice", "%1\nNative: %2; other operators fall back to the CPU reference.")
                .arg(toQString(plugin.description), ops.join(QStringLiteral(", "))),
            Qt::ToolTipRole);
    }
    combo->setToolTip(QCoreApplication::translate(
        "BackendChoice", "Where the target runs; the reference always runs on the CPU"));
    return combo;
}

Result<std::shared_ptr<exec::Backend>> openBackend(const std::string& name, int device)
{
    if (name.empty() || name == "cpu" || name == "day0-cpu") {
        return std::shared_ptr<exec::Backend>(); // the CPU reference needs no plugin
    }
    return extend::openRunBackend(*sharedRegistry(), name, device);
}

} // namespace day0::ui
