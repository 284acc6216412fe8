# packaging/deb.cmake — the man pages and the Debian package (see
# packaging/README.md). Included at the end of the top-level CMakeLists.txt,
# after the install rules, whose files the package holds.
#
# Promises: hakmem(1) and hakmem(3) are regenerated at build time from
# docs/options.md and docs/stats.md (tools/hakmem_man.py), so they cannot
# drift from the option table, and are installed gzipped; `cpack -G DEB` in
# a tree configured with CMAKE_INSTALL_PREFIX=/usr (what `make deb` does)
# gives hakmem_<version>_<arch>.deb with GNUInstallDirs' multiarch libdir.
# May call: python3 (build time), cpack, and, in the tests, groff, mandoc,
# man, dpkg, dpkg-deb, cc and pkg-config.

# ---- man pages ---------------------------------------------------------
find_package(Python3 COMPONENTS Interpreter)
set(HAKMEM_MAN_DIR ${PROJECT_BINARY_DIR}/man)
if(Python3_Interpreter_FOUND)
  set(_hakmem_man_out ${HAKMEM_MAN_DIR}/hakmem.1 ${HAKMEM_MAN_DIR}/hakmem.1.gz
                      ${HAKMEM_MAN_DIR}/hakmem.3 ${HAKMEM_MAN_DIR}/hakmem.3.gz)
  add_custom_command(
    OUTPUT ${_hakmem_man_out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${HAKMEM_MAN_DIR}
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/hakmem_man.py
            --options ${PROJECT_SOURCE_DIR}/docs/options.md
            --stats ${PROJECT_SOURCE_DIR}/docs/stats.md
            --version ${PROJECT_VERSION} --gzip
            ${PROJECT_SOURCE_DIR}/packaging/man/hakmem.1.in=${HAKMEM_MAN_DIR}/hakmem.1
            ${PROJECT_SOURCE_DIR}/packaging/man/hakmem.3.in=${HAKMEM_MAN_DIR}/hakmem.3
    DEPENDS ${PROJECT_SOURCE_DIR}/tools/hakmem_man.py
            ${PROJECT_SOURCE_DIR}/docs/options.md ${PROJECT_SOURCE_DIR}/docs/stats.md
            ${PROJECT_SOURCE_DIR}/packaging/man/hakmem.1.in
            ${PROJECT_SOURCE_DIR}/packaging/man/hakmem.3.in
    COMMENT "Generating hakmem(1) and hakmem(3) from docs/options.md and docs/stats.md"
    VERBATIM)
  add_custom_target(hakmem_man ALL DEPENDS ${_hakmem_man_out})
  install(FILES ${HAKMEM_MAN_DIR}/hakmem.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  install(FILES ${HAKMEM_MAN_DIR}/hakmem.3.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man3)
else()
  message(WARNING "python3 not found: the man pages are not built or installed")
endif()

# ---- Debian package (CPack) ----------------------------------------------
# The DEB generator installs under /usr (its default packaging prefix), but
# the directories below it are the ones configured, so the tree must be
# configured for /usr too: GNUInstallDirs then picks lib/<multiarch> and the
# launcher's fallback path is the installed library.
set(CPACK_GENERATOR "DEB")
# `make package_source` (which include(CPack) also defines): the sources
# without build trees or git metadata.
set(CPACK_SOURCE_GENERATOR "TGZ")
set(CPACK_SOURCE_IGNORE_FILES "/\\.git" "/build[^/]*/")
set(CPACK_PACKAGE_NAME "hakmem")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "hakmem developers")
set(CPACK_PACKAGE_CONTACT "hakmem developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "general-purpose memory allocator replacing malloc")
set(CPACK_PACKAGE_DESCRIPTION
  "hakmem replaces malloc, free, the other C allocation functions and C++\n\
operator new/delete, when linked or preloaded (the hakmem launcher runs\n\
a command with it). It returns idle memory to the system by time, keeps\n\
statistics at no fast-path cost and has a sampled heap profiler.\n\
.\n\
Two libraries: libhakmem (the default, fast) and libhakmem_secure (every\n\
bad free reported, guard pages, randomized carving; `hakmem --secure`).\n\
.\n\
This package holds both, shared and static, the hakmem launcher, the\n\
header, the pkg-config files and CMake package, and the man pages.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "hakmem developers")
set(CPACK_DEBIAN_PACKAGE_SECTION "libs")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Only the C library at run time (pthreads and dl are part of it).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
include(CPack)
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(STATUS "Debian package: this tree is configured for ${CMAKE_INSTALL_PREFIX}, so its Debian package would not use the multiarch libdir: `make deb` configures one for /usr")
endif()

# ---- tests -----------------------------------------------------------------
if(HAKMEM_BUILD_TESTS)
  if(Python3_Interpreter_FOUND)
    add_test(NAME man_pages_lint
             COMMAND bash ${PROJECT_SOURCE_DIR}/packaging/test_man.sh ${HAKMEM_MAN_DIR})
    set_tests_properties(man_pages_lint PROPERTIES LABELS "packaging;docs" SKIP_RETURN_CODE 77)
  endif()
  if(HAKMEM_BUILD_SHARED AND HAKMEM_BUILD_STATIC)
    add_test(NAME deb_package
             COMMAND bash ${PROJECT_SOURCE_DIR}/packaging/test_deb.sh ${PROJECT_SOURCE_DIR}
                     ${PROJECT_BINARY_DIR} ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER} ${HAKMEM_WERROR})
    set_tests_properties(deb_package PROPERTIES LABELS "packaging" SKIP_RETURN_CODE 77 TIMEOUT 300)
  endif()
endif()
