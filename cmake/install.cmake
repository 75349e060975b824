# `cmake --install`: where everything goes (GNUInstallDirs; DESTDIR is honoured by
# CMake itself). Included at the end of the top-level CMakeLists.txt, after every
# target exists. Layout and reasons: docs/operations.md, "Installing".
#
#   sbin/codeinterpd                      the supervisor (root only; man section 8)
#   bin/codeinterp                        the client command
#   libexec/codeinterp/codeinterp-worker  started only by codeinterpd (compiled-in default)
#   lib/<multiarch>/libcodeinterp.so.0    the client library (+ .so, codeinterp.pc)
#   include/codeinterp/libcodeinterp.h    its header
#   <systemd unit dir>/codeinterpd.{socket,service}   configured with the paths above
#   <systemd user unit dir>/codeinterpd.{socket,service}   the rootless pair (packaging/user)
#   <sysconfdir>/codeinterp/policy.yaml   the example policy (every key at its default)
#   <sysconfdir>/codeinterp/policy-data.yaml   the data policy (the scientific stack on)
#   share/man/man{1,8}, share/doc/codeinterp
#   <python dir>/codeinterp               the Python client, when python/codeinterp exists
include(GNUInstallDirs)

set(CODEINTERP_WORKER_INSTALL_DIR "${CMAKE_INSTALL_LIBEXECDIR}/codeinterp")
set(CODEINTERP_WORKER_PATH "${CMAKE_INSTALL_FULL_LIBEXECDIR}/codeinterp/codeinterp-worker")
# codeinterpd's default --worker: a codeinterp-worker next to itself (the build tree),
# otherwise this installed path (supervisor/main.c, load_worker).
target_compile_definitions(codeinterpd PRIVATE CODEINTERP_WORKER_PATH="${CODEINTERP_WORKER_PATH}")

# A systemd unit directory: <cache_var> when given (-D<cache_var>=), else what systemd.pc
# says for <pc_var>, else <prefix>/<fallback>.
function(codeinterp_unitdir cache_var pc_var fallback doc)
  if(NOT DEFINED ${cache_var})
    pkg_get_variable(_dir systemd ${pc_var})
    if(NOT _dir)
      set(_dir "${CMAKE_INSTALL_PREFIX}/${fallback}")
    endif()
    set(${cache_var} "${_dir}" CACHE PATH "${doc}")
  endif()
endfunction()

# systemd's unit directory (Debian 12: /lib/systemd/system), and its user unit directory,
# for the rootless pair (Debian 12: /usr/lib/systemd/user).
codeinterp_unitdir(CODEINTERP_SYSTEMD_UNITDIR systemdsystemunitdir lib/systemd/system
                   "Where the systemd units are installed")
codeinterp_unitdir(CODEINTERP_SYSTEMD_USERUNITDIR systemduserunitdir lib/systemd/user
                   "Where the systemd user units are installed")

# The Python client (python/codeinterp): installed only when
# it exists, into Debian's directory for pure-Python modules of every python3.
set(CODEINTERP_PYTHON_SOURCE "${CMAKE_SOURCE_DIR}/python/codeinterp" CACHE PATH
    "The Python client package to install (skipped when the directory does not exist)")
set(CODEINTERP_PYTHON_DIR "${CMAKE_INSTALL_PREFIX}/lib/python3/dist-packages" CACHE PATH
    "Where the Python client package is installed")

# --- libcodeinterp, shared ---------------------------------------------------------
# The static codeinterp_client stays what the command and the unit tests link. The
# shared library is the public API only: libcodeinterp.h's ci_* functions (a version
# script hides the common/ helpers compiled into it), position-independent code rather
# than the rest of the build's -fPIE, and no -pie when linking.
add_library(codeinterp_shared SHARED
  ${CMAKE_SOURCE_DIR}/client/lib/libcodeinterp.c ${CMAKE_SOURCE_DIR}/client/lib/render.c
  ${CMAKE_SOURCE_DIR}/common/mp.c ${CMAKE_SOURCE_DIR}/common/util.c ${CMAKE_SOURCE_DIR}/common/sha256.c)
