//! What a run's transcript says beyond its answer: tokens and cost ([`Usage`]), an API error the
//! CLI met ([`ApiError`]) and the writes or commands its permission rules refused
//! ([`PermissionDenial`]). Read per format by [`crate::parse_transcript`] and carried in
//! [`crate::AgentReport`].

use serde::{Deserialize, Serialize};

/// Tokens and cost of one run, as its transcript reports them. Every figure is `None` when the
/// transcript does not report it ("unknown"), never 0 (issue 31 item 7).
///
/// JSON: `{"input_tokens": 2673, "output_tokens": 93, "cache_read_tokens": 0,
/// "cache_write_tokens": 0, "cost_usd": 0.0123}`; absent fields are unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens not served from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens (reasoning included where the runtime reports it apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Input tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Cost in US dollars as the runtime computed it (Claude Code's `total_cost_usd`, OpenCode's
    /// `cost`); Codex reports none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// Figures read from JSON are never NaN (JSON has no NaN), so equality is an equivalence.
impl Eq for Usage {}

impl Usage {
    /// True when no figure is known.
    pub fn is_unknown(&self) -> bool {
        *self == Usage::default()
    }

    /// Input plus output tokens (cache reads and writes included), when any token figure is known.
    pub fn total_tokens(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    }

    /// Adds `other` field by field; a field known on either side stays known.
    pub fn add(&mut self, other: &Usage) {
        fn sum<T: std::ops::Add<Output = T> + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            }
        }
        self.input_tokens = sum(self.input_tokens, other.input_tokens);
        self.output_tokens = sum(self.output_tokens, other.output_tokens);
        self.cache_read_tokens = sum(self.cache_read_tokens, other.cache_read_tokens);
        self.cache_write_tokens = sum(self.cache_write_tokens, other.cache_write_tokens);
        self.cost_usd = sum(self.cost_usd, other.cost_usd);
    }
}

/// The spend of several runs: their known figures summed, and how many runs reported no tokens
/// or no cost (so a total is never shown as complete when it is not).
///
/// JSON: `{"runs": 4, "usage": {...}, "runs_without_tokens": 0, "runs_without_cost": 4}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// Runs counted.
    pub runs: u32,
    /// The known figures, summed.
    pub usage: Usage,
    /// Runs whose transcript reported no token figure.
    pub runs_without_tokens: u32,
    /// Runs whose transcript reported no cost.
    pub runs_without_cost: u32,
}

/// As for [`Usage`]: no NaN reaches a spend.
impl Eq for Spend {}

impl Spend {
    /// Counts one run's usage (`None`: the run reported nothing).
    pub fn add_run(&mut self, usage: Option<&Usage>) {
        self.runs += 1;
        let usage = usage.copied().unwrap_or_default();
        if usage.total_tokens().is_none() {
            self.runs_without_tokens += 1;
        }
        if usage.cost_usd.is_none() {
            self.runs_without_cost += 1;
        }
        self.usage.add(&usage);
    }

    /// Adds another spend.
    pub fn merge(&mut self, other: &Spend) {
        self.runs += other.runs;
        self.usage.add(&other.usage);
        self.runs_without_tokens += other.runs_without_tokens;
        self.runs_without_cost += other.runs_without_cost;
    }

    /// One line for people: `12 345 tokens (in 12 000, out 345), $0.0123`, with what is unknown
    /// said as such (`cost unknown`, `cost unknown for 2 of 4 runs`); `no runs` when empty.
    pub fn human(&self) -> String {
        if self.runs == 0 {
            return "no runs".to_owned();
        }
        let tokens = match (self.usage.total_tokens(), self.runs_without_tokens) {
            (None, _) => "tokens unknown".to_owned(),
            (Some(total), missing) => {
                let mut s = format!(
                    "{total} tokens (in {}, out {})",
                    self.usage.input_tokens.unwrap_or(0)
                        + self.usage.cache_read_tokens.unwrap_or(0)
                        + self.usage.cache_write_tokens.unwrap_or(0),
                    self.usage.output_tokens.unwrap_or(0)
                );
                if missing > 0 {
                    s.push_str(&format!(", unknown for {missing} of {} runs", self.runs));
                }
                s
            }
        };
        let cost = match (self.usage.cost_usd, self.runs_without_cost) {
            (None, _) => "cost unknown".to_owned(),
            (Some(c), 0) => format!("${c:.4}"),
            (Some(c), missing) => {
                format!("${c:.4} (cost unknown for {missing} of {} runs)", self.runs)
            }
        };
        format!("{tokens}, {cost}")
    }
}

/// What kind of API failure a run met, which decides what happens next (issue 31 item 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiErrorKind {
    /// 401/403 or the CLI's own "not logged in": the environment, never retried.
    Auth,
    /// 429.
    RateLimit,
    /// 529 or an `overloaded_error`.
    Overloaded,
    /// Any other 5xx.
    Server,
    /// Any other 4xx (a request the API refused): the arm fails with the CLI's message.
    Request,
    /// An error event without a status the runner can read.
    Other,
}

impl ApiErrorKind {
    /// From an HTTP status (`None`: [`ApiErrorKind::Other`]).
    pub fn from_status(status: Option<u16>) -> Self {
        match status {
            Some(401 | 403) => ApiErrorKind::Auth,
            Some(429) => ApiErrorKind::RateLimit,
            Some(529) => ApiErrorKind::Overloaded,
            Some(500..=599) => ApiErrorKind::Server,
            Some(400..=499) => ApiErrorKind::Request,
            _ => ApiErrorKind::Other,
        }
    }

