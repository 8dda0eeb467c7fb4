/* kerneltools: an XLA FFI handler (a custom call, CUDA platform) that
 * launches a generated CUDA kernel on XLA's stream. key ${key}
 *
 * Host code: compiled by the CPU backend's C compiler, no CUDA header, no
 * nvcc. The attribute `fn` is the kernel's CUfunction (NVRTC-compiled by
 * the CUDA backend, loaded in the device's primary context, which XLA
 * shares); `launch` the address of the driver's cuLaunchKernel (a function
 * of that signature: tests pass a CPU stand-in); `block`, `grid`, `smem` its
 * launch shape; `nx`, `ny` its first two arguments. The buffers are its
 * arguments (row-major, the CUDA backend's layout), then its outputs in the
 * kernel's order (float outputs first). With `stream` = 1 the launch goes
 * on the stream that XLA gives the call (XLA_FFI_Stream_Get); 0 (tests on
 * the CPU platform, which has none) passes a null stream. Batch axes as in
 * the CPU handler (xla_ffi_common.h): one launch per batch entry, in order
 * on that stream. Nothing waits on the host: XLA orders the stream. */
${c_api}
${common}
#include <stdio.h>

/* cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra) */
typedef int kt_launch_fn(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, unsigned, void *, void **, void **);

const char *kt_key(void) { return "${key}"; }

/* The stream XLA runs the call on (NULL and an error where there is none). */
static XLA_FFI_Error *kt_stream(XLA_FFI_CallFrame *frame, void **stream) {
  XLA_FFI_Stream_Get_Args args;
  memset(&args, 0, sizeof(args));
  args.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  args.ctx = frame->ctx;
  XLA_FFI_Error *err = frame->api->XLA_FFI_Stream_Get(&args);
  *stream = err ? NULL : args.stream;
  return err;
}

static XLA_FFI_Error *kt_ffi_cuda_impl(XLA_FFI_CallFrame *frame) {
  int64_t fn, launch, block, grid, smem, nx, ny, on_stream;
  if (!kt_int_attr(frame, "fn", &fn) || !kt_int_attr(frame, "launch", &launch)
      || !kt_int_attr(frame, "block", &block) || !kt_int_attr(frame, "grid", &grid)
      || !kt_int_attr(frame, "smem", &smem) || !kt_int_attr(frame, "nx", &nx)
      || !kt_int_attr(frame, "ny", &ny) || !kt_int_attr(frame, "stream", &on_stream))
    return kt_error(frame, "kerneltools: the custom call lacks an attribute");
  if (!fn || !launch || block < 1 || grid < 0 || grid > 0x7fffffff || smem < 0)
    return kt_error(frame, "kerneltools: a bad launch shape");
  kt_batch bt;
  const char *why = kt_batch_init(frame, &bt);
  if (why) return kt_error(frame, why);
  void *stream = NULL;
  if (on_stream) {
    XLA_FFI_Error *err = kt_stream(frame, &stream);
    if (err) return err;
  }
  void *ptrs[KT_MAX_BUFFERS];
  void *params[KT_MAX_BUFFERS + 2];
  long long sizes[2] = {(long long)nx, (long long)ny};
  params[0] = &sizes[0];
  params[1] = &sizes[1];
  for (int64_t k = 0; k < bt.nbuf; k++) params[k + 2] = &ptrs[k];
  kt_launch_fn *run = (kt_launch_fn *)(intptr_t)launch;
  for (int64_t e = 0; e < bt.count && grid > 0; e++) {
    kt_batch_ptrs(&bt, e, ptrs);  /* params point at ptrs: the launch reads them */
    int rc = run((void *)(intptr_t)fn, (unsigned)grid, 1, 1, (unsigned)block, 1, 1,
                 (unsigned)smem, stream, params, NULL);
    if (rc != 0) {
      char msg[96];  /* (XLA_FFI_Error_Create copies the message) */
      snprintf(msg, sizeof(msg), "kerneltools: cuLaunchKernel failed (CUresult %d)", rc);
      return kt_error_code(frame, msg, XLA_FFI_Error_Code_INTERNAL);
    }
  }
  return NULL;
}

XLA_FFI_Error *kt_ffi_cuda_reduce(XLA_FFI_CallFrame *frame) {
  if (kt_metadata(frame)) return NULL;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  return kt_ffi_cuda_impl(frame);
}
