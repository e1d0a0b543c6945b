//! Which launches a run checks: compute-sanitizer's kernel filters (`--kernel-name`,
//! `--kernel-name-exclude`) and launch window (`--launch-skip`, `--launch-count`), with the
//! meaning its manual gives them, so its users' command lines mean the same under gpusan.
//!
//! A filter is a list of `key=value` pairs: `kernel_name`/`kne` (the kernel's full mangled
//! name), `kernel_substring`/`kns` (a substring of it), `regex` (a regular expression found
//! in it; it takes the rest of the option's value, commas included, as compute-sanitizer's
//! does). Filters add up: a kernel is checked when it matches some `--kernel-name` (or none
//! was given) and no `--kernel-name-exclude`. Every key matches the mangled name only, never
//! the demangled one, as compute-sanitizer's do (its `--help`, 2025.3.1 of CUDA 13.0: "the
//! full mangled name", "a substring in the mangled name", "a regular expression found in the
//! mangled name"): `kns=scale` selects `_Z5scalePfi`, `kns=scale(float` nothing. The window
//! counts only launches of kernels the filters let through: the first `skip` run
//! unchecked, then `count` are checked (0: all the rest), then the rest run unchecked.
//!
//! `gpusan run` parses the options ([`Pattern::parse_option`], so a bad one is an error
//! before the program starts) and hands the result to the injected library as one
//! environment variable ([`Selection::to_env`]); the library decides at each launch
//! ([`Selection::judge`]).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// How one pattern matches a kernel's mangled name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pattern {
    /// `kernel_name=`/`kne=`: the whole mangled name.
    Name(String),
    /// `kernel_substring=`/`kns=`: a substring of the mangled name.
    Substring(String),
    /// `regex=`: a regular expression found in the mangled name.
    Regex(String),
}

impl Pattern {
    /// The patterns of one `--kernel-name` (or `--kernel-name-exclude`) value.
    pub fn parse_option(value: &str) -> Result<Vec<Pattern>, String> {
        let mut out = Vec::new();
        let mut rest = value;
        while !rest.is_empty() {
            let Some((key, after)) = rest.split_once('=') else {
                return Err(format!(
                    "`{rest}` is no key=value pair (keys: kernel_name/kne, kernel_substring/kns, regex)"
                ));
            };
            if key == "regex" {
                regex::Regex::new(after).map_err(|e| format!("regex `{after}`: {e}"))?;
                out.push(Pattern::Regex(after.to_string()));
                break;
            }
            let (value, next) = after.split_once(',').unwrap_or((after, ""));
            if value.is_empty() {
                return Err(format!("`{key}=` has no value"));
            }
            out.push(match key {
                "kernel_name" | "kne" => Pattern::Name(value.to_string()),
                "kernel_substring" | "kns" => Pattern::Substring(value.to_string()),
                _ => {
                    return Err(format!("unknown key `{key}` (keys: kernel_name/kne, kernel_substring/kns, regex)"));
                }
            });
            rest = next;
        }
        if out.is_empty() {
            return Err("no pattern given".to_string());
        }
        Ok(out)
    }
}

/// A pattern ready to match.
#[derive(Debug)]
enum Matcher {
    Name(String),
    Substring(String),
    Regex(regex::Regex),
}

impl Matcher {
    fn new(p: &Pattern) -> Option<Matcher> {
        Some(match p {
            Pattern::Name(n) => Matcher::Name(n.clone()),
            Pattern::Substring(s) => Matcher::Substring(s.clone()),
            Pattern::Regex(r) => Matcher::Regex(regex::Regex::new(r).ok()?),
        })
    }

    fn matches(&self, mangled: &str) -> bool {
        match self {
            Matcher::Name(n) => mangled == n,
            Matcher::Substring(s) => mangled.contains(s.as_str()),
            Matcher::Regex(r) => r.is_match(mangled),
        }
    }
}

/// What `gpusan run` asked for, as it travels to the injected library.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    pub include: Vec<Pattern>,
    pub exclude: Vec<Pattern>,
    pub skip: u64,
    /// 0: no limit.
    pub count: u64,
}

impl Spec {
    /// Whether every launch is checked (nothing to decide at launches).
    pub fn is_all(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty() && self.skip == 0 && self.count == 0
    }

    pub fn to_env(&self) -> String {
        serde_json::to_string(self).expect("plain data")
    }

    /// The spec `gpusan run` wrote; `None` for anything else (then every launch is checked).
    pub fn from_env(text: &str) -> Option<Spec> {
        serde_json::from_str(text).ok()
    }
}

/// Why a launch ran unchecked, as the coverage report words it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unchecked {
    /// Matched no `--kernel-name`.
    NotSelected,
    /// Matched a `--kernel-name-exclude`.
    Excluded,
    /// Before the window (`--launch-skip`).
    Skipped,
    /// After the window (`--launch-count`).
    PastCount,
}

