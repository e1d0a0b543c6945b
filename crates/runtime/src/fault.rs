//! GPU faults: a kernel that faults (an illegal or misaligned address, an illegal
//! instruction, a trap or a failed assertion), checked or not, ends the context, and the
//! program learns of it from some later call's error: which errors those are, and what each
//! means. The finding (`report::FaultDetails`) names the error, the call that returned it,
//! and the kernels launched in that context since the last synchronization that succeeded
//! (one of them faulted), each with its grid, block and stream, and where each was first
//! launched.
//!
//! Launch stacks: unwinding the program's stack at every launch would cost PyTorch's
//! thousands of launches more than the launches themselves, so a kernel's stack is taken at
//! its first launch only, and a finding says so: it is where the program first launched
//! that kernel, which for most programs is where it launches it every time.

/// The driver's sticky kernel errors (`cuda.h` 13.0: "This leaves the process in an
/// inconsistent state and any further CUDA work will return the same error"): after one,
/// the context is unusable. `CUDA_ERROR_EXTERNAL_DEVICE` (911) is sticky too but comes from
/// a device outside CUDA, not a kernel.
pub fn fault_name(code: i32) -> Option<&'static str> {
    Some(match code {
        226 => "CUDA_ERROR_CONTAINED",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        702 => "CUDA_ERROR_LAUNCH_TIMEOUT",
        710 => "CUDA_ERROR_ASSERT",
        714 => "CUDA_ERROR_HARDWARE_STACK_ERROR",
        715 => "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        716 => "CUDA_ERROR_MISALIGNED_ADDRESS",
        717 => "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        718 => "CUDA_ERROR_INVALID_PC",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        721 => "CUDA_ERROR_TENSOR_MEMORY_LEAK",
        _ => return None,
    })
}

/// What the fault means, for the headline.
pub fn meaning(code: i32) -> &'static str {
    match code {
        700 => "a kernel accessed an illegal address",
        702 => "a kernel ran past the watchdog's limit",
        710 => "a device-side assertion failed",
        714 => "a kernel overflowed its call stack",
        715 => "a kernel executed an illegal instruction",
        716 => "a kernel accessed a misaligned address",
        717 => "a kernel accessed an address in the wrong address space",
        718 => "a kernel jumped to an invalid program counter",
        719 => "a kernel trapped or failed",
        721 => "a kernel exited without freeing its tensor memory",
        226 => "the GPU contained an error (an invalid access of a peer GPU's memory over NVLink, or a hardware error)",
        _ => "a kernel failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sticky_kernel_errors_are_faults() {
        for code in [700, 710, 714, 715, 716, 719] {
            assert!(fault_name(code).is_some(), "{code}");
        }
        assert_eq!(fault_name(226), Some("CUDA_ERROR_CONTAINED"));
        for code in [0, 1, 2, 201, 400, 701, 720, 911] {
            assert_eq!(fault_name(code), None, "{code}: not a fault (701: too many resources, 720: too large)");
        }
    }
}
