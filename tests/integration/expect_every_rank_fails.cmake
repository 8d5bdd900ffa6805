# Runs an mpirun command line that must fail the same way on every rank: it exits with
# EXPECT_EXIT and its output holds EXPECT_TEXT (a regular expression) once per rank (RANKS).
# A hang shows as the test's timeout. Skipped (prints "SKIPPED:") where nvidia-smi finds a GPU,
# since there the command is expected to run (tests/gpu/run_all.sh covers that).
#   cmake -DCOMMAND="mpirun|-np|2|day0|run|…" -DEXPECT_EXIT=2 -DEXPECT_TEXT=… -DRANKS=2 -P this
execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE gpu OUTPUT_QUIET ERROR_QUIET)
if(gpu EQUAL 0)
    message("SKIPPED: a CUDA device is present here")
    return()
endif()
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "${EXPECT_TEXT}" hits "${out}\n${err}")
list(LENGTH hits count)
if(NOT code EQUAL EXPECT_EXIT OR NOT count EQUAL RANKS)
    message(FATAL_ERROR "exit code ${code} (want ${EXPECT_EXIT}), '${EXPECT_TEXT}' seen ${count} "
        "times (want once per rank, ${RANKS})\nstdout:\n${out}\nstderr:\n${err}")
endif()
message("every one of ${RANKS} ranks failed with exit ${code}: ${EXPECT_TEXT}")
