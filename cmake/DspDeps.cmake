# Third-party dependencies, all from Debian packages (scripts/setup.sh installs them).
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_path(RANDOM123_INCLUDE_DIR Random123/philox.h REQUIRED)
add_library(dsp_random123 INTERFACE)
target_include_directories(dsp_random123 SYSTEM INTERFACE ${RANDOM123_INCLUDE_DIR})

if(NOT DSP_FUZZ)
  find_package(MPI REQUIRED COMPONENTS C)
  find_package(CLI11 REQUIRED)
  if(DSP_BUILD_TESTS)
    find_package(GTest REQUIRED)
  endif()
  # mpiexec for the multi-rank tests; root needs explicit permission in OpenMPI.
  find_program(DSP_MPIEXEC NAMES mpiexec mpirun HINTS ${MPI_C_COMPILER_INCLUDE_DIRS}/../bin)
endif()
