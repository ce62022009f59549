//! Predicates for Go's `omitempty`: a field is left out when it holds its type's zero value.

pub(crate) fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}

pub(crate) fn is_zero_f64(value: &f64) -> bool {
    *value == 0.0
}
