/* SPDX-License-Identifier: MIT */
/* Output fitting: a streaming UTF-8 decoder feeding a head buffer and a tail ring.
 *
 * Decoding rules (identical to Python's bytes.decode("utf-8", "replace")):
 *
 *   Well-formed sequences are those of Unicode Table 3-7:
 *     00..7F
 *     C2..DF 80..BF
 *     E0     A0..BF 80..BF        (no overlongs)
 *     E1..EC 80..BF 80..BF
 *     ED     80..9F 80..BF        (no surrogates D800..DFFF)
 *     EE..EF 80..BF 80..BF
 *     F0     90..BF 80..BF 80..BF (no overlongs)
 *     F1..F3 80..BF 80..BF 80..BF
 *     F4     80..8F 80..BF 80..BF (nothing above U+10FFFF)
 *
 *   A byte that cannot start a sequence (80..C1, F5..FF) is one U+FFFD. A valid lead
 *   followed by bytes that are a proper prefix of a well-formed sequence, and then by a
 *   byte that cannot continue it, is a "maximal subpart": the prefix becomes one U+FFFD
 *   and the offending byte is decoded afresh (it may start the next sequence). A
 *   prefix still pending at the end of the stream becomes one U+FFFD. Because this only
 *   ever looks at the next byte, it does not matter how the input is split into feeds.
 *
 * Counting rules: every decoded code point (U+FFFD included) is one character, and its
 * byte count is the length of its UTF-8 encoding (U+FFFD: 3 bytes, whatever the length
 * of the invalid input it replaced). `replaced` counts substitutions only; a literal,
 * well-formed EF BF BD in the input is an ordinary character.
 *
 * Keeping: the first head_max = ceiling - ceiling / 4 characters are appended to the
 * head buffer (UTF-8). Later characters go through a ring of tail_max = ceiling / 4
 * code points; whatever falls out of the ring is counted as omitted (its bytes from its
 * code point) and forgotten. So at any time:
 *   total = head + ring + omitted    (for both characters and bytes),
 * and memory is bounded by 4 * head_max bytes of head plus 4 * tail_max bytes of ring.
 *
 * omitted_at convention: if anything was omitted, omitted_at is the number of kept
 * characters before the omitted run (the head length). If nothing was omitted,
 * omitted_at == text_chars (the "run" is empty and sits at the end of the text).
 */
#include "contract/fit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/mp.h"

#define FIT_REPLACEMENT_CHAR 0xFFFDu

struct FitStream {
        uint64_t head_max; /* characters kept from the start */
        uint64_t tail_max; /* characters kept from the end */

        /* Decoder state: a proper prefix of a well-formed multi-byte sequence. */
        uint8_t pending[4];
        unsigned pending_len;  /* bytes in pending; 0 when between characters */
        unsigned pending_need; /* full length of the sequence pending[0] starts */

        /* Head: UTF-8 bytes of the first head_chars characters. */
        char *head;
        size_t head_bytes;
        size_t head_alloc;
        size_t head_alloc_max; /* 4 * head_max, saturated */
        uint64_t head_chars;

        /* Tail: ring of code points. It fills from index 0 without wrapping; only once
         * ring_count == ring_max do new characters overwrite (evict) the oldest one at
         * ring_start. */
        uint32_t *ring;
        size_t ring_alloc;
        size_t ring_max; /* tail_max, saturated to what an array can index */
        size_t ring_start;
        size_t ring_count;
        uint64_t ring_bytes; /* UTF-8 length of the code points in the ring */

        uint64_t total_chars;
        uint64_t total_bytes;
        uint64_t omitted_chars;
        uint64_t omitted_bytes;
        uint64_t replaced;

        bool finished;
};

static unsigned utf8_encoded_len(uint32_t cp) {
        if (cp < 0x80)
                return 1;
        if (cp < 0x800)
                return 2;
        if (cp < 0x10000)
                return 3;
        return 4;
}

