#pragma once

#include "base/result.h"
#include "comm/communicator.h"
#include "exec/backend.h"
#include "extend/plugin_api.h"
#include "extend/profiler_collector.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace day0::extend {

/// A plugin found on disk, described by its JSON metadata, not yet loaded.
struct PluginInfo {
    std::string name; ///< "mpi"
    std::string kind; ///< "communicator", "backend", "profiler"
    std::string version;
    std::string description;
    std::vector<std::string> requiredLibraries; ///< runtime libraries it needs ("libmpi.so.40")
    /// Backends: the operators it runs natively ("rms_norm", ...), known without loading it.
    std::vector<exec::BackendOp> ops;
    std::filesystem::path library; ///< the shared library
    std::filesystem::path metadata; ///< its JSON file
};

/// A loaded plugin library; unloading happens when the last handle goes away.
class LoadedPlugin {
public:
    LoadedPlugin(void* handle, const Day0PluginDescriptor* descriptor, PluginInfo info);
    ~LoadedPlugin();
    LoadedPlugin(const LoadedPlugin&) = delete;
    LoadedPlugin& operator=(const LoadedPlugin&) = delete;

    [[nodiscard]] const PluginInfo& info() const { return m_info; }
    [[nodiscard]] const Day0PluginDescriptor& descriptor() const { return *m_descriptor; }

private:
    void* m_handle;
    const Day0PluginDescriptor* m_descriptor;
    PluginInfo m_info;
};

/// Finds plugins by their JSON metadata in a list of folders and loads them on request.
/// Default folders: $DAY0_PLUGIN_PATH (colon-separated), <exe>/../lib/day0/plugins, and the
/// build tree's plugins/<name>/ folders next to the binary.
class PluginRegistry {
public:
    explicit PluginRegistry(std::vector<std::filesystem::path> folders = defaultFolders());

    /// Metadata of every plugin found (a malformed metadata file is skipped with a warning).
    [[nodiscard]] const std::vector<PluginInfo>& plugins() const { return m_plugins; }
    /// Problems met while scanning ("plugins/x/day0_x.json: 'kind' is missing").
    [[nodiscard]] const std::vector<std::string>& warnings() const { return m_warnings; }
    /// Finds a plugin by name.
    [[nodiscard]] const PluginInfo* find(const std::string& name) const;

    /// Loads a plugin: dlopen, entry point, API version and kind checked against the metadata.
    /// Errors say which library is missing (e.g. the CUDA runtime) and how to get it.
    Result<std::shared_ptr<LoadedPlugin>> load(const std::string& name) const;

    static std::vector<std::filesystem::path> defaultFolders();

private:
    void scan(const std::filesystem::path& folder, int depth);

    std::vector<PluginInfo> m_plugins;
    std::vector<std::string> m_warnings;
};

/// Loads the communicator plugin `name` and creates a communicator with JSON options. The
/// communicator keeps the plugin loaded.
Result<std::shared_ptr<comm::Communicator>> createCommunicator(
    const PluginRegistry& registry, const std::string& name, const std::string& optionsJson = "{}");

/// Loads the backend plugin `name` and creates its backend with JSON options (e.g.
/// {"device": 0}). Errors name what is missing: the plugin, its runtime libraries, or a device
/// ("no CUDA device: ..."). The backend keeps the plugin loaded.
Result<std::shared_ptr<exec::Backend>> createBackend(
    const PluginRegistry& registry, const std::string& name, const std::string& optionsJson = "{}");

/// Loads the profiler plugin `name` (kind "profiler") and creates its collector with JSON
/// options (e.g. {"rank": 0}). The collector keeps the plugin loaded.
Result<std::shared_ptr<ProfilerCollector>> createProfiler(
    const PluginRegistry& registry, const std::string& name, const std::string& optionsJson = "{}");

/// A compute backend chosen by name: the CPU reference ("cpu", "day0-cpu") or a backend plugin.
struct BackendChoice {
    std::string name; ///< "day0-cpu", "cuda"
    /// The operators the backend declares as native (a plugin's manifest "ops"); known even
    /// when it cannot run here.
    std::vector<exec::BackendOp> declaredOps;
    std::shared_ptr<exec::Backend> backend; ///< null when it cannot run here
    std::optional<Error> unavailable; ///< why not ("no CUDA device: ...")
};

/// Resolves `name`. Errors (BadInput) only for a name that is neither the CPU reference nor an
/// installed backend plugin; a plugin that cannot load or finds no device comes back with
/// `unavailable` set, so callers can still show its declared coverage.
Result<BackendChoice> chooseBackend(
    const PluginRegistry& registry, const std::string& name, int device = 0);

/// The backend a run computes on: null for the CPU reference (which runs without one), else the
/// plugin backend `name` on `device`. Errors: an unknown name (BadInput, listing the installed
/// ones) or why the plugin cannot run here ("no CUDA device: ...").
Result<std::shared_ptr<exec::Backend>> openRunBackend(
    const PluginRegistry& registry, const std::string& name, int device = 0);

} // namespace day0::extend
