// gpusan-case: api
// expect: use_after_free_host
// expect-leak: none
// compute-sanitizer: no
// native: may-fail
// what: a child process opens its parent's buffer through an IPC handle, reads it whole, closes
//       it, then copies from it again (CUDA is expected to refuse the copy; the mapping is gone)
#include "case.h"
#include "ipc.h"
static int child(const char* hex) {
    static unsigned char back[4096];
    void* p;
    CK(cudaIpcOpenMemHandle(&p, ipc_unhex(hex), cudaIpcMemLazyEnablePeerAccess));
    CK(cudaMemcpy(back, p, 4096, cudaMemcpyDeviceToHost));
    CK(cudaIpcCloseMemHandle(p));
    TRY(cudaMemcpy(back, p, 16, cudaMemcpyDeviceToHost));
    BUG_DONE();
}
int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "child")) return child(argv[2]);
    IPC_PARENT(argv[0], 4096, 1);
}
