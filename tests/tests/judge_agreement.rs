//! Measuring the A/B judge against the humans, through the built binary (issue 34 item 12):
//! real `ab --judge --pick` runs (the scripted agent as both answering agent and judge, through
//! the real `agent` runner on the embedded queue) write each judge's own verdict beside the human
//! pick; `skillforge judge agreement` reports raw agreement and Cohen's κ with its 95% interval;
//! with `[skillopt] judge_kappa_floor` / `judge_min_paired_picks` a `--judge-only` pick counts
//! (its judge row is written) only once the judge is measured, and nothing changes without them.

use rand::{Rng, SeedableRng};
use serde_json::Value;
use skillforge_tests::Home;
use skillforge_tests::decide::{ab, config, home, import, sql};

const JUDGE: &str = "[skillopt]\nreview_runtimes = [\"scripted\"]\n";

/// The label `role` is shown under for `ab --seed seed` (the command's own shuffle: a seeded
/// `StdRng`'s first bool says whether the challenger is Option A).
fn label_of(role: &str, seed: u64) -> &'static str {
    let challenger_is_a = rand::rngs::StdRng::seed_from_u64(seed).random::<bool>();
    if (role == "challenger") == challenger_is_a {
        "a"
    } else {
        "b"
    }
}

/// One A/B with seed `seed` where the human picks `human` and the scripted judge picks `judge`
/// (roles); `human` `None` is `--judge-only`. Returns the command's JSON.
fn pick(home: &Home, seed: u64, human: Option<&str>, judge: &str) -> Value {
    let prompt = format!(
        "Plan release {seed}.\nscripted: judge-reply {{\"pick\": \"{}\", \"reasoning\": \"scripted\"}}",
        label_of(judge, seed)
    );
    let seed_s = seed.to_string();
    let mut args = vec![prompt.as_str(), "--seed", &seed_s];
    match human {
        Some(h) => args.extend(["--judge", "--pick", label_of(h, seed)]),
        None => args.push("--judge-only"),
    }
    let out = ab(home, &args);
    // a judge that is not measured gives no counted pick
    let counted = if out.get("judge_not_measured").is_some() {
        Value::Null
    } else {
        Value::from(judge)
    };
    assert_eq!(out["judge_winner"], counted, "seed {seed}: {out:#}");
    if let Some(h) = human {
        assert_eq!(out["human_winner"], h, "seed {seed}: {out:#}");
    }
    out
}

fn judge_rows(home: &Home) -> u64 {
    sql(
        home,
        "SELECT COUNT(*) FROM ranked_feedback_events WHERE source = 'skillopt-ab-judge'",
    )
    .parse()
    .unwrap()
}

