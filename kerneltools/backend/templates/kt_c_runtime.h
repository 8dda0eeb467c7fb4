${vecmath}
${kt_exp}
#define KT_EXP(x) ${exp_fn}(x)
#define KT_EXPN(x) ${exp_fn}_nonpos(x) /* x <= 0 or NaN */
#define KT_EXP2N(z) ${exp2_fn}_nonpos(z) /* z <= 0 or NaN */
#define KT_EXP2(x) exp2(x)

typedef struct { ${state} } kt_state;

const char *kt_key(void) { return "${key}"; }
int64_t kt_state_size(void) { return (int64_t)sizeof(kt_state); }
/* 0 in a process forked after OpenMP started: its thread pool is gone there. */
static int kt_parallel = 1;
void kt_set_parallel(int on) { kt_parallel = on; }
