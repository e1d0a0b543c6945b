// gpusan-case: check
// expect: clean
// expect-leak: none
// compute-sanitizer: no
// what: 8 blocks x 64 threads malloc and free blocks of varying size in a loop (bases are
//       reused, exactly filled, freed once); then each thread mallocs a block, stores it in a
//       cudaMalloc'd pointer table, a second kernel reads every block through the table and a
//       third frees them, checking every value
#include "case.h"
constexpr int kBlocks = 8, kThreads = 64, kRounds = 20, kN = kBlocks * kThreads;
__global__ void churn(int* sums) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int s = 0;
    for (int r = 0; r < kRounds; r++) {
        int n = 4 + (t + r) % 13;  // 16..64 bytes
        int* p = (int*)malloc(n * sizeof(int));
        if (!p) { s = -1000000; break; }
        for (int i = 0; i < n; i++) p[i] = i + r;
        for (int i = 0; i < n; i++) s += p[i];
        free(p);
    }
    sums[t] = s;
}
__global__ void make(int** table) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int n = 1 + t % 8;
    int* p = (int*)malloc(n * sizeof(int));
    if (p)
        for (int i = 0; i < n; i++) p[i] = t * 10 + i;
    table[t] = p;
}
__global__ void use(int** table, int* ok) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int* p = table[(t + 1) % kN];  // another thread's block
    int want = (t + 1) % kN, n = 1 + want % 8, good = p != nullptr;
    for (int i = 0; p && i < n; i++) good &= p[i] == want * 10 + i;
    ok[t] = good;
}
__global__ void release(int** table) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    free(table[t]);
    table[t] = nullptr;
}
int main() {
    int *sums, *ok;
    int** table;
    CK(cudaMalloc(&sums, kN * sizeof(int)));
    CK(cudaMalloc(&ok, kN * sizeof(int)));
    CK(cudaMalloc(&table, kN * sizeof(int*)));
    churn<<<kBlocks, kThreads>>>(sums);
    make<<<kBlocks, kThreads>>>(table);
    use<<<kBlocks, kThreads>>>(table, ok);
    release<<<kBlocks, kThreads>>>(table);
    static int hs[kN], hok[kN];
    CK(cudaMemcpy(hs, sums, sizeof hs, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hok, ok, sizeof hok, cudaMemcpyDeviceToHost));
    bool good = true;
    for (int t = 0; t < kN; t++) {
        int want = 0;
        for (int r = 0; r < kRounds; r++) {
            int n = 4 + (t + r) % 13;
            want += n * (n - 1) / 2 + n * r;
        }
        good &= hs[t] == want && hok[t] == 1;
    }
    CK(cudaFree(sums));
    CK(cudaFree(ok));
    CK(cudaFree(table));
    DONE(good);
}
