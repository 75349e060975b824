# The one Python the build embeds: CODEINTERP_PYTHON (default /usr/bin/python3, never a
# python3 that happens to come first on PATH). Its own sysconfig supplies every path the
# build and the worker use, and the embed library is taken from its own pkg-config
# directory ($(LIBPC)/python-X.Y-embed.pc), so another interpreter's python3-embed.pc
# cannot be linked by accident. Sets:
#   CODEINTERP_PY_VERSION     e.g. 3.12.1
#   CODEINTERP_PY_MAJOR_MINOR e.g. 3.12 (the language the tool description names)
#   CODEINTERP_PY_STDLIB      sysconfig stdlib (== platstdlib, checked)
#   CODEINTERP_PY_DYNLOAD     DESTSHARED (lib-dynload)
#   CODEINTERP_PY_LIBDIR      LIBDIR (where libpython is)
#   CODEINTERP_PY_PREFIX      sys.prefix
#   CODEINTERP_PY_EXECUTABLE  sys.executable
#   CODEINTERP_PY_RUNTIME     the worker's read-only binds, ':'-separated (see below)
#   CODEINTERP_PY_MASK        directories under them the worker hides (site-packages)
#   PkgConfig::PYEMBED        the imported target to link
set(CODEINTERP_PYTHON "/usr/bin/python3" CACHE FILEPATH "The Python interpreter whose libpython the worker embeds")

if(NOT IS_ABSOLUTE "${CODEINTERP_PYTHON}" OR NOT EXISTS "${CODEINTERP_PYTHON}")
  message(FATAL_ERROR "CODEINTERP_PYTHON=${CODEINTERP_PYTHON}: not an absolute path to an existing interpreter")
endif()

set(_py_probe [=[
import sys, sysconfig
if sys.version_info < (3, 11):
    sys.exit("Python %s is too old: codeinterp embeds CPython 3.11 or newer" % sys.version.split()[0])
v = sysconfig.get_config_var
p = sysconfig.get_paths()
if not v('Py_ENABLE_SHARED'):
    sys.exit("%s was built without --enable-shared: there is no libpython to embed" % sys.executable)
for value in (sys.version.split()[0], '%d.%d' % sys.version_info[:2], p['stdlib'], p['platstdlib'],
              v('DESTSHARED'), v('LIBDIR'), v('LDLIBRARY'), v('INCLUDEPY'), v('LIBPC'), sys.prefix,
              sys.executable):
    print(value)
]=])
execute_process(
  COMMAND "${CODEINTERP_PYTHON}" -I -S -c "${_py_probe}"
  OUTPUT_VARIABLE _py_out ERROR_VARIABLE _py_err RESULT_VARIABLE _py_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _py_rc EQUAL 0)
  message(FATAL_ERROR "CODEINTERP_PYTHON=${CODEINTERP_PYTHON} cannot be used: ${_py_err}")
endif()
string(REPLACE "\n" ";" _py_out "${_py_out}")
list(GET _py_out 0 CODEINTERP_PY_VERSION)
list(GET _py_out 1 _py_xy)
set(CODEINTERP_PY_MAJOR_MINOR "${_py_xy}")
list(GET _py_out 2 CODEINTERP_PY_STDLIB)
list(GET _py_out 3 _py_platstdlib)
list(GET _py_out 4 CODEINTERP_PY_DYNLOAD)
list(GET _py_out 5 CODEINTERP_PY_LIBDIR)
list(GET _py_out 6 _py_ldlibrary)
list(GET _py_out 7 _py_includepy)
list(GET _py_out 8 _py_libpc)
list(GET _py_out 9 CODEINTERP_PY_PREFIX)
list(GET _py_out 10 CODEINTERP_PY_EXECUTABLE)
if(NOT _py_platstdlib STREQUAL CODEINTERP_PY_STDLIB)
  message(FATAL_ERROR "${CODEINTERP_PYTHON}: stdlib ${CODEINTERP_PY_STDLIB} and platstdlib ${_py_platstdlib} differ; "
    "the worker's search path has room for one")
endif()

# The embed library: this interpreter's own .pc file, found in its LIBPC only.
set(_py_pc "${_py_libpc}/python-${_py_xy}-embed.pc")
if(NOT EXISTS "${_py_pc}")
  message(FATAL_ERROR "${CODEINTERP_PYTHON} (Python ${CODEINTERP_PY_VERSION}) has no ${_py_pc}: "
    "install its development files (Debian: libpython${_py_xy}-dev)")
