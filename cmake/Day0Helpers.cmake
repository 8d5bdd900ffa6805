# Shared build helpers: one folder, one target.

# Warnings used by every project target.
function(day0_set_warnings target)
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor
        # Aggregates here give every member a default, so omitted designated initialisers are fine.
        -Wno-missing-field-initializers)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
        # GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string (GCC bug 105329).
        target_compile_options(${target} PRIVATE -Wno-restrict)
    endif()
    if(DAY0_WARNINGS_AS_ERRORS)
        target_compile_options(${target} PRIVATE -Werror)
    endif()
endfunction()

# day0_core_module(<name> SOURCES ... DEPENDS ...): static library day0_<name>, alias day0::<name>,
# includes rooted at core/ so that headers read "#include \"<name>/file.h\"".
function(day0_core_module name)
    cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS;PRIVATE_DEPENDS" ${ARGN})
    add_library(day0_${name} STATIC ${ARG_SOURCES})
    add_library(day0::${name} ALIAS day0_${name})
    target_include_directories(day0_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/..)
    target_link_libraries(day0_${name} PUBLIC ${ARG_DEPENDS} PRIVATE ${ARG_PRIVATE_DEPENDS})
    day0_set_warnings(day0_${name})
    set_property(GLOBAL APPEND PROPERTY DAY0_CORE_MODULES day0_${name})
endfunction()

# day0_gtest(<name> SOURCES ... DEPENDS ...): a GoogleTest executable registered with CTest.
function(day0_gtest name)
    cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
    add_executable(${name} ${ARG_SOURCES})
    target_link_libraries(${name} PRIVATE ${ARG_DEPENDS} GTest::gtest GTest::gtest_main GTest::gmock)
    target_compile_definitions(${name} PRIVATE
        DAY0_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data"
        DAY0_RESOURCE_DIR="${PROJECT_SOURCE_DIR}/resources")
    day0_set_warnings(${name})
    gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
        PROPERTIES ENVIRONMENT "QT_QPA_PLATFORM=offscreen")
endfunction()

# day0_add_plugin(<name> SOURCES ... LIBS ... MANIFEST <json> [PRIVATE_STATICS]): the plugin
# day0_plugin_<name>, a shared library loaded at run time through core/extend (plugin_api.h,
# DAY0_DECLARE_PLUGIN), with its JSON manifest beside it in the build tree and both installed to
# lib/day0/plugins. Its own code exports only the entry point; PRIVATE_STATICS also hides the
# symbols of the static libraries it links (the CUDA runtime's, cuBLAS's).
function(day0_add_plugin name)
    cmake_parse_arguments(ARG "PRIVATE_STATICS" "MANIFEST" "SOURCES;LIBS" ${ARGN})
    set(target day0_plugin_${name})
    add_library(${target} MODULE ${ARG_SOURCES})
    target_link_libraries(${target} PRIVATE ${ARG_LIBS} day0::extend)
    set_target_properties(${target} PROPERTIES PREFIX "lib" CXX_VISIBILITY_PRESET hidden)
    if(ARG_PRIVATE_STATICS)
        set_target_properties(${target} PROPERTIES LINK_OPTIONS "-Wl,--exclude-libs,ALL")
    endif()
    day0_set_warnings(${target})
    get_filename_component(manifest ${ARG_MANIFEST} NAME)
    configure_file(${ARG_MANIFEST} ${CMAKE_CURRENT_BINARY_DIR}/${manifest} COPYONLY)
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/day0/plugins)
    install(FILES ${ARG_MANIFEST} DESTINATION ${CMAKE_INSTALL_LIBDIR}/day0/plugins)
endfunction()
