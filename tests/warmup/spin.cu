// A kernel that never returns: every thread spins on a flag nobody sets. Its launcher waits for
// it (a CUDA sync with no warm-up frame on the stack): a real hang, a timeout within the check's
// normal budget, however long a warm-up may take (tests/warmup/launchers.py: never_returns).
extern "C" __global__ void spin_forever(volatile int* flag)
{
    while (*flag == 0) {
    }
}
