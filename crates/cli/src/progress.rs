//! The progress line of `gpusan run` on a terminal: instrumenting a large module takes
//! seconds, and a terminal that shows nothing meanwhile looks hung. Only when standard
//! error is a terminal (`gpusan run` then sets `GPUSAN_PROGRESS`, and the injected library
//! names the module it is instrumenting in `report-<pid>.json.progress`), and only once
//! the instrumentation has taken [`AFTER`]: short ones, and every run whose output is
//! captured (tests, CI logs), show nothing.

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, SystemTime};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long instrumentation runs before the line appears.
pub const AFTER: Duration = Duration::from_secs(1);

/// Whether the run shows progress: its standard error is a terminal.
pub fn wanted() -> bool {
    std::io::stderr().is_terminal()
}

/// What a progress file in `dir` says, when the oldest has been there for `AFTER` at
/// `now`: the line to show, with how long it has taken.
pub fn due(dir: &Path, now: SystemTime) -> Option<String> {
    let entries = std::fs::read_dir(dir).ok()?;
    let oldest = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".json.progress")))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .min()?;
    let taken = now.duration_since(oldest.0).ok().filter(|t| *t >= AFTER)?;
    let what = std::fs::read_to_string(&oldest.1).ok()?;
    Some(format!("gpusan: {} ({} s)", what.trim(), taken.as_secs()))
}

/// The line, drawn on standard error while a progress file is due.
pub struct Line(Option<ProgressBar>);

impl Line {
    pub fn new() -> Line {
        Line(None)
    }

    /// Shows, updates or clears the line from `dir`'s progress files.
    pub fn update(&mut self, dir: &Path) {
        match (due(dir, SystemTime::now()), &self.0) {
            (Some(text), Some(bar)) => bar.set_message(text),
            (Some(text), None) => {
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.set_message(text);
                bar.enable_steady_tick(Duration::from_millis(120));
                self.0 = Some(bar);
            }
            (None, Some(_)) => self.clear(),
            (None, None) => {}
        }
    }

    /// Runs `f` (which writes to standard error) with the line out of its way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    pub fn clear(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A progress file is due only once it has been there for `AFTER`, and then says what
    /// is instrumented and for how long; no file, no line.
    #[test]
    fn a_progress_file_is_due_after_a_second() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(due(dir.path(), SystemTime::now()), None);
        let file = dir.path().join("report-7.json.progress");
        std::fs::write(&file, "instrumenting a module (3 KiB of PTX)").unwrap();
        let made = std::fs::metadata(&file).unwrap().modified().unwrap();
        assert_eq!(due(dir.path(), made + Duration::from_millis(300)), None);
        assert_eq!(
            due(dir.path(), made + Duration::from_millis(2500)).as_deref(),
            Some("gpusan: instrumenting a module (3 KiB of PTX) (2 s)")
        );
        std::fs::write(dir.path().join("report-7.json.events"), "").unwrap();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(due(dir.path(), made + Duration::from_secs(5)), None);
    }
}
