//! The optimize loop's steps, one per file, in the order a tick takes them: [`locate`] (locating
//! measurements before the experiments they would change), [`experiment`] (one experiment from
//! dispatch to its selection decision; [`remote_exp`] for a detached worker), [`judging`] (judge
//! passes of a measured output), [`integrate`] (holdout, winner, runners-up). Each takes the
//! loop's [`crate::ctx::Ctx`] and applies what it decides to the experiment log itself.

pub mod experiment;
pub mod integrate;
pub mod judging;
pub mod locate;
pub mod remote_exp;