static unsigned utf8_encode(uint32_t cp, char out[static 4]) {
        unsigned n = utf8_encoded_len(cp);

        switch (n) {
        case 1:
                out[0] = (char) cp;
                break;
        case 2:
                out[0] = (char) (0xC0 | (cp >> 6));
                out[1] = (char) (0x80 | (cp & 0x3F));
                break;
        case 3:
                out[0] = (char) (0xE0 | (cp >> 12));
                out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
                out[2] = (char) (0x80 | (cp & 0x3F));
                break;
        default:
                out[0] = (char) (0xF0 | (cp >> 18));
                out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
                out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
                out[3] = (char) (0x80 | (cp & 0x3F));
                break;
        }
        return n;
}

static inline bool utf8_is_continuation(char c) {
        return ((uint8_t) c & 0xC0) == 0x80;
}

/* Full length of the sequence a lead byte starts, or 0 if it cannot start one. */
static inline unsigned utf8_lead_len(uint8_t b) {
        if (b < 0x80)
                return 1;
        if (b >= 0xC2 && b <= 0xDF)
                return 2;
        if (b >= 0xE0 && b <= 0xEF)
                return 3;
        if (b >= 0xF0 && b <= 0xF4)
                return 4;
        return 0; /* 80..BF (continuation), C0/C1 (overlong), F5..FF (too large) */
}

/* Whether b may follow lead as the second byte of a sequence (Table 3-7). */
static inline bool utf8_second_ok(uint8_t lead, uint8_t b) {
        switch (lead) {
        case 0xE0:
                return b >= 0xA0 && b <= 0xBF;
        case 0xED:
                return b >= 0x80 && b <= 0x9F;
        case 0xF0:
                return b >= 0x90 && b <= 0xBF;
        case 0xF4:
                return b >= 0x80 && b <= 0x8F;
        default:
                return b >= 0x80 && b <= 0xBF;
        }
}

static uint32_t utf8_decode_complete(const uint8_t *p, unsigned n) {
        switch (n) {
        case 2:
                return (uint32_t) (p[0] & 0x1F) << 6 | (uint32_t) (p[1] & 0x3F);
        case 3:
                return (uint32_t) (p[0] & 0x0F) << 12 | (uint32_t) (p[1] & 0x3F) << 6 | (uint32_t) (p[2] & 0x3F);
        default:
                return (uint32_t) (p[0] & 0x07) << 18 | (uint32_t) (p[1] & 0x3F) << 12 | (uint32_t) (p[2] & 0x3F) << 6 |
                       (uint32_t) (p[3] & 0x3F);
        }
}

static uint64_t sat_mul4(uint64_t x) {
        return x > UINT64_MAX / 4 ? UINT64_MAX : x * 4;
}

/* Make room for up to `chars` more characters, so that the emit path below can never
 * fail. Allocations only grow towards (never past) the ceiling-derived maxima. */
static int fit_stream_reserve(FitStream *s, uint64_t chars) {
        if (s->head_chars < s->head_max) {
                uint64_t n = MIN(chars, s->head_max - s->head_chars);
                uint64_t want = (uint64_t) s->head_bytes + sat_mul4(n);

                want = MIN(want, (uint64_t) s->head_alloc_max);
                if (want > s->head_alloc) {
                        uint64_t a = MAX(want, (uint64_t) s->head_alloc * 2);
                        a = MIN(a, (uint64_t) s->head_alloc_max);
                        char *h = realloc(s->head, (size_t) a);
                        if (!h)
                                return -ENOMEM;
                        s->head = h;
                        s->head_alloc = (size_t) a;
                }
                /* Characters beyond the head's remaining room go to the ring. */
                chars -= n;
        }

        if (chars > 0 && s->ring_count < s->ring_max) {
                uint64_t want = (uint64_t) s->ring_count + MIN(chars, (uint64_t) (s->ring_max - s->ring_count));

                if (want > s->ring_alloc) {
                        uint64_t a = MAX(want, (uint64_t) s->ring_alloc * 2);
                        a = MIN(a, (uint64_t) s->ring_max);
                        uint32_t *r = reallocarray(s->ring, (size_t) a, sizeof(uint32_t));
                        if (!r)
                                return -ENOMEM;
                        s->ring = r;
                        s->ring_alloc = (size_t) a;
                }
        }

        return 0;
}

/* Account for one decoded character. `utf8` is its encoding (n bytes). Room has been
 * reserved by fit_stream_reserve(). */
