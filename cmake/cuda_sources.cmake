# cuda_sources.cmake - adds the CUDA backend, the GPU comm and the nccl store to the library.
# Included by the top-level CMakeLists.txt AFTER the kvstore target exists.
#
# Run-time dependencies stay optional: the CUDA runtime is linked statically (it opens the
# driver, libcuda.so.1, itself with dlopen) and NCCL is opened with dlopen("libnccl.so.2") on
# first use, so libkvstore.so NEEDs neither and loads on machines without them.

if(NOT KVSTORE_CUDA_ENABLED)
  return()
endif()

set(_kv_cuda_dir ${CMAKE_CURRENT_LIST_DIR}/../src)
target_sources(kvstore PRIVATE
  ${_kv_cuda_dir}/core/cuda/cuda_backend.cc
  ${_kv_cuda_dir}/core/cuda/cuda_kernels.cu
  ${_kv_cuda_dir}/comm/cuda/device_comm.cc)
if(KVSTORE_NCCL_ENABLED)
  target_sources(kvstore PRIVATE
    ${_kv_cuda_dir}/comm/nccl/nccl_lib.cc
    ${_kv_cuda_dir}/comm/nccl/nccl_store.cc)
  # Header only: never link libnccl (see above).
  target_include_directories(kvstore PRIVATE ${KVSTORE_NCCL_INCLUDE_DIR})
endif()

set_target_properties(kvstore PROPERTIES CUDA_RUNTIME_LIBRARY Static)
target_link_libraries(kvstore PRIVATE CUDA::cudart_static ${CMAKE_DL_LIBS})
# Host code of the .cu files gets the same warnings as the C++ sources.
target_compile_options(kvstore PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
