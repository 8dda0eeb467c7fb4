/* kerneltools: an XLA FFI handler (a custom call) that runs a generated CPU
 * kernel on XLA's buffers. key ${key}
 *
 * The handler is generic: the attribute `fn` is the address of a loaded
 * kernel's kt_kernel(r0, r1, ny, args, outs), and the buffers are its
 * arguments, already in the kernel's layout (j-variables packed by tiles;
 * XLA did that), then its outputs. Leading axes beyond a buffer's
 * `core_ranks` are batch axes (jax.vmap's "expand_dims": an unmapped
 * operand has size 1 there): the kernel runs once per batch entry, the
 * operands of size 1 broadcast. No copy, no Python. Written against the
 * plain C API of jaxlib's xla/ffi/api/c_api.h (inlined below). */
${c_api}

#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <pthread.h>
#endif

typedef void kt_kernel_fn(int64_t, int64_t, int64_t, void **, void **);

/* Kernels built without OpenMP (zig's clang): the handler splits the rows
   into `threads` pieces of whole 8-row blocks, one per thread, as the CPU
   backend's Python threads do (each piece writes only its own rows). */
typedef struct {
  kt_kernel_fn *fn;
  int64_t r0, r1, ny;
  void **args, **outs;
} kt_piece;

static void *kt_run_piece(void *p) {
  kt_piece *q = (kt_piece *)p;
  q->fn(q->r0, q->r1, q->ny, q->args, q->outs);
  return NULL;
}

#define KT_MAX_THREADS 256

static void kt_run_rows(kt_kernel_fn *fn, int64_t nx, int64_t ny, void **args,
                        void **outs, int64_t threads) {
  int64_t blocks = (nx + 7) / 8;
  int64_t parts = threads < blocks ? threads : blocks;
  if (parts > KT_MAX_THREADS) parts = KT_MAX_THREADS;
  if (parts <= 1 || nx * ny <= (1 << 20)) {
    fn(0, nx, ny, args, outs);
    return;
  }
#ifdef _WIN32
  fn(0, nx, ny, args, outs);
#else
  kt_piece pieces[KT_MAX_THREADS];
  pthread_t ids[KT_MAX_THREADS];
  int started[KT_MAX_THREADS];
  for (int64_t k = 0; k < parts; k++) {
    int64_t a = blocks * k / parts * 8, b = blocks * (k + 1) / parts * 8;
    pieces[k] = (kt_piece){fn, a, b < nx ? b : nx, ny, args, outs};
  }
  for (int64_t k = 1; k < parts; k++)
    started[k] = pthread_create(&ids[k], NULL, kt_run_piece, &pieces[k]) == 0;
  kt_run_piece(&pieces[0]);
  for (int64_t k = 1; k < parts; k++) {
    if (started[k]) pthread_join(ids[k], NULL);
    else kt_run_piece(&pieces[k]);  /* no thread: run it here */
  }
#endif
}

const char *kt_key(void) { return "${key}"; }

#define KT_MAX_BUFFERS 64
#define KT_MAX_BATCH 8