static inline void fit_stream_emit(FitStream *s, uint32_t cp, const void *utf8, unsigned n) {
        s->total_chars++;
        s->total_bytes += n;

        if (s->head_chars < s->head_max) {
                memcpy(s->head + s->head_bytes, utf8, n);
                s->head_bytes += n;
                s->head_chars++;
                return;
        }

        if (s->ring_max == 0) {
                /* No tail at all (ceiling 0 or 1): straight to the omitted count. */
                s->omitted_chars++;
                s->omitted_bytes += n;
                return;
        }

        if (s->ring_count < s->ring_max) {
                /* Still filling: ring_start is 0, no wrap yet. */
                s->ring[s->ring_count++] = cp;
                s->ring_bytes += n;
                return;
        }

        /* Full: the oldest tail character is now in the middle, i.e. omitted. */
        unsigned old = utf8_encoded_len(s->ring[s->ring_start]);
        s->omitted_chars++;
        s->omitted_bytes += old;
        s->ring_bytes -= old;

        s->ring[s->ring_start] = cp;
        s->ring_bytes += n;
        s->ring_start++;
        if (s->ring_start == s->ring_max)
                s->ring_start = 0;
}

static inline void fit_stream_emit_replacement(FitStream *s) {
        static const uint8_t fffd[3] = { 0xEF, 0xBF, 0xBD };

        s->replaced++;
        fit_stream_emit(s, FIT_REPLACEMENT_CHAR, fffd, sizeof(fffd));
}

int fit_stream_new(uint64_t ceiling, FitStream **ret) {
        FitStream *s;

        if (!ret)
                return -EINVAL;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;

        s->tail_max = ceiling / 4;
        s->head_max = ceiling - s->tail_max;
        s->head_alloc_max = (size_t) MIN(sat_mul4(s->head_max), (uint64_t) SIZE_MAX);
        /* An array of more than SIZE_MAX / 4 code points could never be allocated anyway. */
        s->ring_max = (size_t) MIN(s->tail_max, (uint64_t) (SIZE_MAX / sizeof(uint32_t)));

        *ret = s;
        return 0;
}

void fit_stream_free(FitStream *s) {
        if (!s)
                return;
        free(s->head);
        free(s->ring);
        free(s);
}

/* Feeding after fit_stream_finish() is a programming error and returns -EINVAL.
 * On -ENOMEM nothing of buf has been consumed and the stream is unchanged. */
int fit_stream_feed(FitStream *s, const void *buf, size_t len) {
        const uint8_t *p = buf;
        int r;

        if (!s || (!buf && len > 0))
                return -EINVAL;
        if (s->finished)
                return -EINVAL;
        if (len == 0)
                return 0;

        /* Each input byte yields at most one character of its own, plus at most one
         * U+FFFD for a pending prefix it interrupts; and a prefix can only be interrupted
         * once. So len bytes produce at most len + 1 characters. */
        r = fit_stream_reserve(s, (uint64_t) len + 1);
        if (r < 0)
                return r;

        for (size_t i = 0; i < len;) {
                uint8_t b = p[i];

                if (s->pending_len == 0) {
                        /* Between characters: b starts something. */
                        if (b < 0x80) {
                                fit_stream_emit(s, b, &b, 1);
                                i++;
                                continue;
                        }

                        unsigned need = utf8_lead_len(b);
                        if (need == 0)
                                /* Cannot start a sequence: a maximal subpart of length 1. */
                                fit_stream_emit_replacement(s);
                        else {
                                s->pending[0] = b;
                                s->pending_len = 1;
                                s->pending_need = need;
                        }
                        i++;
                        continue;
                }

                bool ok = s->pending_len == 1 ? utf8_second_ok(s->pending[0], b) : utf8_is_continuation((char) b);
                if (!ok) {
                        /* The pending prefix is a maximal subpart: one U+FFFD for all of it.
                         * b is not consumed; it is looked at again as a potential lead. */
                        s->pending_len = 0;
                        fit_stream_emit_replacement(s);
                        continue;
                }

                s->pending[s->pending_len++] = b;
                i++;
                if (s->pending_len == s->pending_need) {
                        uint32_t cp = utf8_decode_complete(s->pending, s->pending_need);
                        s->pending_len = 0;
                        fit_stream_emit(s, cp, s->pending, s->pending_need);
                }
        }

        return 0;
}

