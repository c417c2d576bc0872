//! The retry budget (contract 6.3): its local form is tested with the breaker and
//! retry tests (`breaker/`, `retry/`), its fleet form here.

mod replicas;
