# Packages (CPack): `cpack` in the build directory, or `cmake --build build --target package`.
#   nccl-ha        runtime:     libnccl-net-ha.so (in ${CMAKE_INSTALL_LIBDIR}), ha-ping, ha-net-driver
#   nccl-ha-dev    development: librdma_reactor.a, libha_net.a, headers (with nccl_ha/version.hpp),
#                               lib/cmake/nccl-ha (find_package), lib/pkgconfig/nccl-ha.pc
#   nccl-ha-doc    docs:        share/doc/nccl-ha (README.md, LICENSE, docs/*.md)
# Every package carries the license: share/doc/<package>/copyright (runtime, dev), LICENSE (doc);
# the .rpm License field says Apache-2.0.
# .deb always; .rpm too when rpmbuild is installed (-devel instead of -dev there).
# scripts/package-check.sh builds them and checks what is in them.

# ---- the pkg-config file (relocatable: its prefix is relative to the file) ----
set(NCCL_HA_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH NCCL_HA_PC_TO_PREFIX "/prefix/${NCCL_HA_PC_DIR}" "/prefix")
set(NCCL_HA_PC_BOOST_CFLAGS "")
foreach(dir IN LISTS Boost_INCLUDE_DIRS)
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES AND NOT dir STREQUAL "/usr/include")
    string(APPEND NCCL_HA_PC_BOOST_CFLAGS " -I${dir}")
  endif()
endforeach()
configure_file(cmake/nccl-ha.pc.in ${CMAKE_CURRENT_BINARY_DIR}/nccl-ha.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/nccl-ha.pc DESTINATION ${NCCL_HA_PC_DIR} COMPONENT development)

# ---- docs, and the license in every package ----
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT docs)
file(GLOB NCCL_HA_DOC_FILES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/docs/*.md)  # README.md links them
install(FILES ${NCCL_HA_DOC_FILES} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT docs)
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright COMPONENT runtime)
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/nccl-ha-dev RENAME copyright COMPONENT development)

# ---- CPack ----
set(CPACK_PACKAGE_NAME nccl-ha)
set(CPACK_PACKAGE_VENDOR "nccl-ha")
set(CPACK_PACKAGE_CONTACT "nccl-ha maintainers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_CURRENT_SOURCE_DIR}/LICENSE)
set(CPACK_RESOURCE_FILE_README ${CMAKE_CURRENT_SOURCE_DIR}/README.md)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_COMPONENTS_ALL runtime development docs)
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_STRIP_FILES OFF)

set(CPACK_COMPONENT_RUNTIME_DISPLAY_NAME "nccl-ha plugin and tools")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
  "libnccl-net-ha.so, the NCCL net plugin (NCCL_NET_PLUGIN=ha), and the tools ha-ping (rail checker) and ha-net-driver (drives a net plugin like NCCL's proxy). License: Apache-2.0.")
set(CPACK_COMPONENT_DEVELOPMENT_DISPLAY_NAME "nccl-ha development files")
set(CPACK_COMPONENT_DEVELOPMENT_DESCRIPTION
  "The rdma_reactor and ha_net static libraries, their headers, the CMake package (find_package(nccl-ha)) and nccl-ha.pc. License: Apache-2.0.")
set(CPACK_COMPONENT_DOCS_DISPLAY_NAME "nccl-ha documentation")
set(CPACK_COMPONENT_DOCS_DESCRIPTION "README, documentation (docs/) and LICENSE of nccl-ha. License: Apache-2.0.")

set(CPACK_GENERATOR DEB)
find_program(NCCL_HA_RPMBUILD rpmbuild)
if(NCCL_HA_RPMBUILD)
  list(APPEND CPACK_GENERATOR RPM)
endif()

# .deb (Debian 12 and derivatives)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME nccl-ha)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME nccl-ha-dev)
set(CPACK_DEBIAN_DOCS_PACKAGE_NAME nccl-ha-doc)
set(CPACK_DEBIAN_DOCS_PACKAGE_SECTION doc)
set(CPACK_DEBIAN_DOCS_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
# Runtime: dpkg-shlibdeps names libc6 (>= 2.34), libibverbs1 and, for the tools (dynamically
# linked), libstdc++6 / libgcc-s1 with their versions (scripts/package-check.sh checks libibverbs1).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "ibverbs-providers")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "nccl-ha-doc")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS
  "libibverbs-dev, libssl-dev, libboost1.81-dev | libboost1.83-dev | libboost-dev (>= ${NCCL_HA_BOOST_MIN}), pkg-config | pkgconf")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SUGGESTS "nccl-ha-doc")

# .rpm (same layout; the -devel suffix is the RPM convention)
set(CPACK_RPM_COMPONENT_INSTALL ON)
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0")
set(CPACK_RPM_PACKAGE_GROUP "System Environment/Libraries")
set(CPACK_RPM_RUNTIME_PACKAGE_NAME nccl-ha)
set(CPACK_RPM_DEVELOPMENT_PACKAGE_NAME nccl-ha-devel)
set(CPACK_RPM_DOCS_PACKAGE_NAME nccl-ha-doc)
set(CPACK_RPM_DOCS_PACKAGE_ARCHITECTURE noarch)
set(CPACK_RPM_RUNTIME_PACKAGE_REQUIRES "libibverbs")
set(CPACK_RPM_DEVELOPMENT_PACKAGE_REQUIRES "libibverbs-devel, openssl-devel, boost-devel >= ${NCCL_HA_BOOST_MIN}")
# rpmbuild's automatic Requires/Provides scanning is left on (libc, libibverbs sonames);
# no debuginfo split, no build-id links shared with other packages.
set(CPACK_RPM_SPEC_MORE_DEFINE "%define _build_id_links none")
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
  /usr/lib/cmake /usr/lib/pkgconfig /usr/share/doc /usr/${CMAKE_INSTALL_LIBDIR}/cmake
  /usr/${CMAKE_INSTALL_LIBDIR}/pkgconfig /usr/${CMAKE_INSTALL_INCLUDEDIR})

include(CPack)
