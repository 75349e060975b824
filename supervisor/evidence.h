/* SPDX-License-Identifier: MIT */
/* A result's evidence, timing and exit status, packed into the result map the protocol
 * opened (protocol.c), from its ProtoResult. docs/protocol.md, "Results". */
#pragma once

#include <msgpack.h>

#include "supervisor/protocol.h"

/* "evidence": codeSha256, codeCharacters, inputs (each source as mounted, a kept
 * output's producedBy), runtime, policy, limits. */
void evidence_pack(msgpack_packer *pk, const ProtoResult *r);
/* "elapsedMs" and "timing": two pairs. */
void evidence_pack_timing(msgpack_packer *pk, const ProtoResult *r);
/* "exitStatus": nil when no worker ended. */
void evidence_pack_exit_status(msgpack_packer *pk, const ProtoResult *r);