static XLA_FFI_Error *kt_error(XLA_FFI_CallFrame *frame, const char *msg) {
  XLA_FFI_Error_Create_Args args;
  memset(&args, 0, sizeof(args));
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.message = msg;
  args.errc = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  return frame->api->XLA_FFI_Error_Create(&args);
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

static XLA_FFI_Error *kt_ffi_reduce_impl(XLA_FFI_CallFrame *frame) {
  XLA_FFI_Scalar *fn_attr = kt_attr(frame, "fn", XLA_FFI_AttrType_SCALAR);
  XLA_FFI_Scalar *ny_attr = kt_attr(frame, "ny", XLA_FFI_AttrType_SCALAR);
  XLA_FFI_Scalar *nx_attr = kt_attr(frame, "nx", XLA_FFI_AttrType_SCALAR);
  XLA_FFI_Scalar *st_attr = kt_attr(frame, "state", XLA_FFI_AttrType_SCALAR);
  XLA_FFI_Scalar *th_attr = kt_attr(frame, "threads", XLA_FFI_AttrType_SCALAR);
  XLA_FFI_Array *ranks = kt_attr(frame, "core_ranks", XLA_FFI_AttrType_ARRAY);
  int64_t nargs = frame->args.size, nrets = frame->rets.size;
  if (!fn_attr || !ny_attr || !nx_attr || !st_attr || !th_attr || !ranks)
    return kt_error(frame, "kerneltools: the custom call lacks an attribute");
  if (nargs + nrets > KT_MAX_BUFFERS || (int64_t)ranks->size != nargs + nrets)
    return kt_error(frame, "kerneltools: too many buffers, or core_ranks mismatch");
  kt_kernel_fn *fn = (kt_kernel_fn *)(intptr_t)(*(int64_t *)fn_attr->value);
  int64_t nx = *(int64_t *)nx_attr->value, ny = *(int64_t *)ny_attr->value;
  int64_t state = *(int64_t *)st_attr->value;
  int64_t threads = *(int64_t *)th_attr->value;
  const int64_t *core = (const int64_t *)ranks->data;
  /* the batch shape: the first output's leading axes */
  XLA_FFI_Buffer *out0 = (XLA_FFI_Buffer *)frame->rets.rets[0];
  int64_t nb = out0->rank - core[nargs];
  if (nb > KT_MAX_BATCH) return kt_error(frame, "kerneltools: too many batch axes");
  int64_t nbatch = 1, shape[KT_MAX_BATCH];
  for (int64_t a = 0; a < nb; a++) { shape[a] = out0->dims[a]; nbatch *= shape[a]; }
  int64_t strides[KT_MAX_BUFFERS][KT_MAX_BATCH];
  char *base[KT_MAX_BUFFERS];
  void *ptrs[KT_MAX_BUFFERS + 1];
  for (int64_t k = 0; k < nargs + nrets; k++) {
    XLA_FFI_Buffer *b = (XLA_FFI_Buffer *)(k < nargs ? frame->args.args[k]
                                                     : frame->rets.rets[k - nargs]);
    if (kt_itemsize(b->dtype) == 0 || b->rank < core[k] || b->rank - core[k] > nb)
      return kt_error(frame, "kerneltools: a buffer of unexpected dtype or rank");
    kt_layout(b, core[k], nb, strides[k]);
    base[k] = (char *)b->data;
  }
  char *scratch = malloc((size_t)(nx > 0 ? nx : 1) * (size_t)(state > 0 ? state : 1));
  if (!scratch) return kt_error(frame, "kerneltools: out of memory for the states");
  for (int64_t e = 0; e < nbatch; e++) {
    for (int64_t k = 0; k < nargs + nrets; k++) {
      int64_t off = 0, rest = e;
      for (int64_t a = nb - 1; a >= 0; a--) {
        off += (rest % shape[a]) * strides[k][a];
        rest /= shape[a];
      }
      ptrs[k] = base[k] + off;
    }
    ptrs[nargs + nrets] = scratch;
    if (nx > 0) kt_run_rows(fn, nx, ny, ptrs, ptrs + nargs, threads);
  }
  free(scratch);
  return NULL;
}

XLA_FFI_Error *kt_ffi_reduce(XLA_FFI_CallFrame *frame) {
  XLA_FFI_Extension_Base *ext = frame->extension_start;
  if (ext != NULL && ext->type == XLA_FFI_Extension_Metadata) {
    /* XLA asks which FFI version the handler was built against */
    XLA_FFI_Metadata_Extension *m = (XLA_FFI_Metadata_Extension *)ext;
    m->metadata->api_version.major_version = XLA_FFI_API_MAJOR;
    m->metadata->api_version.minor_version = XLA_FFI_API_MINOR;
    m->metadata->traits = 0;
    return NULL;
  }
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  return kt_ffi_reduce_impl(frame);
}
