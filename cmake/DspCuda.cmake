# DSP_WITH_CUDA=ON builds the CUDA kernel library and the NCCL communicator (nvcc required; no GPU
# needed to compile: scripts/test.sh asks for it wherever nvcc is, so the sources keep compiling);
# AUTO builds them where nvcc is found and this machine has a GPU (nvidia-smi lists one), since on
# a machine without one they only cost compile time (a quarter of a cold build). The full CUDA
# build (kernels linked into the trainer) also needs a CUDA-enabled LibTorch (see docs/building.md).
set(DSP_CUDA_ENABLED OFF)
set(_dsp_cuda_wanted ON)
if(DSP_WITH_CUDA STREQUAL "AUTO" AND NOT DSP_FUZZ)
  find_program(DSP_NVIDIA_SMI nvidia-smi)
  set(_gpus "")
  if(DSP_NVIDIA_SMI)
    execute_process(COMMAND ${DSP_NVIDIA_SMI} -L OUTPUT_VARIABLE _gpus ERROR_QUIET
                    RESULT_VARIABLE _smi_rc TIMEOUT 20)
  endif()
  if(NOT _gpus MATCHES "GPU [0-9]+:")
    set(_dsp_cuda_wanted OFF)
    message(STATUS "dsp: no GPU on this machine: the CUDA backends are not compiled "
                   "(-DDSP_WITH_CUDA=ON compiles them)")
  endif()
elseif(NOT DSP_WITH_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DSP_WITH_CUDA=${DSP_WITH_CUDA}: expected AUTO, ON or OFF")
endif()
if(NOT DSP_WITH_CUDA STREQUAL "OFF" AND NOT DSP_FUZZ AND _dsp_cuda_wanted)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND DEFINED ENV{CUDAARCHS})
      set(CMAKE_CUDA_ARCHITECTURES $ENV{CUDAARCHS})  # CMake's own variable, e.g. CUDAARCHS=90
    elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    # A CUDA LibTorch's Caffe2 config ignores CMAKE_CUDA_ARCHITECTURES (it clears it in the
    # directory that finds Torch) and, with no GPU to detect, lists every arch it knows; hand it
    # the same architectures through TORCH_CUDA_ARCH_LIST ("80;90" -> "8.0;9.0").
    if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
      set(_dsp_torch_archs "")
      foreach(_a ${CMAKE_CUDA_ARCHITECTURES})
        string(REGEX REPLACE "^([0-9]+)([0-9])(-real|-virtual)?$" "\\1.\\2" _a "${_a}")
        list(APPEND _dsp_torch_archs "${_a}")
      endforeach()
      set(ENV{TORCH_CUDA_ARCH_LIST} "${_dsp_torch_archs}")
    endif()
    enable_language(CUDA)
    # The shared CUDA runtime, as LibTorch links it: one cudart (one set of runtime state,
    # registrations and streams) in a process that holds both, never a static copy beside it.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    # NCCL: -DDSP_NCCL_ROOT=<dir with include/nccl.h and lib/libnccl.so*> (e.g. the lib folder of
    # the nvidia-nccl-cu13 wheel, which ships only libnccl.so.2), else the CUDA toolkit's.
    set(DSP_NCCL_ROOT "" CACHE PATH "NCCL install or wheel folder (include/, lib/)")
    set(_nccl_hints ${DSP_NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}/.. /usr/local/cuda)
    find_library(DSP_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints}
                 PATH_SUFFIXES lib lib64)
    find_path(DSP_NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
              PATH_SUFFIXES include)
    if(NOT DSP_NCCL_LIBRARY OR NOT DSP_NCCL_INCLUDE_DIR)
      message(FATAL_ERROR "CUDA found but NCCL (nccl.h, libnccl) not found; set DSP_NCCL_ROOT "
                          "(e.g. a nvidia-nccl wheel's folder) or DSP_WITH_CUDA=OFF")
    endif()
    message(STATUS "dsp: NCCL ${DSP_NCCL_LIBRARY} (${DSP_NCCL_INCLUDE_DIR})")
    set(DSP_CUDA_ENABLED ON)
    message(STATUS "dsp: CUDA kernels and NCCL backend enabled (archs ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(DSP_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DSP_WITH_CUDA=ON but no CUDA compiler was found")
  else()
    message(STATUS "dsp: nvcc not found, CPU-only build")
  endif()
endif()
