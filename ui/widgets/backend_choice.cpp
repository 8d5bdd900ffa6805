#include "widgets/backend_choice.h"

#include "extend/plugin_registry.h"
#include "widgets/formatting.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QStringList>

namespace day0::ui {

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
    const extend::PluginRegistry registry;
    for (const auto& plugin : registry.plugins()) {
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
    const extend::PluginRegistry registry;
    return extend::openRunBackend(registry, name, device);
}

} // namespace day0::ui
