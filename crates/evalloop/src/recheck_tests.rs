//! Recheck refusals, one test each, on sessions rendered in each runtime's real on-disk shape and
//! read back through [`crate::sessions::parse_session`].

use chrono::{DateTime, Duration, Utc};

use super::*;
use crate::ledger::tests::row;
use crate::sessions::{Source, parse_session};

fn t0() -> DateTime<Utc> {
    "2026-09-17T00:00:00Z".parse().unwrap()
}

/// A Claude Code project JSONL session: `n_turns` user/assistant exchanges, the last user turn
/// `last_user`, `loads` Skill tool calls of `skill`.
fn claude(id: &str, at: DateTime<Utc>, n_turns: usize, last_user: &str, loads: usize) -> Session {
    let mut lines = Vec::new();
    let ts = |k: usize| (at + Duration::seconds(k as i64)).to_rfc3339();
    for k in 0..n_turns {
        let user = if k + 1 == n_turns && k > 0 {
            last_user.to_owned()
        } else {
            format!("please write part {k} of the weekly notes")
        };
        lines.push(serde_json::json!({"type": "user", "sessionId": id, "timestamp": ts(2 * k), "message": {"role": "user", "content": user}}));
        let mut content =
            vec![serde_json::json!({"type": "text", "text": format!("Here is part {k}.")})];
        if k < loads {
            content.push(serde_json::json!({"type": "tool_use", "id": format!("t{k}"), "name": "Skill", "input": {"skill": "tldr"}}));
        }
        lines.push(serde_json::json!({"type": "assistant", "sessionId": id, "timestamp": ts(2 * k + 1), "message": {"role": "assistant", "content": content}}));
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    parse_session(Source::Claude, &text).unwrap()
}

fn codex(id: &str, at: DateTime<Utc>, last_user: &str) -> Session {
    let lines = [
        serde_json::json!({"timestamp": at.to_rfc3339(), "type": "session_meta", "payload": {"id": id}}),
        serde_json::json!({"timestamp": at.to_rfc3339(), "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "write the notes"}]}}),
        serde_json::json!({"timestamp": at.to_rfc3339(), "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}}),
        serde_json::json!({"timestamp": at.to_rfc3339(), "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": last_user}]}}),
    ];
    parse_session(
        Source::Codex,
        &lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap()
}

const FAIL: &str = "no, far too verbose - the reply needs bullets";
const FINE: &str = "thanks, ship it";

/// `n` sessions from `start`, one a day apart by hours, the first `n_fail` ending in a correction.
fn window(
    prefix: &str,
    start: DateTime<Utc>,
    n: usize,
    n_fail: usize,
    loads: usize,
) -> Vec<Session> {
    (0..n)
        .map(|i| {
            claude(
                &format!("{prefix}{i}"),
                start + Duration::hours(i as i64 * 3),
                2,
                if i < n_fail { FAIL } else { FINE },
                loads,
            )
        })
        .collect()
}

fn entry(signature: Option<&[&str]>, derived_from: Option<&str>) -> LedgerRow {
    let mut r = row("tldr", "adopt", t0());
    r.signature = signature.map(|w| Signature {
        words: w.iter().map(|s| s.to_string()).collect(),
        derived_from: derived_from.map(str::to_owned),
    });
    r
}

const SIG: &[&str] = &["verbose", "bullets"];

fn run(
    entry: &LedgerRow,
    sessions: &[Session],
    days_after: i64,
    installed: bool,
) -> RecheckOutcome {
    let input = RecheckInput {
        entry,
        description: Some("Keep replies short and scannable."),
        installed,
        sessions,
        now: t0() + Duration::days(days_after),
    };
    recheck(&input, &RecheckConfig::default())
}

/// 40 eligible sessions long before adoption whose corrections are about something else, so the
/// theme's words stay rare in the corpus.
fn filler() -> Vec<Session> {
    window("z", t0() - Duration::days(30), 40, 0, 0)
        .into_iter()
        .map(|mut x| {
            x.turns[2].text = "no, use the other folder for the release notes".into();
            x
        })
        .collect()
}

fn corpus(before_fail: usize, after_fail: usize, loads: usize) -> Vec<Session> {
    let mut s = window("b", t0() - Duration::days(8), 10, before_fail, 0);
    s.extend(window(
        "a",
        t0() + Duration::hours(1),
        10,
        after_fail,
        loads,
    ));
    s.extend(filler());
    s
}

fn skip_reason(o: &RecheckOutcome) -> &str {
    match &o.verdict {
        RecheckVerdict::Skip { reason } => reason,
        other => panic!("expected SKIP, got {other:?}: {}", o.line()),
    }
}

// E-19
#[test]
fn e19_drop_of_30_percent_confirms_no_drop_revokes() {
    let confirmed = run(&entry(Some(SIG), None), &corpus(8, 1, 1), 14, true);
    assert_eq!(
        confirmed.verdict,
        RecheckVerdict::AdoptConfirmed,
        "{}",
        confirmed.line()
    );
    assert!(
        confirmed.line().contains("loaded 10 times"),
        "{}",
        confirmed.line()
    );
    let revoked = run(&entry(Some(SIG), None), &corpus(8, 2, 1), 14, true);
    assert_eq!(
        revoked.verdict,
        RecheckVerdict::Revoked,
        "{}",
        revoked.line()
    );
}

// E-23
#[test]
fn e23_absent_evidence_skips_naming_why() {
    assert!(
        skip_reason(&run(&entry(None, None), &corpus(8, 1, 1), 14, true))
            .contains("no recorded signature")
    );
    assert!(
        skip_reason(&run(&entry(Some(SIG), None), &corpus(0, 0, 1), 14, true))
            .contains("baseline of zero")
    );
    let mut after_only = window("a", t0() + Duration::hours(1), 10, 1, 1);
    after_only.extend(filler().into_iter().map(|mut x| {
        x.started_at = t0() + Duration::days(2);
        x
    }));
    assert!(
        skip_reason(&run(&entry(Some(SIG), None), &after_only, 14, true)).contains("no baseline")
    );
    let few: Vec<Session> = corpus(8, 1, 1)
        .into_iter()
        .filter(|s| !s.id.starts_with('a') || s.id.as_str() < "a5")
        .collect();
    assert!(
        skip_reason(&run(&entry(Some(SIG), None), &few, 14, true)).contains("too few sessions")
    );
    let headless: Vec<Session> = window("h", t0() - Duration::days(3), 20, 0, 1);
    assert!(
        skip_reason(&run(&entry(Some(SIG), None), &headless, 14, true))
            .contains("no corrections to count")
    );
}

// E-24
#[test]
fn e24_under_five_days_since_adoption_skips() {
    assert!(
        skip_reason(&run(&entry(Some(SIG), None), &corpus(5, 0, 1), 4, true))
            .contains("fewer than 5 days")
    );
}

// E-25
#[test]
fn e25_common_words_dropped_and_fewer_than_two_refused() {
    let o = run(
        &entry(
            Some(&["other", "folder", "the", "release", "notes", "verbose"]),
            None,
        ),
        &corpus(8, 1, 1),
        14,
        true,
    );
    assert!(
        skip_reason(&o).contains("distinct word(s) left"),
        "{}",
        o.line()
    );
}

// E-26
#[test]
fn e26_more_than_20_distinct_words_refused_20_allowed() {
    let words: Vec<String> = (0..21).map(|i| format!("theme{i}")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    assert!(
        skip_reason(&run(&entry(Some(&refs), None), &corpus(8, 1, 1), 14, true))
            .contains("more than 20")
    );
    let mut twenty: Vec<&str> = refs[..18].to_vec();
    twenty.extend(SIG);
    let o = run(&entry(Some(&twenty), None), &corpus(8, 1, 1), 14, true);
    assert_eq!(o.verdict, RecheckVerdict::AdoptConfirmed, "{}", o.line());
}

// E-27
#[test]
fn e27_signature_lifted_from_the_description_refused_on_sight() {
    let tagged = run(
        &entry(Some(SIG), Some("skill_md:/s/tldr/SKILL.md")),
        &corpus(8, 1, 1),
        14,
        true,
    );
    assert!(skip_reason(&tagged).contains("refused on sight"));
    let lifted = run(
        &entry(Some(&["replies", "short", "scannable"]), None),
        &corpus(8, 1, 1),
        14,
        true,
    );
    assert!(
        skip_reason(&lifted).contains("own description"),
        "{}",
        lifted.line()
    );
}

// E-28
#[test]
fn e28_one_rare_word_counts_a_common_one_alone_does_not() {
    let texts: Vec<String> = (0..20)
        .map(|i| {
            if i < 2 {
                "no, verbose again".to_string()
            } else if i < 6 {
                "no, folder wrong".to_string()
            } else {
                "fine".to_string()
            }
        })
        .collect();
    let eps: Vec<Episode> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| Episode {
            session_id: i.to_string(),
            turn_idx: 2,
            text: t.clone(),
        })
        .collect();
    let stats = WordStats::of(&eps);
    let cfg = RecheckConfig::default();
    let words: BTreeSet<String> = ["verbose", "folder"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(
        matches("no, verbose", &words, &stats, &cfg),
        "verbose is in 10% of episodes: rare"
    );
    assert!(
        !matches("no, folder", &words, &stats, &cfg),
        "folder is in 20%: needs a second word"
    );
    assert!(matches("folder too verbose", &words, &stats, &cfg));
}

// E-29
#[test]
fn e29_single_turn_sessions_are_not_in_the_denominator() {
    let mut s = corpus(8, 1, 1);
    s.extend((0..7).map(|i| {
        claude(
            &format!("one{i}"),
            t0() + Duration::hours(2 + i),
            1,
            FAIL,
            1,
        )
    }));
    let o = run(&entry(Some(SIG), None), &s, 14, true);
    assert_eq!((o.n_before, o.n_after), (50, 10), "{}", o.line());
}

// E-30
#[test]
fn e30_length_confound_tied_to_the_verdicts_factor_skips() {
    let mut s: Vec<Session> = (0..20)
        .map(|i| {
            claude(
                &format!("b{i}"),
                t0() - Duration::days(8) + Duration::hours(i),
                2,
                if i < 2 { FAIL } else { FINE },
                0,
            )
        })
        .collect();
    s.extend((0..20).map(|i| {
        claude(
            &format!("a{i}"),
            t0() + Duration::hours(i + 1),
            10,
            if i < 10 { FAIL } else { FINE },
            1,
        )
    }));
    s.extend(filler());
    let o = run(&entry(Some(SIG), None), &s, 14, true);
    assert!(skip_reason(&o).contains("length confound"), "{}", o.line());
}

// E-31
#[test]
fn e31_zero_loads_skip_whichever_way_the_rate_moved() {
    let o = run(&entry(Some(SIG), None), &corpus(8, 0, 0), 14, true);
    assert!(
        skip_reason(&o).contains("loaded 0 times") && skip_reason(&o).contains("stays due"),
        "{}",
        o.line()
    );
    let mut codex_window = window("b", t0() - Duration::days(8), 10, 8, 0);
    codex_window.extend(filler());
    codex_window.extend((0..10).map(|i| {
        codex(
            &format!("c{i}"),
            t0() + Duration::hours(i + 1),
            if i < 2 { FAIL } else { FINE },
        )
    }));
    let o = run(&entry(Some(SIG), None), &codex_window, 14, true);
    assert!(
        skip_reason(&o).contains("loaded 0 times"),
        "Codex records no loads: SKIP, not revoke: {}",
        o.line()
    );
    let confirmed = run(&entry(Some(SIG), None), &corpus(8, 1, 1), 14, true);
    assert!(confirmed.line().contains("loaded 10 times"));
}

// E-32
#[test]
fn e32_a_zero_names_its_kind_and_only_colours_the_message() {
    let installed = run(&entry(Some(SIG), None), &corpus(8, 0, 0), 14, true);
    let absent = run(&entry(Some(SIG), None), &corpus(8, 0, 0), 14, false);
    assert!(skip_reason(&installed).contains("passed over"));
    assert!(skip_reason(&absent).contains("not installed"));
}

// E-33
#[test]
fn e33_opencode_loads_count_in_the_recheck() {
    let mut s = corpus(2, 1, 0);
    let oc = parse_session(
        Source::Opencode,
        &crate::sessions::tests::OPENCODE
            .replace("tldr-replies", "tldr")
            .replace(
                "1789894800000",
                &(t0() + Duration::hours(50)).timestamp_millis().to_string(),
            ),
    )
    .unwrap();
    s.push(oc);
    let o = run(&entry(Some(SIG), None), &s, 14, true);
    assert_eq!(o.loads, 1, "{}", o.line());
}
