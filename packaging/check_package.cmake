# Builds the Debian package with CPack and checks its contents and control fields.
# cmake -DBUILD_DIR=<build> -DOUT_DIR=<scratch> -DWITH_GUI=ON|OFF -P check_package.cmake
file(REMOVE_RECURSE ${OUT_DIR})
file(MAKE_DIRECTORY ${OUT_DIR})
find_program(DPKG_DEB dpkg-deb REQUIRED)

# gzip and no stripping keep the check quick; the release package uses CPack's defaults.
execute_process(
    COMMAND ${CMAKE_CPACK_COMMAND} -G DEB -B ${OUT_DIR} --config ${BUILD_DIR}/CPackConfig.cmake
        -D CPACK_STRIP_FILES=OFF -D CPACK_DEBIAN_COMPRESSION_TYPE=gzip
    WORKING_DIRECTORY ${BUILD_DIR}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cpack failed (${rc}):\n${out}\n${err}")
endif()
file(GLOB debs ${OUT_DIR}/*.deb)
list(LENGTH debs count)
if(NOT count EQUAL 1)
    message(FATAL_ERROR "expected one .deb in ${OUT_DIR}, found ${count}: ${debs}\n${out}")
endif()

execute_process(COMMAND ${DPKG_DEB} -c ${debs} OUTPUT_VARIABLE contents RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dpkg-deb -c ${debs} failed")
endif()
set(expected
    ./usr/bin/day0
    ./usr/share/day0/configs/kimi-k2.json
    ./usr/share/day0/configs/deepseek-v3.json)
if(WITH_GUI)
    list(APPEND expected
        ./usr/bin/day0-workbench
        ./usr/share/applications/day0-workbench.desktop
        ./usr/share/icons/hicolor/scalable/apps/day0-workbench.svg
        ./usr/share/metainfo/io.github.day0.workbench.metainfo.xml)
endif()
foreach(path IN LISTS expected)
    string(FIND "${contents}" " ${path}\n" at)
    if(at EQUAL -1)
        message(FATAL_ERROR "${debs}: missing ${path}\ncontents:\n${contents}")
    endif()
endforeach()
if(WITH_GUI AND NOT contents MATCHES "\\./usr/lib[^ ]*/day0/libday0_figures\\.so\n")
    message(FATAL_ERROR "${debs}: missing the report figures module libday0_figures.so\n${contents}")
endif()
# day0 links no Qt (its report figures come from libday0_figures at run time).
execute_process(COMMAND ${DPKG_DEB} -x ${debs} ${OUT_DIR}/root RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dpkg-deb -x ${debs} failed")
endif()
# The CLI as the package installs it, inside the extracted tree.
cmake_path(APPEND OUT_DIR root usr bin day0 OUTPUT_VARIABLE packaged_day0)
execute_process(COMMAND ldd ${packaged_day0} OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR libs MATCHES "libQt")
    message(FATAL_ERROR "${debs}: the packaged day0 links Qt (or ldd failed):\n${libs}")
endif()
if(WITH_GUI)
    # The packaged CLI, as installed, still draws its report's figures through the module.
    execute_process(
        COMMAND ${CMAKE_COMMAND} -E env XDG_CACHE_HOME=${OUT_DIR}/cache DAY0_STORE=/dev/null
            ${packaged_day0} validate kimi-k2 --work ${OUT_DIR}/work
            --report ${OUT_DIR}/report.html --json -q --no-record
        OUTPUT_VARIABLE report RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT report MATCHES "\"figures\": [1-9]")
        message(FATAL_ERROR "the packaged day0 validate drew no figures (exit ${rc}):\n${err}")
    endif()
endif()
if(contents MATCHES "\\./usr/(include|lib/[^ ]*\\.a)")
    message(FATAL_ERROR "${debs}: ships headers or static libraries:\n${contents}")
endif()

execute_process(COMMAND ${DPKG_DEB} -f ${debs} Package Version Depends OUTPUT_VARIABLE fields)
foreach(needle "Package: day0" "libc6")
    string(FIND "${fields}" "${needle}" at)
    if(at EQUAL -1)
        message(FATAL_ERROR "${debs}: control fields lack '${needle}':\n${fields}")
    endif()
endforeach()
if(WITH_GUI)
    foreach(needle "libqt6widgets6" "libqcustomplot2.1-qt6")
        string(FIND "${fields}" "${needle}" at)
        if(at EQUAL -1)
            message(FATAL_ERROR "${debs}: Depends lacks '${needle}':\n${fields}")
        endif()
    endforeach()
endif()
message(STATUS "${debs}: ${count} package, contents and dependencies as expected")
