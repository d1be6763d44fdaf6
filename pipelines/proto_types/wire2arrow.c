/* wire2arrow: protobuf wire bytes -> columnar buffers, driven by a plan built in Python.
 *
 * The silver job's fast path (pipelines/proto_types/_native.py builds the plan, compiles this
 * file with the system C compiler once per source version, loads it with ctypes, and turns
 * the buffers into Arrow arrays). It covers the canonical encoding of the types the plan
 * accepts and nothing more: any record where it meets something else (a field number the
 * writer schema does not define, a wire type that does not match, a singular message or
 * Timestamp field written twice (protobuf merges those), a repeated map key, a string that is
 * not UTF-8, a varint or length that runs past its buffer, a Timestamp out of range, a
 * Duration past 2^53 ns, a closed enum's unknown number, a missing proto2 required field) is
 * "given back": its partial output is rolled back and its index is reported, and the Python
 * caller decodes that record with the exact upb path. So the fast path never has to decide
 * what protobuf would do in an unusual case; it only has to agree with it on the usual one,
 * which tests/unit/proto_types/test_native.py checks against the upb path on random messages.
 *
 * No Python API, no Arrow headers: plain C99, one shared library, called through ctypes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Builder types: how a column's values are stored. */
enum { B_I32 = 1, B_I64 = 2, B_F32 = 3, B_F64 = 4, B_BOOL = 5, B_BIN = 6, B_STRUCT = 7, B_LIST = 8 };

/* Value kinds (what a field's bytes mean). */
enum {
  K_INT32 = 1, K_INT64, K_UINT32, K_UINT64, K_SINT32, K_SINT64, K_FIXED32, K_SFIXED32,
  K_FIXED64, K_SFIXED64, K_FLOAT, K_DOUBLE, K_BOOL, K_STRING, K_BYTES, K_ENUM, K_MESSAGE,
  K_TIMESTAMP, K_DURATION
};
/* A wrapper type (google.protobuf.Int32Value, ...): K_WRAPPER + the kind of its `value`. */
#define K_WRAPPER 32
#define IS_WRAPPER(kind) ((kind) > K_WRAPPER)
/* Kinds read from a length-delimited sub-message that protobuf would merge if repeated. */
#define IS_SUB(kind) ((kind) == K_MESSAGE || (kind) == K_TIMESTAMP || (kind) == K_DURATION || IS_WRAPPER(kind))

/* Field labels. */
enum { L_IMPLICIT = 0, L_PRESENCE = 1, L_REPEATED = 2, L_MAP = 3, L_REQUIRED = 4 };

#define GIVE_BACK 1
#define NO_MEMORY 2

typedef struct {
  uint8_t *p;
  size_t len, cap;
} Buf;

typedef struct {
  int type;
  int64_t n;  /* slots appended */
  Buf valid;  /* one byte per slot: 1 valid, 0 null */
  Buf data;   /* fixed-width values, or the bytes of B_BIN values */
  Buf offs;   /* int32 offsets (B_BIN, B_LIST), starting with 0 */
} Builder;

typedef struct {
  int number, kind, label, oneof, builder, elem, sub, kind2, elem2, position;
  int enum_first, enum_count; /* closed enum: its sorted numbers in Plan.enums; else count 0 */
} Field;
#define FIELD_INTS 12

typedef struct {
  int first, nfields, noneofs, case_first, maxnum;
  int16_t *bynum; /* field number -> index within the message, -1 when not defined */
} Msg;

typedef struct {
  int nmsg, nfield, nbuilder;
  Msg *msgs;
  Field *fields;
  int *cases;     /* builder of each real oneof's case column */
  int *btypes;
  int32_t *enums; /* the numbers of closed enums, sorted per enum */
} Plan;

typedef struct {
  int nbuilder;
  Builder *b;
} Result;

typedef struct {
  int64_t n, valid, data, offs;
} Mark;

typedef struct {
  const uint8_t *p;
  size_t len;
  uint64_t v;
  int present;
} Slot;

/* ---------------------------------------------------------------- buffers */

static int buf_reserve(Buf *b, size_t extra) {
  if (b->len + extra <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra) cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) return NO_MEMORY;
  b->p = p;
  b->cap = cap;
  return 0;
}