endif()
foreach(_var PKG_CONFIG_PATH PKG_CONFIG_LIBDIR)
  if(DEFINED ENV{${_var}})
    set(_py_saved_${_var} "$ENV{${_var}}")
  else()
    unset(_py_saved_${_var})
  endif()
endforeach()
set(_py_saved_use_prefix "${PKG_CONFIG_USE_CMAKE_PREFIX_PATH}")
unset(ENV{PKG_CONFIG_PATH})
set(ENV{PKG_CONFIG_LIBDIR} "${_py_libpc}") # replaces pkg-config's default directories
set(PKG_CONFIG_USE_CMAKE_PREFIX_PATH OFF)
pkg_check_modules(PYEMBED REQUIRED IMPORTED_TARGET python-${_py_xy}-embed)
foreach(_var PKG_CONFIG_PATH PKG_CONFIG_LIBDIR) # restored, or unset as they were
  if(DEFINED _py_saved_${_var})
    set(ENV{${_var}} "${_py_saved_${_var}}")
  else()
    unset(ENV{${_var}})
  endif()
endforeach()
set(PKG_CONFIG_USE_CMAKE_PREFIX_PATH "${_py_saved_use_prefix}")
# The .pc file says where its headers and library are: they must be the interpreter's.
file(REAL_PATH "${CODEINTERP_PY_LIBDIR}/${_py_ldlibrary}" _py_want_lib)
set(_py_got_libs "")
foreach(_l ${PYEMBED_LINK_LIBRARIES})
  file(REAL_PATH "${_l}" _l)
  list(APPEND _py_got_libs "${_l}")
endforeach()
if(NOT PYEMBED_VERSION STREQUAL _py_xy OR NOT "${_py_includepy}" IN_LIST PYEMBED_INCLUDE_DIRS
   OR NOT "${_py_want_lib}" IN_LIST _py_got_libs)
  message(FATAL_ERROR "Mismatch: ${CODEINTERP_PYTHON} is Python ${_py_xy} with headers ${_py_includepy} and "
    "libpython ${_py_want_lib}, but ${_py_pc} gives version ${PYEMBED_VERSION}, "
    "headers '${PYEMBED_INCLUDE_DIRS}', libraries '${_py_got_libs}'")
endif()
if(NOT EXISTS "${CODEINTERP_PY_LIBDIR}/${_py_ldlibrary}")
  message(FATAL_ERROR "${CODEINTERP_PYTHON}: ${CODEINTERP_PY_LIBDIR}/${_py_ldlibrary} does not exist")
endif()

# A libpython outside the loader's default directories: the binaries that link it carry
# its directory as their RUNPATH (the worker finds it at the same path in its root).
execute_process(COMMAND "${CODEINTERP_PYTHON}" -I -S -c "import sysconfig; print(sysconfig.get_config_var('MULTIARCH') or '')"
  OUTPUT_VARIABLE _py_multiarch OUTPUT_STRIP_TRAILING_WHITESPACE)
