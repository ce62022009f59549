//! The Redis queue backend (skillforge's own, on the `redis` crate).
