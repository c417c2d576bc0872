//! A token bucket (`rate_per_s` and `burst`, contract 8), pure: time is an
//! argument. With a fleet it also hears what the other replicas took, so that
//! every replica's bucket holds the fleet to one rate (`spent_elsewhere`).

use std::time::Duration;

use tokio::time::Instant;

use super::file::Rate;

/// A client key's bucket.
#[derive(Debug, Clone)]
pub struct Bucket {
    rate: Rate,
    /// Tokens as of `at`; below zero after the fleet took more than was here.
    tokens: f64,
    at: Instant,
    /// Tokens taken here and not yet told to the fleet.
    unshared: u64,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn new(rate: Rate, now: Instant) -> Bucket {
        Bucket {
            rate,
            tokens: f64::from(rate.burst),
            at: now,
            unshared: 0,
        }
    }

    /// The same bucket with another shape (the file changed): its tokens kept,
    /// within the new burst.
    pub fn reshaped(mut self, rate: Rate) -> Bucket {
        self.rate = rate;
        self.tokens = self.tokens.min(f64::from(rate.burst));
        self
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate.per_s).min(f64::from(self.rate.burst));
        self.at = now;
    }

    /// Takes a token at `now`, or says how long until one is due.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            self.unshared += 1;
            return Ok(());
        }
        Err(Duration::from_secs_f64(
            (1.0 - self.tokens) / self.rate.per_s,
        ))
    }

    /// The tokens taken here since the last call, for the fleet.
    pub fn take_unshared(&mut self) -> u64 {
        std::mem::take(&mut self.unshared)
    }

    /// `tokens` taken here could not be told to the fleet: tell them next time.
    pub fn not_shared(&mut self, tokens: u64) {
        self.unshared += tokens;
    }

    /// The other replicas took `tokens` since the last round.
    pub fn spent_elsewhere(&mut self, tokens: u64, now: Instant) {
        self.refill(now);
        // However much the fleet took, the wait for a token stays within a
        // burst's refill.
        self.tokens = (self.tokens - tokens as f64).max(-f64::from(self.rate.burst));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn rate(per_s: f64, burst: u32) -> Rate {
        Rate { per_s, burst }
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_sustained_rate() {
        let start = Instant::now();
        let mut bucket = Bucket::new(rate(2.0, 4), start);
        for _ in 0..4 {
            assert_eq!(bucket.take(start), Ok(()));
        }
        assert_eq!(
            bucket.take(start),
            Err(S / 2),
            "half a second to the next token"
        );
        tokio::time::advance(S / 4).await;
        assert_eq!(bucket.take(Instant::now()), Err(S / 4));
        tokio::time::advance(S / 4).await;
        assert_eq!(bucket.take(Instant::now()), Ok(()));
        // A long pause refills no more than the burst.
        tokio::time::advance(60 * S).await;
        let now = Instant::now();
        let taken = (0..10).filter(|_| bucket.take(now).is_ok()).count();
        assert_eq!(taken, 4);
        assert_eq!(bucket.take_unshared(), 9, "every token taken here, once");
        assert_eq!(bucket.take_unshared(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn what_the_fleet_took_is_taken_from_here_too() {
        let start = Instant::now();
        let mut bucket = Bucket::new(rate(1.0, 3), start);
        bucket.spent_elsewhere(3, start);
        assert_eq!(bucket.take(start), Err(S));
        // Far more than a burst elsewhere: the wait stays within a burst's refill.
        bucket.spent_elsewhere(1_000, start);
        assert_eq!(bucket.take(start), Err(4 * S));
        tokio::time::advance(4 * S).await;
        assert_eq!(bucket.take(Instant::now()), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_smaller_burst_from_an_edit_caps_the_tokens() {
        let start = Instant::now();
        let bucket = Bucket::new(rate(1.0, 10), start);
        let mut smaller = bucket.reshaped(rate(1.0, 2));
        assert_eq!(smaller.take(start), Ok(()));
        assert_eq!(smaller.take(start), Ok(()));
        assert_eq!(smaller.take(start), Err(S));
    }
}
