//! Findings shown as they are found, not only at exit: a long job shows its first error
//! early. The injected library writes each new distinct finding of a process to its
//! `report-<pid>.json.events` file the moment it has it (a host check at the call, a
//! kernel's at the drain after a synchronization); a thread of `gpusan run` follows those
//! files while the program runs and prints each finding's text as it appears.
//!
//! The report's header line goes out before the first finding streamed, so the text reads as
//! one report: header, findings, and at exit the rest. The final report then leaves out
//! what was already shown (nothing is printed twice, the header included) and keeps the
//! rest: notes, findings only the final documents hold (leaks), and the summary. The JSON, SARIF and JUnit reports are made from the final documents as
//! before: streaming changes only when the text is printed.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use gpusan_runtime::report::{Document, EventLine, Report, TextConfig};

use crate::cs_compat::Presentation;

/// How often the events files are read while the program runs.
const POLL: Duration = Duration::from_millis(100);

/// Where the text report goes: standard error, or `--log-file`.
pub type Sink = Box<dyn Write + Send>;

/// The events files read so far and the findings shown.
pub struct Stream {
    dir: PathBuf,
    /// Per events file: bytes consumed, and a last line not yet complete.
    files: BTreeMap<PathBuf, (u64, Vec<u8>)>,
    /// Each finding shown, as its JSON (the same report serializes the same way in the
    /// events file and in the final document).
    shown: HashSet<String>,
    /// `--print-limit`, `--demangle`, `--show-backtrace`: a streamed finding is shown as the
    /// final text would show it, and counts against the same limit.
    presentation: Presentation,
    /// The report's header line, and whether it has been written.
    header: (String, bool),
    out: Sink,
}

impl Stream {
    /// Follows `dir`'s events files, writing onto `out`; `header` is the report's first line
    /// (`Document::header_line`), written before the first finding.
    pub fn new(dir: &Path, out: Sink, presentation: Presentation, header: String) -> Stream {
        Stream {
            dir: dir.to_path_buf(),
            files: BTreeMap::new(),
            shown: HashSet::new(),
            presentation,
            header: (header, false),
            out,
        }
    }

    /// Reads what the events files gained since the last poll and prints each finding not
    /// shown yet.
    pub fn poll(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut events: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".json.events")))
            .collect();
        events.sort();
        for path in events {
            for line in self.new_lines(&path) {
                // A line that does not read as a finding is left to the final report, which
                // says which file is damaged.
                if let Ok(line) = serde_json::from_slice::<EventLine>(&line) {
                    self.show(&line);
                }
            }
        }
        let _ = self.out.flush();
    }

    /// The complete lines `path` gained.
    fn new_lines(&mut self, path: &Path) -> Vec<Vec<u8>> {
        use std::io::{Read, Seek, SeekFrom};
        let (offset, partial) = self.files.entry(path.to_path_buf()).or_default();
        let Ok(mut file) = std::fs::File::open(path) else { return Vec::new() };
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(*offset)).is_err() || file.read_to_end(&mut bytes).is_err() {
            return Vec::new();
        }
        *offset += bytes.len() as u64;
        partial.extend_from_slice(&bytes);
        let Some(end) = partial.iter().rposition(|&b| b == b'\n') else { return Vec::new() };
        let rest = partial.split_off(end + 1);
        let complete = std::mem::replace(partial, rest);
        complete.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect()
    }

    /// A finding, and the process that made it where that process has a rank (a distributed
    /// job's).
    fn show(&mut self, line: &EventLine) {
        let report = &line.report;
        if self.presentation.limit().is_some_and(|l| self.shown.len() >= l) {
            return; // past --print-limit: in the JSON only (the final text's note says so)
        }
        let Ok(key) = serde_json::to_string(report) else { return };
        if self.shown.insert(key) {
            if !self.header.1 {
                self.header.1 = writeln!(self.out, "{}", self.header.0).is_ok();
            }
            let mut shaped = report.clone();
            self.presentation.shape_report(&mut shaped);
            let process =
                line.process.as_ref().filter(|p| p.rank.is_some()).map(|p| p.line() + "\n").unwrap_or_default();
            let _ = if self.presentation.text.verbose {
                writeln!(self.out, "{shaped:#}{process}=========")
            } else {
                writeln!(self.out, "{shaped}{process}=========")
            };
        }
    }

    fn was_shown(&self, report: &Report) -> bool {
        serde_json::to_string(report).is_ok_and(|k| self.shown.contains(&k))
    }

    /// The final text report of `doc`, less the findings already shown, and no more than
    /// `--print-limit` findings in all.
    pub fn final_text(&self, doc: &Document) -> String {
        let mut rest = doc.clone();
        rest.errors.retain(|e| !self.was_shown(&e.report));
        if let Some(l) = self.presentation.limit() {
            rest.errors.truncate(l.saturating_sub(self.shown.len()));
        }
        self.presentation.shape(&mut rest);
        rest.to_text_with(TextConfig { header_shown: self.header.1, ..self.presentation.text })
    }

    /// Writes the end of the text report.
    pub fn write(&mut self, text: &str) -> std::io::Result<()> {
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }
}

/// A [`Stream`] polled on its own thread while the program runs.
pub struct Follower {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Stream>,
}

impl Follower {
    /// Follows `stream`; with `progress`, also draws the progress line (`crate::progress`).
    pub fn start(mut stream: Stream, progress: bool) -> Follower {
        let (stop, stopped) = mpsc::channel::<()>();
        let mut line = progress.then(crate::progress::Line::new);
        let thread = std::thread::spawn(move || loop {
            match (stopped.recv_timeout(POLL), &mut line) {
                (Err(RecvTimeoutError::Timeout), Some(line)) => {
                    line.suspend(|| stream.poll());
                    line.update(&stream.dir);
                }
                (Err(RecvTimeoutError::Timeout), None) => stream.poll(),
                // Stopped (or gpusan is ending): a last read for what the processes wrote
                // at exit.
                (_, line) => {
                    if let Some(line) = line {
                        line.clear();
                    }
                    stream.poll();
                    return stream;
                }
            }
        });
        Follower { stop, thread }
    }

    /// Stops following, once everything written so far is shown.
    pub fn finish(self) -> Option<Stream> {
        let _ = self.stop.send(());
        self.thread.join().ok()
    }
}
