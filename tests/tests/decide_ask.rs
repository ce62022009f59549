//! Asks that share one agent session, and the human pick at a terminal, through the built binary
//! (issue 15; seed: SkillOpt, "Live-traffic A/B interception (off by default, #482)",
//! "Champion-challenger A/B preferences (Mode B)"; S-65, S-72, S-73).
//!
//! Two `ask` processes on one session: the second waits for the first's session lock
//! (`agent-session:<template>:<runtime>`), so their agent runs never overlap — read from the
//! scripted agent's effects log (`scripted: effects`), in which the first ask's champion is
//! held open (`scripted: wait-for`) until the second is seen waiting. `ab` without `--pick` on a
//! terminal (a pty from `script(1)`, util-linux) prompts for the pick; with stdin not a terminal
//! it reads one line as before.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use skillforge_tests::decide::{ab, config, count, home, import, sql};
use skillforge_tests::{Home, Reaped, bin, wait_exit};

const WAIT: Duration = Duration::from_secs(60);

/// `skillforge --json ask planner PROMPT --pick a` in the background, stdout and stderr to files
/// `<home>/<name>.out` and `<home>/<name>.err`.
fn spawn_ask(home: &Home, name: &str, prompt: &str) -> Reaped {
    let out = std::fs::File::create(home.path().join(format!("{name}.out"))).unwrap();
    let err = std::fs::File::create(home.path().join(format!("{name}.err"))).unwrap();
    let child: Child = home
        .cmd()
        .args(["--json", "ask", "planner", prompt, "--pick", "a"])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap();
    Reaped(child)
}

fn read(home: &Home, file: &str) -> String {
    std::fs::read_to_string(home.path().join(file)).unwrap_or_default()
}

fn ask_jobs(home: &Home) -> usize {
    home.json(&["jobs", "list", "--limit", "1000"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "ask")
        .count()
}

/// `(event, label, pid)` of each effects line.
fn effects(path: &Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_owned(), f[1].to_owned(), f[2].to_owned())
        })
        .collect()
}

/// A home whose every ask is intercepted for a live A/B: `planner` imported with a pending
/// challenger, `live_ab_sample_rate = 1.0`, and the champion's arm past `bandit_min_samples` (2)
/// through two manual picks.
fn intercepting_home() -> Home {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    config(
        &home,
        "[skillopt]\nlive_ab_sample_rate = 1.0\nbandit_min_samples = 2\nreview_runtimes = []\n",
    );
    for seed in ["1", "2"] {
        ab(&home, &[&format!("Q{seed}"), "--pick", "a", "--seed", seed]);
    }
    home
}

