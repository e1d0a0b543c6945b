//! Input text as error messages show it. Errors quote the file they refuse, and that file
//! may be hostile or machine-written: control bytes would drive the user's terminal, bidi
//! overrides would make the shown text lie, and a minified module puts megabytes on one
//! line (and formatting widths past 65,535 panic in `std::fmt` and in miette). So quoted
//! text is escaped and cut to a window around the spot the error points at.

/// Characters shown before the marked spot at most; more are elided with `…`.
const BEFORE: usize = 60;
/// Characters of the marked spot shown at most.
const MARKED: usize = 80;
/// Characters shown after the marked spot at most.
const AFTER: usize = 40;
/// Characters a quoted token (`found `…``) keeps at most.
const QUOTE: usize = 60;

/// Whether `c` is shown as an escape: control characters and the invisible format
/// characters that reorder or hide text (bidi overrides and isolates, zero-width marks).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FEFF}')
        || matches!(c, '\u{FFF9}'..='\u{FFFB}')
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if hidden(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        c => out.push(c),
    }
}

/// `text` with every hidden character escaped (`\u{1b}`, `\t`).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

/// `text` escaped and cut to a few dozen characters, for quoting a token in a message.
pub fn quote(text: &str) -> String {
    let mut out = escape(&text.chars().take(QUOTE).collect::<String>());
    if text.chars().nth(QUOTE).is_some() {
        out.push('…');
    }
    out
}

/// A line of input as a snippet shows it, and where in it the marker goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The escaped, windowed text; tabs are shown as one space so columns line up.
    pub text: String,
    /// Byte range of the marked spot in `text`.
    pub marked: std::ops::Range<usize>,
}

impl Window {
    /// Characters of `text` before the marked spot: the marker's indent.
    pub fn marker_indent(&self) -> usize {
        self.text[..self.marked.start].chars().count()
    }

    /// Characters of the marked spot, at least one.
    pub fn marker_width(&self) -> usize {
        self.text[self.marked.clone()].chars().count().max(1)
    }
}

/// The window of `line` around the bytes `start..end` (clamped to the line and to char
/// boundaries), escaped: at most [`BEFORE`] characters before, [`MARKED`] of the spot and
/// [`AFTER`] after, with `…` where text was left out.
pub fn window(line: &str, start: usize, end: usize) -> Window {
    let start = floor_char(line, start.min(line.len()));
    let end = floor_char(line, end.clamp(start, line.len()));
    let before: Vec<char> = line[..start].chars().rev().take(BEFORE + 1).collect();
    let mut text = String::new();
    if before.len() > BEFORE {
        text.push('…');
    }
    for &c in before.iter().take(BEFORE).rev() {
        push_shown(&mut text, c);
    }
    let marked_start = text.len();
    let mut spot = line[start..end].chars();
    for c in spot.by_ref().take(MARKED) {
        push_shown(&mut text, c);
    }
    let marked_end = text.len();
    if spot.next().is_some() {
        text.push('…');
    } else {
        let mut after = line[end..].chars();
        for c in after.by_ref().take(AFTER) {
            push_shown(&mut text, c);
        }
        if after.next().is_some() {
            text.push('…');
        }
    }
    Window { text, marked: marked_start..marked_end }
}

fn push_shown(out: &mut String, c: char) {
    if c == '\t' {
        out.push(' ');
    } else {
        push_escaped(out, c);
    }
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped() {
        assert_eq!(escape("a\u{1b}[31m\u{7}\u{202e}b\tc"), "a\\u{1b}[31m\\u{7}\\u{202e}b\\tc");
        assert_eq!(escape("ünï ok"), "ünï ok");
    }

    #[test]
    fn a_long_quote_is_cut() {
        let q = quote(&"x".repeat(1000));
        assert_eq!(q.chars().count(), QUOTE + 1);
        assert!(q.ends_with('…'));
        assert_eq!(quote("short"), "short");
    }

    #[test]
    fn a_short_line_is_shown_whole() {
        let w = window("\tadd.s32 %r1, ;", 14, 15);
        assert_eq!(w.text, " add.s32 %r1, ;");
        assert_eq!((w.marker_indent(), w.marker_width()), (14, 1));
    }

    #[test]
    fn a_long_line_is_cut_around_the_spot() {
        let line = format!("{}#{}", " ".repeat(100_000), "y".repeat(100_000));
        let w = window(&line, 100_000, 100_001);
        assert_eq!(w.marker_indent(), BEFORE + 1);
        assert_eq!(&w.text[w.marked.clone()], "#");
        assert!(w.text.starts_with('…') && w.text.ends_with('…'), "{}", w.text);
        assert!(w.text.chars().count() <= BEFORE + MARKED + AFTER + 2);
    }

    #[test]
    fn a_long_spot_is_cut_and_the_marker_stays_inside_the_text() {
        let line = "z".repeat(10_000);
        let w = window(&line, 0, line.len());
        assert_eq!(w.marker_width(), MARKED);
        assert!(w.text.ends_with('…'));
    }

    #[test]
    fn offsets_inside_a_character_or_past_the_end_are_clamped() {
        let w = window("aé", 2, 99);
        assert_eq!(w.text, "aé");
        assert_eq!(w.marker_indent(), 1);
    }
}
