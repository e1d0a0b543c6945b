//! Which kernels a run launched and which of them gpusan checked: every report says it, so a
//! run that checked nothing never reads as clean. Per kernel, its launches and the route
//! that checked it (PTX instrumented at load, built instrumented at build time, through
//! NVRTC, through a linker) or why it was not checked (machine code only, PTX too new, the
//! pass refused it, `api` mode). Merged across the processes of a run like the findings.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// One kernel of one module, as launched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelCoverage {
    /// Demangled where the name is a C++ or Rust symbol.
    pub name: String,
    pub mangled: String,
    pub launches: u64,
    /// The route that checked it; `None` when it ran unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_by: Option<String>,
    /// Why it ran unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchecked: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Coverage {
    pub kernels: Vec<KernelCoverage>,
    /// Filled in by [`Coverage::totals`] for readers of the JSON.
    #[serde(default)]
    pub totals: Totals,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Totals {
    pub kernels: u64,
    pub launches: u64,
    pub checked_kernels: u64,
    pub checked_launches: u64,
    /// Unchecked kernels and their launches, by reason.
    pub unchecked: BTreeMap<String, ReasonCount>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReasonCount {
    pub kernels: u64,
    pub launches: u64,
}

/// `mangled` demangled (Itanium C++, Rust), else as it is; C++ without its parameters.
pub fn demangle(mangled: &str) -> String {
    demangle_with(mangled, cpp_demangle::DemangleOptions::new().no_params().no_return_type())
}

/// `mangled` demangled with its parameters, which tell overloads apart (`oob(float*, int)`),
/// as a finding names the function it happened in; else as it is.
pub fn signature(mangled: &str) -> String {
    demangle_with(mangled, cpp_demangle::DemangleOptions::new().no_return_type())
}

fn demangle_with(mangled: &str, options: cpp_demangle::DemangleOptions) -> String {
    if let Ok(sym) = cpp_demangle::Symbol::new(mangled) {
        if let Ok(s) = sym.demangle_with_options(&options) {
            return s;
        }
    }
    if let Ok(d) = rustc_demangle::try_demangle(mangled) {
        return format!("{d:#}");
    }
    mangled.to_string()
}

impl KernelCoverage {
    pub fn new(mangled: &str, launches: u64, verdict: Result<&str, &str>) -> KernelCoverage {
        let (checked_by, unchecked) = match verdict {
            Ok(route) => (Some(route.to_string()), None),
            Err(why) => (None, Some(why.to_string())),
        };
        KernelCoverage { name: demangle(mangled), mangled: mangled.to_string(), launches, checked_by, unchecked }
    }

    fn key(&self) -> (&str, Option<&str>, Option<&str>) {
        (&self.mangled, self.checked_by.as_deref(), self.unchecked.as_deref())
    }
}

impl Coverage {
    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }

    /// Adds `k`'s launches to the same kernel with the same verdict, or adds it.
    pub fn add(&mut self, k: KernelCoverage) {
        match self.kernels.iter_mut().find(|e| e.key() == k.key()) {
            Some(e) => e.launches = e.launches.saturating_add(k.launches),
            None => self.kernels.push(k),
        }
        self.totals = self.compute_totals();
    }

    /// Folds in another process's coverage.
    pub fn merge(&mut self, other: Coverage) {
        for k in other.kernels {
            self.add(k);
        }
    }

    fn compute_totals(&self) -> Totals {
        let mut t = Totals::default();
        for k in &self.kernels {
            t.kernels += 1;
            t.launches = t.launches.saturating_add(k.launches);
            match &k.unchecked {
                None => {
                    t.checked_kernels += 1;
                    t.checked_launches = t.checked_launches.saturating_add(k.launches);
                }
                Some(why) => {
                    let r = t.unchecked.entry(why.clone()).or_default();
                    r.kernels += 1;
                    r.launches = r.launches.saturating_add(k.launches);
                }
            }
        }
        t
    }

    /// Kernels and launches, when kernels ran and not one launch was checked: a report with
    /// no error then says nothing of the kernels, and must say so.
    pub fn none_checked(&self) -> Option<(u64, u64)> {
        let t = self.compute_totals();
        (t.launches > 0 && t.checked_launches == 0).then_some((t.kernels, t.launches))
    }

    /// Kernels launched that were not checked.
    pub fn unchecked(&self) -> impl Iterator<Item = &KernelCoverage> {
        self.kernels.iter().filter(|k| k.unchecked.is_some())
    }

    /// The report's one line: `checked 41 of 57 kernels (2,391 of 2,604 launches); 16
    /// unchecked: 12 machine code only (cubin) (e.g. gemm, softmax), …`.
    pub fn summary_line(&self) -> String {
        let t = self.compute_totals();
        let mut line = format!(
            "checked {} of {} (launches: {} of {})",
            t.checked_kernels,
            plural(t.kernels, "kernel"),
            thousands(t.checked_launches),
            thousands(t.launches)
        );
        if t.unchecked.is_empty() {
            return line;
        }
        let _ = write!(line, "; {} unchecked:", t.kernels - t.checked_kernels);
        let mut reasons: Vec<_> = t.unchecked.iter().collect();
        reasons.sort_by(|a, b| b.1.launches.cmp(&a.1.launches).then(a.0.cmp(b.0)));
        for (i, (why, n)) in reasons.iter().enumerate() {
            let mut names: Vec<&KernelCoverage> =
                self.kernels.iter().filter(|k| k.unchecked.as_deref() == Some(why.as_str())).collect();
            names.sort_by_key(|k| std::cmp::Reverse(k.launches));
            let shown: Vec<&str> = names.iter().take(3).map(|k| short(&k.name)).collect();
            let more = if names.len() > 3 { ", …" } else { "" };
            let sep = if i == 0 { " " } else { "; " };
            let _ = write!(line, "{sep}{} {why} (e.g. {}{more})", n.kernels, shown.join(", "));
        }
        line
    }
}

