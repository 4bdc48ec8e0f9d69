//! `cutpoint._native`: the Rust half of the `cutpoint` Python package (built with
//! maturin, abi3 for CPython 3.9 and newer). The pure-Python package `cutpoint`
//! (`python/cutpoint/`) wraps it: it serializes lists of dicts to the JSON the
//! library's readers take, parses compacted logs back, and defines the exception
//! classes this module raises (`cutpoint._errors`).
//!
//! - `tracker`: `Tracker`, `Record`, `Event` and the values they return.
//! - `formats`: `check`, `legal_cuts`, `detect`, `count_tokens`, `compact` (dispatching on a strategy
//!   name) on whole logs.
//! - `strategies`: `compact`'s strategies other than `summarize` (clear,
//!   clear-thinking, digest, slide, truncate, pipeline), run as the library's pipelines.
//! - `errors`: every library error as a Python exception with its facts; a Rust panic
//!   becomes a `CutpointError`, never a crash.
#![forbid(unsafe_code)]

use pyo3::prelude::*;

mod errors;
mod formats;
mod strategies;
mod tracker;

/// The native half of the `cutpoint` package. Import `cutpoint`, not this module.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<tracker::PyRecord>()?;
    m.add_class::<tracker::PyEvent>()?;
    m.add_class::<tracker::PyTracker>()?;
    m.add_class::<tracker::PyAppended>()?;
    m.add_class::<tracker::PyHandled>()?;
    m.add_class::<tracker::PyPendingCall>()?;
    m.add_class::<tracker::PyAnomalies>()?;
    m.add_class::<formats::PyViolation>()?;
    m.add_function(wrap_pyfunction!(formats::check, m)?)?;
    m.add_function(wrap_pyfunction!(formats::legal_cuts, m)?)?;
    m.add_function(wrap_pyfunction!(formats::detect, m)?)?;
    m.add_function(wrap_pyfunction!(formats::compact, m)?)?;
    m.add_function(wrap_pyfunction!(formats::count_tokens, m)?)?;
    m.add("STRATEGIES", formats::STRATEGIES.to_vec())?;
    m.add("AVAILABLE_STRATEGIES", formats::AVAILABLE.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