static int buf_put(Buf *b, const void *src, size_t n) {
  if (buf_reserve(b, n)) return NO_MEMORY;
  if (n) memcpy(b->p + b->len, src, n);
  b->len += n;
  return 0;
}

static int put_offset(Buf *b, int64_t value) {
  if (value > INT32_MAX) return GIVE_BACK; /* Arrow int32 offsets: the caller splits */
  int32_t v = (int32_t)value;
  return buf_put(b, &v, 4);
}

/* ---------------------------------------------------------------- wire reading */

static int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
  const uint8_t *p = *pp;
  uint64_t v = 0;
  for (int i = 0; i < 10; i++) {
    if (p >= end) return GIVE_BACK;
    uint8_t byte = *p++;
    if (i == 9 && byte > 1) return GIVE_BACK;
    v |= (uint64_t)(byte & 0x7f) << (7 * i);
    if (!(byte & 0x80)) {
      *pp = p;
      *out = v;
      return 0;
    }
  }
  return GIVE_BACK;
}

/* A varint of at most 5 bytes whose value fits `max`: protobuf (upb) reads tags and lengths
 * this way and rejects longer encodings even of small values; the upb path decides those. */
static int read_varint32(const uint8_t **pp, const uint8_t *end, uint64_t max, uint64_t *out) {
  const uint8_t *p = *pp;
  uint64_t v;
  if (read_varint(&p, end, &v) || p - *pp > 5 || v > max) return GIVE_BACK;
  *pp = p;
  *out = v;
  return 0;
}

static int read_tag(const uint8_t **pp, const uint8_t *end, uint64_t *tag) {
  return read_varint32(pp, end, UINT32_MAX, tag);
}

static int read_len(const uint8_t **pp, const uint8_t *end, const uint8_t **start, size_t *len) {
  uint64_t n;
  if (read_varint32(pp, end, INT32_MAX, &n)) return GIVE_BACK;
  if (n > (uint64_t)(end - *pp)) return GIVE_BACK;
  *start = *pp;
  *len = (size_t)n;
  *pp += n;
  return 0;
}

static int wire_type_of(int kind) {
  switch (kind) {
    case K_FIXED32: case K_SFIXED32: case K_FLOAT: return 5;
    case K_FIXED64: case K_SFIXED64: case K_DOUBLE: return 1;
    case K_STRING: case K_BYTES: case K_MESSAGE: case K_TIMESTAMP: case K_DURATION: return 2;
    default: return IS_WRAPPER(kind) ? 2 : 0;
  }
}

/* Reads one scalar of `kind` (not string/bytes/message) in its wire type into raw 64 bits. */
static int read_scalar(int kind, const uint8_t **pp, const uint8_t *end, uint64_t *out) {
  int wt = wire_type_of(kind);
  if (wt == 0) return read_varint(pp, end, out);
  size_t size = wt == 5 ? 4 : 8;
  if ((size_t)(end - *pp) < size) return GIVE_BACK;
  uint64_t v = 0;
  for (size_t i = 0; i < size; i++) v |= (uint64_t)(*pp)[i] << (8 * i);
  *pp += size;
  *out = v;
  return 0;
}

/* ---------------------------------------------------------------- UTF-8 (RFC 3629) */

