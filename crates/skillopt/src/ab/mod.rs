//! Champion/challenger A/B preferences, Mode B (seed: SkillOpt, "Champion-challenger A/B
//! preferences (Mode B, off by default)", "Live-traffic A/B interception", "Cross-family
//! LLM-judge auto-pairwise"; facts §6; S-64..S-82).
//!
//! * [`import`]: a reviewer's blinded paired-review packet (`pairwise import`) → ranked
//!   feedback events, one transaction.
//! * [`ask`]: the prompt a version answers an ask with, its declared runtimes.
//! * [`bandit`]: Beta-Bernoulli arms, exact and Monte Carlo P(challenger > champion), 95% credible
//!   intervals (pure).
//! * [`pick`]: the challenger choice, the label shuffle, a pick mapped back to its role, the
//!   ranked event one pick writes (pure).
//! * [`judge`]: the blind judge prompt, lenient verdict parsing, cross-family judge selection (pure).
//! * [`agreement`]: a judge's agreement with the humans (raw, Cohen's κ with its 95% interval)
//!   and whether it is measured (pure).
//! * [`jury`]: majority, disagreement and veto over several judges (pure).
//! * [`record`]: one A/B's rows and its bandit update in one transaction.
//! * [`live`]: whether a foreground ask is intercepted (pure).
//! * [`session`]: the runtime-session lock an intercepted ask holds once for both answers (S-72).
//!
//! **Architecture Invariant:** judge and jury rows are evidence only; only a human pick moves an
//! arm (S-80).

pub mod agreement;
pub mod ask;
pub mod bandit;
pub mod import;
pub mod judge;
pub mod jury;
pub mod live;
pub mod pick;
pub mod record;
pub mod session;

pub use import::{ImportError, ImportReport, PAIRWISE_SOURCE, PairwiseImport, import_pairwise};
