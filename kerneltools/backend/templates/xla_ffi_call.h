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
#if !defined(_WIN32) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700 /* sigaction, SA_SIGINFO (before any system header) */
#endif
${c_api}
${common}

#include <signal.h>
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

/* Rows [r0, r1) (r0 a multiple of 8). */
static void kt_run_rows(kt_kernel_fn *fn, int64_t r0, int64_t r1, int64_t ny,
                        void **args, void **outs, int64_t threads) {
  int64_t blocks = (r1 - r0 + 7) / 8;
  int64_t parts = threads < blocks ? threads : blocks;
  if (parts > KT_MAX_THREADS) parts = KT_MAX_THREADS;
  if (parts <= 1 || (r1 - r0) * ny <= (1 << 20)) {
    fn(r0, r1, ny, args, outs);
    return;
  }
#ifdef _WIN32
  fn(r0, r1, ny, args, outs);
#else
  kt_piece pieces[KT_MAX_THREADS];
  pthread_t ids[KT_MAX_THREADS];
  int started[KT_MAX_THREADS];
  for (int64_t k = 0; k < parts; k++) {
    int64_t a = r0 + blocks * k / parts * 8, b = r0 + blocks * (k + 1) / parts * 8;
    pieces[k] = (kt_piece){fn, a, b < r1 ? b : r1, ny, args, outs};
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

/* Ctrl-C: a call runs its rows by chunks of about KT_CHUNK_PAIRS pairs and
   stops between two chunks once SIGINT came (an error CANCELLED; Python's
   own handler, chained, then raises KeyboardInterrupt), as the CPU backend
   stops between its chunks (kerneltools/backend/_progress.py). The flag is
   set by a handler chained in front of the process's (Python's), installed
   by kt_watch_sigint; a call clears it when it starts. */
#define KT_CHUNK_PAIRS ((int64_t)1 << 27)
static volatile sig_atomic_t kt_interrupted = 0;
#ifndef _WIN32
static struct sigaction kt_prev_sigint;

static void kt_on_sigint(int sig, siginfo_t *info, void *ctx) {
  kt_interrupted = 1;
  if (kt_prev_sigint.sa_flags & SA_SIGINFO) {
    if (kt_prev_sigint.sa_sigaction) kt_prev_sigint.sa_sigaction(sig, info, ctx);
  } else if (kt_prev_sigint.sa_handler != SIG_DFL && kt_prev_sigint.sa_handler != SIG_IGN) {
    kt_prev_sigint.sa_handler(sig);
  }
}
#endif

/* 1 when SIGINT reaches kt_on_sigint (installed now in front of the current
   handler, unless it is there already); 0 where SIGINT is ignored or has its
   default action (nothing to chain to), or on Windows. */
int kt_watch_sigint(void) {
#ifdef _WIN32
  return 0;
#else
  struct sigaction cur, mine;
  if (sigaction(SIGINT, NULL, &cur) != 0) return 0;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == kt_on_sigint) return 1;
  if (!(cur.sa_flags & SA_SIGINFO)
      && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN)) return 0;
  memset(&mine, 0, sizeof(mine));
  mine.sa_sigaction = kt_on_sigint;
  mine.sa_flags = SA_SIGINFO | (cur.sa_flags & (SA_RESTART | SA_ONSTACK));
  sigemptyset(&mine.sa_mask);
  kt_prev_sigint = cur;
  return sigaction(SIGINT, &mine, NULL) == 0;
#endif
}

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
  int64_t chunk = ny > 0 ? KT_CHUNK_PAIRS / ny / 8 * 8 : nx;
  if (chunk < 8) chunk = 8;
  kt_interrupted = 0;
  for (int64_t e = 0; e < bt.count; e++) {
    kt_batch_ptrs(&bt, e, ptrs);
    ptrs[bt.nbuf] = scratch;
    for (int64_t r0 = 0; r0 < nx; r0 += chunk) {
      if (kt_interrupted) {
        free(scratch);
        return kt_error_code(frame, "kerneltools: interrupted (Ctrl-C)",
                             XLA_FFI_Error_Code_CANCELLED);
      }
      kt_run_rows(fn, r0, r0 + chunk < nx ? r0 + chunk : nx, ny, ptrs, ptrs + nargs,
                  threads);
    }
  }
  free(scratch);
  return NULL;
}

XLA_FFI_Error *kt_ffi_reduce(XLA_FFI_CallFrame *frame) {
  if (kt_metadata(frame)) return NULL;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  return kt_ffi_reduce_impl(frame);
}
