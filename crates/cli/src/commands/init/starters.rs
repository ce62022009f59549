//! The starter files of `skillforge init`, one per family, each valid as written (the end-to-end
//! test feeds each to the command that reads it) and naming its schema the way editors read it:
//! `$schema` in JSON, `# yaml-language-server: $schema=` in YAML, a comment in a SKILL.md's
//! frontmatter (Agent Skills frontmatter has no schema key).

/// One starter file.
pub struct Starter {
    /// Path relative to the home.
    pub path: &'static str,
    /// What it is and which command reads it (printed by `init`).
    pub what: &'static str,
    /// Its text.
    pub text: &'static str,
}

/// Every starter file, in the order `init` lists them.
pub const STARTERS: &[Starter] = &[
    Starter {
        path: "skills/example-skill/SKILL.md",
        what: "a skill (`template add DIR`, `eval forge --skill-dir DIR`)",
        text: SKILL_MD,
    },
    Starter {
        path: "evals/briefs/example-brief.json",
        what: "an eval brief (`eval brief --check FILE`, `eval forge --brief FILE`)",
        text: BRIEF,
    },
    Starter {
        path: "train/items.yml",
        what: "train review items (`train start --items-file FILE`)",
        text: ITEMS,
    },
    Starter {
        path: "optimize/spec.yml",
        what: "an optimize spec (`optimize init --spec FILE`)",
        text: OPTIMIZE_SPEC,
    },
    Starter {
        path: "bineval/questions.yml",
        what: "a BINEVAL question set (`binary run --set FILE`)",
        text: BINEVAL,
    },
];

const SKILL_MD: &str = "---
# Agent Skills frontmatter: `name` (= this directory's name) and `description` are all a skill needs.
# skillforge derives the rest (id from name, kind, version 1, capabilities, runtime_compatibility,
# tags, inputs, outputs) and `skillforge template show example-skill` lists what it derived;
# set any of them here to override. Schema: ../../schemas/agent-template-metadata.json
name: example-skill
description: Writes a one-line summary of a code change that names its user-visible effect first. Use when asked to summarize a diff or write a commit subject.
---
# Change summaries

When asked to summarize a change:

1. Read the diff and find what a user of the software will notice.
2. Write one line, at most 72 characters, that starts with that effect (\"Login accepts long passwords\"),
   not with the mechanism (\"Refactor password check\").
3. Add nothing else: no preamble, no bullet list.
";

const BRIEF: &str = r#"{
  "$schema": "../../schemas/eval-brief.json",
  "id": "example-summary",
  "prompt": "Summarize the change in change.diff in one line for the release notes. Reply with the line only.",
  "setup": {
    "change.diff": "--- a/login.py\n+++ b/login.py\n@@ -1,2 +1,2 @@\n-MAX_PASSWORD = 32\n+MAX_PASSWORD = 256\n"
  },
  "verify": "test -s \"$FORGE_FINAL\" && test \"$(grep -c . \"$FORGE_FINAL\")\" -le 2",
  "rubric": "Prefer the summary that names what a user notices (longer passwords are accepted) in one short line.",
  "output": "reply"
}
"#;

const ITEMS: &str = "# yaml-language-server: $schema=../schemas/train-items.json
# Review items of a train session: each iteration generates options for every item, a reviewer
# ranks them in the blind packet, and the optimizer turns the feedback into a candidate version.
items:
  - id: login-limit
    title: Summarize the password limit change
    input: |
      -MAX_PASSWORD = 32
      +MAX_PASSWORD = 256
  - id: user-cache
    title: Summarize the cache change
    input: adds an LRU cache in front of the user lookup
";

const OPTIMIZE_SPEC: &str = "# yaml-language-server: $schema=../schemas/optimize-spec.json
# An optimize spec: what to improve in a git repository, how to measure it, what may change.
# `measurement.command` runs in the repository's checkout and prints the metrics as JSON on
# stdout, e.g. {\"metrics\": {\"seconds\": 1.25}}. Edit the command and the paths for your project.
name: example
description: Make the benchmark faster without changing its results.
metric:
  primary: { name: seconds, direction: minimize }
measurement:
  command: sh measure.sh
  timeout_seconds: 300
scope:
  mutable: [src]
  immutable: [measure.sh]
stopping:
  max_iterations: 5
# Who edits the code in each experiment: `scripted` is a stand-in with no model (it edits only
# what SKILLFORGE_SCRIPTED_EDITS says, for trying the loop); claude, codex or opencode use a model.
execution:
  runtime: scripted
# The ideas to try first (the loop proposes more as it learns). Each says what to change and
# why: where the time goes, what you expect to gain and how sure you are. Replace this one.
hypotheses:
  - id: h1
    description: Read the input once instead of once per iteration
    category: io
    priority: high
    opportunity:
      workload: the benchmark that measure.sh runs
      baseline: the loop's first measurement
      evidence: a profile of the benchmark shows most time spent reading the input
      expected_benefit: 20% relative
      confidence: medium
      cost_and_risk: a small change in src/
      estimate: { benefit: 0.2, confidence: 0.5 }
";

const BINEVAL: &str = "# yaml-language-server: $schema=../schemas/bineval-question-set.json
# A BINEVAL question set: dimensions of yes/no questions about one output (\"yes\" = good).
# Questions with assertions (contains, not_contains, regex, not_regex) are answered
# deterministically (`binary run --deterministic`); the others by a reviewer model.
version: 1
template_or_task_kind: change-summary
dimensions:
  - name: form
    questions:
      - id: one-line
        text: Is the summary a single line?
        not_regex: '\\n.'
      - id: no-preamble
        text: Does it start without a preamble such as \"Here is\"?
        not_contains: [\"Here is\", \"Summary:\"]
  - name: content
    weight: 2
    questions:
      - id: names-effect
        text: Does it name an effect a user notices?
        violation_example: Refactor password check
        not_contains: [Refactor]
";
