# The emulator firewall's include scan (cmake/FirewallScan.cmake) fails when it should, and only then.
# cmake -DEMO_SOURCE_DIR=<checkout> -DWORK_DIR=<scratch dir> -P firewall_test.cmake
cmake_minimum_required(VERSION 3.22)
set(scan ${EMO_SOURCE_DIR}/cmake/FirewallScan.cmake)

# Runs the scan over `root` as the configure would: sets `rc` and `out` (stdout and stderr).
macro(run_scan root)
  execute_process(COMMAND ${CMAKE_COMMAND} -DEMO_FIREWALL_ROOT=${root} -P ${scan}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
endmacro()

# expect(<passes|fails> [HAS text...] [LACKS text...] WHAT description): on the last run_scan.
function(expect outcome)
  cmake_parse_arguments(ARG "" "WHAT" "HAS;LACKS" ${ARGN})
  set(ok TRUE)
  if((outcome STREQUAL "passes") AND NOT (rc EQUAL 0))
    set(ok FALSE)
  elseif((outcome STREQUAL "fails") AND (rc EQUAL 0))
    set(ok FALSE)
  endif()
  foreach(text ${ARG_HAS})
    string(FIND "${out}" "${text}" at)
    if(at EQUAL -1)
      set(ok FALSE)
    endif()
  endforeach()
  foreach(text ${ARG_LACKS})
    string(FIND "${out}" "${text}" at)
    if(NOT at EQUAL -1)
      set(ok FALSE)
    endif()
  endforeach()
  if(ok)
    message(STATUS "ok: ${ARG_WHAT}")
  else()
    message(SEND_ERROR "FAILED: ${ARG_WHAT} (exit ${rc}); the scan said:\n${out}")
  endif()
endfunction()

# A fake checkout: a clean source and public header per stage, an emulator that includes its own
# truth, and in pack only comments and look-alike names that mention it.
set(clean ${WORK_DIR}/clean)
file(REMOVE_RECURSE ${WORK_DIR})
foreach(stage model pack optimize pipeline calibrate)
  file(WRITE ${clean}/src/${stage}/${stage}.cpp "#include \"emo/${stage}/${stage}.h\"\n#include <vector>\n")
  file(WRITE ${clean}/include/emo/${stage}/${stage}.h "#pragma once\n#include \"emo/base/result.h\"\n")
endforeach()
file(WRITE ${clean}/src/emulator/emulator.cpp "#include \"truth.h\"\n#include \"emulator_detail.h\"\n")
file(WRITE ${clean}/src/pack/fit.cpp
     "// Never #include \"../emulator/truth.h\" here.\n//#include \"emo/emulator/emulator.h\"\n"
     "#include \"emo/pack/fit.h\"\n#include \"my_truth.h\"\n#include \"emulators/x.h\"\n")
run_scan(${clean})
expect(passes HAS "no include of the emulator" WHAT "a clean tree passes")

# The truth planted in pack, and the public emulator header in a model header.
set(planted ${WORK_DIR}/planted)
file(COPY ${clean}/ DESTINATION ${planted})
file(WRITE ${planted}/src/pack/fit.cpp "#include \"emo/pack/fit.h\"\n\n#include \"../emulator/truth.h\"\n")
file(APPEND ${planted}/include/emo/model/model.h "  #  include <emo/emulator/emulator.h>\n")
run_scan(${planted})
expect(fails HAS "src/pack/fit.cpp:3: #include \"../emulator/truth.h\""
                 "include/emo/model/model.h:3: #  include <emo/emulator/emulator.h>"
             LACKS "src/pack/pack.cpp" "src/emulator/"
       WHAT "a planted include fails, naming each file and line")

# An emulator header by its name alone, as an include directory would find it.
file(WRITE ${planted}/src/optimize/optimize.cpp "#include <vector>\n#include \"emulator_detail.h\"\n")
file(REMOVE ${planted}/src/pack/fit.cpp ${planted}/include/emo/model/model.h)
run_scan(${planted})
expect(fails HAS "src/optimize/optimize.cpp:2: #include \"emulator_detail.h\"" WHAT "an emulator header by name fails")

# The other way: the emulator including graph/ or replay/ (or analysis/, which includes them) fails;
# the executor's header is fine.
set(emu ${WORK_DIR}/emu)
file(COPY ${clean}/ DESTINATION ${emu})
file(WRITE ${emu}/src/emulator/emulator.cpp
     "#include \"truth.h\"\n#include \"emo/executor/executor.h\"\n// #include \"emo/replay/replay.h\"\n")
run_scan(${emu})
expect(passes HAS "no include of graph, replay or analysis" WHAT "an emulator on the executor passes")
file(WRITE ${emu}/src/emulator/kineto_out.cpp "#include <vector>\n#include \"emo/replay/replay.h\"\n")
file(WRITE ${emu}/include/emo/emulator/emulator.h "#pragma once\n#include \"emo/analysis/analysis.h\"\n")
file(WRITE ${emu}/src/emulator/energy.cpp "#include \"../graph/graph.h\"\n#include \"graph.h\"\n")
run_scan(${emu})
expect(fails HAS "src/emulator/kineto_out.cpp:2: #include \"emo/replay/replay.h\""
                 "include/emo/emulator/emulator.h:2: #include \"emo/analysis/analysis.h\""
                 "src/emulator/energy.cpp:1: #include \"../graph/graph.h\""
                 "src/emulator/energy.cpp:2: #include \"graph.h\""
             LACKS "src/emulator/emulator.cpp"
       WHAT "the emulator including graph, replay or analysis fails, naming each file and line")

# And the checkout itself.
run_scan(${EMO_SOURCE_DIR})
expect(passes WHAT "the real tree passes")
