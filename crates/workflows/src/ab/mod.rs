//! Champion/challenger A/B evidence (seed: "Champion-challenger A/B preferences"): [`import`]
//! turns a reviewer's blinded paired-review packet into ranked feedback events.

pub mod import;

pub use import::{ImportError, ImportReport, PAIRWISE_SOURCE, PairwiseImport, import_pairwise};
