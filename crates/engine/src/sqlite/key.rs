//! How a job id is stored (schema v6 on, `migrations/0006_binary_ids.sql`): a job id in its
//! canonical UUID text form (what [`crate::job::new_job_id`] makes: 36 characters, lowercase,
//! hyphenated) is stored as its 16 bytes (a BLOB); any other id (written by hand into an old
//! file) stays TEXT. The conversion happens at the backend boundary: the public id is always the
//! text form.
//!
//! Columns holding a key: `jobs.id`, `job_attempts.job_id`, `job_output.job_id`,
//! `pruned_jobs.id`. Statements that get ids inside a JSON document convert them in SQL with
//! [`key_of_text`], the same rule as [`Key::of`].

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::sqlite::{SqliteArgumentsBuffer, SqliteTypeInfo, SqliteValueRef};
use sqlx::{Decode, Encode, Sqlite, Type, TypeInfo, ValueRef};

/// A stored job id. Variants are in SQLite's sort order (every TEXT sorts before every BLOB).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Key {
    /// An id that is not a canonical UUID, as it was given.
    Text(String),
    /// The 16 bytes of a canonical UUID id.
    Blob(Vec<u8>),
}

impl Key {
    /// The stored form of job id `id`.
    pub(super) fn of(id: &str) -> Key {
        match uuid::Uuid::parse_str(id) {
            Ok(u) if u.hyphenated().to_string() == id => Key::Blob(u.as_bytes().to_vec()),
            _ => Key::Text(id.to_owned()),
        }
    }

    /// A key that sorts after every stored one (a BLOB longer than 16 bytes of 0xff).
    pub(super) fn after_all() -> Key {
        Key::Blob(vec![0xff; 17])
    }

    /// The public (text) form of the id.
    pub(super) fn into_id(self) -> String {
        match self {
            Key::Text(s) => s,
            Key::Blob(b) => match uuid::Uuid::from_slice(&b) {
                Ok(u) => u.hyphenated().to_string(),
                // Never written by this backend; shown rather than refused.
                Err(_) => hex::encode(b),
            },
        }
    }
}

impl Type<Sqlite> for Key {
    fn type_info() -> SqliteTypeInfo {
        <Vec<u8> as Type<Sqlite>>::type_info()
    }

    fn compatible(ty: &SqliteTypeInfo) -> bool {
        <Vec<u8> as Type<Sqlite>>::compatible(ty)
    }
}

impl Encode<'_, Sqlite> for Key {
    fn encode_by_ref(&self, args: &mut SqliteArgumentsBuffer) -> Result<IsNull, BoxDynError> {
        match self {
            Key::Text(s) => <String as Encode<Sqlite>>::encode_by_ref(s, args),
            Key::Blob(b) => <Vec<u8> as Encode<Sqlite>>::encode_by_ref(b, args),
        }
    }
}

impl<'r> Decode<'r, Sqlite> for Key {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        if value.type_info().name() == "BLOB" {
            Ok(Key::Blob(<Vec<u8> as Decode<Sqlite>>::decode(value)?))
        } else {
            Ok(Key::Text(<String as Decode<Sqlite>>::decode(value)?))
        }
    }
}

/// The public id in column `name` of `row` (a [`Key`] column).
pub(super) fn id_of<I: sqlx::ColumnIndex<sqlx::sqlite::SqliteRow>>(
    row: &sqlx::sqlite::SqliteRow,
    name: I,
) -> Result<String, sqlx::Error> {
    sqlx::Row::try_get::<Key, _>(row, name).map(Key::into_id)
}

/// SQL for the stored key of the id text that expression `x` yields ([`Key::of`] in SQL: a
/// canonical UUID text becomes its 16 bytes, anything else stays as it is). `x` is evaluated
/// several times: pass a column or a cheap expression.
pub(super) fn key_of_text(x: &str) -> String {
    format!(
        "(CASE WHEN length({x}) = 36 AND {x} = lower({x}) AND substr({x}, 9, 1) = '-' \
         AND substr({x}, 14, 1) = '-' AND substr({x}, 19, 1) = '-' AND substr({x}, 24, 1) = '-' \
         AND length(unhex(replace({x}, '-', ''))) = 16 THEN unhex(replace({x}, '-', '')) ELSE {x} END)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_uuids_are_16_bytes_and_other_ids_stay_text() {
        let id = crate::job::new_job_id();
        let key = Key::of(&id);
        assert!(matches!(&key, Key::Blob(b) if b.len() == 16));
        assert_eq!(key.into_id(), id);
        for other in ["job-a", &id.to_uppercase(), &id.replace('-', ""), ""] {
            assert_eq!(Key::of(other), Key::Text(other.to_owned()), "{other}");
        }
        assert!(Key::after_all() > Key::of(&id) && Key::of(&id) > Key::of("zzz"));
    }

    /// The SQL conversion agrees with [`Key::of`] (run by the bundled SQLite).
    #[tokio::test]
    async fn the_sql_conversion_agrees_with_the_rust_one() {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .unwrap();
        let id = crate::job::new_job_id();
        let odd = format!("{}-", &id[..35]);
        for text in [
            id.as_str(),
            "job-a",
            &id.to_uppercase(),
            &id.replace('-', ""),
            &odd,
            "0123456789abcdef0123456789abcdef0123",
        ] {
            let sql = format!("SELECT {}", key_of_text("?1"));
            let got: Key = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .bind(text)
                .fetch_one(&mut c)
                .await
                .unwrap();
            assert_eq!(got, Key::of(text), "{text}");
        }
    }
}