/// A demangled name cut to what a reader scans for: no template arguments past 60 chars.
fn short(name: &str) -> &str {
    if name.len() <= 60 {
        return name;
    }
    let cut = name.char_indices().take_while(|(i, _)| *i < 60).last().map_or(0, |(i, c)| i + c.len_utf8());
    &name[..cut]
}

fn plural(n: u64, what: &str) -> String {
    format!("{} {what}{}", thousands(n), if n == 1 { "" } else { "s" })
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Coverage {
        let mut c = Coverage::default();
        c.add(KernelCoverage::new("_Z4gemmPfS_i", 2000, Ok("PTX at load")));
        c.add(KernelCoverage::new("vector_add", 391, Ok("NVRTC")));
        c.add(KernelCoverage::new(
            "_ZN2at6native18elementwise_kernelILi128ELi4EEEviT1_",
            200,
            Err("machine code only"),
        ));
        c.add(KernelCoverage::new("cub_scan", 13, Err("machine code only")));
        c
    }

    #[test]
    fn names_are_demangled() {
        assert_eq!(demangle("_Z4gemmPfS_i"), "gemm");
        assert_eq!(demangle("vector_add"), "vector_add");
        assert!(demangle("_ZN2at6native18elementwise_kernelILi128ELi4EEEviT1_")
            .starts_with("at::native::elementwise_kernel<128, 4>"));
        assert_eq!(demangle("_Z5scaleIfEvPT_S0_i"), "scale<float>", "no return type, no parameters");
        assert_eq!(signature("_Z3oobPfi"), "oob(float*, int)");
        assert_eq!(signature("_Z3oobPii"), "oob(int*, int)");
        assert_eq!(signature("saxpy"), "saxpy");
    }

    #[test]
    fn the_summary_counts_kernels_and_launches_and_names_the_unchecked() {
        let c = sample();
        assert_eq!(
            c.summary_line(),
            "checked 2 of 4 kernels (launches: 2,391 of 2,604); 2 unchecked: 2 machine code only \
             (e.g. at::native::elementwise_kernel<128, 4>, cub_scan)"
        );
        let t = &c.totals;
        assert_eq!((t.kernels, t.launches, t.checked_kernels, t.checked_launches), (4, 2604, 2, 2391));
        assert_eq!(t.unchecked["machine code only"], ReasonCount { kernels: 2, launches: 213 });
        assert_eq!(c.unchecked().count(), 2);
    }

    #[test]
    fn merging_adds_launches_of_the_same_kernel_and_verdict() {
        let mut a = sample();
        a.merge(sample());
        assert_eq!(a.kernels.len(), 4);
        assert_eq!(a.totals.launches, 2 * 2604);
        let mut b = Coverage::default();
        b.add(KernelCoverage::new("_Z4gemmPfS_i", 1, Err("api mode")));
        a.merge(b);
        assert_eq!(a.kernels.len(), 5, "another verdict is another line");
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Coverage>(&json).unwrap(), a);
    }

    #[test]
    fn a_run_that_checked_everything_says_so_in_one_short_line() {
        let mut c = Coverage::default();
        c.add(KernelCoverage::new("k", 1, Ok("PTX at load")));
        assert_eq!(c.summary_line(), "checked 1 of 1 kernel (launches: 1 of 1)");
    }
}
