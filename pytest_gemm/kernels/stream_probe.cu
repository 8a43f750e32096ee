// Holds a stream until the host releases it: one thread spins on a word of mapped host
// memory. The stream probe (stream_probe.py) puts this in front of a Python launcher's
// call, so work the launcher enqueues on the current stream cannot start, while work it
// puts on any other stream runs and shows up in C before the stream is released.
extern "C" __global__ void gemm_stream_hold(const volatile int* flag)
{
    while (*flag == 0) {
        __nanosleep(1000);
    }
}