// S-72: two asks on one session, each intercepted for a live A/B, hold its lock in turn.
#[test]
fn s72_two_concurrent_asks_on_one_session_take_its_lock_in_turn() {
    let home = intercepting_home();
    let (log, go) = (home.path().join("effects.log"), home.path().join("go"));
    let first_prompt = format!(
        "What changed first?\nscripted: effects {} first\nscripted: wait-for {}\n",
        log.display(),
        go.display()
    );
    let mut first = spawn_ask(&home, "first", &first_prompt);
    home.wait(WAIT, "the first ask's champion to start", || {
        effects(&log).first().map(|_| ())
    });
    let mut second = spawn_ask(
        &home,
        "second",
        &format!(
            "What changed next?\nscripted: effects {} second\n",
            log.display()
        ),
    );
    // The second ask either waits for the session, or (lock broken) submits its own answer job.
    home.wait(
        WAIT,
        "the second ask to wait for the session or to submit",
        || {
            (read(&home, "second.err").contains("waiting for session") || ask_jobs(&home) > 1)
                .then_some(())
        },
    );
    let waiting = read(&home, "second.err");
    assert!(
        waiting.contains("waiting for session `agent-session:planner:scripted`"),
        "{waiting}"
    );
    assert_eq!(
        ask_jobs(&home),
        1,
        "nothing of the second ask runs while the first holds the session"
    );
    std::fs::write(&go, "").unwrap();
    for ask in [&mut first, &mut second] {
        assert!(
            wait_exit(&mut ask.0, WAIT).success(),
            "{}\n{}",
            read(&home, "first.err"),
            read(&home, "second.err")
        );
    }
    let answer = |name: &str| -> Value {
        serde_json::from_str(&read(&home, &format!("{name}.out"))).unwrap()
    };
    let (a1, a2) = (answer("first"), answer("second"));
    // Fencing tokens come from one counter shared by every lock name (queue schema v7), so the
    // second ask's lock has a higher token than the first's: taken in turn, one lock per ask.
    let token_of = |asked: &Value| {
        asked["live_ab"]["session"]["fencing_token"]
            .as_u64()
            .unwrap_or_else(|| panic!("no session token: {asked}"))
    };
    assert!(
        token_of(&a2) > token_of(&a1),
        "one lock per ask, taken in turn: {a1}\n{a2}"
    );
    for (asked, token) in [(&a1, token_of(&a1)), (&a2, token_of(&a2))] {
        assert!(
            asked["answer"]
                .as_str()
                .unwrap()
                .starts_with("scripted answer "),
            "{asked}"
        );
        let live = &asked["live_ab"];
        assert_eq!(
            (live["intercepted"].as_bool(), live["arms_moved"].as_bool()),
            (Some(true), Some(true)),
            "{asked}"
        );
        assert_eq!(live["session"]["lock"], "agent-session:planner:scripted");
        assert_eq!(
            live["session"]["fencing_token"], token,
            "one lock per ask, taken in turn: {asked}"
        );
    }
    // The effects: the first ask's champion and challenger, then the second ask's, never interleaved.
    let seen = effects(&log);
    let order: Vec<(&str, &str)> = seen
        .iter()
        .map(|(e, l, _)| (e.as_str(), l.as_str()))
        .collect();
    let one = [
        ("start", "first"),
        ("end", "first"),
        ("start", "first"),
        ("end", "first"),
    ];
    let two = [
        ("start", "second"),
        ("end", "second"),
        ("start", "second"),
        ("end", "second"),
    ];
    assert_eq!(order, [one, two].concat(), "{seen:?}");
    for pair in seen.chunks(2) {
        assert_eq!(
            pair[0].2, pair[1].2,
            "each run ends before the next starts: {seen:?}"
        );
    }
    assert!(
        !format!("{}{}", read(&home, "first.err"), read(&home, "second.err"))
            .contains("session is busy")
    );
    let locks = home.json(&["locks"]);
    assert!(
        !locks
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["name"] == "agent-session:planner:scripted"),
        "released: {locks}"
    );
    assert_eq!(
        count(&home, "skillopt_ab_picks"),
        4,
        "two manual picks and one live pick per ask"
    );
}

/// `skillforge ab planner PROMPT --seed 7` on a pty (see [`on_a_terminal`]), typing `input`.
fn ab_on_a_terminal(home: &Home, input: &str) -> (bool, String) {
    on_a_terminal(
        home,
        &["ab", "planner", "Plan the release", "--seed", "7"],
        input,
    )
}

