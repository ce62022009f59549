//! Credentials out of text that is shown or logged: the user-info part of every URL
//! (`redis://:secret@host` → `redis://***@host`) and the value of a `pass` / `password` query
//! parameter (`redis+unix:///run/redis.sock?pass=secret` → `…?pass=***`).
//!
//! Used by the Redis backend's errors, the CLI's startup lines and its log writer, which passes
//! every log line through [`redact_urls`] (issue 32 item 8).

/// Characters that end a URL inside free text (log lines, error chains, quoted names).
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '<' | '>' | ')' | ']' | ',' | ';')
}

/// `text` with the credentials of every URL in it replaced by `***`: the user info between
/// `://` and the authority's last `@`, and the values of `pass=` / `password=` query parameters.
/// Text without `://` is returned unchanged.
pub fn redact_urls(text: &str) -> String {
    if !text.contains("://") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(scheme_end) = rest.find("://") {
        let (head, tail) = rest.split_at(scheme_end + 3);
        out.push_str(head);
        let url_len = tail.find(ends_url).unwrap_or(tail.len());
        let (url, after) = tail.split_at(url_len);
        out.push_str(&redact_one(url));
        rest = after;
    }
    out.push_str(rest);
    out
}

/// One URL after its `scheme://`.
fn redact_one(url: &str) -> String {
    let authority_len = url.find(['/', '?', '#']).unwrap_or(url.len());
    let (authority, path) = url.split_at(authority_len);
    let mut out = match authority.rfind('@') {
        Some(at) => format!("***{}", &authority[at..]),
        None => authority.to_owned(),
    };
    match path.split_once('?') {
        Some((before, query)) => {
            out.push_str(before);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((name, _)) if matches!(name, "pass" | "password") => format!("{name}=***"),
                    _ => param.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(path),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact_urls;

    #[test]
    fn credentials_in_urls_are_replaced_and_the_rest_is_kept() {
        let check = |text: &str, expected: &str| assert_eq!(redact_urls(text), expected, "{text}");
        check("redis://127.0.0.1:6379", "redis://127.0.0.1:6379");
        check(
            "redis://:s3cret@10.0.0.1:6379/2",
            "redis://***@10.0.0.1:6379/2",
        );
        check(
            "rediss://worker:p@ss@redis.example:6380",
            "rediss://***@redis.example:6380",
        );
        check(
            "worker w-1 on redis queue redis://default:hunter2@h:1; labels os=linux",
            "worker w-1 on redis queue redis://***@h:1; labels os=linux",
        );
        check(
            "connect to `redis://u:x@h:1`: refused; again redis://:y@h2",
            "connect to `redis://***@h:1`: refused; again redis://***@h2",
        );
        check(
            "redis+unix:///run/redis.sock?db=1&pass=s3cret",
            "redis+unix:///run/redis.sock?db=1&pass=***",
        );
        check("https://example.com/a@b", "https://example.com/a@b");
        check("no url here: user:pw@host", "no url here: user:pw@host");
        check("", "");
    }
}
