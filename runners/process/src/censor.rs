//! The censor marker: a stderr line with which a command declares its own result unusable.

/// Marker lines accepted on stderr; with exit code 125 they make the run `censored`.
/// `CE_OPTIMIZE_CENSORED` is the optimize loop seed's spelling, accepted for compatibility.
pub const CENSOR_MARKERS: &[&str] = &["SKILLFORGE_CENSORED", "CE_OPTIMIZE_CENSORED"];

/// Longest line (bytes) the streaming scanner inspects; longer lines are never markers.
#[cfg(feature = "exec")]
const MAX_MARKER_LINE_BYTES: usize = 1024;

/// True when `line` is a censor marker line: after trimming whitespace it is one of
/// [`CENSOR_MARKERS`], optionally followed by `:` or whitespace and a free-text reason
/// (`SKILLFORGE_CENSORED: flaky fixture`).
pub fn is_censor_line(line: &str) -> bool {
    let line = line.trim();
    CENSOR_MARKERS
        .iter()
        .any(|marker| match line.strip_prefix(marker) {
            Some(rest) => {
                rest.is_empty() || rest.starts_with(':') || rest.starts_with(char::is_whitespace)
            }
            None => false,
        })
}

/// Scans a byte stream chunk by chunk for a censor marker line, so a marker printed early
/// is still seen after the captured tail has dropped it.
#[cfg(feature = "exec")]
#[derive(Debug, Default)]
pub struct CensorScanner {
    /// The current, unfinished line (at most [`MAX_MARKER_LINE_BYTES`]).
    line: Vec<u8>,
    /// The current line already exceeded [`MAX_MARKER_LINE_BYTES`].
    is_line_overlong: bool,
    /// A marker line was seen.
    has_marker: bool,
}

#[cfg(feature = "exec")]
impl CensorScanner {
    /// Feeds the next chunk of the stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        for &byte in chunk {
            if byte == b'\n' {
                self.end_line();
            } else if self.line.len() < MAX_MARKER_LINE_BYTES {
                self.line.push(byte);
            } else {
                self.is_line_overlong = true;
            }
        }
    }

    /// Ends the stream (a last line without `\n` still counts) and says whether a marker line
    /// was seen.
    pub fn finish(mut self) -> bool {
        self.end_line();
        self.has_marker
    }

    fn end_line(&mut self) {
        if !self.is_line_overlong && !self.has_marker {
            self.has_marker = is_censor_line(&String::from_utf8_lossy(&self.line));
        }
        self.line.clear();
        self.is_line_overlong = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn censor_lines() {
        let check =
            |line: &str, expected: bool| assert_eq!(is_censor_line(line), expected, "{line:?}");
        check("SKILLFORGE_CENSORED", true);
        check("  CE_OPTIMIZE_CENSORED\r", true);
        check("SKILLFORGE_CENSORED: flaky fixture", true);
        check("SKILLFORGE_CENSORED flaky", true);
        check("SKILLFORGE_CENSORED_NOT", false);
        check("error: SKILLFORGE_CENSORED", false);
        check("", false);
    }

    #[cfg(feature = "exec")]
    #[test]
    fn scanner_finds_markers_across_chunks() {
        let check = |chunks: &[&[u8]], expected: bool| {
            let mut scanner = CensorScanner::default();
            for chunk in chunks {
                scanner.feed(chunk);
            }
            assert_eq!(scanner.finish(), expected, "{chunks:?}");
        };
        check(&[b"noise\nSKILLFORGE_", b"CENSORED\nmore noise\n"], true);
        check(&[b"noise\nCE_OPTIMIZE_CENSORED"], true);
        check(&[b"SKILLFORGE", b"_CENSORED_NOT\n"], false);
        check(&[b"nothing here\n"], false);
        let long = [b'x'; MAX_MARKER_LINE_BYTES + 10];
        check(&[&long, b"SKILLFORGE_CENSORED\n"], false);
        check(&[&long, b"\nSKILLFORGE_CENSORED\n"], true);
    }
}
