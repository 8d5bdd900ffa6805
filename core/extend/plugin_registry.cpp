#include "extend/plugin_registry.h"

#include "base/file_util.h"
#include "base/json_util.h"
#include "base/resources.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <set>
#include <sstream>
#include <system_error>

namespace day0::extend {

namespace fs = std::filesystem;

LoadedPlugin::LoadedPlugin(void* handle, const Day0PluginDescriptor* descriptor, PluginInfo info)
    : m_handle(handle)
    , m_descriptor(descriptor)
    , m_info(std::move(info))
{
}

LoadedPlugin::~LoadedPlugin()
{
    if (m_handle) {
        ::dlclose(m_handle);
    }
}

std::vector<fs::path> PluginRegistry::defaultFolders()
{
    std::vector<fs::path> folders;
    if (const char* env = std::getenv("DAY0_PLUGIN_PATH"); env && *env) {
        std::stringstream ss(env);
        std::string item;
        while (std::getline(ss, item, ':')) {
            if (!item.empty()) {
                folders.emplace_back(item);
            }
        }
    }
    // Installed: <prefix>/<libdir>/day0/plugins (lib/x86_64-linux-gnu on Debian).
    for (const auto& dir : installedLibraryDirs()) {
        folders.push_back(dir / "plugins");
    }
    std::error_code ec;
    const auto exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const auto dir = exe.parent_path();
        // Build tree: <build>/app/cli/day0 next to <build>/plugins/<name>/.
        folders.push_back(dir / "../../plugins");
        folders.push_back(dir / "../plugins");
    }
    return folders;
}

PluginRegistry::PluginRegistry(std::vector<fs::path> folders)
{
    for (const auto& folder : folders) {
        scan(folder, 0);
    }
}

void PluginRegistry::scan(const fs::path& folder, int depth)
{
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
        return;
    }
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
        const auto& path = entry.path();
        if (entry.is_directory(ec) && depth == 0) {
            scan(path, depth + 1);
            continue;
        }
        const auto filename = path.filename().string();
        if (filename.rfind("day0_", 0) != 0 || path.extension() != ".json") {
            continue;
        }
        auto json = readJsonFile(path);
        if (!json) {
            m_warnings.push_back(json.error().message);
            continue;
        }
        JsonReader r(*json, displayPath(path));
        PluginInfo info;
        info.name = r.stringOr("name", "");
        info.kind = r.stringOr("kind", "");
        info.version = r.stringOr("version", "");
        info.description = r.stringOr("description", "");
        info.metadata = path;
        const auto libraryName = r.stringOr("library", "");
        if (info.name.empty()) {
            r.fail("name", "is missing");
        }
        if (info.kind.empty()) {
            r.fail("kind", "is missing");
        }
        if (libraryName.empty()) {
            r.fail("library", "is missing");
        }
        if (json->contains("requires") && (*json)["requires"].is_array()) {
            for (const auto& lib : (*json)["requires"]) {
                if (lib.is_string()) {
                    info.requiredLibraries.push_back(lib.get<std::string>());
                }
            }
        }
        if (json->contains("ops") && (*json)["ops"].is_array()) {
            for (const auto& op : (*json)["ops"]) {
                const auto parsed = op.is_string() ? exec::backendOpFromName(op.get<std::string>())
                                                   : std::nullopt;
                if (!parsed) {
                    r.fail("ops", fmt::format("names an unknown operator {}", dumpJson(op)));
                    break;
                }
                info.ops.push_back(*parsed);
            }
        }
        if (!r.ok()) {
            m_warnings.push_back(r.error().message);
            continue;
        }
        info.library = path.parent_path() / libraryName;
        if (!fs::exists(info.library, ec)) {
            continue; // metadata in a source folder, the library lives in the build tree
        }
        if (find(info.name)) {
            continue; // the first folder wins
        }
        m_plugins.push_back(std::move(info));
    }
}

const PluginInfo* PluginRegistry::find(const std::string& name) const
{
    for (const auto& p : m_plugins) {
        if (p.name == name) {
            return &p;
        }
    }
    return nullptr;
}

Result<std::shared_ptr<LoadedPlugin>> PluginRegistry::load(const std::string& name) const
{
    const PluginInfo* info = find(name);
    if (!info) {
        std::string known;
        for (const auto& p : m_plugins) {
            known += (known.empty() ? "" : ", ") + p.name;
        }
        return Error::unsupported(fmt::format(
            "plugin '{}' is not installed (found: {})", name, known.empty() ? "none" : known));
    }
    ::dlerror();
    void* handle = ::dlopen(info->library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = ::dlerror();
        std::string hint;
        if (!info->requiredLibraries.empty()) {
            hint = fmt::format(" (the plugin needs {})",
                fmt::format("{}", fmt::join(info->requiredLibraries, ", ")));
        }
        return Error::unsupported(fmt::format("plugin '{}': cannot load {}: {}{}", name,
            displayPath(info->library), why ? why : "unknown error", hint));
    }
    auto entry = reinterpret_cast<Day0PluginEntry>(::dlsym(handle, DAY0_PLUGIN_ENTRY_NAME));
    if (!entry) {
        ::dlclose(handle);
        return Error::badInput(fmt::format("plugin '{}': {} does not export {}", name,
            displayPath(info->library), DAY0_PLUGIN_ENTRY_NAME));
    }
    const Day0PluginDescriptor* descriptor = entry();
    if (!descriptor || descriptor->apiVersion != DAY0_PLUGIN_API_VERSION) {
        ::dlclose(handle);
        return Error::unsupported(
            fmt::format("plugin '{}' was built for plugin API {} but this day0 has API {}; "
                        "rebuild the plugin",
                name, descriptor ? descriptor->apiVersion : -1, DAY0_PLUGIN_API_VERSION));
    }
    if (info->kind != descriptor->kind || info->name != descriptor->name) {
        ::dlclose(handle);
        return Error::badInput(
            fmt::format("plugin '{}': metadata says {} '{}' but the library is {} '{}'", name,
                info->kind, info->name, descriptor->kind, descriptor->name));
    }
    return std::make_shared<LoadedPlugin>(handle, descriptor, *info);
}

