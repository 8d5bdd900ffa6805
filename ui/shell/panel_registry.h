#pragma once

#include <QKeySequence>
#include <QString>

#include <functional>
#include <vector>

class QWidget;

namespace day0::ui {

class JobRunner;
class Session;
struct Preferences;

/// What a panel gets when it is created: the shared session, the job runner and the user's
/// preferences.
struct PanelContext {
    Session& session;
    JobRunner& jobs;
    const Preferences* preferences = nullptr; ///< the user's; null: the defaults
};

/// Where a panel docks by default; panels in the same area are tabbed together.
enum class PanelArea { Left, Right };

/// A panel as the shell sees it (GammaRay's ToolUiFactory, Qt Creator's IMode): the shell docks,
/// tabs and shortcuts it without knowing its type.
struct PanelDescriptor {
    QString id; ///< stable, used for object names, layout state and --screenshot ("memory")
    QString title; ///< dock title ("Memory")
    QKeySequence shortcut; ///< raises the panel
    PanelArea area = PanelArea::Right;
    int order = 0; ///< position among the panels (menus, tabs)
    bool raised = false; ///< the visible tab of its area in the default layout
    std::function<QWidget*(PanelContext&, QWidget* parent)> create;
};

/// The panels known to the shell, in display order.
class PanelRegistry {
public:
    /// Adds a panel; a second panel with the same id replaces the first.
    void add(PanelDescriptor descriptor);
    [[nodiscard]] const std::vector<PanelDescriptor>& panels() const { return m_panels; }
    /// The panel with this id, nullptr if none.
    [[nodiscard]] const PanelDescriptor* find(const QString& id) const;

private:
    std::vector<PanelDescriptor> m_panels;
};

} // namespace day0::ui