set(_py_system_libdirs /lib /usr/lib /lib64 /usr/lib64 /lib/${_py_multiarch} /usr/lib/${_py_multiarch})
if(NOT CODEINTERP_PY_LIBDIR IN_LIST _py_system_libdirs)
  set_property(TARGET PkgConfig::PYEMBED APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:-rpath,${CODEINTERP_PY_LIBDIR}")
endif()

# What the worker's root binds read-only, at the same paths as on the host: the standard
# library, lib-dynload when it lies outside it, and every directory holding a shared
# library that libpython or an extension module in lib-dynload loads (ldd, run now:
# rebuild after moving the interpreter). A library directory that contains the standard
# library (pyenv's PREFIX/lib holds python3.X/ with site-packages) is not bound whole:
# only its libraries are, one file each.
find_program(CODEINTERP_LDD ldd REQUIRED)
file(GLOB _py_ext_modules "${CODEINTERP_PY_DYNLOAD}/*.so")
# Tk is left out: a worker has no display, and python3-tk (which Debian's matplotlib
# pulls in) links libBLT from /usr/lib, a file the package's target host need not have.
# `import tkinter` fails in the worker, as it would on a host without Tk.
list(FILTER _py_ext_modules EXCLUDE REGEX "/_tkinter[.][^/]*$")
set(_py_libs "")
foreach(_obj "${CODEINTERP_PY_LIBDIR}/${_py_ldlibrary}" ${_py_ext_modules})
  execute_process(COMMAND "${CODEINTERP_LDD}" "${_obj}" OUTPUT_VARIABLE _ldd RESULT_VARIABLE _ldd_rc)
  if(NOT _ldd_rc EQUAL 0)
    message(FATAL_ERROR "ldd ${_obj} failed")
  endif()
  if(_ldd MATCHES "=> not found")
    message(WARNING "${_obj} needs a library that is not installed (ldd: not found); importing it will fail")
  endif()
  string(REGEX MATCHALL "=> (/[^ \n]+)" _found "${_ldd}")
  foreach(_m ${_found})
    string(REGEX REPLACE "^=> " "" _m "${_m}")
    list(APPEND _py_libs "${_m}")
  endforeach()
endforeach()
file(REAL_PATH "${CODEINTERP_PY_LIBDIR}/${_py_ldlibrary}" _libpython)
list(APPEND _py_libs "${_libpython}")
list(REMOVE_DUPLICATES _py_libs)

set(_py_runtime "${CODEINTERP_PY_STDLIB}")
string(FIND "${CODEINTERP_PY_DYNLOAD}/" "${CODEINTERP_PY_STDLIB}/" _pos)
if(NOT _pos EQUAL 0)
  list(APPEND _py_runtime "${CODEINTERP_PY_DYNLOAD}")
endif()
foreach(_lib ${_py_libs})
  file(REAL_PATH "${_lib}" _lib)
  get_filename_component(_dir "${_lib}" DIRECTORY)
  string(FIND "${CODEINTERP_PY_STDLIB}/" "${_dir}/" _pos)
  if(_pos EQUAL 0)
    list(APPEND _py_runtime "${_lib}") # the directory holds the stdlib: this file only
  else()
    list(APPEND _py_runtime "${_dir}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _py_runtime)
foreach(_p ${_py_runtime})
  if(_p MATCHES ":")
    message(FATAL_ERROR "A runtime path contains ':': ${_p}")
  endif()
endforeach()
string(REPLACE ";" ":" CODEINTERP_PY_RUNTIME "${_py_runtime}")

# The interpreter's own site-packages (purelib, platlib) when one of the binds above
# brings it along (pyenv's lives inside its stdlib, with pip in it): the worker mounts
# an empty read-only tmpfs over it, so the root holds the stdlib and nothing installed.
execute_process(COMMAND "${CODEINTERP_PYTHON}" -I -S -c
  "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['platlib'])"
  OUTPUT_VARIABLE _py_site OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
string(REPLACE "\n" ";" _py_site "${_py_site}")
list(REMOVE_DUPLICATES _py_site)
set(_py_masks "")
foreach(_site ${_py_site})
  foreach(_p ${_py_runtime})
    string(FIND "${_site}/" "${_p}/" _pos)
    if(_pos EQUAL 0 AND IS_DIRECTORY "${_site}" AND NOT _site MATCHES ":")
      list(APPEND _py_masks "${_site}")
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES _py_masks)
string(REPLACE ";" ":" CODEINTERP_PY_MASK "${_py_masks}")

# The pythonPackages allow-list (docs/policy.md): for each package, the site
# directories its import needs on sys.path and the read-only binds it needs beyond
# the ones above, or why this interpreter cannot have it (cmake/python_packages.py,
# which imports each package in a child of the interpreter). The worker binds the
# union for the packages its policy names; a policy naming a missing one is refused.
#   CODEINTERP_PY_PKG_<NAME>_SITES, _BINDS, _PRELOAD, _ENV   ':'-separated
#   CODEINTERP_PY_PKG_<NAME>_MISSING          "" when available, else the reason
execute_process(COMMAND "${CODEINTERP_PYTHON}" -s -E "${CMAKE_CURRENT_LIST_DIR}/python_packages.py"
  "${CODEINTERP_PY_RUNTIME}"
  OUTPUT_VARIABLE _py_pkgs_out ERROR_VARIABLE _py_pkgs_err RESULT_VARIABLE _py_pkgs_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _py_pkgs_rc EQUAL 0)
  message(FATAL_ERROR "cmake/python_packages.py failed with ${CODEINTERP_PYTHON}: ${_py_pkgs_err}")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${CMAKE_CURRENT_LIST_DIR}/python_packages.py")
string(REPLACE "\n" ";" _py_pkgs_lines "${_py_pkgs_out}")
set(_py_pkgs_json "")
set(_py_pkg_names "")
foreach(_line ${_py_pkgs_lines})
  string(REPLACE "\t" ";" _f "${_line}")
  list(GET _f 0 _name)
  list(GET _f 1 _state)
  string(TOUPPER "${_name}" _NAME)
  list(APPEND _py_pkg_names ${_NAME})
  if(_state STREQUAL "ok")
    list(GET _f 2 CODEINTERP_PY_PKG_${_NAME}_SITES)
    list(GET _f 3 CODEINTERP_PY_PKG_${_NAME}_BINDS)
    list(GET _f 4 CODEINTERP_PY_PKG_${_NAME}_PRELOAD)
    # An empty last field (no environment) is not a list element.
    list(LENGTH _f _nf)
    set(CODEINTERP_PY_PKG_${_NAME}_ENV "")
    if(_nf GREATER 5)
      list(GET _f 5 CODEINTERP_PY_PKG_${_NAME}_ENV)
    endif()
    set(CODEINTERP_PY_PKG_${_NAME}_MISSING "")
    message(STATUS "Python package ${_name}: sys.path ${CODEINTERP_PY_PKG_${_NAME}_SITES}; "
      "binds ${CODEINTERP_PY_PKG_${_NAME}_BINDS}; preloaded ${CODEINTERP_PY_PKG_${_NAME}_PRELOAD}")
    string(REPLACE ":" "\", \"" _b "${CODEINTERP_PY_PKG_${_NAME}_BINDS}")
    string(REPLACE ":" "\", \"" _s "${CODEINTERP_PY_PKG_${_NAME}_SITES}")
    string(REPLACE ":" "\", \"" _l "${CODEINTERP_PY_PKG_${_NAME}_PRELOAD}")
    string(APPEND _py_pkgs_json "    \"${_name}\": {\"sites\": [\"${_s}\"], \"binds\": [\"${_b}\"], "
      "\"preload\": [\"${_l}\"], \"env\": \"${CODEINTERP_PY_PKG_${_NAME}_ENV}\"},\n")
  else()
    list(GET _f 2 _why)
    string(REGEX REPLACE "[\"\\]" "'" _why "${_why}")
    set(CODEINTERP_PY_PKG_${_NAME}_SITES "")
    set(CODEINTERP_PY_PKG_${_NAME}_BINDS "")
    set(CODEINTERP_PY_PKG_${_NAME}_PRELOAD "")
    set(CODEINTERP_PY_PKG_${_NAME}_ENV "")
    set(CODEINTERP_PY_PKG_${_NAME}_MISSING "${_why}")
    message(STATUS "Python package ${_name}: not available (${_why})")
    string(APPEND _py_pkgs_json "    \"${_name}\": null,\n")
  endif()
endforeach()
string(REGEX REPLACE ",\n$" "\n" _py_pkgs_json "${_py_pkgs_json}")
# Their compile definitions, one set per package of the allow-list (contract/runtime.c).
set(CODEINTERP_PY_PKG_DEFINITIONS "")
foreach(_NAME ${_py_pkg_names})
  foreach(_field SITES BINDS PRELOAD ENV MISSING)
    list(APPEND CODEINTERP_PY_PKG_DEFINITIONS
      "CODEINTERP_PY_PKG_${_NAME}_${_field}=\"${CODEINTERP_PY_PKG_${_NAME}_${_field}}\"")
  endforeach()
endforeach()

message(STATUS "Embedded Python ${CODEINTERP_PY_VERSION} (${CODEINTERP_PYTHON}): stdlib ${CODEINTERP_PY_STDLIB}, "
  "libdir ${CODEINTERP_PY_LIBDIR}, embed ${_py_pc}")
message(STATUS "Worker runtime binds: ${CODEINTERP_PY_RUNTIME}; hidden: ${CODEINTERP_PY_MASK}")

# The same facts for the tests and the benchmark (tests/integration/conftest.py).
set(_py_runtime_json "")
foreach(_p ${_py_runtime})
  string(APPEND _py_runtime_json "\"${_p}\", ")
endforeach()
string(REGEX REPLACE ", $" "" _py_runtime_json "${_py_runtime_json}")
set(_py_masks_json "")
foreach(_p ${_py_masks})
  string(APPEND _py_masks_json "\"${_p}\", ")
endforeach()
string(REGEX REPLACE ", $" "" _py_masks_json "${_py_masks_json}")
file(CONFIGURE OUTPUT "${CMAKE_BINARY_DIR}/python.json" CONTENT [=[
{
  "interpreter": "@CODEINTERP_PYTHON@",
  "version": "@CODEINTERP_PY_VERSION@",
  "stdlib": "@CODEINTERP_PY_STDLIB@",
  "dynload": "@CODEINTERP_PY_DYNLOAD@",
  "libdir": "@CODEINTERP_PY_LIBDIR@",
  "prefix": "@CODEINTERP_PY_PREFIX@",
  "executable": "@CODEINTERP_PY_EXECUTABLE@",
  "runtime": [@_py_runtime_json@],
  "hidden": [@_py_masks_json@],
  "packages": {
@_py_pkgs_json@  }
}
]=] @ONLY)
