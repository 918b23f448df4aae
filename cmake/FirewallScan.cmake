# The emulator firewall's include scan. The stages that model and optimize (model, pack, optimize,
# pipeline, calibrate) may not include anything of the emulated GPU: no path with an `emulator`
# directory in it ("../emulator/truth.h", "emo/emulator/emulator.h"), and no header named like the
# emulator's own (truth.h, emulator_detail.h, emulator.h), whatever its path.
#
# include(): defines emo_firewall_scan(ROOT <dir> VIOLATIONS <var> [FILES <var>]).
# cmake -DEMO_FIREWALL_ROOT=<dir> -P FirewallScan.cmake: scans <dir>, fails naming each file:line.

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.22)
endif()
set(EMO_FIREWALL_STAGES model pack optimize pipeline calibrate)

# Sets VIOLATIONS to "file:line: #include <what>" for every forbidden include under ROOT's stage
# folders (src/<stage>, include/emo/<stage>), and FILES to the files scanned.
function(emo_firewall_scan)
  cmake_parse_arguments(ARG "" "ROOT;VIOLATIONS;FILES" "" ${ARGN})
  set(globs "")
  foreach(stage ${EMO_FIREWALL_STAGES})
    foreach(ext c cc cpp cxx h hh hpp hxx inl ipp)
      list(APPEND globs ${ARG_ROOT}/src/${stage}/*.${ext} ${ARG_ROOT}/include/emo/${stage}/*.${ext})
    endforeach()
  endforeach()
  if(CMAKE_SCRIPT_MODE_FILE)
    file(GLOB_RECURSE files ${globs})
  else()
    # A new or removed file re-runs the configure; Firewall.cmake makes an edit re-run it too.
    file(GLOB_RECURSE files CONFIGURE_DEPENDS ${globs})
  endif()
  list(SORT files)

  # Names, not just paths: `#include "truth.h"` would find the header through an include directory.
  set(forbidden truth.h emulator_detail.h emulator.h)

  set(violations "")
  foreach(f ${files})
    file(READ ${f} content)
    set(content "\n${content}")
    # An #include at the start of a line: one commented out with // never matches.
    string(REGEX MATCHALL "\n[ \t]*#[ \t]*include[ \t]*[<\"][^>\"\n]*[>\"]" includes "${content}")
    foreach(inc ${includes})
      string(REGEX REPLACE "^.*[<\"]([^>\"]*)[>\"]$" "\\1" path "${inc}")
      string(REPLACE "\\" "/" path "${path}")
      string(REPLACE "/" ";" dirs "${path}")
      list(POP_BACK dirs name)
      if("emulator" IN_LIST dirs OR name IN_LIST forbidden)
        string(FIND "${content}" "${inc}" pos)
        string(SUBSTRING "${content}" 0 ${pos} before)
        string(REGEX REPLACE "[^\n]" "" newlines "${before}")
        string(LENGTH "${newlines}" line)
        math(EXPR line "${line} + 1")
        file(RELATIVE_PATH rel ${ARG_ROOT} ${f})
        string(STRIP "${inc}" inc)
        list(APPEND violations "${rel}:${line}: ${inc}")
      endif()
    endforeach()
  endforeach()
  set(${ARG_VIOLATIONS} ${violations} PARENT_SCOPE)
  if(ARG_FILES)
    set(${ARG_FILES} ${files} PARENT_SCOPE)
  endif()
endfunction()

# Fails with one line per violation.
function(emo_firewall_fail_on violations)
  if(violations)
    list(JOIN violations "\n  " text)
    message(FATAL_ERROR "emulator firewall: the model and optimizer stages must not see the emulated GPU's "
                        "truth (src/emulator, include/emo/emulator), but:\n  ${text}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT EMO_FIREWALL_ROOT)
    message(FATAL_ERROR "usage: cmake -DEMO_FIREWALL_ROOT=<source dir> -P ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  emo_firewall_scan(ROOT ${EMO_FIREWALL_ROOT} VIOLATIONS violations FILES files)
  emo_firewall_fail_on("${violations}")
  list(LENGTH files n)
  message(STATUS "emulator firewall: ${n} files under ${EMO_FIREWALL_ROOT}, no include of the emulator")
endif()
