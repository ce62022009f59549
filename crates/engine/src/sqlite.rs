//! The embedded SQLite queue backend (on sqlx).
