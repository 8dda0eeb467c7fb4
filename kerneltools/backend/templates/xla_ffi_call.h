/* kerneltools: an XLA FFI handler (a custom call) that runs a generated CPU
 * kernel on XLA's buffers. key ${key}
 *
 * The handler is generic: the attribute `fn` is the address of a loaded
 * kernel's kt_kernel(r0, r1, ny, args, outs), and the buffers are its
 * arguments, already in the kernel's layout (j-variables packed by tiles;
 * XLA did that), then its outputs. Leading axes beyond a buffer's
 * `core_ranks` are batch axes (jax.vmap's "expand_dims": an unmapped
 * operand has size 1 there): the kernel runs once per batch entry, the
 * operands of size 1 broadcast (xla_ffi_common.h). No copy, no Python.
 * Written against the plain C API of jaxlib's xla/ffi/api/c_api.h (inlined
 * below). */
${c_api}
${common}

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

static XLA_FFI_Error *kt_ffi_reduce_impl(XLA_FFI_CallFrame *frame) {
  int64_t fn_addr, nx, ny, state, threads;
  if (!kt_int_attr(frame, "fn", &fn_addr) || !kt_int_attr(frame, "nx", &nx)
      || !kt_int_attr(frame, "ny", &ny) || !kt_int_attr(frame, "state", &state)
      || !kt_int_attr(frame, "threads", &threads))
    return kt_error(frame, "kerneltools: the custom call lacks an attribute");
  kt_batch bt;
  const char *why = kt_batch_init(frame, &bt);
  if (why) return kt_error(frame, why);
  kt_kernel_fn *fn = (kt_kernel_fn *)(intptr_t)fn_addr;
  int64_t nargs = frame->args.size;
  void *ptrs[KT_MAX_BUFFERS + 1];
  char *scratch = malloc((size_t)(nx > 0 ? nx : 1) * (size_t)(state > 0 ? state : 1));
  if (!scratch) return kt_error(frame, "kerneltools: out of memory for the states");
  for (int64_t e = 0; e < bt.count; e++) {
    kt_batch_ptrs(&bt, e, ptrs);
    ptrs[bt.nbuf] = scratch;
    if (nx > 0) kt_run_rows(fn, nx, ny, ptrs, ptrs + nargs, threads);
  }
  free(scratch);
  return NULL;
}

XLA_FFI_Error *kt_ffi_reduce(XLA_FFI_CallFrame *frame) {
  if (kt_metadata(frame)) return NULL;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  return kt_ffi_reduce_impl(frame);
}
