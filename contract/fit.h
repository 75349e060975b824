/* SPDX-License-Identifier: MIT */
/* Output fitting: UTF-8-aware, streaming, with exact omission counts.
 *
 * A channel's bytes arrive in arbitrary chunks. They are decoded as UTF-8; each
 * maximal invalid subsequence (per the Unicode "substitution of maximal subparts"
 * practice, as Python's errors="replace" does) becomes one U+FFFD. All counts are
 * of the decoded text: "characters" are Unicode code points, "bytes" are the UTF-8
 * bytes of those code points (U+FFFD counts 1 character, 3 bytes), so that always
 *   total_chars = kept chars + omitted_chars  and  total_bytes = text_bytes + omitted_bytes.
 *
 * What is kept: when the text has more than `ceiling` characters, the first
 * `ceiling - ceiling / 4` characters (the head) and the last `ceiling / 4`
 * characters (the tail); the omitted run is the middle, and `omitted_at` is the
 * character offset in `text` where it was (== head length). A FitStream never holds
 * more than the ceiling's worth of characters (at most 4 bytes each) plus a few bytes. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct FitText {
        char *text;          /* kept text, valid UTF-8, NUL-terminated (malloc'd) */
        size_t text_bytes;   /* strlen-equivalent byte length of text (text may hold U+0000) */
        uint64_t text_chars; /* code points in text */
        uint64_t total_chars;
        uint64_t total_bytes;
        uint64_t omitted_chars;
        uint64_t omitted_bytes;
        uint64_t replaced;   /* U+FFFD substitutions made for invalid input */
        uint64_t omitted_at; /* code point offset in text where omitted_chars were removed */
} FitText;

typedef struct FitStream FitStream;

/* ceiling: maximum characters kept (0 keeps nothing, everything is counted as omitted). */
int fit_stream_new(uint64_t ceiling, FitStream **ret);
void fit_stream_free(FitStream *s);
/* Feed raw bytes. Never fails except -ENOMEM. */
int fit_stream_feed(FitStream *s, const void *buf, size_t len);
/* Counts so far (for progress), without finishing. Pending partial sequences are not counted. */
uint64_t fit_stream_chars(const FitStream *s);
uint64_t fit_stream_bytes(const FitStream *s);
/* Flush the decoder (a truncated trailing sequence becomes U+FFFD) and produce the result.
 * The stream may be freed afterwards; ret owns its text. */
int fit_stream_finish(FitStream *s, FitText *ret);

/* Fit a complete buffer in one go (same rules as a stream). */
int fit_text_from_buffer(const void *buf, size_t len, uint64_t ceiling, FitText *ret);

/* Cut further (from the middle, widening the omitted run, keeping head : tail proportion
 * roughly 3 : 1) until text_bytes <= max_bytes; counts stay exact. Never splits a code point. */
int fit_text_shrink(FitText *t, size_t max_bytes);

/* Aggregate bound: shrink the largest texts first ("water filling") until the sum of
 * text_bytes over all n texts is <= budget. NULL entries are skipped. */
int fit_texts_to_budget(FitText *const *texts, size_t n, size_t budget);

void fit_text_done(FitText *t); /* frees text; accepts a zeroed FitText */

/* The wire form of a fitted text, the same in the worker's report and in the supervisor's
 * result: the FIT_TEXT_WIRE_FIELDS pairs text, totalCharacters, totalBytes,
 * omittedCharacters, omittedBytes, in that order, packed into a map the caller opened
 * with room for them (and for any pairs of its own, packed after). */
#define FIT_TEXT_WIRE_FIELDS 5
void fit_text_pack_fields(msgpack_packer *pk, const FitText *t);
