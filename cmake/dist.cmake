# dist.cmake - the distributed (parameter-server) stores over ZeroMQ.
#
# Included by the top-level CMakeLists.txt when KVSTORE_USE_DIST is ON, before the layers:
# defines the interface targets below and sets KVSTORE_DIST_ENABLED (src/ps is built then).
# Needs libzmq (found through pkg-config) and the cppzmq header (Debian: libzmq3-dev
# cppzmq-dev pkg-config); without them the stores are left out with a
# message and KVSTORE_DIST_ENABLED stays OFF. Targets that need ZeroMQ directly (tests,
# benchmarks) link `kvstore_zmq`; the ps layer links both.
set(KVSTORE_DIST_ENABLED OFF)

# cppzmq's package config hard-fails when libzmq or pkg-config is missing, so check first.
find_package(PkgConfig QUIET)
if(NOT PKG_CONFIG_FOUND)
  message(STATUS "kvstore: pkg-config not found (apt install pkg-config libzmq3-dev cppzmq-dev); "
                 "building without the distributed stores")
  return()
endif()
pkg_check_modules(KVSTORE_LIBZMQ QUIET IMPORTED_TARGET libzmq)
find_path(KVSTORE_ZMQ_HPP_DIR zmq.hpp)
if(NOT KVSTORE_LIBZMQ_FOUND OR NOT KVSTORE_ZMQ_HPP_DIR)
  message(STATUS "kvstore: libzmq or cppzmq (zmq.hpp) not found (apt install libzmq3-dev "
                 "cppzmq-dev); building without the distributed stores")
  return()
endif()
# Job authentication derives the CURVE keys with libsodium (libsodium-dev; Debian's
# libzmq3-dev depends on it, as libzmq's CURVE is built on it).
pkg_check_modules(KVSTORE_SODIUM QUIET IMPORTED_TARGET libsodium)
if(NOT KVSTORE_SODIUM_FOUND)
  message(STATUS "kvstore: libsodium not found (apt install libsodium-dev); building without "
                 "the distributed stores")
  return()
endif()
if(NOT TARGET kvstore_sodium)
  add_library(kvstore_sodium INTERFACE)
  target_link_libraries(kvstore_sodium INTERFACE PkgConfig::KVSTORE_SODIUM)
endif()
find_package(cppzmq QUIET)
if(NOT TARGET kvstore_zmq)
  add_library(kvstore_zmq INTERFACE)
  if(TARGET cppzmq)
    target_link_libraries(kvstore_zmq INTERFACE cppzmq)
  else()
    target_include_directories(kvstore_zmq INTERFACE ${KVSTORE_ZMQ_HPP_DIR})
    target_link_libraries(kvstore_zmq INTERFACE PkgConfig::KVSTORE_LIBZMQ)
  endif()
endif()

set(KVSTORE_DIST_ENABLED ON)
message(STATUS "kvstore: distributed stores enabled (libzmq ${KVSTORE_LIBZMQ_VERSION})")
