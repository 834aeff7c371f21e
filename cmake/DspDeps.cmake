# Third-party dependencies, all from Debian packages (scripts/setup.sh installs them). A missing one
# stops the configuration with one line naming the package to install; `pip install .` shows the
# same line.
function(dsp_missing_dependency what debian_package)
  # The leading space keeps CMake from wrapping the line.
  message(FATAL_ERROR " dsp needs ${what}: apt install ${debian_package} "
                      "(scripts/setup.sh installs every dependency)")
endfunction()

# dsp_find_package(<Package> <debian-package> [find_package args...])
macro(dsp_find_package name debian_package)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    dsp_missing_dependency(${name} "${debian_package}")
  endif()
endmacro()

# dsp_find_file(<VAR> <debian-package> PATH|LIBRARY <name>): find_path/find_library, same message.
function(dsp_find_file var debian_package kind name)
  if(kind STREQUAL "LIBRARY")
    find_library(${var} ${name})
  else()
    find_path(${var} ${name})
  endif()
  if(NOT ${var})
    dsp_missing_dependency(${name} "${debian_package}")
  endif()
endfunction()

dsp_find_package(fmt libfmt-dev)
dsp_find_package(nlohmann_json nlohmann-json3-dev)
dsp_find_package(ZLIB zlib1g-dev)
# g++ ships OpenMP (libgomp); clang needs LLVM's runtime.
dsp_find_package(OpenMP "libgomp1 (g++) or libomp-14-dev (clang)" COMPONENTS CXX)
dsp_find_file(RANDOM123_INCLUDE_DIR librandom123-dev PATH Random123/philox.h)
add_library(dsp_random123 INTERFACE)
target_include_directories(dsp_random123 SYSTEM INTERFACE ${RANDOM123_INCLUDE_DIR})

if(NOT DSP_FUZZ)
  dsp_find_package(MPI "libopenmpi-dev openmpi-bin" COMPONENTS C)
  dsp_find_package(CLI11 libcli11-dev)
  dsp_find_file(DSP_METIS_LIBRARY libmetis-dev LIBRARY metis)
  dsp_find_file(DSP_METIS_INCLUDE_DIR libmetis-dev PATH metis.h)
  if(DSP_BUILD_TESTS)
    dsp_find_package(GTest "libgtest-dev libgmock-dev")
  endif()
  # mpiexec for the multi-rank tests; root needs explicit permission in OpenMPI.
  find_program(DSP_MPIEXEC NAMES mpiexec mpirun HINTS ${MPI_C_COMPILER_INCLUDE_DIRS}/../bin)
endif()
