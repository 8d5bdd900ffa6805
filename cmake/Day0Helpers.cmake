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