Result<std::shared_ptr<comm::Communicator>> createCommunicator(
    const PluginRegistry& registry, const std::string& name, const std::string& optionsJson)
{
    auto plugin = registry.load(name);
    if (!plugin) {
        return plugin.error();
    }
    auto loaded = *plugin;
    if (std::string(loaded->descriptor().kind) != "communicator") {
        return Error::badInput(fmt::format(
            "plugin '{}' is a {}, not a communicator", name, loaded->descriptor().kind));
    }
    char error[512] = {};
    void* object = loaded->descriptor().create(optionsJson.c_str(), error, sizeof error);
    if (!object) {
        return Error::unsupported(fmt::format(
            "plugin '{}': {}", name, error[0] ? error : "could not create a communicator"));
    }
    // For "communicator" plugins `create` returns a heap-held std::shared_ptr<comm::Communicator>
    // (plugin_api.h). The returned pointer's deleter keeps the plugin mapped while it lives.
    auto* held = static_cast<std::shared_ptr<comm::Communicator>*>(object);
    comm::Communicator* raw = held->get();
    return std::shared_ptr<comm::Communicator>(
        raw, [loaded, held](comm::Communicator*) { loaded->descriptor().destroy(held); });
}

Result<std::shared_ptr<exec::Backend>> createBackend(
    const PluginRegistry& registry, const std::string& name, const std::string& optionsJson)
{
    auto plugin = registry.load(name);
    if (!plugin) {
        return plugin.error();
    }
    auto loaded = *plugin;
    if (std::string(loaded->descriptor().kind) != "backend") {
        return Error::badInput(
            fmt::format("plugin '{}' is a {}, not a backend", name, loaded->descriptor().kind));
    }
    char error[512] = {};
    void* object = loaded->descriptor().create(optionsJson.c_str(), error, sizeof error);
    if (!object) {
        return Error::unsupported(
            fmt::format("plugin '{}': {}", name, error[0] ? error : "could not create a backend"));
    }
    // For "backend" plugins `create` returns a heap-held std::shared_ptr<exec::Backend>.
    auto* held = static_cast<std::shared_ptr<exec::Backend>*>(object);
    exec::Backend* raw = held->get();
    return std::shared_ptr<exec::Backend>(
        raw, [loaded, held](exec::Backend*) { loaded->descriptor().destroy(held); });
}

Result<std::shared_ptr<ProfilerCollector>> createProfiler(
    const PluginRegistry& registry, const std::string& name, const std::string& optionsJson)
{
    auto plugin = registry.load(name);
    if (!plugin) {
        return plugin.error();
    }
    auto loaded = *plugin;
    if (std::string(loaded->descriptor().kind) != "profiler") {
        return Error::badInput(
            fmt::format("plugin '{}' is a {}, not a profiler", name, loaded->descriptor().kind));
    }
    char error[512] = {};
    void* object = loaded->descriptor().create(optionsJson.c_str(), error, sizeof error);
    if (!object) {
        return Error::unsupported(
            fmt::format("plugin '{}': {}", name, error[0] ? error : "could not create a profiler"));
    }
    // For "profiler" plugins `create` returns a heap-held std::shared_ptr<ProfilerCollector>.
    auto* held = static_cast<std::shared_ptr<ProfilerCollector>*>(object);
    ProfilerCollector* raw = held->get();
    return std::shared_ptr<ProfilerCollector>(
        raw, [loaded, held](ProfilerCollector*) { loaded->descriptor().destroy(held); });
}

Result<BackendChoice> chooseBackend(
    const PluginRegistry& registry, const std::string& name, int device)
{
    BackendChoice choice;
    if (name.empty() || name == "cpu" || name == "day0-cpu") {
        choice.name = "day0-cpu";
        choice.backend = exec::makeCpuBackend();
        const auto ops = exec::allBackendOps();
        choice.declaredOps.assign(ops.begin(), ops.end());
        return choice;
    }
    const PluginInfo* info = registry.find(name);
    if (info == nullptr || info->kind != "backend") {
        std::string known = "cpu";
        for (const auto& p : registry.plugins()) {
            if (p.kind == "backend") {
                known += ", " + p.name;
            }
        }
        return Error::badInput(fmt::format("--backend {}: {} (available: {})", name,
            info == nullptr ? "no such backend plugin is installed"
                            : fmt::format("plugin '{}' is a {}, not a backend", name, info->kind),
            known));
    }
    choice.name = info->name;
    choice.declaredOps = info->ops;
    auto backend = createBackend(registry, name, fmt::format("{{\"device\": {}}}", device));
    if (backend) {
        choice.backend = std::move(*backend);
    } else {
        choice.unavailable = backend.error();
    }
    return choice;
}

Result<std::shared_ptr<exec::Backend>> openRunBackend(
    const PluginRegistry& registry, const std::string& name, int device)
{
    auto choice = chooseBackend(registry, name, device);
    if (!choice) {
        return choice.error();
    }
    if (choice->unavailable) {
        return *choice->unavailable;
    }
    if (choice->name == "day0-cpu") {
        return std::shared_ptr<exec::Backend>();
    }
    return choice->backend;
}

} // namespace day0::extend
