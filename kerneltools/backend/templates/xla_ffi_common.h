/* kerneltools: what the XLA FFI handlers (xla_ffi_call.h on the CPU,
 * xla_ffi_cuda.h on CUDA) share: attributes, errors, the metadata answer,
 * and the walk over the batch axes. Written against the plain C API of
 * jaxlib's xla/ffi/api/c_api.h (inlined before this text). */

#include <stdlib.h>
#include <string.h>

#define KT_MAX_BUFFERS 64
#define KT_MAX_BATCH 8

static XLA_FFI_Error *kt_error_code(XLA_FFI_CallFrame *frame, const char *msg,
                                    XLA_FFI_Error_Code code) {
  XLA_FFI_Error_Create_Args args;
  memset(&args, 0, sizeof(args));
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.message = msg;
  args.errc = code;
  return frame->api->XLA_FFI_Error_Create(&args);
}

static XLA_FFI_Error *kt_error(XLA_FFI_CallFrame *frame, const char *msg) {
  return kt_error_code(frame, msg, XLA_FFI_Error_Code_INVALID_ARGUMENT);
}

/* The attribute `name`: a scalar (its int64 value in *out) or an int64 array
   (its data and size). Attributes come sorted by name; few, so a scan. */
static void *kt_attr(XLA_FFI_CallFrame *frame, const char *name, XLA_FFI_AttrType type) {
  size_t len = strlen(name);
  for (int64_t k = 0; k < frame->attrs.size; k++) {
    XLA_FFI_ByteSpan *s = frame->attrs.names[k];
    if (s->len == len && memcmp(s->ptr, name, len) == 0 && frame->attrs.types[k] == type)
      return frame->attrs.attrs[k];
  }
  return NULL;
}

/* A scalar int64 attribute (1 when found, 0 when absent). */
static int kt_int_attr(XLA_FFI_CallFrame *frame, const char *name, int64_t *out) {
  XLA_FFI_Scalar *s = kt_attr(frame, name, XLA_FFI_AttrType_SCALAR);
  if (!s) return 0;
  *out = *(int64_t *)s->value;
  return 1;
}

static int64_t kt_itemsize(XLA_FFI_DataType t) {
  switch (t) {
    case XLA_FFI_DataType_F64: case XLA_FFI_DataType_S64: case XLA_FFI_DataType_U64:
      return 8;
    case XLA_FFI_DataType_F32: case XLA_FFI_DataType_S32: case XLA_FFI_DataType_U32:
      return 4;
    case XLA_FFI_DataType_U8: case XLA_FFI_DataType_S8: case XLA_FFI_DataType_PRED:
      return 1;
    default:
      return 0;
  }
}

/* Byte size of a buffer's trailing `core` axes, and its batch axes'
   strides (in bytes, 0 where the axis has size 1), right-aligned on
   `nb` batch axes. */
static int64_t kt_layout(XLA_FFI_Buffer *b, int64_t core, int64_t nb, int64_t *strides) {
  int64_t size = kt_itemsize(b->dtype);
  int64_t lead = b->rank - core;
  for (int64_t a = lead; a < b->rank; a++) size *= b->dims[a];
  int64_t stride = size;
  for (int64_t a = nb - 1; a >= 0; a--) {
    int64_t own = a - (nb - lead);
    if (own < 0) { strides[a] = 0; continue; }
    strides[a] = b->dims[own] == 1 ? 0 : stride;
    stride *= b->dims[own];
  }
  return size;
}

/* The batch axes of a call: leading axes beyond a buffer's `core_ranks`
   (jax.vmap's "expand_dims": an unmapped operand has size 1 there), the
   batch shape being the first output's; operands of size 1 broadcast. */
typedef struct {
  int64_t nbuf, nb, count, shape[KT_MAX_BATCH];
  int64_t strides[KT_MAX_BUFFERS][KT_MAX_BATCH];
  char *base[KT_MAX_BUFFERS];
} kt_batch;

/* NULL, or why the call's buffers do not fit. */
static const char *kt_batch_init(XLA_FFI_CallFrame *frame, kt_batch *bt) {
  XLA_FFI_Array *ranks = kt_attr(frame, "core_ranks", XLA_FFI_AttrType_ARRAY);
  int64_t nargs = frame->args.size, nrets = frame->rets.size;
  if (!ranks || nrets < 1) return "kerneltools: the custom call lacks core_ranks";
  if (nargs + nrets > KT_MAX_BUFFERS || (int64_t)ranks->size != nargs + nrets)
    return "kerneltools: too many buffers, or core_ranks mismatch";
  const int64_t *core = (const int64_t *)ranks->data;
  XLA_FFI_Buffer *out0 = (XLA_FFI_Buffer *)frame->rets.rets[0];
  bt->nbuf = nargs + nrets;
  bt->nb = out0->rank - core[nargs];
  if (bt->nb < 0 || bt->nb > KT_MAX_BATCH) return "kerneltools: too many batch axes";
  bt->count = 1;
  for (int64_t a = 0; a < bt->nb; a++) {
    bt->shape[a] = out0->dims[a];
    bt->count *= bt->shape[a];
  }
  for (int64_t k = 0; k < bt->nbuf; k++) {
    XLA_FFI_Buffer *b = (XLA_FFI_Buffer *)(k < nargs ? frame->args.args[k]
                                                     : frame->rets.rets[k - nargs]);
    if (kt_itemsize(b->dtype) == 0 || b->rank < core[k] || b->rank - core[k] > bt->nb)
      return "kerneltools: a buffer of unexpected dtype or rank";
    kt_layout(b, core[k], bt->nb, bt->strides[k]);
    bt->base[k] = (char *)b->data;
  }
  return NULL;
}

/* The buffers' addresses in batch entry `e` (arguments, then outputs). */
static void kt_batch_ptrs(const kt_batch *bt, int64_t e, void **ptrs) {
  for (int64_t k = 0; k < bt->nbuf; k++) {
    int64_t off = 0, rest = e;
    for (int64_t a = bt->nb - 1; a >= 0; a--) {
      off += (rest % bt->shape[a]) * bt->strides[k][a];
      rest /= bt->shape[a];
    }
    ptrs[k] = bt->base[k] + off;
  }
}

/* 1 when XLA asks which FFI version the handler was built against (the
   answer written), else 0. */
static int kt_metadata(XLA_FFI_CallFrame *frame) {
  XLA_FFI_Extension_Base *ext = frame->extension_start;
  if (ext == NULL || ext->type != XLA_FFI_Extension_Metadata) return 0;
  XLA_FFI_Metadata_Extension *m = (XLA_FFI_Metadata_Extension *)ext;
  m->metadata->api_version.major_version = XLA_FFI_API_MAJOR;
  m->metadata->api_version.minor_version = XLA_FFI_API_MINOR;
  m->metadata->traits = 0;
  return 1;
}
