//! The retry policy (contract section 2): which failed attempts are retried and
//! which end the request, the back-off between them, the min remaining a retry
//! must leave, and stalls inside and past the early window.

mod failures;
mod stalls;