uint64_t fit_stream_chars(const FitStream *s) {
        return s ? s->total_chars : 0;
}

uint64_t fit_stream_bytes(const FitStream *s) {
        return s ? s->total_bytes : 0;
}

/* The stream is finished afterwards (further feeds fail with -EINVAL), but calling this
 * again returns the same result. On -ENOMEM, ret is untouched and it may be retried. */
int fit_stream_finish(FitStream *s, FitText *ret) {
        int r;

        if (!s || !ret)
                return -EINVAL;

        if (s->pending_len > 0) {
                /* Truncated sequence at the end of the stream: one U+FFFD. */
                r = fit_stream_reserve(s, 1);
                if (r < 0)
                        return r;
                s->pending_len = 0;
                fit_stream_emit_replacement(s);
        }
        s->finished = true;

        /* head_bytes + ring_bytes is what we hold in memory, so it fits in size_t. */
        size_t text_bytes = s->head_bytes + (size_t) s->ring_bytes;
        _cleanup_free_ char *text = malloc(text_bytes + 1);
        if (!text)
                return -ENOMEM;

        if (s->head_bytes > 0)
                memcpy(text, s->head, s->head_bytes);

        char *q = text + s->head_bytes;
        for (size_t i = 0, k = s->ring_start; i < s->ring_count; i++) {
                q += utf8_encode(s->ring[k], q);
                if (++k == s->ring_count)
                        k = 0;
        }
        *q = '\0';

        uint64_t text_chars = s->head_chars + s->ring_count;

        *ret = (FitText){
                .text = TAKE_PTR(text),
                .text_bytes = text_bytes,
                .text_chars = text_chars,
                .total_chars = s->total_chars,
                .total_bytes = s->total_bytes,
                .omitted_chars = s->omitted_chars,
                .omitted_bytes = s->omitted_bytes,
                .replaced = s->replaced,
                /* Omissions only start once the head is full, so the run sits right after
                 * it. Nothing omitted: by convention the (empty) run is at the end. */
                .omitted_at = s->omitted_chars > 0 ? s->head_chars : text_chars,
        };
        return 0;
}

int fit_text_from_buffer(const void *buf, size_t len, uint64_t ceiling, FitText *ret) {
        FitStream *s = NULL;
        int r;

        if (!ret)
                return -EINVAL;

        r = fit_stream_new(ceiling, &s);
        if (r < 0)
                return r;

        r = fit_stream_feed(s, buf, len);
        if (r >= 0)
                r = fit_stream_finish(s, ret);

        fit_stream_free(s);
        return r;
}

/* Number of code points in text[from, to), from and to on code point boundaries. */
static uint64_t utf8_count_chars(const char *text, size_t from, size_t to) {
        uint64_t n = 0;

        for (size_t i = from; i < to; i++)
                if (!utf8_is_continuation(text[i]))
                        n++;
        return n;
}

/* Keeps a prefix [0, head_end) and a suffix [tail_start, text_bytes) of the text, both
 * cut on code point boundaries, with head_end <= tail_start, and moves everything in
 * between into the omitted counts. The existing omitted run (at character omitted_at)
 * must stay inside the new one, so the prefix is taken from the part before it and the
 * suffix from the part after it. The byte budget is split 3 : 1 (like head : tail); a
 * side that needs less than its share leaves the rest to the other. */
