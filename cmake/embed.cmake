# Turn a text file into a C header holding its bytes, NUL-terminated, as
#   static const unsigned char <NAME>[] = { ... };
# Run as a script at build time:
#   cmake -DINPUT=file -DOUTPUT=header.h -DNAME=identifier -P embed.cmake
# The file must not contain a NUL byte (the text is compiled as a C string).
foreach(var INPUT OUTPUT NAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed.cmake: ${var} is not set")
  endif()
endforeach()

file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_len)
if(hex_len EQUAL 0)
  message(FATAL_ERROR "embed.cmake: ${INPUT} is empty")
endif()
# Two hex digits per byte; 16 bytes per line.
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
if(bytes MATCHES "0x00,")
  message(FATAL_ERROR "embed.cmake: ${INPUT} contains a NUL byte")
endif()
string(REPEAT "0x..," 16 line)
string(REGEX REPLACE "(${line})" "\\1\n        " bytes "${bytes}")
math(EXPR size "${hex_len} / 2")
get_filename_component(source_name "${INPUT}" NAME)

set(text "/* Generated from ${source_name} by cmake/embed.cmake at build time. Do not edit. */
/* ${size} bytes and a terminating NUL. */
static const unsigned char ${NAME}[] = {
        ${bytes}0x00
};
")
# Written whole, then renamed: an interrupted build never leaves half a header.
file(WRITE "${OUTPUT}.tmp" "${text}")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
