//! Circuit breakers (contract 6.2): when one opens, the one probe of half-open,
//! the local retry budget (6.3) during an outage, and how long an opening lasts.

mod opens;
mod times;
