//! skillforge domain store: SQLite (sqlx) aggregates and the content-addressed blob store (DESIGN §6).
