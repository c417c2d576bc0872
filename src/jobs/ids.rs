//! Job ids (contract 7.1): `job_` and 22 characters of `[A-Za-z0-9]` from 122
//! random bits, so knowing one id tells nothing about another. A fleet's ids add
//! the epoch of its Redis (6 characters, made once and kept in Redis) and a
//! check of 4 over the rest: when a job cannot be found, an id whose check holds
//! and whose epoch is not the Redis's current one was made by ladle before its
//! Redis lost its data (`410 job_lost`), not a job that expired or an id that
//! was never made (`404 job_not_found`).

const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// The random part's length.
const RANDOM: usize = 22;
/// The epoch's length.
const EPOCH: usize = 6;
/// The check's length: a made-up id passes it once in 62⁴ (about 15 million).
const CHECK: usize = 4;

/// `len` base62 digits of `value` (its low digits, most significant first).
fn base62(mut value: u128, len: usize) -> String {
    let mut digits = vec![b'0'; len];
    for digit in digits.iter_mut().rev() {
        *digit = DIGITS[(value % 62) as usize];
        value /= 62;
    }
    String::from_utf8_lossy(&digits).into_owned()
}

/// 22 random base62 characters (a version 4 UUID's 122 bits).
fn random() -> String {
    base62(uuid::Uuid::new_v4().as_u128(), RANDOM)
}

/// The check of an id's random part and epoch.
fn check(random_and_epoch: &str) -> String {
    let hash = xxhash_rust::xxh3::xxh3_64(random_and_epoch.as_bytes());
    base62(u128::from(hash), CHECK)
}

/// A job id of a single process (the state file).
pub fn fresh() -> String {
    format!("job_{}", random())
}

/// A job id of the fleet whose Redis has `epoch`.
pub fn in_epoch(epoch: &str) -> String {
    let body = format!("{}{epoch}", random());
    format!("job_{body}{}", check(&body))
}

/// A new epoch for a Redis that has none (a new one, or one that lost its data).
pub fn new_epoch() -> String {
    base62(uuid::Uuid::new_v4().as_u128(), EPOCH)
}

/// The epoch a fleet's id was made in, if `id` is one (its check holding).
pub fn epoch_of(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("job_")?;
    if rest.len() != RANDOM + EPOCH + CHECK || !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let (body, sum) = rest.split_at(RANDOM + EPOCH);
    (check(body) == sum).then(|| &body[RANDOM..])
}

/// Whether `id` has the shape of a job id (anything else is not looked up).
pub fn plausible_id(id: &str) -> bool {
    id.strip_prefix("job_").is_some_and(|rest| {
        [RANDOM, RANDOM + EPOCH + CHECK].contains(&rest.len())
            && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleet_id_carries_its_epoch_and_a_check() {
        let id = in_epoch("Ab12Cd");
        assert_eq!(id.len(), "job_".len() + 32);
        assert!(plausible_id(&id));
        assert_eq!(epoch_of(&id), Some("Ab12Cd"));
        // One character changed anywhere: the check no longer holds.
        let mut forged = id.clone().into_bytes();
        forged[10] = if forged[10] == b'x' { b'y' } else { b'x' };
        let forged = String::from_utf8(forged).expect("ASCII");
        assert_eq!(epoch_of(&forged), None);
        assert!(plausible_id(&forged), "still looked up, as not found");
    }

    #[test]
    fn single_process_ids_have_no_epoch_and_differ() {
        let (a, b) = (fresh(), fresh());
        assert!(plausible_id(&a) && plausible_id(&b));
        assert_ne!(a, b);
        assert_eq!(epoch_of(&a), None);
        assert!(!plausible_id("job_../../etc") && !plausible_id("job_short"));
        assert_eq!(new_epoch().len(), 6);
    }
}