// Issue 34 item 12: six paired picks (human, judge): 3× challenger/challenger, 2×
// champion/champion, 1× champion/challenger: 5 of 6 agree, κ = (5/6 − 1/2) / (1 − 1/2) = 2/3,
// Cohen's standard error √((5/6)(1/6) / (6 · 1/4)) = 0.3043, interval 0.0703 to 1 (clipped)
#[test]
fn judge_agreement_reports_kappa_with_its_interval_from_real_ab_rows() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    config(&home, JUDGE);
    let empty = home.run(&["judge", "agreement"]);
    assert!(
        String::from_utf8_lossy(&empty.stdout).contains("no judge has picked beside a human yet"),
        "{empty:?}"
    );
    let table = [
        ("challenger", "challenger"),
        ("challenger", "challenger"),
        ("challenger", "challenger"),
        ("champion", "champion"),
        ("champion", "champion"),
        ("champion", "challenger"),
    ];
    for (i, (h, j)) in table.iter().enumerate() {
        pick(&home, 100 + i as u64, Some(h), j);
    }
    let report = home.json(&["judge", "agreement"]);
    let judges = report["judges"].as_array().unwrap();
    assert_eq!(judges.len(), 1, "{report:#}");
    let j = &judges[0];
    assert_eq!(
        (j["runtime"].as_str(), j["model"].as_str()),
        (Some("scripted"), Some("")),
        "{report:#}"
    );
    let a = &j["agreement"];
    assert_eq!(
        (a["n"].as_u64(), a["agreements"].as_u64()),
        (Some(6), Some(5)),
        "{report:#}"
    );
    assert!((a["raw"].as_f64().unwrap() - 5.0 / 6.0).abs() < 1e-9);
    assert!(
        (a["kappa"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9,
        "{report:#}"
    );
    let lo = a["interval"][0].as_f64().unwrap();
    assert!(
        (lo - 0.0703).abs() < 5e-4 && a["interval"][1].as_f64() == Some(1.0),
        "{report:#}"
    );
    assert_eq!(report["gate"], Value::Null, "no gate configured");
    assert!(
        j.get("measured").is_none(),
        "without the gate nothing is said about counting: {report:#}"
    );
    let text = String::from_utf8_lossy(&home.run(&["judge", "agreement"]).stdout).into_owned();
    assert!(
        text.contains(
            "scripted (model not named): 5 of 6 agree (83%), κ 0.67 (95% interval 0.07 to 1.00)"
        ),
        "{text}"
    );
    assert!(!text.contains("p-value"), "{text}");
    // a judge-only A/B has no human pick: it adds nothing to the pairs
    pick(&home, 200, None, "challenger");
    assert_eq!(
        home.json(&["judge", "agreement"])["judges"][0]["agreement"]["n"].as_u64(),
        Some(6)
    );
}

// Issue 34 item 12: with the gate on, a `--judge-only` pick of a judge not yet measured is not
// counted (no judge row, said in the output); once six paired picks put κ's lower bound over the
// floor it counts; a higher floor stops it again; without the gate keys it counts as before and
// the output has no word about measuring
#[test]
fn a_judge_only_pick_counts_only_once_the_judge_is_measured() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    let gate = |floor: &str| {
        config(
            &home,
            &format!("{JUDGE}judge_kappa_floor = {floor}\njudge_min_paired_picks = 6\n"),
        )
    };
    gate("0.05");
    let first = pick(&home, 300, None, "challenger");
    let why = first["judge_not_measured"]
        .as_str()
        .unwrap_or_else(|| panic!("{first:#}"));
    assert!(
        why.contains("scripted (model not named) is not measured")
            && why.contains("0 paired pick(s) with a human, fewer than judge_min_paired_picks 6"),
        "{why}"
    );
    assert_eq!(
        judge_rows(&home),
        0,
        "an unmeasured judge's pick is not counted"
    );
    let table = [
        ("challenger", "challenger"),
        ("challenger", "challenger"),
        ("challenger", "challenger"),
        ("champion", "champion"),
        ("champion", "champion"),
        ("champion", "challenger"),
    ];
    for (i, (h, j)) in table.iter().enumerate() {
        pick(&home, 310 + i as u64, Some(h), j);
    }
    let rows_with_humans = judge_rows(&home);
    assert_eq!(
        rows_with_humans, 6,
        "a judge beside a human pick is recorded as before"
    );
    let report = home.json(&["judge", "agreement"]);
    assert_eq!(report["judges"][0]["measured"], true, "{report:#}");
    let counted = pick(&home, 330, None, "challenger");
    assert!(counted.get("judge_not_measured").is_none(), "{counted:#}");
    assert_eq!(
        judge_rows(&home),
        rows_with_humans + 1,
        "a measured judge's pick counts"
    );
    // κ's lower bound 0.07 is under a floor of 0.5
    gate("0.5");
    let refused = pick(&home, 331, None, "champion");
    assert!(
        refused["judge_not_measured"]
            .as_str()
            .is_some_and(|w| w.contains("lower bound 0.07 is below judge_kappa_floor 0.5")),
        "{refused:#}"
    );
    assert_eq!(judge_rows(&home), rows_with_humans + 1);
    let text = String::from_utf8_lossy(&home.run(&["judge", "agreement"]).stdout).into_owned();
    assert!(
        text.contains(
            "; not measured: κ's 95% interval lower bound 0.07 is below judge_kappa_floor 0.5"
        ),
        "{text}"
    );
    // off: counted as before, and nothing in the output about it
    config(&home, JUDGE);
    let off = pick(&home, 332, None, "champion");
    assert!(off.get("judge_not_measured").is_none(), "{off:#}");
    assert_eq!(judge_rows(&home), rows_with_humans + 2);
    // a half-configured gate is refused naming the key, before anything runs
    config(&home, &format!("{JUDGE}judge_kappa_floor = 0.2\n"));
    let out = home.run(&[
        "ab",
        "planner",
        "Plan release 400.",
        "--judge-only",
        "--seed",
        "400",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("judge_kappa_floor is set without judge_min_paired_picks"),
        "{out:?}"
    );
    assert_eq!(
        judge_rows(&home),
        rows_with_humans + 2,
        "nothing was recorded"
    );
}

/// `candidate decide planner@v2 --json`.
fn decide(home: &Home) -> Value {
    skillforge_tests::decide_json(home, &["candidate", "decide", "planner@v2"])
}

/// The step and reason a `candidate decide` stopped at (panics on a promotion).
fn stopped(decided: &Value) -> (u64, String) {
    assert_eq!(decided["decision"]["decision"], "notify", "{decided:#}");
    (
        decided["decision"]["step"].as_u64().unwrap(),
        decided["decision"]["reason"].as_str().unwrap().to_owned(),
    )
}

// S-59 (issue 34 item 12), end to end: a candidate with a `--judge-only` pick, under
// `auto_promote_require_measured_judge`, is held at step 3 while its judge is not measured —
// no gate configured, too few paired picks, κ's lower bound under the floor — each said; once the
// real A/B rows (human and judge picks of the same A/Bs) measure the judge above the floor, the
// guardrails pass and the bandit's picks promote it. With the switch off the judge is not read.
#[test]
fn s59_require_measured_judge_holds_a_candidate_until_its_judge_is_measured() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    // Mode B: the human picks' bandit confidence decides once step 3 passes
    let guardrails = "[skillopt]\nreview_runtimes = [\"scripted\"]\nauto_promote = true\n\
                      auto_promote_min_samples = 3\nauto_promote_min_score = 0.5\n\
                      auto_promote_min_confidence = 0.3\n";
    config(&home, guardrails);
    // a judge-only pick, counted (no gate yet)
    pick(&home, 500, None, "challenger");
    assert_eq!(judge_rows(&home), 1);
    let required = format!("{guardrails}auto_promote_require_measured_judge = true\n");
    config(&home, &required);
    let (step, why) = stopped(&decide(&home));
    assert_eq!(step, 3, "{why}");
    assert!(
        why.contains("no judge can be measured: set judge_kappa_floor and judge_min_paired_picks"),
        "{why}"
    );
    let gated = |floor: &str| {
        config(
            &home,
            &format!("{required}judge_kappa_floor = {floor}\njudge_min_paired_picks = 6\n"),
        )
    };
    gated("0.05");
    let (step, why) = stopped(&decide(&home));
    assert_eq!(step, 3, "{why}");
    assert!(
        why.contains("the candidate's --judge-only picks count")
            && why.contains("the judge scripted (model not named) is not measured")
            && why.contains("0 paired pick(s) with a human, fewer than judge_min_paired_picks 6"),
        "{why}"
    );
    // six real A/Bs with a human and the judge (κ 2/3, lower bound 0.07)
    let table = [
        ("challenger", "challenger"),
        ("challenger", "challenger"),
        ("challenger", "challenger"),
        ("champion", "champion"),
        ("champion", "champion"),
        ("champion", "challenger"),
    ];
    for (i, (h, j)) in table.iter().enumerate() {
        pick(&home, 510 + i as u64, Some(h), j);
    }
    gated("0.5");
    let (step, why) = stopped(&decide(&home));
    assert_eq!(step, 3, "{why}");
    assert!(
        why.contains("lower bound 0.07 is below judge_kappa_floor 0.5"),
        "{why}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending"
    );
    // measured at a floor of 0.05: step 3 passes, and the bandit's 6 pulls at P ≈ 0.5 ≥ 0.3 promote
    gated("0.05");
    let decided = decide(&home);
    assert_eq!(decided["decision"]["decision"], "promote", "{decided:#}");
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "current"
    );
}

// S-59: with the switch off (unset), a judge that is not measured does not stop the guardrails
// at step 3: the decision is the one it was before the switch existed.
#[test]
fn s59_off_an_unmeasured_judge_does_not_stop_step_3() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    config(
        &home,
        "[skillopt]\nreview_runtimes = [\"scripted\"]\nauto_promote = true\n\
         auto_promote_min_samples = 3\nauto_promote_min_score = 0.5\n",
    );
    pick(&home, 600, None, "challenger");
    let (step, why) = stopped(&decide(&home));
    assert_eq!(step, 6, "no auto-trace samples: {why}");
}
