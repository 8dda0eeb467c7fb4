typedef ${real} real_t;
typedef double acc_t;
#define PI_R ((real_t)3.141592653589793238462643383279502884)
${defines}
#define KT_LT(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
