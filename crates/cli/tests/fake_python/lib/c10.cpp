// The fake libc10.so of the fake torch: the shim links against it, as against PyTorch's.
extern "C" int fake_c10(void) { return 0; }
