//! The console's HTML: escaping, the page frame (navigation, sign-out form, the embedded
//! stylesheet and script), and small pieces the pages share. Every page leaves through
//! [`page`], which removes URL credentials and every registered secret from the whole text.

use axum::response::Html;

use super::access::{Role, Viewer};

/// `text` escaped for HTML text and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` percent-encoded for a query-string value.
pub fn url_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The navigation's entries: (path, label).
const NAV: [(&str, &str); 5] = [
    ("/", "Queue"),
    ("/jobs", "Jobs"),
    ("/workers", "Workers & locks"),
    ("/attention", "Attention"),
    ("/work", "Work"),
];

/// A whole page for `viewer`: title, navigation with `active` marked, `body`, the sign-out form.
/// The text is passed through [`crate::control::redact::redact`] (URL credentials, tokens,
/// the queue password) before it is sent.
pub fn page(title: &str, viewer: &Viewer, active: &str, body: &str) -> Html<String> {
    let nav: String = NAV
        .iter()
        .map(|(href, label)| {
            let class = if *href == active {
                " class=\"active\""
            } else {
                ""
            };
            format!("<a href=\"{href}\"{class}>{label}</a>")
        })
        .collect();
    let role = match viewer.role {
        Role::Admin => "admin",
        Role::Read => "read-only",
    };
    let logout = match &viewer.csrf {
        Some(csrf) => format!(
            "<form method=\"post\" action=\"/logout\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Sign out</button></form>",
            esc(csrf)
        ),
        None => String::new(),
    };
    let text = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>{title} · skillforge</title><link rel=\"stylesheet\" href=\"/assets/console.css\"></head>\
         <body data-role=\"{role}\"><header><span class=\"brand\">skillforge</span><nav>{nav}</nav><span class=\"who\">{role}</span>{logout}</header>\
         <main><h1>{title}</h1>{body}</main><script src=\"/assets/console.js\"></script></body></html>",
        title = esc(title)
    );
    Html(crate::control::redact::redact(&text))
}

/// A page without navigation (login, refusals).
pub fn page_plain(title: &str, body: &str) -> Html<String> {
    let text = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t} · skillforge</title>\
         <link rel=\"stylesheet\" href=\"/assets/console.css\"></head><body><main class=\"narrow\"><h1>{t}</h1>{body}</main></body></html>",
        t = esc(title)
    );
    Html(crate::control::redact::redact(&text))
}

/// The hidden CSRF field of an action form (empty for a bearer-token client).
pub fn csrf_field(viewer: &Viewer) -> String {
    viewer
        .csrf
        .as_deref()
        .map(|c| format!("<input type=\"hidden\" name=\"csrf\" value=\"{}\">", esc(c)))
        .unwrap_or_default()
}

/// A one-button action form posting to `action`, shown to admins only.
pub fn action_button(viewer: &Viewer, action: &str, label: &str, class: &str) -> String {
    if viewer.role != Role::Admin {
        return String::new();
    }
    format!(
        "<form method=\"post\" action=\"{}\" class=\"inline\">{}<button type=\"submit\" class=\"{class}\">{}</button></form>",
        esc(action),
        csrf_field(viewer),
        esc(label)
    )
}

/// A table with a header row; cells are HTML already.
pub fn table(headers: &[&str], rows: &[Vec<String>], empty: &str) -> String {
    if rows.is_empty() {
        return format!("<p class=\"empty\">{}</p>", esc(empty));
    }
    let head: String = headers
        .iter()
        .map(|h| format!("<th>{}</th>", esc(h)))
        .collect();
    let body: String = rows
        .iter()
        .map(|r| {
            format!(
                "<tr>{}</tr>",
                r.iter()
                    .map(|c| format!("<td>{c}</td>"))
                    .collect::<String>()
            )
        })
        .collect();
    format!("<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
}

/// A state badge.
pub fn state_badge(state: &str) -> String {
    format!("<span class=\"state state-{0}\">{0}</span>", esc(state))
}

/// A link to job `id`'s page.
pub fn job_link(id: &str) -> String {
    format!("<a href=\"/jobs/{0}\" class=\"job-id\">{0}</a>", esc(id))
}
