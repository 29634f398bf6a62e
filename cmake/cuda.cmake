# cuda.cmake - decides whether this build has the CUDA paths and the nccl store, and turns
# the CUDA language on. Included by the top-level CMakeLists.txt BEFORE the library target is
# created: CMAKE_CUDA_ARCHITECTURES is copied into the target's CUDA_ARCHITECTURES property at
# creation time, so it must be set here.
#
#   KVSTORE_USE_CUDA  AUTO (on when nvcc is found) | ON (fail without nvcc) | OFF
#   KVSTORE_USE_NCCL  AUTO (on with CUDA when nccl.h is found) | ON | OFF
#
# Outputs (plain variables, this is an include): KVSTORE_CUDA_ENABLED, KVSTORE_NCCL_ENABLED,
# KVSTORE_NCCL_INCLUDE_DIR. Neither the CUDA driver nor libnccl is ever linked: the runtime is
# linked statically (cmake/cuda_sources.cmake) and NCCL is opened with dlopen on first use.

string(TOUPPER "${KVSTORE_USE_CUDA}" _kv_use_cuda)
string(TOUPPER "${KVSTORE_USE_NCCL}" _kv_use_nccl)
foreach(_kv_opt _kv_use_cuda _kv_use_nccl)
  if(${_kv_opt} STREQUAL "TRUE" OR ${_kv_opt} STREQUAL "1" OR ${_kv_opt} STREQUAL "YES")
    set(${_kv_opt} ON)
  elseif(${_kv_opt} STREQUAL "FALSE" OR ${_kv_opt} STREQUAL "0" OR ${_kv_opt} STREQUAL "NO"
         OR ${_kv_opt} STREQUAL "")
    set(${_kv_opt} OFF)
  endif()
  if(NOT ${_kv_opt} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "KVSTORE_USE_CUDA/KVSTORE_USE_NCCL must be AUTO, ON or OFF "
                        "(got '${${_kv_opt}}')")
  endif()
endforeach()

set(KVSTORE_CUDA_ENABLED OFF)
set(KVSTORE_NCCL_ENABLED OFF)

if(_kv_use_cuda STREQUAL "OFF")
  message(STATUS "kvstore: CUDA off (KVSTORE_USE_CUDA=OFF)")
else()
  # nvcc: an explicit CMAKE_CUDA_COMPILER, then PATH / CUDACXX (check_language), then the
  # default toolkit location, which is often not on PATH.
  if(NOT CMAKE_CUDA_COMPILER)
    include(CheckLanguage)
    check_language(CUDA)
    if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
      set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler" FORCE)
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
      # Ampere and Hopper as machine code, plus PTX of the newest for later GPUs (the driver
      # JIT-compiles it). CUDA 13 supports compute_75 and newer only.
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
    endif()
    if(NOT CMAKE_CUDA_HOST_COMPILER AND CMAKE_CXX_COMPILER)
      set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(KVSTORE_CUDA_ENABLED ON)
    message(STATUS "kvstore: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}), "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES}")
  elseif(_kv_use_cuda STREQUAL "ON")
    message(FATAL_ERROR "KVSTORE_USE_CUDA=ON but no nvcc was found (set CMAKE_CUDA_COMPILER "
                        "or CUDACXX, or use KVSTORE_USE_CUDA=AUTO/OFF)")
  else()
    message(STATUS "kvstore: nvcc not found, building without CUDA")
  endif()
endif()

if(_kv_use_nccl STREQUAL "ON" AND NOT KVSTORE_CUDA_ENABLED)
  message(FATAL_ERROR "KVSTORE_USE_NCCL=ON needs CUDA (KVSTORE_USE_CUDA is ${KVSTORE_USE_CUDA} "
                      "and nvcc was not found or CUDA is off)")
endif()
if(KVSTORE_CUDA_ENABLED AND NOT _kv_use_nccl STREQUAL "OFF")
  # Only the header is needed at build time: the library is opened with dlopen at run time.
  find_path(KVSTORE_NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME ENV NCCL_ROOT
    PATH_SUFFIXES include)
  if(KVSTORE_NCCL_INCLUDE_DIR)
    set(KVSTORE_NCCL_ENABLED ON)
    message(STATUS "kvstore: nccl store enabled (nccl.h in ${KVSTORE_NCCL_INCLUDE_DIR}; "
                   "libnccl.so.2 is opened at run time)")
  elseif(_kv_use_nccl STREQUAL "ON")
    message(FATAL_ERROR "KVSTORE_USE_NCCL=ON but nccl.h was not found (set NCCL_HOME)")
  else()
    message(STATUS "kvstore: nccl.h not found, building without the nccl store")
  endif()
endif()