int fit_text_shrink(FitText *t, size_t max_bytes) {
        size_t cut, head_budget, tail_budget;

        if (!t)
                return -EINVAL;
        if (t->text_bytes <= max_bytes)
                return 0;
        if (!t->text || t->omitted_at > t->text_chars)
                return -EINVAL;

        size_t head_share = max_bytes - max_bytes / 4, tail_share = max_bytes / 4;

        if (t->omitted_chars == 0) {
                /* No run yet: it may go anywhere, so put it where the shares meet. Since
                 * head_share + tail_share = max_bytes < text_bytes, the two do not overlap. */
                head_budget = head_share;
                tail_budget = tail_share;
                cut = head_share;
        } else {
                /* Byte offset of the existing run. */
                uint64_t c = 0;
                for (cut = 0; cut < t->text_bytes; cut++)
                        if (!utf8_is_continuation(t->text[cut]) && c++ == t->omitted_at)
                                break;

                size_t head_avail = cut, tail_avail = t->text_bytes - cut;
                if (head_avail <= head_share) {
                        head_budget = head_avail;
                        tail_budget = max_bytes - head_avail;
                } else if (tail_avail <= tail_share) {
                        tail_budget = tail_avail;
                        head_budget = max_bytes - tail_avail;
                } else {
                        head_budget = head_share;
                        tail_budget = tail_share;
                }
        }

        /* Largest boundary <= head_budget (and <= cut). */
        size_t head_end = MIN(head_budget, cut);
        while (head_end > 0 && head_end < t->text_bytes && utf8_is_continuation(t->text[head_end]))
                head_end--;

        /* Smallest boundary >= text_bytes - tail_budget (and >= cut). */
        size_t tail_start = t->text_bytes - MIN(tail_budget, t->text_bytes - cut);
        while (tail_start < t->text_bytes && utf8_is_continuation(t->text[tail_start]))
                tail_start++;

        uint64_t removed_chars = utf8_count_chars(t->text, head_end, tail_start);
        size_t removed_bytes = tail_start - head_end;
        size_t tail_len = t->text_bytes - tail_start;

        memmove(t->text + head_end, t->text + tail_start, tail_len);
        t->text_bytes = head_end + tail_len;
        t->text[t->text_bytes] = '\0';

        t->text_chars -= removed_chars;
        t->omitted_chars += removed_chars;
        t->omitted_bytes += removed_bytes;
        t->omitted_at = t->omitted_chars > 0 ? utf8_count_chars(t->text, 0, head_end) : t->text_chars;

        /* Give the memory back; failing to is harmless. */
        char *smaller = realloc(t->text, t->text_bytes + 1);
        if (smaller)
                t->text = smaller;

        return 0;
}

/* Water filling: find the largest level L such that sum(min(text_bytes_i, L)) <= budget,
 * then cut every text above L down to L (the first few get L + 1 to use up the
 * remainder). Texts at or below L are left alone: the largest ones give first. */
int fit_texts_to_budget(FitText *const *texts, size_t n, size_t budget) {
        uint64_t sum = 0;
        size_t largest = 0;
        int r;

        if (!texts && n > 0)
                return -EINVAL;

        for (size_t i = 0; i < n; i++) {
                if (!texts[i])
                        continue;
                sum += texts[i]->text_bytes;
                largest = MAX(largest, texts[i]->text_bytes);
        }
        if (sum <= budget)
                return 0;

        /* Invariant: level lo fits, level hi does not (hi == largest means no cut). */
        size_t lo = 0, hi = largest;
        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;
                uint64_t used = 0;

                for (size_t i = 0; i < n; i++)
                        if (texts[i])
                                used += MIN(texts[i]->text_bytes, mid);
                if (used <= budget)
                        lo = mid;
                else
                        hi = mid;
        }

        uint64_t used = 0;
        for (size_t i = 0; i < n; i++)
                if (texts[i])
                        used += MIN(texts[i]->text_bytes, lo);
        uint64_t spare = budget - used; /* < number of texts above lo, by maximality of lo */

        for (size_t i = 0; i < n; i++) {
                if (!texts[i] || texts[i]->text_bytes <= lo)
                        continue;

                size_t target = lo;
                if (spare > 0) {
                        target++;
                        spare--;
                }
                r = fit_text_shrink(texts[i], target);
                if (r < 0)
                        return r;
        }

        return 0;
}

void fit_text_done(FitText *t) {
        if (!t)
                return;
        free(t->text);
        *t = (FitText){};
}

void fit_text_pack_fields(msgpack_packer *pk, const FitText *t) {
        mp_pack_cstr(pk, "text");
        mp_pack_strn(pk, t->text ? t->text : "", t->text_bytes);
        mp_pack_kv_uint(pk, "totalCharacters", t->total_chars);
        mp_pack_kv_uint(pk, "totalBytes", t->total_bytes);
        mp_pack_kv_uint(pk, "omittedCharacters", t->omitted_chars);
        mp_pack_kv_uint(pk, "omittedBytes", t->omitted_bytes);
}