impl Unchecked {
    pub fn reason(self) -> &'static str {
        match self {
            Unchecked::NotSelected => "not selected by --kernel-name",
            Unchecked::Excluded => "excluded by --kernel-name-exclude",
            Unchecked::Skipped => "skipped by --launch-skip",
            Unchecked::PastCount => "past --launch-count",
        }
    }
}

/// The filters and the window, with the count of launches the filters let through.
#[derive(Debug)]
pub struct Selection {
    include: Vec<Matcher>,
    exclude: Vec<Matcher>,
    skip: u64,
    count: u64,
    matched: AtomicU64,
}

impl Selection {
    pub fn new(spec: &Spec) -> Selection {
        Selection {
            include: spec.include.iter().filter_map(Matcher::new).collect(),
            exclude: spec.exclude.iter().filter_map(Matcher::new).collect(),
            skip: spec.skip,
            count: spec.count,
            matched: AtomicU64::new(0),
        }
    }

    /// Whether the filters let kernel `mangled` be checked at all (the window aside).
    pub fn filters(&self, mangled: &str) -> Result<(), Unchecked> {
        if !self.include.is_empty() && !self.include.iter().any(|m| m.matches(mangled)) {
            return Err(Unchecked::NotSelected);
        }
        if self.exclude.iter().any(|m| m.matches(mangled)) {
            return Err(Unchecked::Excluded);
        }
        Ok(())
    }

    /// A launch of kernel `mangled`: checked, or why not. Counts it in the window when the
    /// filters let it through.
    pub fn judge(&self, mangled: &str) -> Result<(), Unchecked> {
        self.filters(mangled)?;
        let n = self.matched.fetch_add(1, Ordering::Relaxed);
        if n < self.skip {
            return Err(Unchecked::Skipped);
        }
        if self.count != 0 && n - self.skip >= self.count {
            return Err(Unchecked::PastCount);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(include: &str, exclude: &str, skip: u64, count: u64) -> Selection {
        let p = |v: &str| if v.is_empty() { Vec::new() } else { Pattern::parse_option(v).unwrap() };
        Selection::new(&Spec { include: p(include), exclude: p(exclude), skip, count })
    }

    #[test]
    fn keys_long_and_short_and_regex_takes_the_rest() {
        assert_eq!(
            Pattern::parse_option("kns=oob,kne=_Z4goodPi,kernel_name=a,kernel_substring=b").unwrap(),
            vec![
                Pattern::Substring("oob".into()),
                Pattern::Name("_Z4goodPi".into()),
                Pattern::Name("a".into()),
                Pattern::Substring("b".into())
            ]
        );
        assert_eq!(
            Pattern::parse_option("kns=x,regex=^_Z[0-9]+(a|b),c").unwrap(),
            vec![Pattern::Substring("x".into()), Pattern::Regex("^_Z[0-9]+(a|b),c".into())]
        );
        for bad in ["oob", "kns=", "name=oob", "regex=(", ""] {
            assert!(Pattern::parse_option(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn filters_match_the_mangled_name_and_exclusions_win() {
        let s = spec("kns=oob", "", 0, 0);
        assert_eq!(s.judge("_Z3oobPii"), Ok(()));
        assert_eq!(s.judge("_Z4goodPi"), Err(Unchecked::NotSelected));
        let s = spec("kne=_Z3oobPii", "", 0, 0);
        assert_eq!(s.judge("_Z3oobPii"), Ok(()));
        assert_eq!(s.judge("_Z3oobPiii"), Err(Unchecked::NotSelected), "a whole name, not a prefix");
        let s = spec("regex=^_Z[0-9]+o", "kns=Pii", 0, 0);
        assert_eq!(s.judge("_Z3oobPii"), Err(Unchecked::Excluded));
        assert_eq!(s.judge("_Z3oobPf"), Ok(()));
        assert_eq!(spec("", "kns=good", 0, 0).judge("_Z4goodPi"), Err(Unchecked::Excluded));
    }

    #[test]
    fn the_window_counts_only_launches_the_filters_let_through() {
        let s = spec("kns=oob", "", 1, 2);
        let seen: Vec<_> = ["oob", "good", "oob", "good", "oob", "oob"].iter().map(|k| s.judge(k)).collect();
        use Unchecked::*;
        assert_eq!(seen, vec![Err(Skipped), Err(NotSelected), Ok(()), Err(NotSelected), Ok(()), Err(PastCount)]);
        let s = spec("", "", 2, 0);
        let seen: Vec<_> = (0..4).map(|_| s.judge("k").is_ok()).collect();
        assert_eq!(seen, vec![false, false, true, true], "count 0: every launch after the skipped ones");
    }

    #[test]
    fn the_spec_travels_through_the_environment() {
        let s = Spec { include: Pattern::parse_option("regex=a,b").unwrap(), exclude: vec![], skip: 3, count: 1 };
        assert_eq!(Spec::from_env(&s.to_env()), Some(s.clone()));
        assert!(!s.is_all());
        assert!(Spec::default().is_all());
        assert_eq!(Spec::from_env("junk"), None);
    }
}
