//! GitHub's primary and secondary rate limits as a pure decision: given a response's status,
//! headers and body, how long to wait before trying again (GitHub REST docs, "Rate limits for the
//! REST API" › "Exceeding the rate limit").
//!
//! * `retry-after: N` (secondary limits, 403 or 429) → wait N seconds.
//! * `x-ratelimit-remaining: 0` with `x-ratelimit-reset: EPOCH` (primary limit, 403 or 429) → wait
//!   until the reset time (at least one second).
//! * a 403/429 whose message names a secondary rate limit but carries neither header → wait one
//!   minute, doubled per attempt (GitHub: "wait for at least one minute", then exponentially longer).
//! * anything else is not a rate limit.

use std::time::Duration;

use http::{HeaderMap, StatusCode};

/// How long to wait after a rate-limited response, or `None` when it is not one. `attempt` is
/// 1 for the first retry; `now_epoch` is the current Unix time in seconds.
pub fn rate_limit_wait(
    status: StatusCode,
    headers: &HeaderMap,
    body: &str,
    attempt: u32,
    now_epoch: u64,
) -> Option<Duration> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(secs) = header("retry-after").and_then(|v| v.parse::<u64>().ok()) {
        return Some(Duration::from_secs(secs));
    }
    if header("x-ratelimit-remaining") == Some("0")
        && let Some(reset) = header("x-ratelimit-reset").and_then(|v| v.parse::<u64>().ok())
    {
        return Some(Duration::from_secs(reset.saturating_sub(now_epoch).max(1)));
    }
    let secondary = body.to_lowercase().contains("secondary rate limit");
    (secondary || status == StatusCode::TOO_MANY_REQUESTS).then(|| {
        Duration::from_secs(60u64.saturating_mul(1u64 << attempt.saturating_sub(1).min(6)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn waits_table() {
        let forbidden = StatusCode::FORBIDDEN;
        let table = [
            (forbidden, headers(&[("retry-after", "7")]), "", 1, Some(7)),
            (
                StatusCode::TOO_MANY_REQUESTS,
                headers(&[("retry-after", "3")]),
                "",
                1,
                Some(3),
            ),
            (
                forbidden,
                headers(&[
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-reset", "1030"),
                ]),
                "",
                1,
                Some(30),
            ),
            (
                forbidden,
                headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "900")]),
                "",
                1,
                Some(1),
            ),
            (
                forbidden,
                headers(&[]),
                "You have exceeded a secondary rate limit",
                1,
                Some(60),
            ),
            (
                forbidden,
                headers(&[]),
                "You have exceeded a secondary rate limit",
                3,
                Some(240),
            ),
            (
                StatusCode::TOO_MANY_REQUESTS,
                headers(&[]),
                "",
                2,
                Some(120),
            ),
            // A plain 403 (no permission) and the remaining-not-zero case are not rate limits.
            (
                forbidden,
                headers(&[("x-ratelimit-remaining", "4999")]),
                "Resource not accessible by integration",
                1,
                None,
            ),
            (
                StatusCode::NOT_FOUND,
                headers(&[("retry-after", "5")]),
                "",
                1,
                None,
            ),
            (StatusCode::OK, headers(&[]), "", 1, None),
        ];
        for (status, map, body, attempt, want) in table {
            assert_eq!(
                rate_limit_wait(status, &map, body, attempt, 1000),
                want.map(Duration::from_secs),
                "{status} {map:?} {body}"
            );
        }
    }
}
