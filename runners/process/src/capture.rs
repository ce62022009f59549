//! Output capture: reads a child's stdout or stderr concurrently, keeping only the most
//! recent bytes up to a cap and marking what was cut.

use std::collections::VecDeque;

use skillforge_runner::{CancellationToken, OutputFn, OutputStream};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::censor::CensorScanner;

/// Fixed start of the line that prefixes a captured stream cut at its cap.
///
/// A cut stream reads `[... truncated N bytes]\n` followed by the most recent bytes
/// (at most the cap), where `N` counts every byte dropped from the front, so a consumer
/// checks `tail.starts_with(TRUNCATION_MARKER)`. The marker line is not counted in the cap.
pub const TRUNCATION_MARKER: &str = "[... truncated ";

/// The full marker line for `n_truncated` dropped bytes, e.g. `[... truncated 42 bytes]\n`.
pub fn truncation_marker(n_truncated: u64) -> String {
    format!("{TRUNCATION_MARKER}{n_truncated} bytes]\n")
}

/// Size of one read from a child's pipe.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// The most recent bytes of a stream, at most `cap` of them, plus a count of what was dropped
/// (also used by the container runner for the logs it streams).
#[derive(Debug)]
pub struct TailBuffer {
    bytes: VecDeque<u8>,
    cap: usize,
    n_dropped: u64,
}

impl TailBuffer {
    /// An empty buffer keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            bytes: VecDeque::new(),
            cap,
            n_dropped: 0,
        }
    }

    /// Appends `chunk`, dropping the oldest bytes beyond the cap.
    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= self.cap {
            self.n_dropped += (self.bytes.len() + chunk.len() - self.cap) as u64;
            self.bytes.clear();
            self.bytes.extend(&chunk[chunk.len() - self.cap..]);
            return;
        }
        let n_over = (self.bytes.len() + chunk.len()).saturating_sub(self.cap);
        self.bytes.drain(..n_over);
        self.n_dropped += n_over as u64;
        self.bytes.extend(chunk);
    }

    /// The captured text: lossy UTF-8 of the kept bytes, prefixed with
    /// [`truncation_marker`] when anything was dropped. A cut inside a multi-byte character
    /// drops that character's remaining continuation bytes (counted as truncated) instead of
    /// rendering them as U+FFFD. Returns the text and the number of truncated bytes.
    pub fn into_text(mut self) -> (String, u64) {
        let kept = self.bytes.make_contiguous();
        if self.n_dropped == 0 {
            return (String::from_utf8_lossy(kept).into_owned(), 0);
        }
        // UTF-8 continuation bytes are 0b10xx_xxxx; a character has at most 3 of them.
        let n_partial = kept
            .iter()
            .take(3)
            .take_while(|&&byte| byte & 0b1100_0000 == 0b1000_0000)
            .count();
        let n_truncated = self.n_dropped + n_partial as u64;
        let mut text = truncation_marker(n_truncated);
        text.push_str(&String::from_utf8_lossy(&kept[n_partial..]));
        (text, n_truncated)
    }
}

/// What was captured from one stream.
#[derive(Debug)]
pub(crate) struct StreamCapture {
    /// The kept tail.
    pub(crate) tail: TailBuffer,
    /// A censor marker line was seen anywhere in the stream (only when scanning was asked for).
    pub(crate) has_censor_marker: bool,
    /// The stream was still open when `stop` fired.
    pub(crate) was_stopped: bool,
}

impl StreamCapture {
    /// Nothing captured (a stream that was not piped).
    pub(crate) fn empty() -> Self {
        Self {
            tail: TailBuffer::new(0),
            has_censor_marker: false,
            was_stopped: false,
        }
    }
}

/// Where a capture sends each chunk as it is read: live output (`RunContext::output`).
pub(crate) type LiveOutput = Option<(OutputFn, OutputStream)>;

/// Reads `reader` to its end (or until `stop` fires), keeping the last `cap` bytes and,
/// when `scan_censor`, looking for a censor marker line; every chunk read also goes to `live`.
///
/// A read error ends the capture early (logged); what was read so far is kept.
pub(crate) async fn capture_stream<R>(
    mut reader: R,
    cap: usize,
    scan_censor: bool,
    stop: CancellationToken,
    live: LiveOutput,
) -> StreamCapture
where
    R: AsyncRead + Unpin,
{
    let mut tail = TailBuffer::new(cap);
    let mut scanner = scan_censor.then(CensorScanner::default);
    let mut chunk = vec![0_u8; READ_CHUNK_BYTES];
    let mut was_stopped = false;
    loop {
        let n_read = tokio::select! {
            biased;
            read = reader.read(&mut chunk) => match read {
                Ok(n_read) => n_read,
                Err(error) => {
                    tracing::warn!(%error, "read child output failed; keeping what was read");
                    0
                }
            },
            () = stop.cancelled() => {
                was_stopped = true;
                0
            }
        };
        if n_read == 0 {
            break;
        }
        tail.push(&chunk[..n_read]);
        if let Some((output, stream)) = &live {
            output(*stream, &chunk[..n_read]);
        }
        if let Some(scanner) = scanner.as_mut() {
            scanner.feed(&chunk[..n_read]);
        }
    }
    let has_censor_marker = scanner.is_some_and(CensorScanner::finish);
    StreamCapture {
        tail,
        has_censor_marker,
        was_stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(cap: usize, chunks: &[&[u8]]) -> (String, u64) {
        let mut tail = TailBuffer::new(cap);
        for chunk in chunks {
            tail.push(chunk);
        }
        tail.into_text()
    }

    #[test]
    fn tail_buffer_keeps_the_most_recent_bytes() {
        let check = |cap: usize, chunks: &[&[u8]], expected: &str, expected_n: u64| {
            assert_eq!(
                captured(cap, chunks),
                (expected.to_owned(), expected_n),
                "cap {cap} {chunks:?}"
            );
        };
        check(10, &[b"hello"], "hello", 0);
        check(5, &[b"hel", b"lo"], "hello", 0);
        check(5, &[b"hello", b"!"], "[... truncated 1 bytes]\nello!", 1);
        check(3, &[b"ab", b"cdefgh"], "[... truncated 5 bytes]\nfgh", 5);
        check(3, &[b"abcdefgh", b"i"], "[... truncated 6 bytes]\nghi", 6);
        check(0, &[b"abc"], "[... truncated 3 bytes]\n", 3);
        check(0, &[], "", 0);
    }

    #[test]
    fn tail_buffer_never_splits_a_character() {
        // "€" is 3 bytes; every cap cuts at a different offset inside or between characters.
        let euros = "€".repeat(10);
        for cap in 1..=12 {
            let (text, n_truncated) = captured(cap, &[euros.as_bytes()]);
            let body = text
                .strip_prefix(&truncation_marker(n_truncated))
                .expect("marker");
            assert!(body.chars().all(|c| c == '€'), "cap {cap}: {body:?}");
            assert_eq!(body.len(), cap / 3 * 3, "cap {cap}");
            assert_eq!(n_truncated as usize + body.len(), euros.len(), "cap {cap}");
        }
    }

    #[tokio::test]
    async fn capture_stream_reads_to_end_and_scans_for_the_censor_marker() {
        let input: &[u8] = b"SKILLFORGE_CENSORED\nlast words";
        let capture = capture_stream(input, 5, true, CancellationToken::new(), None).await;
        assert!(capture.has_censor_marker);
        assert!(!capture.was_stopped);
        assert_eq!(
            capture.tail.into_text().0,
            "[... truncated 25 bytes]\nwords"
        );
    }
}
