// Shared by the cases of several GPUs: they need two, with peer access from device 0 to 1.
#pragma once
#include "../case.h"

// Returns from main (1, with a FAIL line) where there are not two GPUs with peer access.
#define NEED_PEER_ACCESS()                                                       \
    do {                                                                         \
        int need_devices = 0, need_can = 0;                                      \
        CK(cudaGetDeviceCount(&need_devices));                                   \
        if (need_devices < 2) { printf("FAIL needs 2 GPUs\n"); return 1; }       \
        CK(cudaDeviceCanAccessPeer(&need_can, 0, 1));                            \
        if (!need_can) { printf("FAIL no peer access 0 -> 1\n"); return 1; }     \
    } while (0)
