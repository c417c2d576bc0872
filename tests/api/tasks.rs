//! Task tests.
