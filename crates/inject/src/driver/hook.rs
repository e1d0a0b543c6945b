//! gpusan's stand-ins for driver functions: `hooks!` exports each under the driver's exact
//! (versioned) name and signature, counts its calls, and hands the real function, typed,
//! to the family's handler, or only forwards in a child that cannot use CUDA (see
//! [`super::fork`]). The real address comes from whichever door handed the stand-in
//! out (`dlsym` stores it in the stand-in's [`Slot`]), or is resolved on first use when the
//! program linked against `libcuda` directly.

use std::ffi::CStr;
use std::sync::atomic::AtomicU64;

use gpusan_runtime::per_process::PerProcess;

use super::resolve::Slot;

/// What the doors know of one stand-in.
pub struct Hook {
    pub name: &'static CStr,
    /// The exported stand-in's address.
    pub wrapper: usize,
    pub real: &'static Slot,
    /// Calls made in this process (a forked child counts its own).
    pub calls: &'static PerProcess<AtomicU64>,
}

/// `fn name(args);` forwards and counts; `fn name(args) => |real| handler(real, args…);`
/// hands the typed real function to a handler. Also defines `pub fn hooks() -> Vec<Hook>`,
/// the family's stand-ins in the order declared.
macro_rules! hooks {
    (@call $f:ident, [], $($arg:ident),*) => { $f($($arg),*) };
    (@call $f:ident, [$real:ident $handler:expr], $($arg:ident),*) => {{ let $real = $f; $handler }};
    (@name $name:ident) => {
        // SAFETY: NUL-terminated here.
        unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) }
    };
    ($( fn $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) $(=> |$real:ident| $handler:expr)? ; )*) => {
        $(
            #[allow(non_snake_case)]
            mod $name {
                pub static REAL: $crate::driver::resolve::Slot = $crate::driver::resolve::Slot::new();
                pub static CALLS: gpusan_runtime::per_process::PerProcess<std::sync::atomic::AtomicU64> =
                    gpusan_runtime::per_process::PerProcess::new(|| std::sync::atomic::AtomicU64::new(0));
            }

            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $crate::driver::types::CUresult {
                $name::CALLS.get().fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let real = $name::REAL.driver($crate::driver::hook::hooks!(@name $name));
                let Some(f) = $crate::driver::resolve::typed::<unsafe extern "C" fn($($ty),*) -> $crate::driver::types::CUresult>(real)
                else {
                    return $crate::driver::types::CUDA_ERROR_NOT_INITIALIZED; // the driver is not loaded
                };
                if $crate::driver::fork::forward_only() {
                    return f($($arg),*);
                }
                $crate::driver::hook::hooks!(@call f, [$($real $handler)?], $($arg),*)
            }
        )*

        /// This family's stand-ins, in the order declared.
        pub fn hooks() -> Vec<$crate::driver::hook::Hook> {
            vec![$($crate::driver::hook::Hook {
                name: $crate::driver::hook::hooks!(@name $name),
                wrapper: $name as *const () as usize,
                real: &$name::REAL,
                calls: &$name::CALLS,
            }),*]
        }
    };
}

pub(crate) use hooks;
