//! gpusan's stand-ins for driver functions: `hooks!` exports each under the driver's exact
//! (versioned) name and signature, counts its calls, and hands the real function, typed,
//! to the family's handler, or only forwards in a child that cannot use CUDA (see
//! [`super::fork`]) and after an internal error ([`super::boundary`]). The real address comes from whichever door handed the stand-in
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
///
/// Each stand-in is a panic-proof boundary ([`super::boundary`]): the handler gets the real
/// function through `tracked`, which notes the real result per thread, so that if the
/// handler panics the program still gets the driver's answer: the result noted if the real
/// call was made, else the real call made then. Either way exactly one real call.
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
                std::thread_local! {
                    /// The real function's result in this thread's current call, once made.
                    static RESULT: std::cell::Cell<Option<$crate::driver::types::CUresult>> =
                        const { std::cell::Cell::new(None) };
                }
                /// The real function, its result noted in `RESULT`. Never panics (it is
                /// `extern "C"`: a panic would abort).
                unsafe extern "C" fn tracked($($arg: $ty),*) -> $crate::driver::types::CUresult {
                    let real = $name::REAL.driver($crate::driver::hook::hooks!(@name $name));
                    let Some(f) = $crate::driver::resolve::typed::<unsafe extern "C" fn($($ty),*) -> $crate::driver::types::CUresult>(real)
                    else {
                        return $crate::driver::types::CUDA_ERROR_NOT_INITIALIZED;
                    };
                    let r = f($($arg),*);
                    RESULT.with(|c| c.set(Some(r)));
                    r
                }
                $name::CALLS.get().fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let real = $name::REAL.driver($crate::driver::hook::hooks!(@name $name));
                let Some(f) = $crate::driver::resolve::typed::<unsafe extern "C" fn($($ty),*) -> $crate::driver::types::CUresult>(real)
                else {
                    return $crate::driver::types::CUDA_ERROR_NOT_INITIALIZED; // the driver is not loaded
                };
                if $crate::driver::boundary::bypassed() {
                    return f($($arg),*);
                }
                let outer = RESULT.with(|c| c.replace(None));
                let tracked = tracked as unsafe extern "C" fn($($ty),*) -> $crate::driver::types::CUresult;
                let r = $crate::driver::boundary::contain(
                    stringify!($name),
                    || {
                        $crate::driver::boundary::test_panic(stringify!($name));
                        let r = $crate::driver::hook::hooks!(@call tracked, [$($real $handler)?], $($arg),*);
                        $crate::driver::boundary::test_panic(concat!(stringify!($name), ":after"));
                        r
                    },
                    || match RESULT.with(|c| c.get()) {
                        Some(r) => r,
                        None => f($($arg),*),
                    },
                );
                RESULT.with(|c| c.set(outer));
                $crate::driver::fault::seen(stringify!($name), r);
                r
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
