//! The two macros every part's own invariant check uses (`check` methods return a
//! `String` naming what is wrong): a module of their own, so the parts do not import
//! [`invariants`](super::invariants), which imports them.

/// `Err(message)` from the enclosing function unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// `Err(message)` from the enclosing function unless the two values are equal.
macro_rules! ensure_eq {
    ($a:expr, $b:expr, $($fmt:tt)+) => {{
        let (a, b) = (&$a, &$b);
        if a != b {
            return Err(format!("{} ({:?} != {:?})", format!($($fmt)+), a, b));
        }
    }};
}

pub(crate) use {ensure, ensure_eq};
