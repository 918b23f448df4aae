# The emulator firewall's include scan. The stages that model and optimize (model, pack, optimize,
# pipeline, calibrate) may not include anything of the emulated GPU: no path with an `emulator`
# directory in it ("../emulator/truth.h", "emo/emulator/emulator.h"), and no header named like the
# emulator's own (truth.h, emulator_detail.h, emulator.h), whatever its path.
# The other way round, the emulated GPU (src/emulator, include/emo/emulator) times its runs with the
# independent executor alone: it may include nothing of graph/ or replay/, nor analysis/ (whose header
# includes both) — no path with such a directory in it, no header named graph.h, replay.h or analysis.h.
#
# include(): defines emo_firewall_scan(ROOT <dir> VIOLATIONS <var> [FILES <var>]) and
# emo_emulator_scan(ROOT <dir> VIOLATIONS <var> [FILES <var>]).
# cmake -DEMO_FIREWALL_ROOT=<dir> -P FirewallScan.cmake: scans <dir> both ways, fails naming each file:line.

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.22)
endif()
set(EMO_FIREWALL_STAGES model pack optimize pipeline calibrate)

# Sets VIOLATIONS to "file:line: #include <what>" for every include under ROOT's folders FOLDERS
# (each as src/<f> and include/emo/<f>) with one of DIRS among its path's directories or named one of
# NAMES, and FILES to the files scanned.
function(emo_include_scan)
  cmake_parse_arguments(ARG "" "ROOT;VIOLATIONS;FILES" "FOLDERS;DIRS;NAMES" ${ARGN})
  set(globs "")
  foreach(folder ${ARG_FOLDERS})
    foreach(ext c cc cpp cxx h hh hpp hxx inl ipp)
      list(APPEND globs ${ARG_ROOT}/src/${folder}/*.${ext} ${ARG_ROOT}/include/emo/${folder}/*.${ext})
    endforeach()
  endforeach()
  if(CMAKE_SCRIPT_MODE_FILE)
    file(GLOB_RECURSE files ${globs})
  else()
    # A new or removed file re-runs the configure; Firewall.cmake makes an edit re-run it too.
    file(GLOB_RECURSE files CONFIGURE_DEPENDS ${globs})
  endif()
  list(SORT files)

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
      set(hit FALSE)
      foreach(d ${ARG_DIRS})
        if(d IN_LIST dirs)
          set(hit TRUE)
        endif()
      endforeach()
      if(hit OR name IN_LIST ARG_NAMES)
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

# The stages against the emulator. Names, not just paths: `#include "truth.h"` would find the header
# through an include directory.
function(emo_firewall_scan)
  cmake_parse_arguments(ARG "" "ROOT;VIOLATIONS;FILES" "" ${ARGN})
  emo_include_scan(ROOT ${ARG_ROOT} VIOLATIONS violations FILES files FOLDERS ${EMO_FIREWALL_STAGES}
                   DIRS emulator NAMES truth.h emulator_detail.h emulator.h)
  set(${ARG_VIOLATIONS} ${violations} PARENT_SCOPE)
  if(ARG_FILES)
    set(${ARG_FILES} ${files} PARENT_SCOPE)
  endif()
endfunction()

# The emulator against graph/, replay/ and analysis/.
function(emo_emulator_scan)
  cmake_parse_arguments(ARG "" "ROOT;VIOLATIONS;FILES" "" ${ARGN})
  emo_include_scan(ROOT ${ARG_ROOT} VIOLATIONS violations FILES files FOLDERS emulator
                   DIRS graph replay analysis NAMES graph.h replay.h analysis.h)
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

function(emo_emulator_fail_on violations)
  if(violations)
    list(JOIN violations "\n  " text)
    message(FATAL_ERROR "emulator firewall: the emulated GPU times its runs with the executor and must not "
                        "see graph/ or replay/ (nor analysis/, which includes them), but:\n  ${text}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT EMO_FIREWALL_ROOT)
    message(FATAL_ERROR "usage: cmake -DEMO_FIREWALL_ROOT=<source dir> -P ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  emo_firewall_scan(ROOT ${EMO_FIREWALL_ROOT} VIOLATIONS violations FILES files)
  emo_firewall_fail_on("${violations}")
  emo_emulator_scan(ROOT ${EMO_FIREWALL_ROOT} VIOLATIONS emu_violations FILES emu_files)
  emo_emulator_fail_on("${emu_violations}")
  list(LENGTH files n)
  list(LENGTH emu_files n_emu)
  message(STATUS "emulator firewall: ${n} files under ${EMO_FIREWALL_ROOT}, no include of the emulator; "
                 "${n_emu} emulator files, no include of graph, replay or analysis")
endif()