set_target_properties(codeinterp_shared PROPERTIES
  OUTPUT_NAME codeinterp VERSION ${PROJECT_VERSION} SOVERSION 0
  POSITION_INDEPENDENT_CODE ON
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
  LINK_DEPENDS ${CMAKE_SOURCE_DIR}/client/lib/libcodeinterp.map)
get_target_property(_ci_opts codeinterp_shared COMPILE_OPTIONS)
list(REMOVE_ITEM _ci_opts -fPIE)
set_property(TARGET codeinterp_shared PROPERTY COMPILE_OPTIONS ${_ci_opts} -fPIC)
get_target_property(_ci_opts codeinterp_shared LINK_OPTIONS)
list(REMOVE_ITEM _ci_opts -pie)
set_property(TARGET codeinterp_shared PROPERTY LINK_OPTIONS ${_ci_opts}
  -Wl,--version-script=${CMAKE_SOURCE_DIR}/client/lib/libcodeinterp.map)
if(NOT CODEINTERP_ASAN AND NOT CODEINTERP_UBSAN AND NOT CODEINTERP_FUZZ)
  # (A sanitizer's runtime is linked by the executable, so it is undefined here then.)
  target_link_options(codeinterp_shared PRIVATE -Wl,--no-undefined)
endif()
target_link_libraries(codeinterp_shared PRIVATE PkgConfig::MSGPACK)

install(TARGETS codeinterpd RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(TARGETS codeinterp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS codeinterp-worker RUNTIME DESTINATION ${CODEINTERP_WORKER_INSTALL_DIR})
install(TARGETS codeinterp_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/client/lib/libcodeinterp.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/codeinterp)
configure_file(${CMAKE_SOURCE_DIR}/packaging/codeinterp.pc.in ${CMAKE_BINARY_DIR}/packaging/codeinterp.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/codeinterp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The units name the installed binary and policy.
set(CODEINTERP_SBINDIR "${CMAKE_INSTALL_FULL_SBINDIR}")
set(CODEINTERP_SYSCONFDIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}")
foreach(unit codeinterpd.service codeinterpd.socket)
  configure_file(${CMAKE_SOURCE_DIR}/packaging/${unit} ${CMAKE_BINARY_DIR}/packaging/${unit} @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/packaging/${unit} DESTINATION ${CODEINTERP_SYSTEMD_UNITDIR})
  # The rootless pair for the user's own systemd (docs/operations.md, "Rootless").
  configure_file(${CMAKE_SOURCE_DIR}/packaging/user/${unit} ${CMAKE_BINARY_DIR}/packaging/user/${unit} @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/packaging/user/${unit} DESTINATION ${CODEINTERP_SYSTEMD_USERUNITDIR})
endforeach()
install(FILES ${CMAKE_SOURCE_DIR}/packaging/policy.yaml ${CMAKE_SOURCE_DIR}/packaging/policy-data.yaml
  DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/codeinterp)

install(FILES ${CMAKE_SOURCE_DIR}/docs/man/codeinterp.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_SOURCE_DIR}/docs/man/codeinterpd.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
file(GLOB _ci_docs ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${_ci_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Checked at configure time: configure again after python/ appears.
if(EXISTS "${CODEINTERP_PYTHON_SOURCE}/__init__.py")
  install(DIRECTORY "${CODEINTERP_PYTHON_SOURCE}" DESTINATION "${CODEINTERP_PYTHON_DIR}" COMPONENT python
    PATTERN __pycache__ EXCLUDE PATTERN "*.pyc" EXCLUDE)
else()
  message(STATUS "No Python client at ${CODEINTERP_PYTHON_SOURCE}: not installed")
endif()
