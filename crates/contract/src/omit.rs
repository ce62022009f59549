//! Predicates for Go's `omitempty`: a field is left out when it holds its type's zero value.

use serde::Deserialize as _;

pub(crate) fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}

pub(crate) fn is_zero_f64(value: &f64) -> bool {
    *value == 0.0
}

/// Reads a field Go may write as `null` (a nil slice or map without `omitempty`; facts §1: Go
/// writes empty lists as `null`) as its empty value. Used with `#[serde(default)]` so an absent
/// field (omitempty) reads the same.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
