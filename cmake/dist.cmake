# dist.cmake - the distributed (parameter-server) stores over ZeroMQ.
#
# Included by the top-level CMakeLists.txt after the `kvstore` target exists, when
# KVSTORE_USE_DIST is ON. Adds src/dist/*.cc to the library, links libzmq privately and sets
# KVSTORE_DIST_ENABLED. Without libzmq (Debian: libzmq3-dev, cppzmq-dev, pkg-config) the
# stores are left out with a message and KVSTORE_DIST_ENABLED stays OFF.
set(KVSTORE_DIST_ENABLED OFF)
find_package(cppzmq QUIET)
if(NOT TARGET cppzmq)
  message(STATUS "kvstore: libzmq/cppzmq not found (apt install libzmq3-dev cppzmq-dev pkg-config); "
                 "building without the distributed stores")
  return()
endif()
file(GLOB KVSTORE_DIST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/../src/dist/*.cc)
target_sources(kvstore PRIVATE ${KVSTORE_DIST_SOURCES})
target_link_libraries(kvstore PRIVATE cppzmq)
set(KVSTORE_DIST_ENABLED ON)
message(STATUS "kvstore: distributed stores enabled (cppzmq ${cppzmq_VERSION})")
