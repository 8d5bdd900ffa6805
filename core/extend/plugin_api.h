#pragma once

// The binary interface between day0 and its plugins: every plugin shared library exports one C
// function, `day0_plugin_descriptor`, returning a static descriptor. `create` returns a heap-held
// `std::shared_ptr<Interface>*` of the interface named by `kind` (day0::comm::Communicator for
// "communicator", day0::exec::Backend for "backend", day0::profile::ProfilerCollector for
// "profiler"), released with `destroy`. A backend's manifest lists the operators it runs natively
// under "ops" (exec::backendOpName spellings), so coverage is known without loading it. A plugin is
// built with the same compiler as the apps, and `apiVersion` guards the layout.

#include <cstddef>

/// Bumped whenever a plugin-facing interface (this struct or the interfaces its kinds name)
/// changes (2: exec::Backend::releaseWeights).
#define DAY0_PLUGIN_API_VERSION 2

extern "C" {

/// Describes a plugin and creates its objects.
struct Day0PluginDescriptor {
    int apiVersion; ///< DAY0_PLUGIN_API_VERSION the plugin was built against
    const char* name; ///< "mpi", "cuda", "nccl", "cupti"
    const char* kind; ///< "communicator", "backend", "profiler"
    const char* version; ///< the plugin's own version
    /// Creates an object of the kind's interface from JSON options; on failure returns nullptr and
    /// writes a message (naming what is missing) into `error` (at most `errorSize` bytes).
    void* (*create)(const char* optionsJson, char* error, std::size_t errorSize);
    /// Destroys an object made by `create`.
    void (*destroy)(void* object);
};

/// The one symbol a plugin exports.
using Day0PluginEntry = const Day0PluginDescriptor* (*)();
}

/// Name of the exported entry point.
#define DAY0_PLUGIN_ENTRY_NAME "day0_plugin_descriptor"

/// Declares a plugin: its descriptor and the exported entry point, in one line at namespace
/// scope of the plugin's source (every plugin, so the exported symbol is written once):
///
///     DAY0_DECLARE_PLUGIN("mpi", "communicator", "1.0", &createCommunicator, &destroyCommunicator)
#define DAY0_DECLARE_PLUGIN(name, kind, version, create, destroy)                                  \
    extern "C" __attribute__((visibility("default"))) const Day0PluginDescriptor*                  \
    day0_plugin_descriptor()                                                                       \
    {                                                                                              \
        static const Day0PluginDescriptor descriptor { DAY0_PLUGIN_API_VERSION, name, kind,        \
            version, create, destroy };                                                            \
        return &descriptor;                                                                        \
    }