static int utf8_ok(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) { i++; continue; }
    size_t need;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) { need = 1; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { need = 2; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { need = 3; cp = c & 0x07; }
    else return 0;
    if (i + need >= n) return 0; /* truncated sequence */
    for (size_t k = 1; k <= need; k++) {
      uint8_t d = s[i + k];
      if ((d & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (need == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) return 0;
    if (need == 3 && (cp < 0x10000 || cp > 0x10ffff)) return 0;
    i += need + 1;
  }
  return 1;
}

/* ---------------------------------------------------------------- appending values */

static int append_valid(Builder *b, uint8_t valid) {
  if (buf_put(&b->valid, &valid, 1)) return NO_MEMORY;
  b->n++;
  return 0;
}

/* Appends a scalar value (raw wire bits, or 0 for the default) converted for `kind`. */
static int append_scalar(Builder *b, int kind, uint64_t raw, uint8_t valid) {
  int rc;
  switch (b->type) {
    case B_I32: {
      int32_t v;
      if (kind == K_SINT32) {
        uint32_t u = (uint32_t)raw;
        v = (int32_t)((u >> 1) ^ (~(u & 1) + 1));
      } else {
        v = (int32_t)(uint32_t)raw;
      }
      rc = buf_put(&b->data, &v, 4);
      break;
    }
    case B_I64: {
      int64_t v;
      if (kind == K_SINT64) v = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
      else if (kind == K_UINT32 || kind == K_FIXED32) v = (int64_t)(uint32_t)raw;
      else if (kind == K_SFIXED32) v = (int64_t)(int32_t)(uint32_t)raw;
      else v = (int64_t)raw;
      rc = buf_put(&b->data, &v, 8);
      break;
    }
    case B_F32: {
      uint32_t bits = (uint32_t)raw;
      rc = buf_put(&b->data, &bits, 4);
      break;
    }
    case B_F64:
      rc = buf_put(&b->data, &raw, 8);
      break;
    case B_BOOL: {
      uint8_t v = raw != 0;
      rc = buf_put(&b->data, &v, 1);
      break;
    }
    default:
      return GIVE_BACK;
  }
  if (rc) return rc;
  return append_valid(b, valid);
}

static int append_bytes(Builder *b, int kind, const uint8_t *p, size_t n, uint8_t valid) {
  if (kind == K_STRING && n && !utf8_ok(p, n)) return GIVE_BACK;
  if (buf_put(&b->data, p, n)) return NO_MEMORY;
  int rc = put_offset(&b->offs, (int64_t)b->data.len);
  if (rc) return rc;
  return append_valid(b, valid);
}

/* The fields of a Timestamp or a Duration: seconds (1, int64) and nanos (2, int32). */
static int read_seconds_nanos(const uint8_t *p, size_t n, int64_t *seconds, int64_t *nanos) {
  const uint8_t *end = p + n;
  *seconds = *nanos = 0;
  while (p < end) {
    uint64_t tag, v;
    if (read_tag(&p, end, &tag) || (tag & 7) != 0) return GIVE_BACK;
    if (read_varint(&p, end, &v)) return GIVE_BACK;
    if ((tag >> 3) == 1) *seconds = (int64_t)v;
    else if ((tag >> 3) == 2) *nanos = (int64_t)(int32_t)(uint32_t)v;
    else return GIVE_BACK;
  }
  return 0;
}

/* Timestamp: micros = seconds * 1e6 + nanos / 1000. */
static int append_timestamp(Builder *b, const uint8_t *p, size_t n, uint8_t valid) {
  int64_t seconds, nanos;
  if (read_seconds_nanos(p, n, &seconds, &nanos)) return GIVE_BACK;
  if (nanos < 0 || nanos > 999999999) return GIVE_BACK;
  /* years 1 to 9999, Timestamp's range: the upb path refuses the others */
  if (seconds < -62135596800LL || seconds > 253402300799LL) return GIVE_BACK;
  int64_t micros;
  if (__builtin_mul_overflow(seconds, (int64_t)1000000, &micros)) return GIVE_BACK;
  if (__builtin_add_overflow(micros, nanos / 1000, &micros)) return GIVE_BACK;
  if (buf_put(&b->data, &micros, 8)) return NO_MEMORY;
  return append_valid(b, valid);
}

/* Duration as double seconds, (seconds * 1e9 + nanos) / 1e9 correctly rounded: exact when the
 * nanosecond total fits a double's 53 bits (|total| <= 2^53 ns, about 104 days); longer ones
 * are given back (the upb path divides the exact integers). */
static int append_duration(Builder *b, const uint8_t *p, size_t n, uint8_t valid) {
  int64_t seconds, nanos;
  if (read_seconds_nanos(p, n, &seconds, &nanos)) return GIVE_BACK;
  /* nanos within a second and of the seconds' sign (Duration's rule): the upb path refuses
   * the others */
  if (nanos < -999999999 || nanos > 999999999) return GIVE_BACK;
  if ((seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) return GIVE_BACK;
  int64_t total;
  if (__builtin_mul_overflow(seconds, (int64_t)1000000000, &total)) return GIVE_BACK;
  if (__builtin_add_overflow(total, nanos, &total)) return GIVE_BACK;
  const int64_t limit = (int64_t)1 << 53;
  if (total > limit || total < -limit) return GIVE_BACK;
  double value = (double)total / 1e9;
  if (buf_put(&b->data, &value, 8)) return NO_MEMORY;
  return append_valid(b, valid);
}

static int append_bytes(Builder *b, int kind, const uint8_t *p, size_t n, uint8_t valid);

/* A wrapper message: its field 1 (`value`, of kind `inner`), protobuf's default when absent. */
static int append_wrapper(Builder *b, int inner, const uint8_t *p, size_t n, uint8_t valid) {
  const uint8_t *end = p + n, *s = NULL;
  size_t len = 0;
  uint64_t raw = 0;
  int want = wire_type_of(inner);
  while (p < end) {
    uint64_t tag;
    if (read_tag(&p, end, &tag)) return GIVE_BACK;
    if ((tag >> 3) != 1 || (int)(tag & 7) != want) return GIVE_BACK;
    if (want == 2) {
      /* a string written twice: protobuf checks the UTF-8 of the one replaced too */
      if (s != NULL && inner == K_STRING) return GIVE_BACK;
      if (read_len(&p, end, &s, &len)) return GIVE_BACK;
    } else if (read_scalar(inner, &p, end, &raw)) {
      return GIVE_BACK;
    }
  }
  if (want == 2) return append_bytes(b, inner, s, len, valid);
  return append_scalar(b, inner, raw, valid);
}

/* 1 when `value` is a number of the field's closed enum (or the enum is open). */
static int enum_ok(const Plan *plan, const Field *f, uint64_t raw) {
  if (f->enum_count == 0) return 1;
  int32_t v = (int32_t)(uint32_t)raw;
  const int32_t *lo = plan->enums + f->enum_first;
  int a = 0, z = f->enum_count - 1;
  while (a <= z) {
    int mid = (a + z) / 2;
    if (lo[mid] == v) return 1;
    if (lo[mid] < v) a = mid + 1;
    else z = mid - 1;
  }
  return 0; /* protobuf keeps it as an unknown field: the upb path decides */
}

/* A length-delimited value of a sub-message kind (not K_MESSAGE) into its builder. */
static int append_sub_value(Builder *b, int kind, const uint8_t *p, size_t n, uint8_t valid) {
  if (kind == K_TIMESTAMP) return append_timestamp(b, p, n, valid);
  if (kind == K_DURATION) return append_duration(b, p, n, valid);
  return append_wrapper(b, kind - K_WRAPPER, p, n, valid);
}

/* ---------------------------------------------------------------- messages */

typedef struct {
  const Plan *plan;
  Builder *b;
} Ctx;

static int append_null_message(Ctx *c, int m);
static int decode_message(Ctx *c, int m, const uint8_t *p, const uint8_t *end);

/* A null (or, for implicit fields, default) slot in the builders of one field. */
static int append_absent(Ctx *c, const Field *f, uint8_t valid) {
  Builder *b = &c->b[f->builder];
  if (f->label == L_REPEATED || f->label == L_MAP) {
    int rc = put_offset(&b->offs, c->b[f->elem].n);
    return rc ? rc : append_valid(b, valid);
  }
  switch (f->kind) {
    case K_MESSAGE: {
      int rc = append_null_message(c, f->sub);
      return rc ? rc : append_valid(b, 0);
    }
    case K_TIMESTAMP: case K_DURATION: {
      int64_t zero = 0;
      if (buf_put(&b->data, &zero, 8)) return NO_MEMORY;
      return append_valid(b, 0);
    }
    case K_STRING: case K_BYTES:
      return append_bytes(b, f->kind, NULL, 0, valid);
    default:
      if (IS_WRAPPER(f->kind)) {
        int inner = f->kind - K_WRAPPER;
        return wire_type_of(inner) == 2 ? append_bytes(b, inner, NULL, 0, 0)
                                        : append_scalar(b, inner, 0, 0);
      }
      return append_scalar(b, f->kind, 0, valid);
  }
}

/* Fills every column under message `m` with one null slot (its parent struct is null). */
static int append_null_message(Ctx *c, int m) {
  const Msg *M = &c->plan->msgs[m];
  for (int i = 0; i < M->nfields; i++) {
    int rc = append_absent(c, &c->plan->fields[M->first + i], 0);
    if (rc) return rc;
  }
  for (int o = 0; o < M->noneofs; o++) {
    int rc = append_scalar(&c->b[c->plan->cases[M->case_first + o]], K_INT32, 0, 0);
    if (rc) return rc;
  }
  return 0;
}

/* Appends one element of kind `kind` read from the wire (value of a repeated or map field). */
static int append_element(Ctx *c, const Field *f, const uint8_t **pp, const uint8_t *end) {
  int kind = f->kind;
  Builder *b = &c->b[f->elem];
  if (wire_type_of(kind) == 2) {
    const uint8_t *s;
    size_t n;
    if (read_len(pp, end, &s, &n)) return GIVE_BACK;
    if (kind == K_MESSAGE) {
      int rc = decode_message(c, f->sub, s, s + n);
      return rc ? rc : append_valid(b, 1);
    }
    if (IS_SUB(kind)) return append_sub_value(b, kind, s, n, 1);
    return append_bytes(b, kind, s, n, 1);
  }
  uint64_t raw;
  if (read_scalar(kind, pp, end, &raw)) return GIVE_BACK;
  if (kind == K_ENUM && !enum_ok(c->plan, f, raw)) return GIVE_BACK;
  return append_scalar(b, kind, raw, 1);
}

static int same_key(const Builder *k, int64_t i, int64_t j) {
  if (k->type == B_BIN) {
    const int32_t *o = (const int32_t *)k->offs.p;
    int32_t li = o[i + 1] - o[i], lj = o[j + 1] - o[j];
    return li == lj && memcmp(k->data.p + o[i], k->data.p + o[j], (size_t)li) == 0;
  }
  size_t w = k->type == B_I32 ? 4 : k->type == B_BOOL ? 1 : 8;
  return memcmp(k->data.p + i * w, k->data.p + j * w, w) == 0;
}

/* One map entry: key (1) and value (2), each defaulted when missing. */
static int append_map_entry(Ctx *c, const Field *f, const uint8_t *p, const uint8_t *end,
                            int64_t first_key) {
  const uint8_t *key_p = NULL, *val_p = NULL;
  size_t key_n = 0, val_n = 0;
  uint64_t key_raw = 0, val_raw = 0;
  int has_key = 0, has_val = 0;
  while (p < end) {
    uint64_t tag;
    if (read_tag(&p, end, &tag)) return GIVE_BACK;
    int num = (int)(tag >> 3), wt = (int)(tag & 7);
    int kind = num == 1 ? f->kind : num == 2 ? f->kind2 : -1;
    if (kind < 0 || wt != wire_type_of(kind)) return GIVE_BACK;
    if (wt == 2) {
      const uint8_t *s;
      size_t n;
      if (read_len(&p, end, &s, &n)) return GIVE_BACK;
      /* a string written twice: protobuf checks the UTF-8 of the one replaced too */
      if ((num == 1 ? has_key : has_val) && kind == K_STRING) return GIVE_BACK;
      if (num == 1) { key_p = s; key_n = n; has_key = 1; }
      else {
        if (has_val && IS_SUB(kind)) return GIVE_BACK; /* protobuf merges the two */
        val_p = s; val_n = n; has_val = 1;
      }
    } else {
      uint64_t raw;
      if (read_scalar(kind, &p, end, &raw)) return GIVE_BACK;
      if (num == 1) { key_raw = raw; has_key = 1; }
      else {
        if (kind == K_ENUM && !enum_ok(c->plan, f, raw)) return GIVE_BACK;
        val_raw = raw; has_val = 1;
      }
    }
  }
  (void)has_key;
  Builder *kb = &c->b[f->elem];
  int rc = wire_type_of(f->kind) == 2 ? append_bytes(kb, f->kind, key_p, key_n, 1)
                                      : append_scalar(kb, f->kind, key_raw, 1);
  if (rc) return rc;
  for (int64_t j = first_key; j < kb->n - 1; j++)
    if (same_key(kb, j, kb->n - 1)) return GIVE_BACK; /* protobuf keeps the last: upb says */
  Builder *vb = &c->b[f->elem2];
  /* a closed enum's default is its first value, not 0: the upb path fills it in */
  if (!has_val && f->kind2 == K_ENUM && f->enum_count) return GIVE_BACK;
  if (f->kind2 != K_MESSAGE && IS_SUB(f->kind2)) return append_sub_value(vb, f->kind2, val_p, val_n, 1);
  switch (f->kind2) {
    case K_MESSAGE:
      rc = decode_message(c, f->sub, val_p, val_p + val_n);
      return rc ? rc : append_valid(vb, 1);
    case K_STRING: case K_BYTES:
      return append_bytes(vb, f->kind2, val_p, val_n, 1);
    default:
      return append_scalar(vb, f->kind2, has_val ? val_raw : 0, 1);
  }
}

#define MAX_FIELDS 512

static int decode_message(Ctx *c, int m, const uint8_t *p, const uint8_t *end) {
  const Plan *plan = c->plan;
  const Msg *M = &plan->msgs[m];
  const Field *fields = plan->fields + M->first;
  Slot slots[MAX_FIELDS];
  int last[MAX_FIELDS];
  int64_t map_first[MAX_FIELDS];
  for (int i = 0; i < M->nfields; i++) {
    slots[i].present = 0;
    if (fields[i].label == L_MAP) map_first[i] = c->b[fields[i].elem].n;
  }
  for (int o = 0; o < M->noneofs; o++) last[o] = -1;
  int rc;
  while (p < end) {
    uint64_t tag;
    if (read_tag(&p, end, &tag)) return GIVE_BACK;
    uint64_t num = tag >> 3;
    int wt = (int)(tag & 7);
    if (num == 0 || num > (uint64_t)M->maxnum) return GIVE_BACK;
    int i = M->bynum[num];
    if (i < 0) return GIVE_BACK; /* a field the schema does not define */
    const Field *f = &fields[i];
    int want = wire_type_of(f->kind);
    if (f->label == L_MAP) {
      const uint8_t *s;
      size_t n;
      if (wt != 2 || read_len(&p, end, &s, &n)) return GIVE_BACK;
      if ((rc = append_map_entry(c, f, s, s + n, map_first[i]))) return rc;
    } else if (f->label == L_REPEATED) {
      if (wt == 2 && want != 2) { /* packed */
        const uint8_t *s;
        size_t n;
        if (read_len(&p, end, &s, &n)) return GIVE_BACK;
        const uint8_t *q = s, *qend = s + n;
        while (q < qend)
          if ((rc = append_element(c, f, &q, qend))) return rc;
      } else if (wt == want) {
        if ((rc = append_element(c, f, &p, end))) return rc;
      } else {
        return GIVE_BACK;
      }
    } else {
      if (wt != want) return GIVE_BACK;
      Slot *s = &slots[i];
      if (want == 2) {
        if (s->present && IS_SUB(f->kind)) return GIVE_BACK; /* protobuf merges the two */
        /* a string written twice: protobuf checks the UTF-8 of the one replaced too */
        if (s->present && f->kind == K_STRING) return GIVE_BACK;
        if (read_len(&p, end, &s->p, &s->len)) return GIVE_BACK;
      } else if (read_scalar(f->kind, &p, end, &s->v)) {
        return GIVE_BACK;
      } else if (f->kind == K_ENUM && !enum_ok(plan, f, s->v)) {
        return GIVE_BACK;
      }
      s->present = 1;
      if (f->oneof >= 0) last[f->oneof] = i;
    }
  }
  /* Emit one slot per singular field, close each repeated field's list. */
  for (int i = 0; i < M->nfields; i++) {
    const Field *f = &fields[i];
    Builder *b = &c->b[f->builder];
    const Slot *s = &slots[i];
    int present = s->present && (f->oneof < 0 || last[f->oneof] == i);
    /* a oneof member replaced by a later one: protobuf parsed and checked it all the same */
    if (s->present && !present && (f->kind == K_STRING || IS_SUB(f->kind))) return GIVE_BACK;
    if (f->label == L_REPEATED || f->label == L_MAP) {
      rc = append_absent(c, f, 1);
    } else if (!present) {
      if (f->label == L_REQUIRED) return GIVE_BACK; /* missing: protobuf's call */
      rc = append_absent(c, f, f->label == L_IMPLICIT);
    } else if (f->kind == K_MESSAGE) {
      rc = decode_message(c, f->sub, s->p, s->p + s->len);
      if (!rc) rc = append_valid(b, 1);
    } else if (IS_SUB(f->kind)) {
      rc = append_sub_value(b, f->kind, s->p, s->len, 1);
    } else if (f->kind == K_STRING || f->kind == K_BYTES) {
      rc = append_bytes(b, f->kind, s->p, s->len, 1);
    } else {
      rc = append_scalar(b, f->kind, s->v, 1);
    }
    if (rc) return rc;
  }
  for (int o = 0; o < M->noneofs; o++) {
    Builder *cb = &c->b[plan->cases[M->case_first + o]];
    int l = last[o];
    rc = append_scalar(cb, K_INT32, l >= 0 ? (uint64_t)fields[l].position : 0, l >= 0);
    if (rc) return rc;
  }
  return 0;
}

/* ---------------------------------------------------------------- API (ctypes) */

void w2a_plan_free(Plan *plan) {
  if (!plan) return;
  if (plan->msgs)
    for (int m = 0; m < plan->nmsg; m++) free(plan->msgs[m].bynum);
  free(plan->msgs);
  free(plan->fields);
  free(plan->cases);
  free(plan->btypes);
  free(plan->enums);
  free(plan);
}

/* msgs: 4 ints per message (first field, field count, oneof count, first case builder);
 * fields: FIELD_INTS ints per field (see Field); cases: builder per oneof; btypes: type per
 * builder; enums: closed enums' numbers. Message 0 is the root. Returns NULL when the plan
 * is not one this file can run. */
Plan *w2a_plan_new(int nmsg, const int32_t *msgs, int nfield, const int32_t *fields, int ncase,
                   const int32_t *cases, int nbuilder, const int32_t *btypes, int nenum,
                   const int32_t *enums) {
  Plan *plan = calloc(1, sizeof(Plan));
  if (!plan) return NULL;
  plan->nmsg = nmsg;
  plan->nfield = nfield;
  plan->nbuilder = nbuilder;
  plan->msgs = calloc((size_t)nmsg, sizeof(Msg));
  plan->fields = calloc((size_t)(nfield ? nfield : 1), sizeof(Field));
  plan->cases = calloc((size_t)(ncase ? ncase : 1), sizeof(int));
  plan->btypes = calloc((size_t)(nbuilder ? nbuilder : 1), sizeof(int));
  plan->enums = calloc((size_t)(nenum ? nenum : 1), sizeof(int32_t));
  if (!plan->msgs || !plan->fields || !plan->cases || !plan->btypes || !plan->enums) goto fail;
  for (int i = 0; i < nenum; i++) plan->enums[i] = enums[i];
  for (int i = 0; i < nfield; i++) {
    const int32_t *r = fields + FIELD_INTS * i;
    Field *f = &plan->fields[i];
    f->number = r[0]; f->kind = r[1]; f->label = r[2]; f->oneof = r[3]; f->builder = r[4];
    f->elem = r[5]; f->sub = r[6]; f->kind2 = r[7]; f->elem2 = r[8]; f->position = r[9];
    f->enum_first = r[10]; f->enum_count = r[11];
    if (f->builder < 0 || f->builder >= nbuilder) goto fail;
    if (f->enum_count < 0 || f->enum_first < 0 || f->enum_first + f->enum_count > nenum) goto fail;
  }
  for (int i = 0; i < ncase; i++) plan->cases[i] = cases[i];
  for (int i = 0; i < nbuilder; i++) plan->btypes[i] = btypes[i];
  for (int m = 0; m < nmsg; m++) {
    Msg *M = &plan->msgs[m];
    M->first = msgs[4 * m]; M->nfields = msgs[4 * m + 1];
    M->noneofs = msgs[4 * m + 2]; M->case_first = msgs[4 * m + 3];
    if (M->nfields > MAX_FIELDS || M->noneofs > MAX_FIELDS) goto fail;
    if (M->first < 0 || M->first + M->nfields > nfield) goto fail;
    int maxnum = 0;
    for (int i = 0; i < M->nfields; i++)
      if (plan->fields[M->first + i].number > maxnum) maxnum = plan->fields[M->first + i].number;
    if (maxnum > 65536) goto fail; /* sparse numbering: not worth a table */
    M->maxnum = maxnum;
    M->bynum = malloc(sizeof(int16_t) * (size_t)(maxnum + 1));
    if (!M->bynum) goto fail;
    for (int k = 0; k <= maxnum; k++) M->bynum[k] = -1;
    for (int i = 0; i < M->nfields; i++) M->bynum[plan->fields[M->first + i].number] = (int16_t)i;
  }
  return plan;
fail:
  w2a_plan_free(plan);
  return NULL;
}

void w2a_result_free(Result *r) {
  if (!r) return;
  for (int i = 0; i < r->nbuilder; i++) {
    free(r->b[i].valid.p);
    free(r->b[i].data.p);
    free(r->b[i].offs.p);
  }
  free(r->b);
  free(r);
}

static void rollback(Result *r, const Mark *marks) {
  for (int i = 0; i < r->nbuilder; i++) {
    r->b[i].n = marks[i].n;
    r->b[i].valid.len = (size_t)marks[i].valid;
    r->b[i].data.len = (size_t)marks[i].data;
    r->b[i].offs.len = (size_t)marks[i].offs;
  }
}

/* Decodes n payloads: payload i is data[value_offsets[i] + starts[i] .. value_offsets[i + 1]).
 * The index of each record given back is written to given_back (capacity n), their count to
 * *n_given_back. Returns NULL only when memory runs out. */
Result *w2a_decode(const Plan *plan, const uint8_t *data, const int32_t *value_offsets,
                   const int32_t *starts, int64_t n, int64_t *given_back,
                   int64_t *n_given_back) {
  Result *r = calloc(1, sizeof(Result));
  Mark *marks = calloc((size_t)(plan->nbuilder ? plan->nbuilder : 1), sizeof(Mark));
  if (!r || !marks) goto fail;
  r->nbuilder = plan->nbuilder;
  r->b = calloc((size_t)(plan->nbuilder ? plan->nbuilder : 1), sizeof(Builder));
  if (!r->b) goto fail;
  for (int i = 0; i < plan->nbuilder; i++) {
    r->b[i].type = plan->btypes[i];
    if ((r->b[i].type == B_BIN || r->b[i].type == B_LIST) && put_offset(&r->b[i].offs, 0))
      goto fail;
  }
  Ctx c = {plan, r->b};
  *n_given_back = 0;
  for (int64_t k = 0; k < n; k++) {
    for (int i = 0; i < plan->nbuilder; i++) {
      marks[i].n = r->b[i].n;
      marks[i].valid = (int64_t)r->b[i].valid.len;
      marks[i].data = (int64_t)r->b[i].data.len;
      marks[i].offs = (int64_t)r->b[i].offs.len;
    }
    int64_t lo = (int64_t)value_offsets[k] + starts[k], hi = value_offsets[k + 1];
    int rc = lo > hi || starts[k] < 0 ? GIVE_BACK : decode_message(&c, 0, data + lo, data + hi);
    if (rc == NO_MEMORY) goto fail;
    if (rc) {
      rollback(r, marks);
      given_back[(*n_given_back)++] = k;
    }
  }
  free(marks);
  return r;
fail:
  free(marks);
  w2a_result_free(r);
  return NULL;
}

int64_t w2a_count(const Result *r, int b) { return r->b[b].n; }

/* which: 0 validity bytes, 1 data, 2 offsets. */
const uint8_t *w2a_buffer(const Result *r, int b, int which, int64_t *len) {
  const Buf *buf = which == 0 ? &r->b[b].valid : which == 1 ? &r->b[b].data : &r->b[b].offs;
  *len = (int64_t)buf->len;
  return buf->p;
}
