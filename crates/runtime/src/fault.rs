//! GPU faults as findings: a kernel that faults (an illegal or misaligned address, an
//! illegal instruction, a trap or a failed assertion), checked or not, ends the context, and
//! the program learns of it from some later call's error. The finding names the error, the
//! call that returned it, and the kernels launched in that context since the last
//! synchronization that succeeded (one of them faulted), each with its grid, block and
//! stream, and where the last of them was first launched.

use serde::{Deserialize, Serialize};

use crate::report::Stack;

/// The driver's sticky kernel errors (`cuda.h`): after one, the context is unusable.
pub fn fault_name(code: i32) -> Option<&'static str> {
    Some(match code {
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
fn meaning(code: i32) -> &'static str {
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
        _ => "a kernel failed",
    }
}

/// One launch that may have faulted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultLaunch {
    pub kernel: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub stream: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultDetails {
    /// `CUDA_ERROR_ILLEGAL_ADDRESS` and the like.
    pub error: String,
    pub code: i32,
    /// The call whose result told the program (`cuCtxSynchronize`, a copy, a launch).
    pub api: String,
    /// Launched in the context since the last synchronization that succeeded, oldest first
    /// (at most the last 16).
    pub kernels: Vec<FaultLaunch>,
    /// Where the program first launched the last of them.
    pub launch_stack: Stack,
    /// Where the program learnt of the fault.
    pub call_stack: Stack,
}

impl FaultDetails {
    pub fn headline(&self) -> String {
        format!("GPU fault: {} ({}): {}", self.error, self.code, meaning(self.code))
    }

    pub fn write(&self, f: &mut std::fmt::Formatter<'_>, bar: &str) -> std::fmt::Result {
        writeln!(f, "{bar}     Returned by {} after the kernel ended the context", self.api)?;
        match self.kernels.as_slice() {
            [] => writeln!(f, "{bar}     No kernel launch seen since the last synchronization that succeeded")?,
            [one] => writeln!(f, "{bar}     In kernel {}", launch(one))?,
            many => {
                writeln!(
                    f,
                    "{bar}     In one of the kernels launched since the last synchronization (the latest last):"
                )?;
                for k in many {
                    writeln!(f, "{bar}       {}", launch(k))?;
                }
            }
        }
        Ok(())
    }
}

fn launch(k: &FaultLaunch) -> String {
    let [gx, gy, gz] = k.grid;
    let [bx, by, bz] = k.block;
    format!("{} with grid ({gx},{gy},{gz}), block ({bx},{by},{bz}) on stream {:#x}", k.kernel, k.stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sticky_kernel_errors_are_faults() {
        for code in [700, 710, 714, 715, 716, 719] {
            assert!(fault_name(code).is_some(), "{code}");
        }
        for code in [0, 1, 2, 201, 400, 701, 720] {
            assert_eq!(fault_name(code), None, "{code}: not a fault (701: too many resources, 720: too large)");
        }
    }
}