/// `skillforge --home HOME ARGS…` on a pty (`script -qec CMD /dev/null`), typing `input`: its
/// success and everything it printed (stdout and stderr share the terminal).
fn on_a_terminal(home: &Home, args: &[&str], input: &str) -> (bool, String) {
    let shell = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let line = [
        bin().display().to_string(),
        "--home".into(),
        home.path().display().to_string(),
    ]
    .iter()
    .map(|a| shell(a))
    .chain(args.iter().map(|a| shell(a)))
    .collect::<Vec<_>>()
    .join(" ");
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux is installed");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

// S-65 / S-73: an ask intercepted for a live A/B without --pick asks the human at a terminal; the
// pick is recorded like a manual one, and a skip leaves it owed to `live-ab pick`.
#[test]
fn s65_an_intercepted_ask_without_pick_prompts_on_a_terminal() {
    let home = intercepting_home();
    assert_eq!(count(&home, "skillopt_ab_picks"), 2);
    let (ok, shown) = on_a_terminal(
        &home,
        &["--json", "ask", "planner", "What changed?"],
        "maybe\nb\n",
    );
    assert!(ok, "{shown}");
    assert!(
        shown.contains("live A/B — Option A:") && shown.contains("Option B:"),
        "{shown}"
    );
    assert!(
        shown.contains("Which answer is better? [a/b, s to skip]"),
        "{shown}"
    );
    assert!(
        shown.contains("`maybe` is not a pick"),
        "asked again: {shown}"
    );
    assert!(
        shown.contains("\"pick_id\"") && !shown.contains("pending_pick"),
        "the pick was recorded, not owed: {shown}"
    );
    assert_eq!(
        count(&home, "skillopt_ab_picks"),
        3,
        "the live pick is recorded like a manual one"
    );
    assert_eq!(count(&home, "skillopt_live_ab_pending"), 0, "nothing owed");
    // `s` skips: the champion answer alone, and the pick owed to `live-ab pick`.
    let (ok, shown) = on_a_terminal(
        &home,
        &["--json", "ask", "planner", "What changed next?"],
        "s\n",
    );
    assert!(ok, "{shown}");
    assert!(
        shown.contains("pending_pick")
            && shown.contains("record the pick later with `skillforge live-ab pick"),
        "{shown}"
    );
    assert_eq!(
        count(&home, "skillopt_ab_picks"),
        3,
        "a skip records nothing"
    );
    assert_eq!(
        count(&home, "skillopt_live_ab_pending"),
        1,
        "the pick is owed"
    );
}

// S-65: without --pick on a terminal the shuffled answers are shown and the pick is prompted
// for; a non-pick is asked again, `s` skips and records nothing.
#[test]
fn s65_ab_without_pick_prompts_on_a_terminal() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    config(&home, "[skillopt]\nreview_runtimes = []\n");
    let (ok, shown) = ab_on_a_terminal(&home, "maybe\nb\n");
    assert!(ok, "{shown}");
    assert!(
        shown.contains("Option A:") && shown.contains("Option B:"),
        "{shown}"
    );
    assert!(
        shown.contains("Which answer is better? [a/b, s to skip]"),
        "{shown}"
    );
    assert!(
        shown.contains("`maybe` is not a pick"),
        "asked again: {shown}"
    );
    // The pick maps back through the seed's shuffle: `b` is the challenger when it was Option B.
    let challenger_was_b = shown.contains("the challenger planner@v2 was Option B");
    assert!(
        challenger_was_b || shown.contains("the challenger planner@v2 was Option A"),
        "{shown}"
    );
    let winner = if challenger_was_b {
        "challenger"
    } else {
        "champion"
    };
    let winning_version = if challenger_was_b {
        "planner@v2"
    } else {
        "planner@v1"
    };
    assert!(
        shown.contains(&format!(
            "recorded: {winner} wins, {winning_version} (the champion"
        )),
        "{shown}"
    );
    let expected = if challenger_was_b {
        "planner@v2/1"
    } else {
        "planner@v1/1"
    };
    let wins = sql(
        &home,
        "SELECT template_version_id || '/' || CAST(alpha - 1 AS INTEGER) FROM skillopt_bandit_arms WHERE alpha > 1",
    );
    assert_eq!(wins, expected, "one win for the picked role");
    assert_eq!(count(&home, "ranked_feedback_events"), 1);
    // `s` skips: the answers were shown, nothing is recorded.
    let (ok, shown) = ab_on_a_terminal(&home, "s\n");
    assert!(
        ok && shown.contains("skipped: no human pick recorded"),
        "{shown}"
    );
    assert_eq!(count(&home, "ranked_feedback_events"), 1);
    assert_eq!(count(&home, "skillopt_ab_picks"), 1);
}

// S-65: with stdin not a terminal the pick is one line of stdin; anything else records nothing.
#[test]
fn s65_ab_without_pick_reads_one_line_from_piped_stdin() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    config(&home, "[skillopt]\nreview_runtimes = []\n");
    let piped = |input: &str| {
        let mut child = home
            .cmd()
            .args(["ab", "planner", "Plan the release", "--seed", "7"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = piped("maybe\nb\n");
    assert_eq!(
        out.status.code(),
        Some(2),
        "one line only, never asked again"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no pick captured (expected `a` or `b`, got \"maybe\"); nothing recorded")
    );
    assert_eq!(count(&home, "ranked_feedback_events"), 0);
    let out = piped("b\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("recorded: "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(count(&home, "ranked_feedback_events"), 1);
}