    /// Whether a later try may succeed (rate limit, overload, 5xx).
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            ApiErrorKind::RateLimit | ApiErrorKind::Overloaded | ApiErrorKind::Server
        )
    }

    /// `auth`, `rate_limit`, `overloaded`, `server`, `request`, `other`.
    pub fn label(self) -> &'static str {
        match self {
            ApiErrorKind::Auth => "auth",
            ApiErrorKind::RateLimit => "rate_limit",
            ApiErrorKind::Overloaded => "overloaded",
            ApiErrorKind::Server => "server",
            ApiErrorKind::Request => "request",
            ApiErrorKind::Other => "other",
        }
    }
}

/// An API error a run's transcript reports (Claude Code's `result` line with `is_error`,
/// Codex's `error` / `turn.failed`, OpenCode's `error` event). A run that shows one gave no
/// answer, whatever its final message says.
///
/// JSON: `{"kind": "request", "status": 400, "message": "API Error: 400 …"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// What kind of failure.
    pub kind: ApiErrorKind,
    /// The HTTP status, when the transcript gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The CLI's own message (at most 500 characters).
    pub message: String,
}

impl ApiError {
    /// An error of `status` (or read from `message` when `None`) with the CLI's `message`.
    pub fn new(status: Option<u16>, message: &str) -> Self {
        let status = status.or_else(|| status_in(message));
        let mut kind = ApiErrorKind::from_status(status);
        let lower = message.to_ascii_lowercase();
        if kind == ApiErrorKind::Other {
            if lower.contains("overloaded") {
                kind = ApiErrorKind::Overloaded;
            } else if lower.contains("rate limit")
                || lower.contains("rate_limit")
                || lower.contains("too many requests")
            {
                kind = ApiErrorKind::RateLimit;
            } else if lower.contains("unauthorized")
                || lower.contains("invalid api key")
                || lower.contains("authentication")
            {
                kind = ApiErrorKind::Auth;
            } else if lower.contains("high demand") || lower.contains("temporarily unavailable") {
                // Codex's wording for a 5xx (it drops the status).
                kind = ApiErrorKind::Server;
            } else if lower.contains("invalid_request_error") {
                kind = ApiErrorKind::Request;
            }
        }
        ApiError {
            kind,
            status,
            message: message.trim().chars().take(500).collect(),
        }
    }
}

/// The first HTTP status in an error message: `API Error: 400 …`, `unexpected status 429 Too
/// Many Requests`, `status code 500`.
fn status_in(message: &str) -> Option<u16> {
    let lower = message.to_ascii_lowercase();
    for marker in [
        "api error: ",
        "unexpected status ",
        "status code ",
        "status: ",
        "http ",
    ] {
        if let Some(at) = lower.find(marker) {
            let digits: String = lower[at + marker.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(code) = digits.parse::<u16>()
                && (400..600).contains(&code)
            {
                return Some(code);
            }
        }
    }
    None
}

/// A tool call the runtime's permission rules refused (Claude Code's `permission_denials`, a
/// Codex command that met a read-only file system, an OpenCode tool `error` naming a denied
/// permission).
///
/// JSON: `{"tool": "Write", "path": "/work/out.md", "message": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionDenial {
    /// The tool (`Write`, `Edit`, `shell`, `write`).
    pub tool: String,
    /// The file it was refused, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What the runtime said, when it said something (at most 300 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl PermissionDenial {
    /// One line for people: `Write of out.md refused`.
    pub fn human(&self) -> String {
        match &self.path {
            Some(path) => format!("{} of `{path}` refused", self.tool),
            None => format!("{} refused", self.tool),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_read_from_each_clis_wording() {
        let check = |message: &str, status: Option<u16>, kind: ApiErrorKind| {
            let e = ApiError::new(None, message);
            assert_eq!((e.status, e.kind), (status, kind), "{message}");
        };
        check(
            "API Error: 400 {\"type\":\"error\"}",
            Some(400),
            ApiErrorKind::Request,
        );
        check(
            "unexpected status 429 Too Many Requests: slow down",
            Some(429),
            ApiErrorKind::RateLimit,
        );
        check(
            "API Error: 529 overloaded",
            Some(529),
            ApiErrorKind::Overloaded,
        );
        check(
            "unexpected status 503 Service Unavailable",
            Some(503),
            ApiErrorKind::Server,
        );
        check(
            "API Error: 401 invalid x-api-key",
            Some(401),
            ApiErrorKind::Auth,
        );
        check("Overloaded", None, ApiErrorKind::Overloaded);
        check("something broke", None, ApiErrorKind::Other);
        assert!(
            ApiErrorKind::Server.is_transient()
                && !ApiErrorKind::Request.is_transient()
                && !ApiErrorKind::Auth.is_transient()
        );
    }

    #[test]
    fn spend_keeps_unknown_apart_from_zero() {
        let mut spend = Spend::default();
        assert_eq!(spend.human(), "no runs");
        spend.add_run(None);
        assert_eq!(spend.human(), "tokens unknown, cost unknown");
        spend.add_run(Some(&Usage {
            input_tokens: Some(100),
            output_tokens: Some(20),
            cost_usd: Some(0.5),
            ..Usage::default()
        }));
        assert_eq!(
            spend.human(),
            "120 tokens (in 100, out 20), unknown for 1 of 2 runs, $0.5000 (cost unknown for 1 of 2 runs)"
        );
        assert_eq!((spend.runs_without_tokens, spend.runs_without_cost), (1, 1));
        let back: Spend = serde_json::from_value(serde_json::to_value(spend).unwrap()).unwrap();
        assert_eq!(back, spend);
        assert_eq!(
            serde_json::to_value(Usage::default()).unwrap(),
            serde_json::json!({})
        );
    }
}
