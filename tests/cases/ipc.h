// Shared by the IPC cases: the parent exports a buffer and runs this program again as its
// child (fork, then exec, so the child starts CUDA afresh), the handle passed in hex.
#pragma once
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

static inline void ipc_hex(const cudaIpcMemHandle_t& h, char* out) {
    const unsigned char* b = (const unsigned char*)&h;
    for (size_t i = 0; i < sizeof h; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static inline cudaIpcMemHandle_t ipc_unhex(const char* in) {
    cudaIpcMemHandle_t h;
    unsigned char* b = (unsigned char*)&h;
    for (size_t i = 0; i < sizeof h; i++) sscanf(in + 2 * i, "%2hhx", &b[i]);
    return h;
}

// Runs `self child HEX` and waits: its exit status (-1 if it did not exit).
static inline int ipc_run_child(const char* self, const cudaIpcMemHandle_t& h) {
    char hex[2 * sizeof(cudaIpcMemHandle_t) + 1];
    ipc_hex(h, hex);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", self, "child", hex, (char*)0);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

// The parent's part of an IPC case: exports a buffer of `bytes` filled with `byte`, runs the
// child, frees the buffer, and ends as a bug case does.
#define IPC_PARENT(self, bytes, byte)                      \
    do {                                                   \
        void* ipc_a;                                       \
        cudaIpcMemHandle_t ipc_h;                          \
        CK(cudaMalloc(&ipc_a, (bytes)));                   \
        CK(cudaMemset(ipc_a, (byte), (bytes)));            \
        CK(cudaIpcGetMemHandle(&ipc_h, ipc_a));            \
        int ipc_st = ipc_run_child((self), ipc_h);         \
        printf("child exit %d\n", ipc_st);                 \
        CK(cudaFree(ipc_a));                               \
        BUG_DONE();                                        \
    } while (0)
