//! Secrets out of everything the CLI writes to stderr (issue 32 item 8): the log writer every
//! tracing event goes through ([`RedactingStderr`]), the startup lines and the final `error:`
//! line pass through [`redact`], which removes the credentials of every URL
//! (`skillforge_engine::redact::redact_urls`) and every value registered with
//! [`register_secret`] (the queue password given apart from the URL, `--secret-env` values).

use std::io::Write;
use std::sync::{Mutex, PoisonError};

/// Values shorter than this are not registered: replacing every `a` or `1` in the log would
/// garble it without hiding anything worth hiding.
const MIN_SECRET_LEN: usize = 4;

static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Registers `value` as a secret of this process: from now on [`redact`] (and so every log
/// line) shows `***` in its place. Values shorter than 4 bytes are ignored.
pub fn register_secret(value: &str) {
    if value.len() < MIN_SECRET_LEN {
        return;
    }
    let mut secrets = SECRETS.lock().unwrap_or_else(PoisonError::into_inner);
    if !secrets.iter().any(|s| s == value) {
        secrets.push(value.to_owned());
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// `text` without URL credentials and without any registered secret.
pub fn redact(text: &str) -> String {
    let mut out = skillforge_engine::redact::redact_urls(text);
    for secret in SECRETS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
    {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), "***");
        }
    }
    out
}

/// The tracing writer: stderr, each write redacted. The fmt layer formats an event into one
/// buffer and writes it with one `write_all`, so a line is redacted whole.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedactingStderr;

impl Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(redact(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactingStderr {
    type Writer = RedactingStderr;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingStderr
    }
}

#[cfg(test)]
mod tests {
    use super::{redact, register_secret};

    #[test]
    fn registered_secrets_and_url_credentials_are_replaced() {
        register_secret("hunter2-queue");
        register_secret("abc");
        assert_eq!(
            redact("auth with hunter2-queue to redis://:pw@h:1 (abc)"),
            "auth with *** to redis://***@h:1 (abc)"
        );
    }
}
