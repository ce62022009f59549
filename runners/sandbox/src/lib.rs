//! The sandbox runner: an independent `git clone --local` at a commit, then commands in it.
